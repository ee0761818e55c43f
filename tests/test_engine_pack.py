"""The two engines of pack-search (MALLOCGAME_ENGINE): the compiled first fit and canonical search of
solvers/pack_search/_pack.pxi against the Python code of ``mallocgame.solvers.pack_search.search``, their reference.
Answers must be identical: the same offsets, status, peak and lower bound, and the same counters (nodes,
backtracks, table hits, restarts, winning run), on hypothesis-generated problems, on MiniMalloc's instances A-K
(node-limited) and on the quick suite's programs, at the same seed."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.formats.io import load_problem
from mallocgame.inputs.suites import suite_entries
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.native_engine import ENGINE_ENV
from mallocgame.solvers.pack_search import search
from mallocgame.solvers.pack_search.search import _first_fit, check_packing, pack
from tests.conftest import BENCHMARKS, needs_benchmarks


def same_stats(r) -> dict:
    return {k: v for k, v in r.stats.items() if k != "seconds"}


def both_engines(monkeypatch, *args, seconds: float, **kwargs):
    """``pack(*args, **kwargs)`` on each engine, each with a budget of ``seconds`` of its own."""
    out = []
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out.append(pack(*args, budget=Budget.start(seconds), **kwargs))
    return out


def assert_same(ref, nat) -> None:
    assert ref.status == nat.status
    assert np.array_equal(ref.offsets, nat.offsets)
    assert ref.peak == nat.peak and ref.lower_bound == nat.lower_bound
    assert same_stats(ref) == same_stats(nat)
    assert [p for _, p in ref.history] == [p for _, p in nat.history]


@st.composite
def instances(draw):
    n = draw(st.integers(1, 14))
    start = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), np.int64)
    length = np.array(draw(st.lists(st.integers(1, 6), min_size=n, max_size=n)), np.int64)
    size = np.array(draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)), np.int64)
    align = None
    if draw(st.booleans()):
        align = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n)), np.int64)
    slack = draw(st.sampled_from([None, 0, 1, 3]))
    return size, start, start + length, align, slack


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(instances(), st.integers(0, 3))
def test_engines_agree_on_generated_problems(monkeypatch, inst, seed):
    size, start, end, align, slack = inst
    capacity = None
    if slack is not None:  # around the least peak: fits, barely fits, or proven impossible
        capacity = pack(size, start, end, alignment=align, budget=Budget.start(20), use_cpsat=False).peak + slack - 1
    ref, nat = both_engines(monkeypatch, size, start, end, capacity=capacity, alignment=align, seconds=20,
                            seed=seed, use_cpsat=False)
    assert_same(ref, nat)
    if nat.status == "OPTIMAL" or nat.status == "FEASIBLE":
        assert check_packing(size, start, end, nat.offsets, capacity, align) is None


@needs_benchmarks()
@pytest.mark.parametrize("name", list("ABCDEFGHIJK"))
def test_engines_agree_on_minimalloc_instances(monkeypatch, name):
    """Node-limited (``_NODE_BUDGET``): both engines run the same restarts up to the same node; the easy
    instances end with a packing before it, the hard ones with UNKNOWN at it."""
    prob = load_problem(BENCHMARKS / "minimalloc" / f"{name}.1048576.csv")
    a = prob.arrays
    monkeypatch.setattr(search, "_NODE_BUDGET", 3000)
    ref, nat = both_engines(monkeypatch, a.size, a.start, a.end, capacity=prob.capacity, alignment=a.alignment,
                            seconds=120, seed=1, use_cpsat=False)
    assert_same(ref, nat)
    assert nat.stats["nodes"] > 0


@pytest.mark.parametrize("entry", suite_entries("quick"), ids=lambda e: e.name)
def test_engines_agree_on_suite_programs(monkeypatch, entry):
    """Peak minimisation (greedy descent, then capacity probes) on a suite program's buffers, node-limited."""
    prob = entry.build()
    a = prob.arrays
    monkeypatch.setattr(search, "_NODE_BUDGET", 2000)
    ref, nat = both_engines(monkeypatch, a.size, a.start, a.end, capacity=None, alignment=a.alignment,
                            seconds=120, seed=0, use_cpsat=False)
    assert_same(ref, nat)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 300), st.integers(0, 2**31), st.booleans())
def test_first_fit_engines_agree(monkeypatch, n, seed, aligned):
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 100, n)
    start = rng.integers(0, 50, n)
    end = start + rng.integers(1, 20, n)
    align = rng.choice([1, 2, 8, 16], n) if aligned else np.ones(n, np.int64)
    out = []
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out.append(_first_fit(size, start, end, align))
    assert np.array_equal(out[0], out[1])
    assert check_packing(size, start, end, out[1], None, align) is None


def test_first_fit_past_its_deadline_stacks_the_rest_in_both_engines(monkeypatch):
    rng = np.random.default_rng(3)
    size, start = rng.integers(1, 100, 500), rng.integers(0, 80, 500)
    end = start + rng.integers(1, 30, 500)
    align = np.ones(500, np.int64)
    out = []
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out.append(_first_fit(size, start, end, align, deadline=0.0))  # long passed: every buffer stacked
    assert np.array_equal(out[0], out[1])
    assert check_packing(size, start, end, out[1]) is None
    order = np.lexsort((-size, start))
    assert np.array_equal(out[1][order], np.concatenate(([0], np.cumsum(size[order])[:-1])))


def test_first_fit_on_a_large_component_agrees(monkeypatch):
    """A 20,000-buffer trace (pack-search's fallback for components above the exact engine's limits)."""
    rng = np.random.default_rng(7)
    n = 20_000
    size = rng.integers(1, 1000, n) * 8
    start = np.sort(rng.integers(0, 40_000, n))
    end = start + rng.integers(1, 400, n)
    align = rng.choice([1, 64], n)
    out = []
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out.append(_first_fit(size, start, end, align))
    assert np.array_equal(out[0], out[1])


def test_native_search_descends_a_large_component():
    """The greedy descent recurses once per buffer: 20,000 of them in one chain of sections must not overflow
    the native stack, and must give the reference's offsets (checked on the first 2,000 against Python)."""
    n = 20_000
    size = np.arange(1, n + 1, dtype=np.int64) % 7 + 1
    start = np.arange(n, dtype=np.int64)
    end = start + 3
    comp = search._Component(size, start, end, None)
    nat = search._NativeSearcher(comp, int(size.sum()) + 1, comp.heuristic("TWA"), node_limit=10 * n + 10,
                                 deadline=float("inf"), stop=None, use_tt=False, choice="rank")
    assert nat.run() is True
    assert check_packing(size[comp.order], start[comp.order], end[comp.order], nat.off) is None
    small = search._Component(size[:2000], start[:2000], end[:2000], None)
    ref = search._Searcher(small, int(size.sum()) + 1, small.heuristic("TWA"), node_limit=20010,
                           deadline=float("inf"), stop=None, use_tt=False, choice="rank")
    nat2 = search._NativeSearcher(small, int(size.sum()) + 1, small.heuristic("TWA"), node_limit=20010,
                                  deadline=float("inf"), stop=None, use_tt=False, choice="rank")

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        assert ref.run() is True
    finally:
        sys.setrecursionlimit(old)
    assert nat2.run() is True
    assert np.array_equal(ref.off, nat2.off) and ref.nodes == nat2.nodes


@needs_benchmarks()
@pytest.mark.parametrize("why", ["deadline", "stop", "node limit"])
def test_both_searches_stop_at_the_same_node(why):
    """A passed deadline or a set stop flag is seen every 64 nodes, a node limit at once, by both engines alike;
    the failed states learnt before are the same."""
    import threading

    prob = load_problem(BENCHMARKS / "minimalloc" / "I.1048576.csv")
    a = prob.arrays
    comp = search._Component(a.size, a.start, a.end, None)
    stop = threading.Event()
    if why == "stop":
        stop.set()
    options = dict(node_limit=500 if why == "node limit" else 10**9,
                   deadline=0.0 if why == "deadline" else float("inf"), stop=stop, use_tt=True, choice="wdeg")
    runs = []
    for cls, table in ((search._Searcher, set()), (search._NativeSearcher, search.FailedStates())):
        s = cls(comp, prob.capacity, comp.heuristic("TWA"), weights=np.zeros(comp.S + 1, np.int64), **options)
        s.tt = table
        with pytest.raises(search._Abort):
            s.run()
        runs.append((s.nodes, s.backtracks, s.tt_hits, len(s.tt), s.off.copy()))
    assert runs[0][:4] == runs[1][:4]
    assert np.array_equal(runs[0][4], runs[1][4])
    assert runs[1][0] == (501 if why == "node limit" else 64)
