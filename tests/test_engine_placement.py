"""The two engines of the ordered best-fit placement (MALLOCGAME_ENGINE): the compiled loop of
mallocgame/algorithms/_placement.pxi (in mallocgame._native) against the Python loop of
``mallocgame.algorithms.placement.greedy_place``, its reference.
Offsets must be identical (``==``) for every order ``heap_orders`` gives and XLA's order, in map and pack
modes, with neighbours from the CSR lists and from the overlap index, with buffers already placed, on
hypothesis-generated problems and on the xla suite; so must the greedy-xla and best-fit solvers' answers."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.algorithms import placement
from mallocgame.algorithms.placement import greedy_place, heap_orders, xla_order
from mallocgame.engine.registry import load_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem.intervals import OverlapIndex, overlap_index
from mallocgame.problem.model import Buffer, Problem
from mallocgame.runtime.native_engine import ENGINE_ENV

HW = PRESETS["tpuv4i"]


def both_engines(monkeypatch, *args, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out.append(greedy_place(*args, **kwargs))
    return out[0], out[1]


def orders_of(problem: Problem) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    benefits = np.array([b.benefit or 0.0 for b in problem.buffers], float)
    return heap_orders(problem) | {"xla": xla_order(problem, benefits), "random": rng.permutation(problem.n)}


def assert_engines_agree(monkeypatch, problem: Problem, capacity: int | None) -> None:
    index = overlap_index(problem)
    for name, order in orders_of(problem).items():
        for use_index in (True, False):
            ref, nat = both_engines(monkeypatch, problem, order, capacity, index=index if use_index else None)
            assert ref.dtype == nat.dtype == np.int64
            assert np.array_equal(ref, nat), (name, use_index)
        # buffers already placed (the first half of the order, placed alone) are kept as they are
        half = np.full(problem.n, -1, np.int64)
        first = order[: problem.n // 2]
        half[first] = ref[first]
        ref2, nat2 = both_engines(monkeypatch, problem, order, capacity, index=index, offsets=half)
        assert np.array_equal(ref2, nat2), name
        assert np.array_equal(half[first], nat2[first])


@st.composite
def problems(draw):
    """Up to 150 buffers on a short horizon (so some buffers have 48+ placed neighbours: the reference's numpy
    hole finder), arbitrary sizes (zero included) and alignments, with or without a capacity."""
    n = draw(st.integers(1, 150))
    horizon = draw(st.integers(2, 40))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, horizon - 1))
        end = draw(st.integers(start + 1, horizon))
        buffers.append(Buffer(f"b{i}", draw(st.integers(0, 64)), start, end, benefit=float(draw(st.integers(0, 9))),
                              alignment=draw(st.sampled_from([1, 1, 2, 4, 8, 16]))))
    capacity = draw(st.one_of(st.none(), st.integers(0, 400)))
    mode = "pack" if capacity is None else draw(st.sampled_from(["map", "pack"]))
    return Problem("hyp", buffers, capacity=capacity, mode=mode)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(problem=problems(), budget=st.sampled_from([4_000_000, 16, 1]))
def test_engines_place_alike_on_generated_problems(monkeypatch, problem, budget):
    # a small index budget makes the index store a set every few starts: every branch of its query
    index = OverlapIndex(problem.arrays.start, problem.arrays.end, budget=budget)
    for name, order in orders_of(problem).items():
        ref, nat = both_engines(monkeypatch, problem, order, problem.capacity, index=index)
        assert np.array_equal(ref, nat), name
    assert_engines_agree(monkeypatch, problem, problem.capacity)


@pytest.mark.parametrize("kind", ["layered", "random"])
def test_engines_place_alike_on_generated_workloads(monkeypatch, kind):
    problem = layered_network(3000, seed=3) if kind == "layered" else random_intervals(2000, seed=3, horizon=300)
    assert_engines_agree(monkeypatch, problem, problem.capacity)


XLA = [e.name for e in suite_entries("xla")]


@pytest.mark.parametrize("name", XLA)
def test_engines_place_alike_on_xla_programs(monkeypatch, name):
    """Map mode at the program's capacity and pack mode (no capacity), every order."""
    problem = {e.name: e for e in suite_entries("xla")}[name].build()
    index = overlap_index(problem)
    for capacity in (problem.capacity, None):
        for order_name, order in orders_of(problem).items():
            ref, nat = both_engines(monkeypatch, problem, order, capacity, index=index)
            assert np.array_equal(ref, nat), (order_name, capacity)
            assert (ref >= 0).any()


def test_a_passed_deadline_cuts_both_engines_at_the_same_buffer(monkeypatch):
    # a deadline already passed (grace included): the clock is read at step 256, and at every step over more
    # than CLOCK_EVERY_STEP neighbours, in both loops, so both stop at the same buffer
    for problem in (layered_network(3000, seed=1), random_intervals(3000, seed=1, horizon=60)):
        order = heap_orders(problem)["spatial"]
        for cut_every in (placement.CLOCK_EVERY_STEP, 10):
            monkeypatch.setattr(placement, "CLOCK_EVERY_STEP", cut_every)
            ref, nat = both_engines(monkeypatch, problem, order, problem.capacity, index=overlap_index(problem),
                                    deadline=time.monotonic() - 1.0)
            assert np.array_equal(ref, nat)
            assert (ref >= 0).sum() < problem.n  # it was cut short
        # a deadline far ahead cuts nothing: the uncut answer
        uncut, _ = both_engines(monkeypatch, problem, order, problem.capacity, index=overlap_index(problem))
        ref, nat = both_engines(monkeypatch, problem, order, problem.capacity, index=overlap_index(problem),
                                deadline=time.monotonic() + 3600)
        assert np.array_equal(ref, uncut) and np.array_equal(nat, uncut)


def test_the_index_checkpoint_csr_holds_the_stored_sets():
    problem = random_intervals(500, seed=2, horizon=50)
    index = OverlapIndex(problem.arrays.start, problem.arrays.end, budget=200)
    indptr, indices = index.checkpoint_csr()
    assert len(index.cp_sets) > 2 and len(indptr) == len(index.cp_sets) + 1
    for k, stored in enumerate(index.cp_sets):
        assert np.array_equal(indices[indptr[k]:indptr[k + 1]], stored)
    assert index.checkpoint_csr()[1] is indices  # built once


def solver_answer(monkeypatch, engine_name: str, solver: str, build) -> tuple:
    monkeypatch.setenv(ENGINE_ENV, engine_name)
    problem = build()  # a fresh problem: its session (and its cached baselines) is built under this engine
    loaded = load_solver(solver)
    solution = loaded.solve(loaded.request(problem, HW, time_limit=600, seed=0))
    return solution.offsets, dict(solution.stats)


@pytest.mark.parametrize("solver", ["greedy-xla", "best-fit"])
@pytest.mark.parametrize("name", ["gpt2-tiny-train-adam", "resnet20-cifar-train", "layered-5000", "pack-2000"])
def test_greedy_xla_and_best_fit_answer_alike_in_both_engines(monkeypatch, solver, name):
    if name == "layered-5000":
        def build():
            return layered_network(5000, seed=2)
    elif name == "pack-2000":
        def build():
            p = random_intervals(2000, seed=2, horizon=200)
            return Problem(p.name, p.buffers, mode="pack")
    else:
        build = {e.name: e for e in suite_entries("xla")}[name].build
    ref = solver_answer(monkeypatch, "python", solver, build)
    nat = solver_answer(monkeypatch, "native", solver, build)
    assert ref == nat
    assert any(o is not None and o >= 0 for o in ref[0])
