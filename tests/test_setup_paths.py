"""The set-up of greedy-xla and best-fit at scale (XLA's order, the overlap index, the evaluator, the buffer
index) vectorised: each gives what its per-item loop gave, checked here against that loop written out."""

from __future__ import annotations

from operator import attrgetter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.algorithms.placement import xla_order
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem import intervals
from mallocgame.problem.intervals import OverlapIndex
from mallocgame.problem.model import Buffer, Problem, offsets_tuple

HW = PRESETS["tpuv4i"]


def xla_order_reference(problem: Problem, benefits: np.ndarray) -> np.ndarray:
    a = problem.arrays
    ids = np.array([b.id for b in problem.buffers])
    density = benefits / np.sqrt(a.size)
    return np.lexsort((ids, -(a.end - a.start), -a.size, -density))


def checkpoint_sets_reference(idx: OverlapIndex) -> list[np.ndarray]:
    out, live, done = [], np.zeros(0, np.int64), 0
    for t, p in zip(idx.cp_time.tolist(), idx.cp_pos.tolist()):
        live = np.concatenate([live, idx.order[done:p]])
        live = live[idx.end[live] > t]
        done = p
        out.append(live)
    return out


@st.composite
def tied_problems(draw):
    """Few distinct sizes, lengths and benefits (many ties), ids in no particular order, NaN benefits too."""
    n = draw(st.integers(1, 120))
    names = draw(st.permutations([f"x{i:03d}" for i in range(n)]))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, 6))
        buffers.append(Buffer(names[i], draw(st.sampled_from([0, 1, 4, 9])), start, start + draw(st.integers(1, 3))))
    benefits = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, float("nan")]), min_size=n, max_size=n)))
    return Problem("ties", buffers), benefits


@settings(max_examples=200, deadline=None)
@given(tied_problems())
def test_xla_order_breaks_ties_by_id_as_the_full_sort(case):
    problem, benefits = case
    assert np.array_equal(xla_order(problem, benefits), xla_order_reference(problem, benefits))


def test_xla_order_on_a_generated_workload():
    problem = layered_network(20_000, seed=2)
    benefits = Evaluator(problem, HW).benefits
    assert np.array_equal(xla_order(problem, benefits), xla_order_reference(problem, benefits))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 300), st.integers(0, 2**31), st.integers(1, 400), st.booleans())
def test_overlap_index_checkpoints_as_the_sweep(monkeypatch, n, seed, budget, vectorised):
    if vectorised:  # the grouped (checkpoint, buffer) pairs, as with many checkpoints
        monkeypatch.setattr(intervals, "_SWEEP_CHECKPOINTS", 0)
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 50, n)
    end = start + rng.integers(1, 30, n)
    idx = OverlapIndex(start, end, budget=budget)
    ref = checkpoint_sets_reference(idx)
    assert len(idx.cp_sets) == len(ref)
    for got, want in zip(idx.cp_sets, ref):
        assert got.dtype == np.int64 and np.array_equal(got, want)
    indptr, indices = idx.checkpoint_csr()
    assert np.array_equal(indices, np.concatenate(ref)) and indptr[-1] == len(indices)
    for s, e in [(int(rng.integers(0, 60)), int(rng.integers(0, 80))) for _ in range(20)]:
        got = idx.query(s, e)
        assert sorted(got.tolist()) == np.flatnonzero((start < e) & (end > s)).tolist() if e > s else len(got) == 0


def test_overlap_index_with_many_checkpoints_matches_the_sweep():
    """A 50,000-buffer trace with short lives: one checkpoint per start (the vectorised build)."""
    rng = np.random.default_rng(5)
    start = np.sort(rng.integers(0, 150_000, 50_000))
    end = start + rng.integers(1, 8, 50_000)
    idx = OverlapIndex(start, end)
    assert idx.stride == 1 and len(idx.cp_sets) >= intervals._SWEEP_CHECKPOINTS
    assert isinstance(idx.cp_sets, intervals._CsrRows)
    ref = checkpoint_sets_reference(idx)
    assert all(np.array_equal(got, want) for got, want in zip(idx.cp_sets, ref))


def test_evaluator_arrays_and_buffer_index_as_the_loops():
    problem = {e.name: e for e in suite_entries("xla")}["gpt2-tiny-train-adam"].build()
    ev = Evaluator(problem, HW)
    index = {b.id: i for i, b in enumerate(problem.buffers)}
    assert problem.index == index
    operands = [o for op in problem.ops for o in op.operands]
    assert np.array_equal(ev.op_of, np.repeat(np.arange(len(problem.ops)), [len(op.operands) for op in problem.ops]))
    assert np.array_equal(ev.buf_of, [index[o.buffer] for o in operands])
    assert np.array_equal(ev.nbytes, np.asarray(list(map(attrgetter("bytes"), operands)), np.float64))
    compute = np.array([op.flops + op.transcendentals for op in problem.ops], np.float64) / HW.peak_flops
    fixed = np.array([op.fixed_bytes for op in problem.ops], np.float64) / HW.slow_bw
    assert np.array_equal(ev.compute, compute) and np.array_equal(ev.fixed, fixed)
    assert ev.op_of.dtype == ev.buf_of.dtype == np.int64


def test_offsets_tuple_as_the_generator():
    rng = np.random.default_rng(1)
    for arr in (rng.integers(-1, 50, 1000), np.array([], np.int64), np.full(5, -1), rng.integers(0, 9, 7).astype(np.int32),
                np.array([-0.5, 2.7, 3.0])):
        want = tuple(None if o < 0 else int(o) for o in arr.tolist())
        got = offsets_tuple(arr)
        assert got == want and all(type(o) is int for o in got if o is not None)
