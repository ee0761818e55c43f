"""The compiled async-copy service (hardware/_copy_service.pxi, in mallocgame._native) against the Python loop it replaced.

The reference below is the loop that was ``serve_copies_left`` before it was compiled; the compiled one
must give bit-identical stalls and budgets (the game's rewards are checked against the evaluator at 1e-9,
and msa reads the budgets left), for any order of copies, windows past either end, empty windows, zero
budgets and plain lists as well as NumPy arrays.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, serve_copies_left, serve_queue
from mallocgame.problem.intervals import next_open


def reference_serve_copies_left(copies, budgets):
    left = [float(x) for x in budgets]
    n = len(left)
    nxt = list(range(n + 1))
    stalls = []
    for first, deadline, need in copies:
        t = next_open(nxt, max(first, 0)) if first < n else n
        end = min(deadline, n)
        while need > 0 and t < end:
            take = need if need < left[t] else left[t]
            need -= take
            left[t] -= take
            if left[t] <= 0:
                nxt[t] = t + 1
                t = next_open(nxt, t + 1)
            else:
                break
        stalls.append(float(need) if need > 0 else 0.0)
    return stalls, left


copy = st.tuples(st.integers(-3, 40), st.integers(-3, 45), st.floats(0.0, 20.0, allow_nan=False))
budget = st.one_of(st.just(0.0), st.floats(0.0, 5.0, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(copy, max_size=30), st.lists(budget, max_size=40))
def test_compiled_equals_reference(copies, budgets):
    want = reference_serve_copies_left(copies, budgets)
    assert serve_copies_left(copies, budgets) == want
    assert serve_copies_left(copies, np.asarray(budgets, np.float64)) == want


def test_hand_case():
    # slot 0 and 1 feed the first copy; the second takes what is left of slot 1 and then slot 2
    assert serve_copies_left([(0, 2, 1.5), (0, 3, 1.0)], [1.0, 1.0, 1.0]) == ([0.0, 0.0], [0.0, 0.0, 0.5])
    assert serve_copies_left([(5, 9, 1.0)], [1.0, 1.0]) == ([1.0], [1.0, 1.0])  # window past the end: all stalls
    assert serve_copies_left([], []) == ([], [])


def test_real_program_evaluator_matches_reference():
    """Every copy of a real answer (msa on an XLA-compiled program) served both ways."""
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries
    from mallocgame.solvers.msa import MemorySpaceAssignment

    entry = next(e for e in suite_entries("xla") if e.name == "mixer-s16-b8")
    problem, hw = prepare(entry.build(), mode="prefetch", hardware=PRESETS["tpuv4i"])
    answer = MemorySpaceAssignment().solve(MemorySpaceAssignment.request(problem, hw, time_limit=30.0, seed=0))
    ev = PrefetchEvaluator.of(problem, hw)
    times = ev.op_times(answer.intervals)
    served = 0
    for first, deadline, seconds, _ in ev.copy_arrays(answer.intervals).values():
        copies = list(zip(first.tolist(), deadline.tolist(), seconds.tolist()))
        assert serve_copies_left(copies, times) == reference_serve_copies_left(copies, times.tolist())
        served += len(copies)
    assert served > 0


@settings(max_examples=200, deadline=None)
@given(st.lists(budget, min_size=1, max_size=40), st.data())
def test_serve_queue_equals_reference_on_its_run(budgets, data):
    """``serve_queue`` (the game's door): copies kept as (deadline, first, buffer, rect, seconds) in service order,
    served on slots lo..hi-1 of the op times, as the reference on the shifted copies and the sliced budgets."""
    n = len(budgets)
    lo = data.draw(st.integers(0, n - 1))
    hi = data.draw(st.integers(lo + 1, n))
    windows = data.draw(st.lists(st.tuples(st.integers(lo, hi), st.integers(lo, hi), st.floats(0.0, 9.0)), max_size=20))
    queue = sorted((max(a, b), min(a, b), 0, r, sec) for r, (a, b, sec) in enumerate(windows))
    want = reference_serve_copies_left([(f - lo, dl - lo, sec) for dl, f, _, _, sec in queue], budgets[lo:hi])[0]
    pad = [(lo, lo - 1, 0, -1, 1.0)]  # copies outside [start, stop) are not served
    before = {r: data.draw(st.sampled_from([0.0, want[i], 1.5])) for i, (_, _, _, r, _) in enumerate(queue)}
    stalls = dict(before)
    changes, delta = serve_queue(pad + queue, 1, 1 + len(queue), budgets, lo, hi, stalls)
    assert stalls == {r: want[i] for i, (_, _, _, r, _) in enumerate(queue)}  # brought up to date in place
    assert changes == [(r, before[r]) for _, _, _, r, _ in queue if before[r] != stalls[r]]  # in service order
    assert delta == sum(stalls[r] - old for r, old in changes)
