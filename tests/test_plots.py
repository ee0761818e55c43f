"""Pictures: `mallocgame plot` and `compare --plot` write non-empty PNGs (Agg canvas); slow-band tracks."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.formats.io import problem_csv_text, write_workload_json
from mallocgame.inputs.generate import layered_network, packed_instance
from mallocgame.plots import slow_tracks
from tests.conftest import run_cli

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "w.json"
    write_workload_json(path, layered_network(40, seed=4))  # capacity given on the command line
    return path


def test_plot_one_answer(workload, tmp_path):
    sol = tmp_path / "sol.csv"
    r = run_cli("solve", str(workload), "--solver", "greedy-xla", "--capacity", "4000000", "-o", str(sol))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "pics" / "answer.png"
    out.parent.mkdir()  # a missing folder is an error (issue 12), not created
    r = run_cli("plot", str(workload), str(sol), "--capacity", "4000000", "-o", str(out))
    assert r.returncode == 0, r.stderr
    width, height = png_size(out)
    assert width > 600 and height > 300 and out.stat().st_size > 10_000


def test_plot_bad_input_exit_2(workload, tmp_path):
    r = run_cli("plot", str(workload), str(tmp_path / "none.csv"), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "file not found" in r.stderr and not (tmp_path / "x.png").exists()
    r = run_cli("plot", str(workload), str(tmp_path / "none.csv"), "-o", str(tmp_path / "x.txt"))
    assert r.returncode == 2 and "-o" in r.stderr


def test_compare_plot_writes_every_picture(workload, tmp_path):
    p, _ = packed_instance(20, seed=1, capacity=64, horizon=12)
    pack = tmp_path / "packed.96.csv"  # room above the hidden 64-high packing, so the greedy answers fit
    pack.write_text(problem_csv_text(p))
    pics = tmp_path / "pics"
    with_capacity = tmp_path / "wc.json"
    with_capacity.write_text(workload.read_text().replace('"format"', '"capacity": 4000000, "format"', 1))
    r = run_cli("compare", str(with_capacity), str(pack), "--solvers", "greedy-xla,best-fit", "--time-limit", "1",
                "--plot", str(pics))
    assert r.returncode == 0, r.stderr
    names = sorted(f.name for f in pics.iterdir())
    assert names == ["pack_gaps.png", "packed.alloc.png", "packed.anytime.png", "speedups.png", "wc.alloc.png",
                     "wc.anytime.png"]
    for f in pics.iterdir():
        width, height = png_size(f)
        assert width > 400 and height > 200 and f.stat().st_size > 5_000


def test_slow_tracks_never_overlap_and_use_the_fewest_tracks():
    rng = np.random.default_rng(0)
    start = rng.integers(0, 50, 200)
    end = start + rng.integers(1, 10, 200)
    tracks = slow_tracks(start, end)
    for t in np.unique(tracks):
        idx = np.flatnonzero(tracks == t)
        order = idx[np.argsort(start[idx])]
        assert (start[order][1:] >= end[order][:-1]).all()
    most_live = max(int(((start <= t) & (end > t)).sum()) for t in range(60))
    assert tracks.max() + 1 == most_live
