"""Every shared computation keeps the solve's deadline: greedy placements, the online allocator, the pack
search's checks and fallbacks, and the solvers built on them (best-fit, pack-search, cpsat, lns).

Inputs are sized so that the computations without a deadline clearly overrun the small budgets used
here (seconds to minutes); the asserts are on what the answers say (cut short, stacked, valid), and
where a time is asserted its margin is several times the budget.
"""

from __future__ import annotations

import time

import numpy as np

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import random_intervals
from mallocgame.inputs.load import prepare
from mallocgame.problem.model import Buffer, Op, Operand, Problem
from mallocgame.runtime.budget import Budget

HW = PRESETS["tpuv4i"]


def one_op(n: int) -> Problem:
    """One op writing ``n`` buffers and one reading them: every buffer overlaps every other (map mode)."""
    sizes = [256 * (1 + i % 7) for i in range(n)]
    bufs = tuple(Buffer(f"b{i}", sizes[i], 0, 2, None, 256) for i in range(n))
    ops = (Op("w", "op", 1e9, 0, tuple(Operand(f"b{i}", "write", sizes[i]) for i in range(n))),
           Op("r", "op", 1e9, 0, tuple(Operand(f"b{i}", "read", sizes[i]) for i in range(n))))
    problem, _ = prepare(Problem("one-op", bufs, ops), mode="map", capacity=sum(sizes) // 4, hardware=HW)
    return problem


def random_pack(n: int) -> Problem:
    """``n`` random intervals (about n^2/8 interfering pairs), pack mode, minimise the peak."""
    problem, _ = prepare(random_intervals(n, seed=0), mode="pack", minimize_peak=True)
    return problem


# ---------------------------------------------------------------------- map mode, one op with n operands

def test_cpsat_map_on_one_op_keeps_its_limit_and_says_the_greedy_was_cut():
    """greedy-xla's placement (cpsat's map fallback) was built without a deadline: each step scans every
    placed buffer, minutes at 500k operands."""
    p = one_op(30_000)
    rep = run_solver("cpsat", p, HW, time_limit=1.0, seed=0)
    assert rep.valid and 0 < rep.placed < p.n
    assert rep.stats.get("cut_short") is True, rep.stats
    assert "cut short by the time limit" in rep.summary()
    assert rep.seconds < 1.0 + 4.0, rep.seconds


def test_best_fit_map_on_one_op_is_cut_short_and_valid():
    p = one_op(30_000)
    rep = run_solver("best-fit", p, HW, time_limit=1.0, seed=0)
    assert rep.valid and 0 < rep.placed < p.n
    assert rep.stats.get("cut_short") is True
    assert "cut short by the time limit" in rep.summary()


def test_lns_window_is_about_k_buffers_even_when_every_buffer_is_live_at_once():
    from mallocgame.hybrid.lns import window_around
    from mallocgame.problem.intervals import overlap_index

    p = one_op(2_000)
    got = window_around(overlap_index(p), np.ones(p.n, bool), 0, 40, (0, 2))
    assert 0 < len(got) <= 80, len(got)
    assert len(np.unique(got)) == len(got)


def test_greedy_place_reads_the_clock_on_every_large_step():
    """Past its deadline, a step over a large neighbourhood ends the placement (it took 256 such steps,
    each scanning every placed buffer, before it read the clock)."""
    from mallocgame.algorithms.placement import greedy_place, stacked_offsets

    p = one_op(20_000)
    a = p.arrays
    first = np.arange(10_000)
    pre = np.full(p.n, -1, np.int64)
    pre[first] = stacked_offsets(a.size[first], a.alignment[first], 0)
    out = greedy_place(p, np.arange(10_000, p.n), None, offsets=pre, deadline=time.monotonic() - 1.0)
    added = int((out >= 0).sum()) - len(first)
    assert 0 < added < 256, added
    assert (out[first] == pre[first]).all()


# ---------------------------------------------------------------------- pack mode

def test_online_pack_past_its_deadline_stacks_the_rest_validly():
    from mallocgame.algorithms.placement import online_pack, online_pack_until
    from mallocgame.solvers.pack_search.search import check_packing

    p = random_pack(3_000)
    a = p.arrays
    out, stacked = online_pack_until(p, time.monotonic() - 1.0)
    assert stacked == p.n  # cut before the first event: every buffer stacked
    assert (out >= 0).all() and check_packing(a.size, a.start, a.end, out, None, a.alignment) is None
    assert (online_pack(p, deadline=time.monotonic() - 1.0) == out).all()
    full = online_pack(p)
    assert int((full + a.size).max()) < int((out + a.size).max())


def test_best_fit_pack_keeps_its_limit_and_says_it_was_cut():
    """BestFit.solve never read its time limit in pack mode (42 s at 20k random intervals, limit 5)."""
    p = random_pack(8_000)
    rep = run_solver("best-fit", p, HW, time_limit=1.0, seed=0)
    assert rep.valid and rep.placed == p.n
    assert rep.stats.get("complete") is False, rep.stats
    assert rep.seconds < 1.0 + 4.0, rep.seconds


def test_check_packing_is_quick_and_still_finds_overlaps():
    from mallocgame.algorithms.placement import online_pack
    from mallocgame.solvers.pack_search.search import check_packing

    p = random_pack(20_000)
    a = p.arrays
    out = online_pack(p)
    t = time.monotonic()
    assert check_packing(a.size, a.start, a.end, out, None, a.alignment) is None
    assert time.monotonic() - t < 10.0  # the all-live-pairs scan took 60-90 s here
    # move one buffer onto another live with it: found
    i = 0
    j = next(j for j in range(1, p.n) if a.start[j] < a.end[i] and a.start[i] < a.end[j])
    bad = out.copy()
    bad[j] = bad[i]
    assert "overlap" in check_packing(a.size, a.start, a.end, bad, None, None)


def test_first_fit_past_its_deadline_is_a_valid_packing():
    from mallocgame.solvers.pack_search.search import _first_fit, check_packing

    p = random_pack(2_000)
    a = p.arrays
    cut = _first_fit(a.size, a.start, a.end, a.alignment, time.perf_counter() - 1.0)
    assert check_packing(a.size, a.start, a.end, cut, None, a.alignment) is None
    full = _first_fit(a.size, a.start, a.end, a.alignment)
    assert int((full + a.size).max()) < int((cut + a.size).max())


def test_pack_search_keeps_its_limit():
    """The hint check and first fit scanned every live buffer per buffer (96 s at 20k, limit 5)."""
    p = random_pack(12_000)
    rep = run_solver("pack-search", p, HW, time_limit=2.0, seed=0)
    assert rep.valid and rep.placed == p.n
    assert rep.seconds < 2.0 + 5.0, rep.seconds


# ---------------------------------------------------------------------- prefetch mode

def _prefetch_problem():
    from mallocgame.inputs.generate import layered_network

    problem, _ = prepare(layered_network(400, seed=0), mode="prefetch", hardware=HW)
    return problem


def test_warm_builds_the_touches_every_prefetch_baseline_reads():
    """Built by the first baseline instead, on the solver's clock (3.3 s of a 10 s run at 200k buffers)."""
    from mallocgame.engine.session import session_for

    p = _prefetch_problem()
    assert "touches" not in p.__dict__
    session_for(p, HW).warm()
    assert "touches" in p.__dict__


def test_cpsat_prefetch_starts_do_not_start_msa_past_their_share():
    """The share spent by the baselines before it, msa still ran (seconds at 200k buffers) before the search."""
    from mallocgame.engine.session import session_for
    from mallocgame.solvers.cpsat.prefetch_windows import _starts

    p = _prefetch_problem()
    session = session_for(p, HW)
    starts = _starts(p, HW, session, None, Budget(1.0, time.monotonic() - 100.0))
    assert "msa" not in {b.name for b in session.built()}
    assert [label for label, _, _ in starts][-1] == "all-slow" and len(starts) >= 2  # the lifted greedy, all-slow
