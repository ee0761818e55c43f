"""The ``xla`` suite: JAX programs compiled by XLA:CPU, read from the committed HLO text without JAX.

``experiments/make_xla_suite.py`` made the files; these tests only read them.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from mallocgame.inputs.suites import XLA_CAPACITY_FRACTION, _xla_dir, read_hlo_file, resolve_inputs, suite_entries
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError

SMALL = ("mixer-s16-b8", "gpt2-tiny-train-adam", "vit-s16-b8")


def test_manifest_files_and_sizes():
    folder = _xla_dir()
    manifest = json.loads((folder / "suite.json").read_text())
    entries = suite_entries("xla")
    assert [e.name for e in entries] == list(manifest["programs"])
    assert len(entries) >= 5
    total = 0
    for info in manifest["programs"].values():
        path = folder / info["file"]
        raw = path.read_bytes()
        total += len(raw)
        assert len(raw) < 2_000_000
        text = gzip.decompress(raw).decode() if path.name.endswith(".gz") else raw.decode()
        assert path.name.endswith(".gz") == (len(text) > 1_000_000)
        assert text.startswith("HloModule ") and "is_scheduled=true" in text.splitlines()[0]
    assert total < 20_000_000


@pytest.mark.parametrize("name", SMALL)
def test_small_entries_build(name):
    (entry,) = resolve_inputs([f"xla:{name}"])
    p = entry.build()
    assert p.name == name and p.has_ops and 200 <= p.n <= 1000
    live = max_live(p)
    assert 0 < p.capacity <= live * XLA_CAPACITY_FRACTION and p.capacity > live * XLA_CAPACITY_FRACTION - 1024


def test_gzipped_file_reads_as_its_text(tmp_path):
    from mallocgame.importers.hlo import parse_hlo_text
    from mallocgame.problem.aliasing import merge_inplace

    path = _xla_dir() / "gpt2-medium-decode-kv.hlo.txt.gz"
    text = gzip.decompress(path.read_bytes()).decode()
    p = read_hlo_file(path, "decode")
    assert p == merge_inplace(parse_hlo_text(text, str(path), name="decode").problem)
    assert p.inplace == () and p.n > 1000  # the donated KV caches' in-place pairs are merged
    bad = tmp_path / "x.hlo.txt.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(InputError, match="not a valid gzip file"):
        read_hlo_file(bad)


def test_suite_needs_no_jax_and_compares(tmp_path):
    code = ("import sys; sys.modules['jax'] = None\n"  # any 'import jax' would fail
            "from mallocgame.inputs.suites import resolve_inputs\n"
            "p = resolve_inputs(['xla:mixer-s16-b8'])[0].build(); print(p.n)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and int(r.stdout) > 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "mallocgame.cli.main", "compare", "xla:mixer-s16-b8,vit-s16-b8",
                        "--solvers", "greedy-xla", "--time-limit", "5", "--seed", "0", "--jobs", "1"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "greedy-xla: valid 2/2" in r.stdout + r.stderr
