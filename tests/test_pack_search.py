"""Tests of the pack-mode search (solvers/pack_search/search.py) and its solver wrapper.

Every answer is checked by an overlap/capacity check written here (not the module's own),
and feasibility claims are compared with an independent brute force on tiny instances.
The CP-SAT thread is switched off where determinism or exact node behaviour matters.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mallocgame.problem.intervals import component_runs as components
from mallocgame.problem.intervals import max_live_of as max_live
from mallocgame.problem.model import Buffer, Problem, Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.solvers.pack_search.search import pack
from mallocgame.solvers.pack_search.solver import PackSearch
from tests.conftest import BENCHMARKS, needs_benchmarks

# ----------------------------------------------------------------------------- helpers

def valid(size, start, end, off, capacity=None, alignment=None) -> bool:
    """Independent check: every offset set, >= 0, within capacity, aligned, and no two
    buffers that are live at the same time share an address."""
    size, start, end, off = (np.asarray(x, np.int64) for x in (size, start, end, off))
    if (off < 0).any():
        return False
    if capacity is not None and (off + size > capacity).any():
        return False
    if alignment is not None and (off % np.asarray(alignment) != 0).any():
        return False
    for i, j in itertools.combinations(range(len(size)), 2):
        if start[i] < end[j] and start[j] < end[i]:           # live ranges overlap
            if off[i] < off[j] + size[j] and off[j] < off[i] + size[i]:
                return False
    return True


def brute_force_feasible(size, start, end, capacity) -> bool:
    """Exhaustive backtracking over every offset of every buffer (tiny instances only)."""
    n = len(size)
    off = [0] * n

    def rec(i: int) -> bool:
        if i == n:
            return True
        for o in range(capacity - size[i] + 1):
            if all(not (start[i] < end[j] and start[j] < end[i]
                        and o < off[j] + size[j] and off[j] < o + size[i]) for j in range(i)):
                off[i] = o
                if rec(i + 1):
                    return True
        return False

    return rec(0)


def guillotine(rng: np.random.Generator, T: int, C: int, pieces: int):
    """Cut the strip [0, T) x [0, C) into ``pieces`` rectangles by random guillotine cuts.

    Returns (size, start, end, offsets): a zero-slack instance (every time has exactly
    C live bytes) with a known packing.
    """
    rects = [(0, T, 0, C)]                  # (t0, t1, o0, o1)
    while len(rects) < pieces:
        k = int(rng.integers(len(rects)))
        t0, t1, o0, o1 = rects[k]
        can_t, can_o = t1 - t0 > 1, o1 - o0 > 1
        if not (can_t or can_o):
            if all(r[1] - r[0] <= 1 and r[3] - r[2] <= 1 for r in rects):
                break
            continue
        if can_t and (not can_o or rng.random() < 0.5):
            cut = int(rng.integers(t0 + 1, t1))
            new = [(t0, cut, o0, o1), (cut, t1, o0, o1)]
        else:
            cut = int(rng.integers(o0 + 1, o1))
            new = [(t0, t1, o0, cut), (t0, t1, cut, o1)]
        rects[k:k + 1] = new
    r = np.array(rects, np.int64)
    return r[:, 3] - r[:, 2], r[:, 0], r[:, 1], r[:, 2]


def sweep_instance(rng: np.random.Generator, T: int, C: int, max_piece: int):
    """Zero-slack instance by a time sweep (harder than guillotine cuts): [0, C) is always
    exactly covered by live buffers; at each step some end, adjacent freed pieces merge
    into gaps, and each gap is refilled by new buffers of random sizes.
    Returns (size, start, end, offsets) with a known packing."""
    live = []                       # (offset, size, start)
    o = 0
    while o < C:
        s = int(min(C - o, rng.integers(1, max_piece + 1)))
        live.append((o, s, 0))
        o += s
    out = []
    for t in range(1, T):
        keep, freed = [], []
        for seg in live:
            (freed if rng.random() < 0.35 else keep).append(seg)
        out += [(seg[1], seg[2], t, seg[0]) for seg in freed]
        gaps: list[tuple[int, int]] = []
        for a, b in sorted((seg[0], seg[0] + seg[1]) for seg in freed):
            if gaps and gaps[-1][1] == a:
                gaps[-1] = (gaps[-1][0], b)
            else:
                gaps.append((a, b))
        for a, b in gaps:
            o = a
            while o < b:
                s = int(min(b - o, rng.integers(1, max_piece + 1)))
                keep.append((o, s, t))
                o += s
        live = keep
    out += [(seg[1], seg[2], T, seg[0]) for seg in live]
    r = np.array(out, np.int64)
    return r[:, 0], r[:, 1], r[:, 2], r[:, 3]


def greedy_start_order(size, start, end, capacity=None):
    """Fixed-order greedy: buffers by start time, each at the lowest offset that fits
    among the already placed ones it overlaps in time. Returns offsets or None."""
    order = np.lexsort((-np.asarray(size), start))
    off = np.full(len(size), -1)
    for i in order:
        taken = sorted((off[j], off[j] + size[j]) for j in range(len(size))
                       if off[j] >= 0 and start[i] < end[j] and start[j] < end[i])
        o = 0
        for a, b in taken:
            if o + size[i] <= a:
                break
            o = max(o, b)
        if capacity is not None and o + size[i] > capacity:
            return None
        off[i] = o
    return off


# ----------------------------------------------------------------------------- small instances

def test_minimalloc_example_feasible_and_tight():
    # benchmarks/examples/input.12.csv: feasible at 12 (= max live), not at 11
    size = [4, 4, 4, 4, 4]
    start = [0, 3, 3, 9, 0]
    end = [3, 9, 21, 21, 9]
    r = pack(size, start, end, capacity=12, budget=Budget.start(10), use_cpsat=False)
    assert r.status == "OPTIMAL" and valid(size, start, end, r.offsets, 12)
    assert pack(size, start, end, capacity=11, budget=Budget.start(10), use_cpsat=False).status == "INFEASIBLE"
    m = pack(size, start, end, capacity=None, budget=Budget.start(10), use_cpsat=False)
    assert m.status == "OPTIMAL" and m.peak == 12 and m.lower_bound == 12


def test_size_or_live_above_capacity_is_infeasible():
    assert pack([5], [0], [1], capacity=4, budget=Budget.start(5)).status == "INFEASIBLE"
    assert pack([3, 3], [0, 0], [2, 2], capacity=5, budget=Budget.start(5)).status == "INFEASIBLE"


def test_greedy_in_start_order_fails_but_a_packing_exists():
    # Found by a seeded scan (see test body): the fixed-order greedy overflows the
    # capacity while the guillotine packing proves the capacity is enough.
    rng = np.random.default_rng(7)
    found = None
    for _ in range(400):
        size, start, end, known = guillotine(rng, T=6, C=6, pieces=8)
        if greedy_start_order(size, start, end, 6) is None:
            found = (size, start, end, known)
            break
    assert found is not None, "scan should find a greedy failure"
    size, start, end, known = found
    assert valid(size, start, end, known, 6)
    r = pack(size, start, end, capacity=6, budget=Budget.start(10), use_cpsat=False)
    assert r.status == "OPTIMAL" and valid(size, start, end, r.offsets, 6)


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_brute_force_on_tiny_random_instances(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 7))
    start = rng.integers(0, 5, n)
    end = start + rng.integers(1, 4, n)
    size = rng.integers(1, 4, n)
    cap = int(max_live(size, start, end) + rng.integers(0, 2))
    cap = max(cap, int(size.max()))
    expected = brute_force_feasible(size.tolist(), start.tolist(), end.tolist(), cap)
    r = pack(size, start, end, capacity=cap, budget=Budget.start(10), seed=seed, use_cpsat=False)
    assert r.status == ("OPTIMAL" if expected else "INFEASIBLE")
    if expected:
        assert valid(size, start, end, r.offsets, cap)
    # minimise mode: the peak is the smallest capacity brute force accepts
    m = pack(size, start, end, capacity=None, budget=Budget.start(10), seed=seed, use_cpsat=False)
    assert valid(size, start, end, m.offsets)
    lo = int(max_live(size, start, end))
    best = next(c for c in range(lo, int(size.sum()) + 1)
                if brute_force_feasible(size.tolist(), start.tolist(), end.tolist(), c))
    assert m.status == "OPTIMAL" and m.peak == best


# ----------------------------------------------------------------------------- from known packings

@pytest.mark.parametrize("seed", range(6))
def test_zero_slack_guillotine_instances_are_packed(seed):
    rng = np.random.default_rng(seed)
    size, start, end, known = guillotine(rng, T=40, C=64, pieces=30)
    size, start, end = size * 1024, start * 7, end * 7          # common divisor 1024
    assert valid(size, start, end, known * 1024, 64 * 1024)
    r = pack(size, start, end, capacity=64 * 1024, budget=Budget.start(20), seed=seed, use_cpsat=False)
    assert r.status == "OPTIMAL"
    assert valid(size, start, end, r.offsets, 64 * 1024)


@pytest.mark.parametrize("seed", range(5))
def test_zero_slack_sweep_instances_need_backtracking_and_are_packed(seed):
    rng = np.random.default_rng(seed)
    size, start, end, known = sweep_instance(rng, T=12, C=40, max_piece=12)
    assert valid(size, start, end, known, 40) and max_live(size, start, end) == 40
    r = pack(size, start, end, capacity=40, budget=Budget.start(20), seed=seed, use_cpsat=False)
    assert r.status == "OPTIMAL"
    assert valid(size, start, end, r.offsets, 40)


def test_random_known_packing_with_slack_hidden_offsets():
    # generate a packing with gaps, hide the offsets, ask for its peak as capacity
    rng = np.random.default_rng(3)
    size, start, end, known = guillotine(rng, T=30, C=50, pieces=40)
    keep = rng.random(len(size)) < 0.75                 # drop pieces: slack appears
    size, start, end, known = size[keep], start[keep], end[keep], known[keep]
    cap = int((known + size).max())
    r = pack(size, start, end, capacity=cap, budget=Budget.start(20), use_cpsat=False)
    assert r.status == "OPTIMAL" and valid(size, start, end, r.offsets, cap)


def test_minimise_peak_reaches_the_max_live_bound():
    rng = np.random.default_rng(11)
    size, start, end, _ = guillotine(rng, T=30, C=40, pieces=25)
    r = pack(size, start, end, capacity=None, budget=Budget.start(20), use_cpsat=False)
    assert r.status == "OPTIMAL"
    assert r.peak == max_live(size, start, end) == 40
    assert valid(size, start, end, r.offsets)
    assert r.history and r.history[-1][1] == r.peak
    assert all(b[1] <= a[1] for a, b in zip(r.history, r.history[1:]))


def test_components_are_independent_and_reuse_addresses():
    # two groups that never overlap in time: each can start at 0
    size = np.array([4, 4, 4, 4])
    start = np.array([0, 0, 10, 10])
    end = np.array([5, 5, 15, 15])
    assert [len(c) for c in components(start, end)] == [2, 2]
    r = pack(size, start, end, capacity=8, budget=Budget.start(5), use_cpsat=False)
    assert r.status == "OPTIMAL" and valid(size, start, end, r.offsets, 8)
    assert r.stats["components"] == 2
    # touching half-open ranges do not overlap: [0,5) and [5,9)
    assert len(components(np.array([0, 5]), np.array([5, 9]))) == 2


def test_alignment_is_respected():
    rng = np.random.default_rng(5)
    size, start, end, _ = guillotine(rng, T=20, C=32, pieces=14)
    size = size * 4
    align = np.where(np.arange(len(size)) % 2 == 0, 8, 4)
    r = pack(size, start, end, capacity=None, alignment=align, budget=Budget.start(10), use_cpsat=False)
    assert r.status in ("OPTIMAL", "FEASIBLE")
    assert valid(size, start, end, r.offsets, alignment=align)


def test_deterministic_for_a_seed():
    # an instance that needs several restarts (node-limited, so the path is reproducible)
    rng = np.random.default_rng(3)
    size, start, end, _ = sweep_instance(rng, T=12, C=40, max_piece=12)
    a = pack(size, start, end, capacity=40, budget=Budget.start(30), seed=3, use_cpsat=False)
    b = pack(size, start, end, capacity=40, budget=Budget.start(30), seed=3, use_cpsat=False)
    assert a.stats["restarts"] > 1
    assert a.status == b.status == "OPTIMAL"
    assert np.array_equal(a.offsets, b.offsets)
    assert a.stats["nodes"] == b.stats["nodes"]


def test_every_seed_gives_a_valid_answer_and_a_seed_repeats_its_answer(monkeypatch):
    # the seeded lane joins from the first round here, so the seed changes the search path
    import mallocgame.solvers.pack_search.search as ps_mod

    monkeypatch.setattr(ps_mod, "_DIVERSIFY_FROM", 0)
    rng = np.random.default_rng(3)
    size, start, end, _ = sweep_instance(rng, T=12, C=40, max_piece=12)
    for seed in range(5):
        a = pack(size, start, end, capacity=40, budget=Budget.start(30), seed=seed, use_cpsat=False)
        assert a.status == "OPTIMAL" and valid(size, start, end, a.offsets, 40)
        b = pack(size, start, end, capacity=40, budget=Budget.start(30), seed=seed, use_cpsat=False)
        assert np.array_equal(a.offsets, b.offsets) and a.stats["nodes"] == b.stats["nodes"]
        m = pack(size, start, end, capacity=None, budget=Budget.start(30), seed=seed, use_cpsat=False)
        assert m.status == "OPTIMAL" and m.peak == 40 and valid(size, start, end, m.offsets)


def test_the_seed_only_breaks_ties_of_the_portfolio_preorders():
    from itertools import islice

    from mallocgame.solvers.pack_search.search import _PORTFOLIO, _Component, _schedule

    rng = np.random.default_rng(8)
    size, start, end, _ = guillotine(rng, T=20, C=16, pieces=30)     # small sizes: many ties
    comp = _Component(size, start, end, None)
    keys = {"W": -comp.length, "A": -(comp.size * comp.length), "T": -comp.sec_total_max,
            "Z": -comp.size, "C": -(comp.sh - comp.sl)}
    names = [h for _, h in _PORTFOLIO]
    runs = {seed: list(islice(_schedule(comp, None, seed), 2 * len(names))) for seed in (0, 1, 2)}
    for seed, rs in runs.items():
        # round 0, then round 1 with the node limit doubled: the portfolio lanes only
        assert [r[0] for r in rs] == names * 2
        assert [r[4] for r in rs] == [2 * comp.m] * len(names) + [4 * comp.m] * len(names)
        for lane, _, h, rank, _ in rs:
            order = np.argsort(rank)            # buffers in preorder
            tup = list(zip(*[keys[ch][order].tolist() for ch in h]))
            assert tup == sorted(tup), f"lane {lane} (seed {seed}) breaks its own keys"
    ties_broken = [not np.array_equal(runs[0][k][3], runs[s][k][3]) for s in (1, 2) for k in range(len(names))]
    assert any(ties_broken)                  # with ties present, seeds do permute them


@needs_benchmarks()
@pytest.mark.parametrize("name", ["B", "G", "H", "K"])
def test_minimalloc_instances_settled_by_the_search_alone_at_any_seed(name):
    # B used to need the CP-SAT thread (the shared conflict weights misled the search)
    from mallocgame.formats.io import load_problem

    prob = load_problem(BENCHMARKS / "minimalloc" / f"{name}.1048576.csv")
    a = prob.arrays
    nodes = set()
    for seed in (0, 3):
        r = pack(a.size, a.start, a.end, capacity=prob.capacity, budget=Budget.start(60), seed=seed, use_cpsat=False)
        assert r.status == "OPTIMAL" and r.stats["cpsat_runs"] == 0
        assert valid(a.size, a.start, a.end, r.offsets, prob.capacity)
        nodes.add(r.stats["nodes"])
    assert len(nodes) == 1 and nodes.pop() < 5000      # deterministic portfolio: same path


def test_valid_hint_is_kept():
    rng = np.random.default_rng(2)
    size, start, end, known = guillotine(rng, T=20, C=30, pieces=20)
    r = pack(size, start, end, capacity=30, hint=known, budget=Budget.start(5))
    assert r.status == "OPTIMAL" and np.array_equal(r.offsets, known)


# ----------------------------------------------------------------------------- solver wrapper

def _problem(size, start, end, capacity):
    bufs = tuple(Buffer(f"b{i}", int(s), int(a), int(e)) for i, (s, a, e) in enumerate(zip(size, start, end)))
    return Problem(name="t", buffers=bufs, capacity=capacity, mode="pack")


def test_solver_wrapper_statuses():
    solver = PackSearch()
    assert solver.name == "pack-search" and solver.modes == frozenset({"pack"})
    rng = np.random.default_rng(9)
    size, start, end, known = guillotine(rng, T=20, C=32, pieces=18)
    p = _problem(size, start, end, 32)
    sol = solver.solve(solver.request(p, None, time_limit=10, seed=0))
    assert isinstance(sol, Solution) and sol.status == Status.OPTIMAL and sol.mode == "pack"
    assert sol.solver == "pack-search" and sol.objective == 32
    assert valid(size, start, end, [o for o in sol.offsets], 32)
    # infeasible: everything None
    bad = solver.solve(solver.request(_problem(size, start, end, 31), None, time_limit=5, seed=0))
    assert bad.status == Status.INFEASIBLE and all(o is None for o in bad.offsets)
    # minimise peak with no capacity, and with minimize_peak on a loose capacity
    for prob, kw in ((_problem(size, start, end, None), {}), (_problem(size, start, end, 100), {"minimize_peak": True})):
        s = solver.solve(solver.request(prob, None, time_limit=10, seed=0, **kw))
        assert s.status == Status.OPTIMAL and s.objective == 32 and s.bound == 32
        assert valid(size, start, end, list(s.offsets))
    # a hint from another solution is accepted
    hint = Solution(offsets=tuple(int(x) for x in known), status=Status.FEASIBLE, mode="pack")
    s = solver.solve(solver.request(p, None, time_limit=5, seed=0, hint=hint))
    assert s.status == Status.OPTIMAL and list(s.offsets) == [int(x) for x in known]


def test_minimise_with_several_components_and_the_large_component_fallback(monkeypatch):
    import mallocgame.solvers.pack_search.search as ps_mod

    rng = np.random.default_rng(4)
    parts = []
    for k, (C, pieces) in enumerate(((30, 15), (50, 25))):
        size, start, end, _ = guillotine(rng, T=20, C=C, pieces=pieces)
        parts.append((size, start + 100 * k, end + 100 * k))       # disjoint in time
    size, start, end = (np.concatenate([p[i] for p in parts]) for i in range(3))
    r = pack(size, start, end, capacity=None, budget=Budget.start(20), use_cpsat=False)
    assert r.status == "OPTIMAL" and r.peak == 50 and valid(size, start, end, r.offsets)
    assert r.stats["components"] == 2
    # the same input with the exact engine switched off: a valid first-fit answer
    monkeypatch.setattr(ps_mod, "_MAX_EXACT", 1)
    f = pack(size, start, end, capacity=None, budget=Budget.start(5), use_cpsat=False)
    assert f.stats["fallback_components"] == 2
    assert f.status in ("OPTIMAL", "FEASIBLE") and valid(size, start, end, f.offsets)
    assert f.peak >= 50 and f.lower_bound == 50


def test_minimise_peak_on_a_component_deeper_than_the_recursion_limit():
    # One component of 1,500 buffers: the greedy descent recurses once per buffer.
    n = 1500
    start = np.arange(n, dtype=np.int64)
    end = start + 3
    size = (np.arange(n, dtype=np.int64) % 5) + 1
    res = pack(size, start, end, capacity=None, budget=Budget.start(20), seed=0, use_cpsat=False)
    assert (res.offsets >= 0).all()
    for i in range(n):
        for j in range(i + 1, min(n, i + 3)):
            a, b = res.offsets[i], res.offsets[j]
            assert a + size[i] <= b or b + size[j] <= a


def _layered_pack(n: int, seed: int = 0):
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.load import prepare

    return prepare(layered_network(n, seed=seed), mode="pack", minimize_peak=True)


def test_never_above_best_fit_on_a_workload_beyond_the_exact_engine_and_the_fallback_is_reported():
    # 12k buffers, one component of ~62M buffer x section cells: above the exact engine's old limit
    # (40M cells), where pack-search used to end on first fit, +11% above max live (55,397,376).
    from mallocgame.engine.session import session_for
    from mallocgame.hardware.validator import validate
    from mallocgame.problem.intervals import max_live as problem_max_live

    problem, spec = _layered_pack(12000)
    s = PackSearch().solve(PackSearch.request(problem, spec, time_limit=15, seed=0, minimize_peak=True))
    assert s.status in (Status.OPTIMAL, Status.FEASIBLE)
    offsets = [int(o) for o in s.offsets]
    assert validate(problem, offsets, capacity=None, mode="pack") is None
    best_fit = session_for(problem, spec).baseline("best-fit")
    assert s.objective <= best_fit.objective == s.stats["best_fit_peak"]
    assert s.objective >= problem_max_live(problem) == s.bound
    # not silent: the stats say the component left the exact engine, and what became of it
    assert s.stats["large_components"] == 1 and s.stats["fallback_components"] == 1
    assert "above the exact engine's limits" in s.stats["fallback"]


def test_window_repair_alone_reaches_max_live_from_first_fit(monkeypatch):
    # pack() with no hint on a component sent to the large path: first fit ends 8% above max live
    # (28,994,560 vs 26,844,160); the window repair brings it down to max live, within a capacity too.
    import mallocgame.solvers.pack_search.search as ps_mod

    monkeypatch.setattr(ps_mod, "_DENSE_LIMIT", 1)
    problem, _ = _layered_pack(1000)
    a = problem.arrays
    lb = int(max_live(a.size, a.start, a.end))
    first = ps_mod._first_fit(a.size, a.start, a.end, a.alignment)
    assert int((first + a.size).max()) > lb
    r = pack(a.size, a.start, a.end, alignment=a.alignment, budget=Budget.start(20), seed=0)
    assert r.status == "OPTIMAL" and r.peak == lb and r.stats["windows"] >= 1
    assert valid(a.size, a.start, a.end, r.offsets, alignment=a.alignment)
    assert "window repair" in r.stats["fallback"] and f"to peak {lb}" in r.stats["fallback"]
    c = pack(a.size, a.start, a.end, capacity=lb, alignment=a.alignment, budget=Budget.start(20), seed=0)
    assert c.status == "OPTIMAL" and c.peak <= lb and valid(a.size, a.start, a.end, c.offsets, lb, a.alignment)


def test_the_run_summary_names_a_fallback():
    from mallocgame.engine.report import Report

    fields = {f: None for f in Report.__dataclass_fields__}
    rep = Report(**{**fields, "solver": "pack-search", "status": "OPTIMAL", "valid": True, "placed": 1, "total": 1,
                    "seconds": 1.0, "stats": {"fallback": "a component of 9 buffers is above the exact engine's limits"}})
    assert "NOTE: a component of 9 buffers is above the exact engine's limits" in rep.summary()
