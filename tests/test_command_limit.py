"""The limit is a promise from the caller's start: a command's from its process's start with the input's load added,
an API call's and a pool run's from their own; every forked solving run sends a big input's trivial answer first;
the pack searches' start deadline is the session's one rule."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import numpy as np
import pytest

from mallocgame.engine import runner, solving
from mallocgame.engine.pools import ProcessPool
from mallocgame.engine.protocol import LIMIT_GRACE, options_of
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import Session
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.runtime.budget import Budget, process_started
from tests.conftest import run_cli
from tests.test_plugins import make_distribution

IMPORT_SECONDS = 2.0  # what the slow plugin's import sleeps
LIMIT = 5.0  # more than the interpreter's start, its imports and the slow import on a loaded machine

# A solver whose module takes IMPORT_SECONDS to import, that sends the all-slow answer and then never returns.
SLOW_PLUGIN = textwrap.dedent(f"""
    import time

    import numpy as np

    from mallocgame import Solver
    from mallocgame.runtime.incumbents import offer

    time.sleep({IMPORT_SECONDS})


    class SlowImport(Solver):
        name = "slow-import"
        modes = frozenset({{"map"}})

        def solve(self, request):
            problem = request.problem
            offer(value=0.0, source="all slow", offsets=np.full(problem.n, -1, np.int64), problem=problem)
            while True:
                time.sleep(0.05)
""")


def _load(mode: str):
    """The 150-buffer example in ``mode`` (pack: minimising the peak, as every pack row of the benchmark)."""
    problem, _ = prepare(read_problem("example:layered150"), mode=mode, minimize_peak=mode == "pack")
    return problem


def test_process_started_is_the_interpreter_s_start_not_the_import_of_mallocgame():
    code = ("import time; time.sleep(0.5); from mallocgame.runtime import budget; "
            "print(budget._IMPORTED - budget.process_started())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0.45 <= float(out.stdout) < 30.0
    assert process_started() <= time.monotonic()


def test_the_command_budget_counts_from_the_start_with_the_load_added():
    budget = solving.command_budget(5.0, started=100.0, loading=2.5)
    assert (budget.started, budget.deadline) == (100.0, 107.5)
    now = time.monotonic()
    assert now <= solving.command_budget(1.0).started <= time.monotonic()  # the API's and a pool run's: from now
    assert solving.answer_reserve(200_000) > solving.answer_reserve(1_000) > 0


def test_a_slow_solver_import_is_inside_the_command_s_limit(tmp_path):
    """The solver's import (2 s) came before the clock started: the command ended at about import + limit + grace."""
    make_distribution(tmp_path, "slow-import-plugin", "slow-import = slow_import_plugin:SlowImport",
                      {"slow_import_plugin.py": SLOW_PLUGIN})
    t0 = time.monotonic()
    r = run_cli("solve", "example:layered150", "--mode", "map", "--solver", "slow-import", "--time-limit",
                f"{LIMIT:g}", "--quiet", env={"PYTHONPATH": str(tmp_path)})
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert "stopped at the limit" in r.stdout + r.stderr
    # the example loads in milliseconds: the whole command, interpreter and imports included, within limit + grace
    assert wall <= LIMIT + LIMIT_GRACE + 1.0, wall  # before: import + limit + grace at least (8 s)
    assert wall >= IMPORT_SECONDS


class _SlowPreload:
    """A solver whose declared heavy module (``preload``) takes a second to import, and that never answers."""

    name = "slow-preload"
    modes = frozenset({"map", "pack", "prefetch"})
    preload = ("limit4_slow_module",)

    def solve(self, request):
        while True:
            time.sleep(0.05)


def test_the_api_s_limit_holds_the_solver_s_imports(tmp_path, monkeypatch):
    """``preload`` imports ran before the limit's clock in the parent: 1 s more than the limit + grace."""
    (tmp_path / "limit4_slow_module.py").write_text("import time\ntime.sleep(1.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "limit4_slow_module", raising=False)
    solver = _SlowPreload()
    monkeypatch.setattr(runner, "load_solver", lambda name: solver)
    monkeypatch.setattr(solving, "load_solver", lambda name: solver, raising=False)  # where the parent imported
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    problem = _load("map")
    t0 = time.monotonic()
    report = solving.solve_beside_bound("slow-preload", problem, problem.hardware, time_limit=0.5, seed=0)
    wall = time.monotonic() - t0
    assert report.valid and "stopped_at_limit" in report.stats
    assert wall <= 0.5 + LIMIT_GRACE + 0.4, wall


class _Hang:
    def solve(self, request):
        while True:
            time.sleep(0.05)


@pytest.mark.parametrize("mode", ["map", "pack", "prefetch"])
def test_a_pool_run_on_a_big_input_sends_the_trivial_answer_first(mode, monkeypatch):
    """compare's runs and a portfolio's members (a pool's run_one) had no first answer: a solver that never
    answered ended as an error at the limit where ``solve`` ended with a valid answer."""
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    monkeypatch.setattr(solving, "solve_with_warm_start", lambda *a, **k: _Hang().solve(None))
    problem = _load(mode)
    pool = ProcessPool(1)
    try:
        pool.start("run", "greedy-xla", problem, problem.hardware, seed=0, time_limit=0.2)
        done = pool.wait(None)
    finally:
        pool.close()
    [(key, kind, report)] = done
    assert kind == "ok", report
    assert report.valid and "first answer" in report.stats["source"] and "stopped_at_limit" in report.stats


def test_below_the_size_a_pool_run_sends_nothing_first(monkeypatch):
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 10**9)
    monkeypatch.setattr(solving, "solve_with_warm_start", lambda *a, **k: _Hang().solve(None))
    problem = _load("map")
    pool = ProcessPool(1)
    try:
        pool.start("run", "greedy-xla", problem, problem.hardware, seed=0, time_limit=0.2)
        [(_, kind, line)] = pool.wait(None)
    finally:
        pool.close()
    assert kind == "error" and "sent no answer" in line


class _DeadlineSpy(Session):
    """A solve session that records the start deadlines it gives and the deadlines best fit is built with."""

    def __init__(self, problem, hw):
        super().__init__(problem, hw)
        self.given: list[tuple[Budget, float]] = []
        self.asked: list[float | None] = []

    def start_deadline(self, budget):
        deadline = super().start_deadline(budget)
        self.given.append((budget, deadline))
        return deadline

    def baseline(self, name, deadline=None):
        if name == "best-fit":
            self.asked.append(deadline)
        return super().baseline(name, deadline)


@pytest.mark.parametrize("name", ["lns", "select-pack"])
def test_the_pack_searches_build_their_start_until_the_session_s_one_deadline(name):
    from mallocgame.engine.registry import load_solver

    problem = _load("pack")
    spy = _DeadlineSpy(problem, problem.hardware)
    solver = load_solver(name)
    budget = Budget.start(2.0)
    solver.solve(SolveRequest(problem, problem.hardware, budget, 0, None, options_of(solver).taken({}), spy))
    [(given, deadline)] = spy.given
    assert given is budget  # the request's whole budget, not the search's part
    assert deadline == pytest.approx(budget.search_part(n=problem.n, per_buffer=1e-6).deadline)  # behaviour kept
    assert deadline >= budget.search_part(n=problem.n).deadline  # never before the search's own deadline
    assert deadline in spy.asked
    # the search asks the session itself: no deadline handed in by hand
    assert "start_until" not in inspect.signature(solver._solve_pack).parameters



def test_a_big_input_s_answer_is_judged_while_its_solver_runs_not_after_the_stop(monkeypatch):
    """A child stopped at its limit left the validation of its answer to after the stop, on the answer reserve."""
    from mallocgame.engine import report as report_module

    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    monkeypatch.setattr(solving, "solve_with_warm_start", lambda *a, **k: _Hang().solve(None))
    judged_at = []
    score = report_module.score
    monkeypatch.setattr(report_module, "score", lambda *a, **k: judged_at.append(time.monotonic()) or score(*a, **k))
    problem = _load("pack")
    t0 = time.monotonic()
    report = solving.solve_beside_bound("greedy-xla", problem, problem.hardware, time_limit=0.5, seed=0)
    assert report.valid and "stopped_at_limit" in report.stats and "first answer" in report.stats["source"]
    assert len(judged_at) == 1 and judged_at[0] < t0 + report.seconds  # once, before the child was stopped


def test_an_answer_judged_ahead_is_not_judged_again(monkeypatch):
    from mallocgame.engine import report as report_module
    from mallocgame.runtime.incumbents import Improvement, Incumbent

    problem = _load("map")
    incumbent = Incumbent(Improvement(0.1, 0.0, "all slow"), offsets=np.full(problem.n, -1, np.int64))
    ahead = report_module.stopped_at_limit(problem, problem.hardware, incumbent, solver_name="x", seconds=0.0,
                                           time_limit=1.0)
    monkeypatch.setattr(report_module, "score", lambda *a, **k: pytest.fail("judged again"))
    report = report_module.stopped_at_limit(problem, problem.hardware, incumbent, solver_name="x", seconds=1.5,
                                            time_limit=1.0, improvements=(incumbent.improvement,),
                                            judged=(incumbent, ahead))
    assert report.valid and report.seconds == 1.5 and report.history == [(0.1, 0.0)]
    assert report.stats["source"] == "all slow" and report.objective == ahead.objective


def _offer_first_and_hang(name, problem, hardware, **kwargs):
    """A pool run's child (`solving.solve_in_child`) that sends the mode's trivial answer and never returns."""
    solving.first_answer(problem)
    _Hang().solve(None)


def _judged_at(monkeypatch) -> list[float]:
    """The instants this process validates and scores an answer (report.score), from now on."""
    from mallocgame.engine import report as report_module

    times = []
    score = report_module.score
    monkeypatch.setattr(report_module, "score", lambda *a, **k: times.append(time.monotonic()) or score(*a, **k))
    return times


def _pool_stop_report(problem, bound, time_limit):
    pool = ProcessPool(1)
    try:
        t0 = time.monotonic()
        pool.start("run", "greedy-xla", problem, problem.hardware, seed=0, time_limit=time_limit, bound=bound)
        [(_, kind, report)] = pool.wait(None)
    finally:
        pool.close()
    assert kind == "ok", report
    return t0, report


def test_a_pool_run_of_a_big_input_is_judged_while_it_runs_as_after_the_stop(monkeypatch):
    """compare's runs and a portfolio's members judged a big input's answer only after the stop (only
    solve_beside_bound judged ahead): the pool judges it while it waits, and the stop's report is the same."""
    monkeypatch.setattr(solving, "solve_in_child", _offer_first_and_hang)
    problem = _load("map")
    bound = runner.problem_bound(problem, problem.hardware)
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 10**9)  # a small input: judged after the stop
    _, after = _pool_stop_report(problem, bound, 0.2)
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)  # a big input: judged while it runs
    judged_at = _judged_at(monkeypatch)
    t0, ahead = _pool_stop_report(problem, bound, 0.2)
    assert len(judged_at) == 1 and judged_at[0] < t0 + 0.2 + LIMIT_GRACE  # once, before the stop
    assert ahead.valid and "stopped_at_limit" in ahead.stats and ahead.bound == bound.value
    assert [v for _, v in ahead.history] == [v for _, v in after.history] == [0.0]  # the times are each run's
    assert replace(ahead, seconds=0.0, history=[]) == replace(after, seconds=0.0, history=[])


def test_a_portfolio_s_member_stopped_at_the_race_s_end_keeps_the_answer_judged_while_it_ran(monkeypatch):
    """The portfolio stops its members at its own deadline (`ProcessPool.stop`): the answer the pool judged while it
    waited is reported, not judged again after the stop."""
    monkeypatch.setattr(solving, "solve_in_child", _offer_first_and_hang)
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    problem = _load("map")
    judged_at = _judged_at(monkeypatch)
    with ProcessPool(1, own_groups=False) as pool:
        pool.start("member", "greedy-xla", problem, problem.hardware, seed=0, time_limit=30.0)
        deadline = time.monotonic() + 5.0
        while not judged_at and time.monotonic() < deadline:
            assert pool.wait(timeout=0.1) == []
        [(key, _)] = pool.sent_answers()
        stopped_at = time.monotonic()
        kind, report = pool.stop(key)
    assert kind == "ok" and report.valid and "stopped_at_limit" in report.stats
    assert len(judged_at) == 1 and judged_at[0] < stopped_at  # judged while it ran, not again at the stop


def test_a_ray_task_s_run_of_a_big_input_is_judged_while_it_runs(monkeypatch):
    from mallocgame.engine.pools import _ray_run

    monkeypatch.setattr(solving, "solve_in_child", _offer_first_and_hang)
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    judged_at = _judged_at(monkeypatch)
    problem = _load("pack")
    t0 = time.monotonic()
    kind, report = _ray_run("greedy-xla", problem, problem.hardware, 0.2, 0, None, {}, None)
    assert kind == "ok", report
    assert report.valid and "stopped_at_limit" in report.stats and "first answer" in report.stats["source"]
    assert len(judged_at) == 1 and judged_at[0] < t0 + 0.2 + LIMIT_GRACE


def test_reschedule_lets_its_child_import_the_solver_as_solve_does(tmp_path, monkeypatch):
    """``solve --reschedule`` imported its solvers' heavy modules in the parent before the fork, where ``solve``
    lets the child import them (runner.preload, inside the limit): now both are the child's, with the same answer."""
    from mallocgame.engine.registry import load_solver
    from mallocgame.hybrid import reschedule

    (tmp_path / "resched_preload_module.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "resched_preload_module", raising=False)
    greedy = load_solver("greedy-xla")

    class PreloadedGreedy:
        name, modes, preload = "preloaded-greedy", greedy.modes, ("resched_preload_module",)

        def solve(self, request):
            assert "resched_preload_module" in sys.modules  # the child's own import, before its solve
            return greedy.solve(request)

    problem = _load("pack")
    plain = reschedule.reschedule_beside_limit("greedy-xla", problem, problem.hardware, time_limit=2.0, seed=0)
    solver = PreloadedGreedy()
    monkeypatch.setattr(runner, "load_solver", lambda name: solver)
    monkeypatch.setattr(reschedule, "load_solver", lambda name: solver, raising=False)  # where the parent imported
    got = reschedule.reschedule_beside_limit("preloaded-greedy", problem, problem.hardware, time_limit=2.0, seed=0)
    assert "resched_preload_module" not in sys.modules  # the parent imported nothing
    assert got.report.valid and got.report.objective == plain.report.objective and got.order == plain.order


def _offer_and_score_slowly(answer, name, problem, hardware, **kwargs):
    """A child's solve that offers its answer and returns it (``answer``, a map Report), scored in the child as
    ``run_solver`` scores it, the judge slowed as a big answer's is."""
    from mallocgame.engine import report as report_module
    from mallocgame.problem.model import Solution, Status
    from mallocgame.runtime.incumbents import offer

    judge = report_module.judge
    report_module.judge = lambda *a, **k: time.sleep(0.5) or judge(*a, **k)  # this child's only
    offer(value=answer.objective, offsets=np.array([-1 if o is None else o for o in answer.offsets]), problem=problem)
    solution = Solution(answer.offsets, Status.FEASIBLE, problem.mode, solver=name)
    return report_module.score(problem, hardware, solution, seconds=0.1, bound=None, solver_name=name)


def test_a_child_s_final_answer_is_judged_by_the_child_alone(monkeypatch):
    """The parent judged a big input's latest answer while the child scored the same answer as its final one (both
    at once, and the parent's result waited for its own judgement): now only the child judges it."""
    from mallocgame.engine import report as report_module

    problem = _load("map")
    answer = runner.run_solver("greedy-xla", problem, problem.hardware, seed=0, time_limit=5.0)
    assert answer.valid and answer.objective > 0
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)  # a big input: the parent judges answers ahead
    monkeypatch.setattr(solving, "solve_with_warm_start", lambda *a, **k: _offer_and_score_slowly(answer, *a, **k))
    judged = []  # the answers this process scores
    score = report_module.score
    monkeypatch.setattr(report_module, "score", lambda *a, **k: judged.append(score(*a, **k)) or judged[-1])
    report = solving.solve_beside_bound("greedy-xla", problem, problem.hardware, time_limit=20.0, seed=0)
    assert report.valid and "stopped_at_limit" not in report.stats and report.objective == answer.objective
    assert all(r.objective == 0.0 for r in judged)  # the all-slow first answer may be judged here, the final one not


def test_the_parent_judges_ahead_an_answer_only_once_it_settled_and_never_after_the_child_returned():
    from types import SimpleNamespace

    from mallocgame.runtime.incumbents import Improvement, Incumbent, Received

    problem = _load("map")
    sent = Received(float("inf"))
    call = SimpleNamespace(sent=sent, incumbent=None)
    judge = solving.StopJudge(call, problem, problem.hardware, name="x", time_limit=1.0)
    judge.ahead = True  # a big input's run
    assert judge.pending_in() is None  # nothing sent
    answer = Incumbent(Improvement(0.1, 0.0, "all slow"), offsets=np.full(problem.n, -1, np.int64))
    sent.take("incumbent", ([answer.improvement], answer))
    call.incumbent = sent.incumbent
    assert 0.0 < judge.pending_in() <= solving.JUDGE_SETTLE and not judge.pending()  # just came
    sent.incumbent_at -= solving.JUDGE_SETTLE
    assert judge.pending()
    sent.take("scoring", True)
    assert judge.pending_in() == solving.JUDGE_POLL  # the child judges an answer itself: look again later
    sent.take("scoring", False)
    assert not judge.pending()  # its scoring just ended: the child may be about to return
    sent.scored_at -= solving.JUDGE_SETTLE
    assert judge.pending()  # it went on solving
    judge.judge()
    assert judge.pending_in() is None and judge.judged[1].valid
    for seconds in (0.2, 0.3):  # newer answers, one after the other: each just came
        newer = Incumbent(Improvement(seconds, 0.0, "all slow"), offsets=np.full(problem.n, -1, np.int64))
        sent.take("incumbent", ([newer.improvement], newer))
        call.incumbent = sent.incumbent
        assert not judge.pending()
        judge.unjudged_since -= solving.JUDGE_WAIT / 2
    assert judge.pending()  # the first of them has waited JUDGE_WAIT: the latest is judged
    sent.take("returned", None)
    assert judge.pending_in() is None  # its report (its final answer, judged there) comes next
