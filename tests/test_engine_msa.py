"""The two engines of msa (MALLOCGAME_ENGINE): the compiled fast-memory heap of mallocgame/algorithms/_msa.pxi against the
Python ``_Heap`` of ``mallocgame.algorithms.memory_space_assignment``, its reference, query by query on random operation
sequences; and whole runs of the algorithm (``msa_run``, every option) and of the ``msa`` solver (its variants
on) on hypothesis-generated problems, the xla suite and the HLO fixtures: identical intervals, objective to the
last bit and statistics (retries, exact copy checks, ...)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame._native import HeapPool, NativeCopyResource, NativeHeap, NativePrefetcher, msa_memory_boundedness
from mallocgame.algorithms.memory_space_assignment import KINDS, _CopyResource, _Heap, _Msa, msa_run
from mallocgame.hardware.spec import PRESETS
from mallocgame.importers.hlo import load_hlo
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.runtime.native_engine import ENGINE_ENV
from mallocgame.solvers.msa import MemorySpaceAssignment
from tests.msa_reference import DATA, HLO_FIXTURES

TPU = PRESETS["tpuv4i"]
NO_DEADLINE = 1e18


def rows(answer) -> list[tuple]:
    return sorted((iv.buffer, iv.start, iv.end, -2 if iv.copy_start is None else iv.copy_start, iv.offset)
                  for iv in answer)


def both_runs(monkeypatch, build, **options) -> dict:
    """``msa_run`` with each engine on a fresh problem from ``build()`` (no cache shared between them)."""
    out = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        problem = build()
        answer, stats = msa_run(problem, problem.hardware or TPU, NO_DEADLINE, **options)
        assert answer is not None
        out[name] = (rows(answer), stats)
    return out


def assert_same_runs(monkeypatch, build, **options) -> None:
    r = both_runs(monkeypatch, build, **options)
    assert r["native"][0] == r["python"][0], options
    assert r["native"][1] == r["python"][1], options


def assert_same_solver(monkeypatch, build, **options) -> None:
    out = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        problem = build()
        sol = MemorySpaceAssignment().solve(MemorySpaceAssignment.request(problem, problem.hardware or TPU, time_limit=1e6,
                                                                    seed=0, **options))
        stats = {k: v for k, v in sol.stats.items()}
        out[name] = (rows(sol.intervals), sol.objective.hex(), stats)
    assert out["native"] == out["python"]


# ---------------------------------------------------------------- the heap, query by query

@st.composite
def heap_scripts(draw):
    ops = draw(st.lists(st.tuples(st.sampled_from(("add", "add", "add", "extend", "truncate", "query")),
                                  st.integers(0, 60), st.integers(1, 30), st.integers(0, 200), st.integers(1, 80),
                                  st.sampled_from((1, 1, 4, 16))), min_size=1, max_size=80))
    return draw(st.integers(50, 300)), ops


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heap_scripts())
def test_native_heap_answers_every_query_as_the_python_heap(script):
    capacity, ops = script
    ref, nat = _Heap(capacity), NativeHeap(capacity)
    for kind, a, length, offset, size, align in ops:
        e = a + length
        if kind == "add":
            assert nat.add(a, e, offset, size) == ref.add(a, e, offset, size)
        elif kind == "extend" and ref.n:
            k = ref.n - 1  # as msa does: only the newest rectangle grows
            end = max(ref.hi[k], e)
            ref.extend(k, end)
            nat.extend(k, end)
        elif kind == "truncate":
            keep = min(ref.n, offset % (ref.n + 1))
            ref.truncate(keep)
            nat.truncate(keep)
        assert nat.n == ref.n
        assert (nat.lo, nat.hi, nat.off, nat.top) == (ref.lo, ref.hi, ref.off, ref.top)
        pool_ref, pool_nat = ref.near(a, e), nat.near(a, e)
        assert isinstance(pool_nat, HeapPool) and pool_nat.as_tuples() == pool_ref
        assert nat.best_fit(a, e, size, align) == ref.best_fit(a, e, size, align)
        for lo_, hi_ in ((a, e), (a + length // 2, e), (a, a + 1)):  # queries inside the pool's range
            assert nat.best_fit(lo_, hi_, size, align, pool_nat) == ref.best_fit(lo_, hi_, size, align, pool_ref)
            assert nat.fits(lo_, hi_, size, align, pool_nat) == ref.fits(lo_, hi_, size, align, pool_ref)
            assert nat.free(lo_, hi_, offset, size, pool_nat) == ref.free(lo_, hi_, offset, size, pool_ref)
            assert nat.free(lo_, hi_, offset, size) == ref.free(lo_, hi_, offset, size)


def test_the_engine_variable_picks_the_heap(monkeypatch):
    problem = prepare(layered_network(40, seed=0), mode="prefetch", capacity_fraction=0.25, hardware=TPU)[0]
    monkeypatch.setenv(ENGINE_ENV, "python")
    msa = _Msa(problem, TPU, NO_DEADLINE)
    assert (type(msa.heap), type(msa.res), msa.prefetcher) == (_Heap, _CopyResource, None)
    for value in ("native", None):
        if value is None:
            monkeypatch.delenv(ENGINE_ENV)
        else:
            monkeypatch.setenv(ENGINE_ENV, value)
        msa = _Msa(problem, TPU, NO_DEADLINE)
        assert (type(msa.heap), type(msa.res), type(msa.prefetcher)) == (NativeHeap, NativeCopyResource, NativePrefetcher)


def test_the_native_engine_runs_the_compiled_buffer_loop(monkeypatch):
    # the native engine's run never enters the Python tries (_Msa.allocate, _BufferTry); the Python engine's does
    problem = prepare(layered_network(60, seed=1), mode="prefetch", capacity_fraction=0.25, hardware=TPU)[0]

    def python_try(self, *args, **kwargs):
        raise AssertionError("the Python try ran")

    monkeypatch.setattr(_Msa, "allocate", python_try)
    monkeypatch.setenv(ENGINE_ENV, "native")
    answer, stats = msa_run(problem, TPU, NO_DEADLINE)
    assert answer and stats["buffers_fast"] > 0
    monkeypatch.setenv(ENGINE_ENV, "python")
    with pytest.raises(AssertionError, match="the Python try ran"):
        msa_run(problem, TPU, NO_DEADLINE)


def test_native_memory_boundedness_is_the_python_one_to_the_bit(monkeypatch):
    problem = prepare(XLA["gpt2-tiny-train-adam"].build(), mode="prefetch")[0]
    monkeypatch.setenv(ENGINE_ENV, "python")
    msa = _Msa(problem, problem.hardware, NO_DEADLINE)
    ref = msa.memory_boundedness()
    nat = msa_memory_boundedness(msa.ptr, msa.ops, msa.reads, msa.writes, msa.dsum, msa.slow_mem, msa.compute, msa.size)
    assert ref.any() and nat.tolist() == ref.tolist()


@pytest.mark.parametrize("n", (80, 400))
def test_both_engines_stop_alike_at_a_passed_deadline(monkeypatch, n):
    # a deadline already passed: the first MIN_DECIDED buffers of the order are decided (a try reads the clock
    # every 64 touches), the rest left in slow memory; the same answer and statistics from both engines
    def build():
        return prepare(layered_network(n, seed=5), mode="prefetch", capacity_fraction=0.25, hardware=TPU)[0]

    out = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        problem = build()
        answer, stats = msa_run(problem, TPU, 0.0)
        assert answer is not None and stats["timed_out"] and stats["cut_short"]
        out[name] = (rows(answer), stats)
    assert out["native"] == out["python"]
    assert out["native"][0]  # some buffers were decided before the clock was read


@functools.cache
def _gpt2_tiny_msa() -> _Msa:
    problem = prepare(XLA["gpt2-tiny-train-adam"].build(), mode="prefetch")[0]
    return _Msa(problem, problem.hardware, NO_DEADLINE)


@settings(max_examples=300, deadline=None)
@given(use=st.integers(0, 10_000), back=st.integers(0, 400), copy_t=st.floats(1e-8, 1e-3),
       reduction=st.floats(0.0, 1e-4), retry=st.integers(0, 3))
def test_native_picker_gives_the_python_pickers_window_and_order(use, back, copy_t, reduction, retry):
    msa = _gpt2_tiny_msa()
    use = use % len(msa.elapsed)
    start = max(use - back, -1)
    picked = msa.picker(start, use, copy_t, reduction, retry)
    max_interval = msa.max_elapsed(copy_t, retry)
    window = msa.prefetcher.window(start, use, copy_t, reduction, max_interval)
    order = msa.prefetcher.candidates(start, use, copy_t, reduction, max_interval)
    if picked is None:
        assert window is None and order is None
    else:
        assert window[:2] == picked[:2]
        assert order == list(picked[2])


# ---------------------------------------------------------------- the copy resource, decision by decision

def assert_same_resource(ref: _CopyResource, nat: NativeCopyResource, where) -> None:
    assert nat.exact_checks == ref.exact_checks, where
    assert nat.saved == ref.saved and nat.times == ref.times, where
    for kind in KINDS:
        assert nat.left(kind) == ref.left[kind], where
        assert nat.copies(kind) == ref.copies[kind], where
        assert nat.allocs(kind) == [list(a) for a in ref.alloc[kind]], where


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(3, 160), steps=st.integers(1, 300),
       saturation=st.sampled_from((0.2, 1.0, 3.0)))
def test_native_copy_resource_takes_every_decision_of_the_python_one(seed, T, steps, saturation):
    # random copies and op savings (budgets saturated or not), each copy tried at earlier and earlier starts as
    # the picker does, some buffers' tries undone: the same answers, witness, journal and exact-check count
    import random

    import numpy as np

    rng = random.Random(seed)
    compute = np.array([rng.uniform(0.1, 1.0) for _ in range(T)])
    slow = compute + np.array([rng.uniform(0.0, 1.0) for _ in range(T)])
    fixed = np.array([rng.choice((0.0, 0.0, 0.01)) for _ in range(T)])
    ref, nat = _CopyResource(compute, slow, fixed), NativeCopyResource(compute, slow, fixed)
    assert nat.tol == ref.tol and nat.T == ref.T
    for step in range(steps):
        if step % 10 == 0:  # a buffer's start; some buffers' tries are undone (a retry restores)
            snaps = ref.snapshot(), nat.snapshot()
        elif step % 10 == 9 and rng.random() < 0.3:
            ref.restore(snaps[0]), nat.restore(snaps[1])
            assert_same_resource(ref, nat, step)
        v = rng.randrange(1, T)
        serve = [(rng.randrange(0, T), rng.uniform(0.0, 0.3)) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
        kind = "prefetch" if rng.random() < 0.8 else "eviction"
        need = rng.uniform(0.05, 3.0) * saturation
        if rng.random() < 0.1:
            assert nat.try_add(serve) == ref.try_add(serve), step
            continue
        for first in range(v - 1, max(-2, v - 60), -1):
            got = ref.try_add(serve, kind, (first, v, need))
            assert nat.try_add(serve, kind, (first, v, need)) == got, (step, first)
            if got:
                break
        assert_same_resource(ref, nat, step)


def test_native_copy_resource_seeds_as_the_python_one():
    import numpy as np

    rng = np.random.default_rng(3)
    T = 50
    compute = rng.uniform(0.1, 1.0, T)
    slow, fixed = compute + rng.uniform(0.0, 1.0, T), np.zeros(T)
    saved = rng.uniform(0.0, 0.2, T)
    light = {"prefetch": [(3, 9, 0.5), (-1, 4, 0.3), (20, 41, 1.0)], "eviction": [(10, 12, 0.2)]}
    heavy = {"prefetch": [(3, 5, 50.0)], "eviction": []}
    for copies in (light, heavy):
        ref, nat = _CopyResource(compute, slow, fixed), NativeCopyResource(compute, slow, fixed)
        assert nat.seed_full(saved, copies) == ref.seed_full(saved, copies)
        assert_same_resource(ref, nat, copies)
    assert not NativeCopyResource(compute, slow, fixed).seed_full(saved, heavy)


# ---------------------------------------------------------------- whole runs

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(n=st.integers(5, 400), seed=st.integers(0, 10_000), fraction=st.sampled_from((0.02, 0.1, 0.25, 0.6, 1.5)),
       max_retries=st.integers(1, 4), max_overlap=st.sampled_from(("buffer", "memory")),
       cross=st.integers(0, 2), ratio=st.sampled_from((1.0, 3.0, 10.0, 40.0)))
def test_both_engines_give_the_same_runs_on_generated_problems(monkeypatch, n, seed, fraction, max_retries,
                                                                max_overlap, cross, ratio):
    def build():
        return prepare(layered_network(n, seed=seed), mode="prefetch", capacity_fraction=fraction, hardware=TPU)[0]

    assert_same_runs(monkeypatch, build, max_retries=max_retries, max_overlap=max_overlap,
                     cross_program_prefetch=cross, overlap_ratio=ratio)


@pytest.mark.parametrize("name", HLO_FIXTURES)
@pytest.mark.parametrize("fraction", (0.1, 0.25, 0.4))
def test_both_engines_give_the_same_runs_on_the_hlo_fixtures(monkeypatch, name, fraction):
    def build():
        problem = load_hlo(DATA / f"{name}.hlo.txt").problem
        return prepare(problem, mode="prefetch", capacity_fraction=fraction, hardware=TPU)[0]

    assert_same_runs(monkeypatch, build)
    assert_same_runs(monkeypatch, build, cross_program_prefetch=1, max_overlap="memory")


XLA = {e.name: e for e in suite_entries("xla")}


@pytest.mark.parametrize("name", sorted(XLA))
def test_both_engines_give_the_same_runs_on_the_xla_suite(monkeypatch, name):
    assert_same_runs(monkeypatch, lambda: prepare(XLA[name].build(), mode="prefetch")[0])


@pytest.mark.parametrize("name", ("gpt2-tiny-train-adam", "resnet20-cifar-train", "vit-s16-b8", "mixer-s16-b8"))
def test_both_engines_give_the_same_solver_answer_with_variants(monkeypatch, name):
    # the solver's default: msa, then XLA's cross-program prefetch and the other max-overlap rule
    assert_same_solver(monkeypatch, lambda: prepare(XLA[name].build(), mode="prefetch")[0], variants=True)


def test_both_engines_give_the_same_solver_answer_with_a_hint(monkeypatch):
    def build():
        return prepare(layered_network(300, seed=3), mode="prefetch", capacity_fraction=0.25, hardware=TPU)[0]

    monkeypatch.setenv(ENGINE_ENV, "python")
    hint_problem = build()
    hint = MemorySpaceAssignment().solve(MemorySpaceAssignment.request(hint_problem, TPU, time_limit=1e6, seed=0,
                                                                  max_retries=1, variants=False))
    assert hint.intervals
    assert_same_solver(monkeypatch, build, hint=hint, variants=True)
