"""The parent keeps the time limit: a solver that never reads its clock still ends at ``time_limit`` +
``LIMIT_GRACE``, with the best answer it sent (validated, FEASIBLE, "stopped at the limit"), in ``solve``,
``compare`` and :func:`mallocgame.solve`; one that sent nothing is exit 1 within the same time."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time

import pytest

import mallocgame
from mallocgame.engine.protocol import LIMIT_GRACE
from mallocgame.engine.solving import answer_reserve
from tests.conftest import DATA, ROOT, run_cli
from tests.test_plugins import make_distribution

# Sends all-slow, then an answer of its own as its incumbents, then never returns and never reads its clock:
# a sleep loop ("stubborn"), a busy loop ("spinner"); "silent" sends nothing.
STUBBORN = '''
import time

import numpy as np

from mallocgame.hardware.evaluator import Evaluator
from mallocgame.runtime.incumbents import offer
from mallocgame.engine.protocol import Solver


def own_answer(problem, hardware):
    """map: buffers at offset 0 while they overlap nothing placed there; pack: every buffer stacked (aligned)."""
    a = problem.arrays
    if problem.mode == "pack":
        offsets, top = np.zeros(problem.n, np.int64), 0
        for i in range(problem.n):
            offsets[i] = top = -(-top // int(a.alignment[i])) * int(a.alignment[i])
            top += int(a.size[i])
        return float((offsets + a.size).max()), offsets
    offsets = np.full(problem.n, -1, np.int64)
    free_from = -1
    for i in np.argsort(a.start, kind="stable"):
        if a.start[i] > free_from and a.size[i] <= problem.capacity:
            offsets[i], free_from = 0, a.end[i]
    return Evaluator.of(problem, hardware).value(offsets), offsets


class Stubborn(Solver):
    name = "stubborn"
    modes = frozenset({"map", "pack"})

    def solve(self, request):
        problem, hardware = request.problem, request.hardware
        if problem.mode == "map":
            offer(value=0.0, offsets=np.full(problem.n, -1, np.int64), source="all-slow")
        value, offsets = own_answer(problem, hardware)
        offer(value=value, offsets=offsets, source=self.name + "-own")
        while True:
            time.sleep(0.05)


class Spinner(Stubborn):
    name = "spinner"

    def solve(self, request):
        problem, hardware = request.problem, request.hardware
        value, offsets = own_answer(problem, hardware)
        offer(value=value, offsets=offsets, source=self.name + "-own")
        x = 0
        while True:
            x += 1


class Rounds(Solver):
    """``solve --reschedule``'s rounds: the first (original order) answers every buffer stacked with gaps, a later
    one offers them stacked without gaps (a lower peak) and never returns."""
    name = "rounds"
    modes = frozenset({"pack"})
    calls = 0

    def solve(self, request):
        from mallocgame.problem.model import Solution, Status, offsets_tuple

        problem = request.problem
        Rounds.calls += 1
        _, stacked = own_answer(problem, request.hardware)
        if Rounds.calls == 1:
            return Solution(offsets_tuple(2 * stacked), Status.FEASIBLE, problem.mode)
        offer(value=float((stacked + problem.arrays.size).max()), offsets=stacked, problem=problem,
              source="rounds-later")
        while True:
            time.sleep(0.05)


class Silent(Solver):
    name = "silent"
    modes = frozenset({"map", "pack"})

    def solve(self, request):
        while True:
            time.sleep(0.05)
'''
ENTRIES = ("stubborn = stubborn_solver:Stubborn\nspinner = stubborn_solver:Spinner\nsilent = stubborn_solver:Silent\n"
           "rounds = stubborn_solver:Rounds")
LIMIT = 2.0  # counted from the command's start: its imports take a share of it on a loaded machine
SLACK = 0.6  # seconds past limit + grace for killing the child and validating its answer on a busy machine


@pytest.fixture
def stubborn_path(tmp_path, monkeypatch):
    make_distribution(tmp_path, "stubborn-plugin", ENTRIES, {"stubborn_solver.py": STUBBORN})
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _own_value(path: str = str(DATA / "layered150.json"), **prepare) -> float:
    """The value (map) or peak (pack) of the plugins' own answer, computed here."""
    import stubborn_solver  # on the path by the fixture

    problem = mallocgame.load_problem(path, **prepare)
    return stubborn_solver.own_answer(problem, problem.hardware)[0]


@pytest.mark.parametrize("name", ["stubborn", "spinner"])
def test_solve_stops_a_solver_that_ignores_its_clock_and_reports_what_it_sent(stubborn_path, name):
    t0 = time.monotonic()
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", name, "--time-limit", str(LIMIT), "--json",
                env={"PYTHONPATH": str(stubborn_path)}, timeout=60)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["valid"] and report["status"] == "FEASIBLE"
    assert report["objective"] == pytest.approx(_own_value())
    assert report["seconds"] <= LIMIT + LIMIT_GRACE + SLACK, report["seconds"]
    # it ran until the parent stopped it: the limit and the grace from the command's start, less the answer's reserve
    assert wall >= LIMIT + LIMIT_GRACE - answer_reserve(150) - 0.05, wall
    assert report["stats"]["source"] == f"{name}-own"
    assert "stopped at the limit" in report["stats"]["stopped_at_limit"]
    summary = r.stderr.strip().splitlines()[-1]
    assert summary.startswith(f"{name}: FEASIBLE ") and "NOTE: stopped at the limit" in summary
    assert f"source={name}-own" in summary


def test_solve_of_a_solver_that_sent_nothing_is_exit_1_at_the_limit(stubborn_path):
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "silent", "--time-limit", str(LIMIT), "--json",
                env={"PYTHONPATH": str(stubborn_path)}, timeout=60)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert not report["valid"] and report["status"] == "UNKNOWN"
    assert "stopped at the limit" in report["violation"] and "sent no answer" in report["violation"]
    assert report["seconds"] <= LIMIT + LIMIT_GRACE + SLACK


def test_pack_mode_limit_report_is_validated(stubborn_path):
    r = run_cli("solve", "example:pack40", "--solver", "stubborn", "--time-limit", str(LIMIT), "--json",
                "--minimize-peak", env={"PYTHONPATH": str(stubborn_path)}, timeout=60)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["valid"] and report["status"] == "FEASIBLE" and report["mode"] == "pack"
    assert report["stats"]["source"] == "stubborn-own"
    assert report["objective"] == pytest.approx(_own_value("example:pack40"))


def test_api_solve_keeps_the_limit(stubborn_path):
    # in a fresh interpreter killed after 60 s: without the parent keeping the limit the call never returns
    code = (f"import json, mallocgame\n"
            f"for name in ('stubborn', 'silent'):\n"
            f"    r = mallocgame.solve({str(DATA / 'layered150.json')!r}, name, time_limit={LIMIT})\n"
            f"    print(json.dumps([r.valid, r.status, r.objective, r.seconds, r.report.stats, r.solution is None]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(stubborn_path)])})
    assert done.returncode == 0, done.stderr
    (valid, status, objective, seconds, stats, _), silent = map(json.loads, done.stdout.splitlines())
    assert valid and status == "FEASIBLE" and objective == pytest.approx(_own_value())
    assert seconds <= LIMIT + LIMIT_GRACE + SLACK and "stopped at the limit" in stats["stopped_at_limit"]
    assert silent[0] is False and silent[5] is True and silent[3] <= LIMIT + LIMIT_GRACE + SLACK  # no answer


def test_compare_row_of_a_stopped_solver_is_its_answer(stubborn_path, tmp_path):
    out = tmp_path / "rows.csv"
    r = run_cli("compare", str(DATA / "layered150.json"), "--solvers", "stubborn,silent", "--time-limit",
                str(LIMIT), "-o", str(out), "--no-progress", env={"PYTHONPATH": str(stubborn_path)}, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {row["solver"]: row for row in csv.DictReader(out.open())}
    assert rows["stubborn"]["status"] == "FEASIBLE" and rows["stubborn"]["valid"] in ("True", "true", "1")
    assert float(rows["stubborn"]["value"]) == pytest.approx(_own_value())
    assert "stopped at the limit" in rows["silent"]["error"]


def test_a_pool_run_past_its_limit_finishes_with_the_answer_it_sent(stubborn_path):
    """compare's and a portfolio's pool: at the limit + grace, or when the portfolio stops a member at its deadline."""
    import time

    from mallocgame.engine.pools import ProcessPool

    problem = mallocgame.load_problem(str(DATA / "layered150.json"))
    with ProcessPool(1) as pool:
        t0 = time.monotonic()
        pool.start("run", "stubborn", problem, problem.hardware, time_limit=0.3, seed=0)
        finished = []
        while not finished:
            finished = pool.wait(timeout=0.2)
        waited = time.monotonic() - t0
    ((key, kind, report),) = finished
    assert key == "run" and kind == "ok" and report.valid and report.status == "FEASIBLE"
    assert report.stats["source"] == "stubborn-own" and report.objective == pytest.approx(_own_value())
    assert 0.3 + LIMIT_GRACE - 0.05 <= waited <= 0.3 + LIMIT_GRACE + SLACK
    with ProcessPool(1) as pool:  # a portfolio at its deadline: the members' answers so far
        pool.start("member", "spinner", problem, problem.hardware, time_limit=30, seed=0)
        while not pool.sent_answers():
            assert pool.wait(timeout=0.1) == []
        kind, report = pool.stop("member")
        assert not pool.busy
    assert kind == "ok" and report.valid and report.stats["source"] == "spinner-own"


@pytest.fixture
def program(tmp_path):
    from mallocgame.formats.io import write_workload_json
    from tests.test_schedule import random_program

    path = tmp_path / "program.json"
    write_workload_json(path, random_program(21, 30))
    return path


def test_reschedule_stops_a_solver_that_ignores_its_clock_in_the_original_order(stubborn_path, program, tmp_path):
    r = run_cli("solve", str(program), "--solver", "stubborn", "--reschedule", "--minimize-peak", "--time-limit",
                str(LIMIT), "--report", str(tmp_path / "r.json"), "-o", str(tmp_path / "a.csv"),
                env={"PYTHONPATH": str(stubborn_path)}, timeout=30)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["valid"] and report["status"] == "FEASIBLE" and report["stats"]["source"] == "stubborn-own"
    assert report["seconds"] <= LIMIT + LIMIT_GRACE + SLACK and "stopped at the limit" in r.stdout
    assert report["objective"] == pytest.approx(_own_value(str(program), mode="pack"))
    assert report["schedule"]["reordered"] is False and report["schedule"]["original_valid"]
    v = run_cli("validate", str(tmp_path / "a.workload.json"), str(tmp_path / "a.csv"), "--mode", "pack")
    assert v.returncode == 0, v.stdout + v.stderr


def test_reschedule_stopped_in_a_later_round_reports_that_rounds_answer_with_its_order(stubborn_path, program,
                                                                                       tmp_path):
    r = run_cli("solve", str(program), "--solver", "rounds", "--reschedule", "--minimize-peak", "--time-limit",
                str(LIMIT), "--report", str(tmp_path / "r.json"), "-o", str(tmp_path / "a.csv"),
                env={"PYTHONPATH": str(stubborn_path)}, timeout=30)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    stacked = _own_value(str(program), mode="pack")
    assert report["valid"] and report["stats"]["source"] == "rounds-later" and "stopped at the limit" in r.stdout
    assert report["objective"] == pytest.approx(stacked)  # the later round's, below the first round's gapped stack
    assert report["schedule"]["original_valid"] and report["schedule"]["original_objective"] > stacked
    assert report["seconds"] <= LIMIT + LIMIT_GRACE + SLACK
    # the answer belongs to the written, re-scheduled workload (solve checked it too before writing)
    v = run_cli("validate", str(tmp_path / "a.workload.json"), str(tmp_path / "a.csv"), "--mode", "pack")
    assert v.returncode == 0, v.stdout + v.stderr
