"""Interrupts and resume (issue 12, item 4): real processes, real signals.

``compare --out`` keeps every finished row when it is stopped, orphans nothing (not even a
process a solver started), exits 130 / 143 and says what finished; ``--resume`` runs only the
rest. ``solve --solver cpsat`` stops at once. ``train --resume`` continues a killed run.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mallocgame.engine.comparison import CSV_COLUMNS
from mallocgame.formats.io import atomic_write_text, problem_csv_text, write_workload_json
from mallocgame.inputs.generate import layered_network, random_intervals
from tests.conftest import ROOT, run_cli
from tests.test_plugins import make_distribution

# A solver that, with HANG_FILE set, starts a grandchild process (its pid written to the file)
# and hangs; without it, answers all-slow at once.
HANGING = textwrap.dedent('''
    import os, subprocess, sys, time
    from mallocgame.problem.model import Solution, Status
    from mallocgame.engine.protocol import Solver

    class Hang(Solver):
        name = "hang"
        modes = frozenset({"map", "pack", "prefetch"})

        def solve(self, request):
            problem = request.problem
            path = os.environ.get("HANG_FILE")
            if path:
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
                with open(path + f".{os.getpid()}", "w") as fh:
                    fh.write(str(child.pid))
                while True:
                    time.sleep(0.05)
            return Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, solver="hang")
''')


@pytest.fixture
def plugin(tmp_path):
    make_distribution(tmp_path / "site", "hang-plugin", "hang = hang_plugin.solver:Hang",
                      {"hang_plugin/__init__.py": "", "hang_plugin/solver.py": HANGING})
    return str(tmp_path / "site")


@pytest.fixture
def inputs(tmp_path):
    work = tmp_path / "layered.json"
    write_workload_json(work, layered_network(40, seed=2))
    table = tmp_path / "intervals.48.csv"
    atomic_write_text(table, problem_csv_text(random_intervals(30, seed=1, max_size=16, with_benefit=True)))
    return [str(work), str(table)]


def start(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mallocgame.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, **(env or {})})


def wait_for(predicate, timeout: float, what: str) -> None:
    t = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > t:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def records(path) -> list[dict[str, str]]:
    text = Path(path).read_text()
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS and all(len(r) == len(CSV_COLUMNS) for r in rows[1:])
    return [dict(zip(CSV_COLUMNS, r)) for r in rows[1:]]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_compare_stopped_keeps_finished_rows_orphans_nothing_and_resumes(tmp_path, plugin, inputs, sig, code):
    out = tmp_path / "results.csv"
    hang = tmp_path / "hang"
    args = ["compare", *inputs, "--solvers", "greedy-xla,hang", "--time-limit", "30", "--jobs", "2",
            "--out", str(out), "--no-progress"]
    proc = start(*args, env={"PYTHONPATH": plugin, "HANG_FILE": str(hang)})
    try:
        # greedy-xla's two rows finish; the two hanging runs (each with a grandchild) keep going
        wait_for(lambda: out.exists() and len(records(out)) == 2 and len(list(tmp_path.glob("hang.*"))) == 2,
                 20, "two rows and two hanging runs")
        family = descendants(proc.pid)
        grandchildren = {int(p.read_text()) for p in tmp_path.glob("hang.*")}
        assert grandchildren <= family and len(family) >= 4
        t0 = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=15)
        stopped = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, stderr
    assert stopped < 5
    assert "Traceback" not in stderr and "Aborted!" not in stderr
    assert f"interrupted by {sig.name}: 2 of 4 runs finished" in stdout and "--resume" in stdout
    assert "greedy-xla: valid 2/2" in stdout  # the summary of what finished
    assert not [p for p in family if alive(p)], "orphaned processes"
    kept = records(out)
    assert {(r["input"], r["solver"]) for r in kept} == {("layered", "greedy-xla"), ("intervals", "greedy-xla")}
    assert all(r["valid"] == "true" and r["time_limit"] == "30.0" and r["seed"] == "0" for r in kept)
    assert not list(tmp_path.glob(".*.tmp"))
    doc = json.loads(out.with_suffix(".json").read_text())
    assert len(doc["results"]) == 2

    # --resume runs only the two missing pairs; the kept rows stay byte for byte
    r = run_cli(*args, "--resume", env={"PYTHONPATH": plugin}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "4 runs on 2 inputs" in r.stdout and "2 kept from" in r.stdout
    after = records(out)
    assert len(after) == 4 and after[:2] == kept
    assert {r["solver"] for r in after[2:]} == {"hang"} and all(r["valid"] == "true" for r in after[2:])
    doc = json.loads(out.with_suffix(".json").read_text())
    assert len(doc["results"]) == 4
    # the kept rows' full records (offsets included) come from the previous JSON
    assert all(res.get("offsets") for res in doc["results"] if res["solver"] == "greedy-xla")


def test_resume_matches_settings_and_refuses_a_foreign_header(tmp_path, inputs):
    out = tmp_path / "r.csv"
    base = ["compare", inputs[1], "--solvers", "greedy-xla", "--time-limit", "1", "--out", str(out), "--no-progress"]
    assert run_cli(*base, timeout=60).returncode == 0
    first = records(out)
    # another seed is another run: kept in the file, and the new row is added
    r = run_cli(*base[:-1], "--seed", "3", "--resume", "--no-progress", timeout=60)
    assert r.returncode == 0, r.stderr
    rows = records(out)
    assert rows[0] == first[0] and [x["seed"] for x in rows] == ["0", "3"]
    out.write_text("input,solver,value\nx,y,1\n")
    r = run_cli(*base, "--resume", timeout=60)
    assert r.returncode == 2 and "header does not match" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert out.read_text() == "input,solver,value\nx,y,1\n"  # refused: the file is untouched
    r = run_cli("compare", inputs[1], "--solvers", "greedy-xla", "--resume", timeout=60)
    assert r.returncode == 2 and "--resume" in r.stderr


def test_solve_cpsat_stops_at_once_on_sigint(tmp_path):
    problem = tmp_path / "r300.csv"  # pack mode, minimise the peak: CP-SAT searches for the whole limit
    atomic_write_text(problem, problem_csv_text(random_intervals(300, seed=1)))
    proc = start("solve", str(problem), "--solver", "cpsat", "--time-limit", "60", "--minimize-peak")
    try:
        wait_for(lambda: bool(descendants(proc.pid)), 20, "the solver's process")
        time.sleep(2.5)  # well inside CP-SAT's native search, which lasts the whole 60 s limit
        family = descendants(proc.pid)
        assert proc.poll() is None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=15)
        stopped = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and stopped < 3
    assert "interrupted by SIGINT" in stderr and "Aborted!" not in stderr and "Traceback" not in stderr
    assert "" not in stderr.splitlines(), repr(stderr)  # click printed a blank line before its Abort
    assert not [p for p in family if alive(p)]


def test_train_killed_then_resumed_continues_from_the_checkpoint(tmp_path):
    pytest.importorskip("torch")
    ck = tmp_path / "ck.pt"
    tiny = ["--games-per-iter", "1", "--updates-per-iter", "2", "--simulations", "2", "--min-size", "6",
            "--max-size", "8", "--batch-size", "4", "--unroll", "2", "--td-steps", "2", "--k", "4",
            "--checkpoint-every", "1", "-o", str(ck)]
    proc = start("train", "--steps", "100000", *tiny)
    try:
        wait_for(lambda: ck.exists(), 60, "the first checkpoint")
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert "interrupted by SIGTERM" in stdout and "--resume" in stdout and "Traceback" not in stderr
    import torch

    saved = torch.load(ck, weights_only=True)["step"]
    assert saved >= 2 and saved % 2 == 0
    r = run_cli("train", "--resume", str(ck), "--steps", str(saved + 4), "-o", str(ck), timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"start at step {saved}, train to {saved + 4}" in r.stdout
    assert f"done: step {saved + 4}" in r.stdout
    assert torch.load(ck, weights_only=True)["step"] == saved + 4


def test_compare_killed_with_sigkill_keeps_its_rows_and_its_runs_die_with_it(tmp_path, plugin, inputs):
    out = tmp_path / "results.csv"
    hang = tmp_path / "hang"
    proc = start("compare", *inputs, "--solvers", "greedy-xla,hang", "--time-limit", "30", "--jobs", "2",
                 "--out", str(out), "--no-progress", env={"PYTHONPATH": plugin, "HANG_FILE": str(hang)})
    grandchildren: set[int] = set()
    try:
        wait_for(lambda: out.exists() and len(records(out)) == 2 and len(list(tmp_path.glob("hang.*"))) == 2,
                 20, "two rows and two hanging runs")
        grandchildren = {int(p.read_text()) for p in tmp_path.glob("hang.*")}
        runs = descendants(proc.pid) - grandchildren  # the forked solver runs
        assert len(runs) == 2
        proc.kill()  # SIGKILL: no handler, no cleanup in the parent
        proc.wait(10)
        # each run has PR_SET_PDEATHSIG: it dies with its parent (a process a solver starts by
        # itself, outside the pool, is not reached: only the parent's cleanup could kill it)
        wait_for(lambda: not [p for p in runs if alive(p)], 5, "the runs to die with their parent")
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in grandchildren:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert {(r["input"], r["solver"]) for r in records(out)} == {("layered", "greedy-xla"),
                                                                 ("intervals", "greedy-xla")}
    assert not list(tmp_path.glob(".*.tmp"))
