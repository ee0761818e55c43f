"""Issue 19 item 2: no silent loss in ``compare -o``.

* Two runs writing one results file: the second refuses with one line (exit 2) while the first
  holds the output (``fcntl.flock`` on the sidecar ``.NAME.lock``), and the file stays the first's.
* ``--resume`` matches rows by the input's content (``input_sha256``), not its automatic name:
  the same two files given in the other order keep their own rows.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

from mallocgame.formats.io import exclusive_output, lock_path
from tests.conftest import ROOT, run_cli

SMALL = "id,lower,upper,size\na,0,2,8\nb,1,3,8\nc,0,3,4\n"
OTHER = "id,lower,upper,size\na,0,5,64\nb,1,3,80\nc,0,3,40\nd,5,9,16\n"


def two_threes(tmp_path):
    """Two different files both named three.100.csv: compare names them three and three.2."""
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    first, second = tmp_path / "x" / "three.100.csv", tmp_path / "y" / "three.100.csv"
    first.write_text(SMALL)
    second.write_text(OTHER)
    return str(first), str(second)


def rows(path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_a_second_compare_on_a_held_output_refuses_and_loses_nothing(tmp_path):
    a, b = two_threes(tmp_path)
    out = tmp_path / "same.csv"
    args = ["compare", a, b, "--solvers", "best-fit", "--time-limit", "1", "-o", str(out), "--no-progress"]
    r = run_cli(*args, timeout=120)
    assert r.returncode == 0, r.stderr
    before = out.read_text()
    assert not (tmp_path / ".same.csv.lock").exists()  # released and removed after a run
    # another process holds the output (as a running compare does): a second run refuses at once
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom mallocgame.formats.io import exclusive_output\n"
        f"with exclusive_output({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = run_cli(*["compare", a, "--solvers", "greedy-xla", "--time-limit", "1", "-o", str(out), "--no-progress"],
                    timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: --output: ") and "another run" in r.stderr
    assert "wrote" not in r.stdout
    assert out.read_text() == before


def test_the_api_holds_the_output_too(tmp_path):
    import pytest

    from mallocgame.engine.comparison import run_comparison
    from mallocgame.formats.io import OutputBusy

    a, _ = two_threes(tmp_path)
    out = tmp_path / "r.csv"
    with exclusive_output(out):  # re-entered by the same process: no wait on itself
        run_comparison([a], ["best-fit"], time_limit=1, results_path=str(out))
    assert out.exists() and not (tmp_path / ".r.csv.lock").exists()
    held = subprocess.Popen([sys.executable, "-c", (
        "import time\nfrom mallocgame.formats.io import exclusive_output\n"
        f"with exclusive_output({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "held"
        with pytest.raises(OutputBusy, match="being written by another run"):
            run_comparison([a], ["best-fit"], time_limit=1, results_path=str(out))
    finally:
        held.kill()
        held.wait()
    assert lock_path(out).endswith("/.r.csv.lock")


def test_resume_pairs_rows_by_content_not_by_automatic_name(tmp_path):
    a, b = two_threes(tmp_path)
    out = tmp_path / "r.csv"
    base = ["--solvers", "best-fit", "--time-limit", "1", "-o", str(out), "--no-progress"]
    r = run_cli("compare", a, b, *base, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    first = {row["input_sha256"]: row for row in rows(out)}
    by_name = {row["input"]: row for row in rows(out)}
    assert len(first) == 2 and by_name["three"]["total"] == "3" and by_name["three.2"]["total"] == "4"
    # the same files in the other order: "three" is now the other file; nothing is re-run
    r = run_cli("compare", b, a, *base, "--resume", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert "2 kept from" in r.stdout
    after = rows(out)
    assert {row["input_sha256"]: (row["value"], row["bound"], row["total"]) for row in after} == \
        {k: (v["value"], v["bound"], v["total"]) for k, v in first.items()}
    named = {row["input"]: row for row in after}
    assert named["three"]["total"] == "4" and named["three.2"]["total"] == "3"  # names follow this run's order
    doc = json.loads(out.with_suffix(".json").read_text())
    assert {(res["input"], res["input_sha256"]) for res in doc["results"]} == \
        {(row["input"], row["input_sha256"]) for row in after}
    # a changed file is another input: its row is run again
    (tmp_path / "x" / "three.100.csv").write_text(SMALL + "d,3,4,2\n")
    r = run_cli("compare", b, a, *base, "--resume", timeout=120)
    assert "1 kept from" in r.stdout, r.stdout


def _hold(path, *, then_rewrite: bool = False) -> subprocess.Popen:
    """A process holding ``path`` as a running compare does (optionally after one rewrite of it, as a
    compare's first finished row replaces the file); returns once it holds it."""
    rewrite = f"    atomic_write_text({str(path)!r}, 'held\\n')\n" if then_rewrite else ""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time\nfrom mallocgame.formats.io import atomic_write_text, exclusive_output\n"
        f"with exclusive_output({str(path)!r}):\n{rewrite}    print('held', flush=True)\n    time.sleep(60)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _compare_into(a: str, out) -> subprocess.CompletedProcess:
    return run_cli("compare", a, "--solvers", "greedy-xla", "--time-limit", "1", "-o", str(out), "--no-progress",
                   timeout=120)


def _refused(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: --output: ") and "another run" in r.stderr, \
        r.stderr
    assert "wrote" not in r.stdout


def test_a_symlink_to_a_held_output_is_refused(tmp_path):
    a, _ = two_threes(tmp_path)
    target = tmp_path / "target.csv"
    target.write_text("first run's rows\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    (tmp_path / "elsewhere").mkdir()
    via_folder = tmp_path / "elsewhere" / "folder"  # a symlinked folder names the same file too
    via_folder.symlink_to(tmp_path, target_is_directory=True)
    holder = _hold(target)
    try:
        _refused(_compare_into(a, link))
        _refused(_compare_into(a, via_folder / "target.csv"))
    finally:
        holder.kill()
        holder.wait()
    assert target.read_text() == "first run's rows\n" and link.is_symlink()
    holder = _hold(link)  # and the other way round: a run writing through the link holds the file
    try:
        _refused(_compare_into(a, target))
    finally:
        holder.kill()
        holder.wait()
    assert target.read_text() == "first run's rows\n"


def test_a_hard_link_to_a_held_output_is_refused(tmp_path):
    a, _ = two_threes(tmp_path)
    target = tmp_path / "target.csv"
    target.write_text("first run's rows\n")
    (tmp_path / "sub").mkdir()
    other = tmp_path / "sub" / "other.csv"
    os.link(target, other)
    holder = _hold(target)
    try:
        _refused(_compare_into(a, other))
    finally:
        holder.kill()
        holder.wait()
    assert target.read_text() == other.read_text() == "first run's rows\n"
    # the holder has already replaced its file once (a first row written): the other name still
    # names the file it started from, which it still holds
    holder = _hold(target, then_rewrite=True)
    try:
        _refused(_compare_into(a, other))
    finally:
        holder.kill()
        holder.wait()
    assert other.read_text() == "first run's rows\n" and target.read_text() == "held\n"
    r = _compare_into(a, other)  # once the holder is gone, the name is free again
    assert r.returncode == 0, r.stderr
