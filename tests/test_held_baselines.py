"""The baselines a search holds (:func:`mallocgame.engine.session.held_names`, :func:`~mallocgame.engine.session.held_baselines`,
:func:`~mallocgame.engine.session.no_worse_than_held`): chosen from the problem and the limit without a clock, built to
their end before the search spends its time (even a budget spent already), never ended below, and named in
``stats["baselines"]``; the conformance check holds a solver to exactly those."""

from __future__ import annotations

import dataclasses
import itertools
import time
from types import SimpleNamespace

import pytest

from mallocgame.engine import conformance
from mallocgame.engine import session as session_module
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import (
    BASELINES,
    held_baselines,
    held_names,
    no_worse_than_held,
    objective_of,
    session_for,
)
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.problem.model import Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.search.game import GameConfig
from mallocgame.search.uct import DEFAULT_COMMIT, DEFAULT_GAME, PREFETCH_K, MCTSConfig, solve_with_uct

HW = conformance.HW
_fresh = itertools.count()


def _problem(mode: str):
    """The short-limits check's 150-buffer problem, a new object each call (its own solve session)."""
    base = conformance._layered(150, 2, 0.25)
    return base.replace(name=f"held-{mode}-{next(_fresh)}", mode=mode,
                        capacity=None if mode == "pack" else base.capacity)


def _stalled_clock():
    """Every clock of the ``time`` module 100 s further on at each reading (a machine that stalls the process)."""
    jumps = itertools.count(1)

    def jumping(clock):
        return lambda: clock() + 100.0 * next(jumps)

    return SimpleNamespace(monotonic=jumping(time.monotonic), perf_counter=jumping(time.perf_counter),
                           time=jumping(time.time), thread_time=jumping(time.thread_time),
                           process_time=jumping(time.process_time))


@pytest.mark.parametrize("mode", ["map", "pack", "prefetch"])
def test_held_names_come_from_size_and_limit_never_from_a_clock(mode, monkeypatch):
    problem = _problem(mode)
    by_limit = {limit: held_names(problem, limit) for limit in (0.001, 0.2, 1.0, 100.0)}
    assert by_limit[0.001] == ()  # nothing fits a millisecond: all-slow (map, prefetch) is the floor
    assert by_limit[100.0] == BASELINES[mode]  # everything fits a long limit
    for short, long_ in itertools.pairwise(by_limit.values()):
        assert set(short) <= set(long_)  # more time never holds a search to fewer baselines
    if mode == "prefetch":  # the short-limits check's limits: msa and its runs at 0.2 s, the XLA variants at 1 s
        assert by_limit[0.2] == ("greedy-xla", "msa")
        assert by_limit[1.0] == BASELINES[mode]
    monkeypatch.setattr(session_module, "time", _stalled_clock())
    assert {limit: held_names(_problem(mode), limit) for limit in by_limit} == by_limit


def _expired_uct(problem, time_limit: float = 1.0) -> Solution:
    """mcts's search (the frame muzero plays too) on ``problem`` with a budget spent 100 s ago."""
    if problem.mode == "prefetch":
        game_cfg = GameConfig(variant="prefetch", k=PREFETCH_K, order="xla", windows=2)
    else:
        variant, order = DEFAULT_GAME[problem.mode]
        game_cfg = GameConfig(variant=variant, k=16, order=order)
    cfg = MCTSConfig(commit=DEFAULT_COMMIT[problem.mode])
    spent = SolveRequest(problem, HW, Budget(time_limit, time.monotonic() - 100.0), seed=0)
    return solve_with_uct("mcts", spent, cfg, game_cfg)


@pytest.mark.parametrize("mode", ["map", "pack", "prefetch"])
def test_a_search_with_its_budget_spent_still_ends_at_or_above_every_held_baseline(mode):
    problem = _problem(mode)
    answer = _expired_uct(problem)
    names = held_names(problem, 1.0)
    assert names  # 150 buffers at 1 s: the mode's baselines are held
    held = session_for(problem, HW).built()
    assert all(b.complete for b in held if b.name in names)  # built to their end though the deadline was long past
    stats = answer.stats["baselines"]
    assert tuple(stats["held"]) == names
    value = objective_of(problem, HW, answer)
    assert value == pytest.approx(answer.objective, rel=1e-9)
    for name, objective in stats["held"].items():
        assert (value <= objective) if mode == "pack" else (value >= objective * (1 - 1e-9)), name
    if mode == "prefetch":  # the best of them is the XLA variant the short-limits check failed on at 1 s
        best = max(stats["held"], key=stats["held"].get)
        assert best == "msa+memory-overlap" and value >= stats["held"][best] * (1 - 1e-9)
        assert stats["answer_from"] in (*stats["held"], "greedy-prefetch-start", "greedy", "committed")


def test_no_worse_than_held_replaces_a_worse_answer_and_says_which():
    problem = _problem("prefetch")
    session = session_for(problem, HW)
    held = held_baselines(session, 0.2)
    assert [b.name for b in held] == list(held_names(problem, 0.2))
    slow = Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode="prefetch", objective=0.0,
                    solver="probe", stats={"mine": 1})
    out = no_worse_than_held(problem, HW, slow, held, answer_from="probe")
    best = max(held, key=lambda b: b.objective)
    assert best.name == "msa"
    assert out.solver == "probe" and out.status is Status.FEASIBLE and out.stats["mine"] == 1
    assert out.stats["baselines"] == {"held": {b.name: b.objective for b in held}, "answer_from": "msa"}
    assert PrefetchEvaluator.of(problem, HW).value(list(out.intervals)) == pytest.approx(best.objective)
    # an answer at least as good is kept, and named as its caller says
    kept = no_worse_than_held(problem, HW, out.replace(stats={}), held, answer_from="search")
    assert kept.intervals == out.intervals and kept.stats["baselines"]["answer_from"] == "search"
    # nothing held: nothing to replace it with (all-slow stays all-slow)
    assert no_worse_than_held(problem, HW, slow, [], answer_from="probe").intervals == ()


def test_no_worse_than_held_keeps_any_packing_within_the_capacity():
    base = _problem("pack")
    [best_fit] = held_baselines(session_for(base, HW), 1.0)
    shift = 1 << 20  # best fit's packing moved up: as valid, a higher peak
    raised = tuple(int(o) + shift for o in best_fit.offsets)
    answer = Solution(offsets=raised, status=Status.FEASIBLE, mode="pack", solver="probe")
    # a feasibility problem (a capacity): any packing within it will do, so it is kept
    fits = base.replace(name=base.name + "-cap", capacity=int(best_fit.objective) + shift)
    assert no_worse_than_held(fits, HW, answer, held_baselines(session_for(fits, HW), 1.0)).offsets == raised
    # no capacity: the peak is the goal, and best fit's lower peak replaces it
    free = base.replace(name=base.name + "-free")
    out = no_worse_than_held(free, HW, answer, held_baselines(session_for(free, HW), 1.0))
    assert out.stats["baselines"]["answer_from"] == "best-fit"
    assert objective_of(free, HW, out) == best_fit.objective < objective_of(free, HW, answer)


def test_the_check_holds_a_solver_to_the_held_baselines_whatever_the_clock(monkeypatch):
    problem = _problem("prefetch")
    quiet = conformance._reference(problem, HW, 1.0)
    assert quiet[0] == "msa+memory-overlap"  # the failure at 1 s: now always held, at any load
    assert conformance._reference(problem, HW, 0.2)[0] == "msa"
    monkeypatch.setattr(session_module, "time", _stalled_clock())
    monkeypatch.setattr(conformance, "time", _stalled_clock())
    assert conformance._reference(problem, HW, 1.0) == quiet


@pytest.mark.parametrize("name", ["portfolio", "cpsat", "lns", "muzero"])
def test_every_prefetch_search_says_which_baselines_it_held_and_ends_at_or_above_them(name):
    # at any load: the held baselines do not depend on the clock, and the answer is never below them
    problem = _problem("prefetch")
    subject = conformance.subject_of(name)
    solution, report, _ = subject.solve(problem, HW, time_limit=0.2)
    stats = solution.stats["baselines"]
    assert tuple(stats["held"]) == held_names(problem, 0.2) == ("greedy-xla", "msa")
    assert report.valid and report.objective >= max(stats["held"].values()) * (1 - 1e-9)
    assert stats["answer_from"]


@pytest.mark.parametrize("mode", ["map", "pack"])
def test_work_units_count_the_touches_without_building_them(mode):
    """Map and pack modes never read the ops' touches: deciding the held baselines must not build them (a Python
    pass over every operand, seconds of a search's own time at 100k buffers), and counts the same pairs."""
    from mallocgame.engine.session import work_units
    from mallocgame.problem.model import derived_facts

    problem = _problem(mode)
    first = problem.ops[0]  # an op that names one of its buffers twice: one (buffer, op) pair, two operands
    twice = dataclasses.replace(first.operands[0], access="write")
    problem = problem.replace(ops=(dataclasses.replace(first, operands=first.operands + (twice,)), *problem.ops[1:]))
    units = work_units(problem)
    assert "touches" not in problem.__dict__
    derived_facts(problem).pop("work_units")
    problem.touches  # noqa: B018  (built now: the count from the touches themselves)
    assert work_units(problem) == units


@pytest.mark.parametrize("mode", ["map", "pack", "prefetch"])
def test_a_search_with_its_budget_spent_builds_no_game(mode, monkeypatch):
    """A game's construction takes no deadline (seconds at 100k+ buffers): past its deadline the search builds none
    (no greedy game of another shape or buffer order, no game to search) and answers with the best it holds."""
    from mallocgame.search import uct

    built = []
    real = uct.Game
    monkeypatch.setattr(uct, "Game", lambda *args, **kwargs: built.append(args[2]) or real(*args, **kwargs))
    problem = _problem(mode)
    answer = _expired_uct(problem)
    assert built == []
    assert answer.stats["moves"] == 0 and answer.stats["simulations"] == 0
    assert answer.stats["baselines"]["answer_from"] in held_names(problem, 1.0)
