"""The validator's overlap sweep: the compiled loop (``native``) against the Python reference (``python``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.hardware import validator as validator_module
from mallocgame.hardware.validator import first_overlap, validate, validate_intervals
from mallocgame.inputs.generate import layered_network, packed_instance
from mallocgame.problem.model import Buffer, FastInterval, Problem


def _both(monkeypatch, problem, offsets):
    monkeypatch.setenv("MALLOCGAME_ENGINE", "python")
    reference = first_overlap(problem, offsets)
    monkeypatch.setenv("MALLOCGAME_ENGINE", "native")
    return reference, first_overlap(problem, offsets)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.sampled_from([0.0, 0.05, 0.3]))
def test_native_sweep_names_the_same_first_pair(seed, n, clash):
    """Random placements (stackings with some buffers moved onto others, and random offsets): the compiled sweep
    returns the very message the Python sweep returns, the first pair included, or ``None`` with it."""
    rng = np.random.default_rng(seed)
    p, _ = packed_instance(n, seed=seed, capacity=64, horizon=8)
    p = p.replace(capacity=None)
    top, offsets = 0, []
    for b in p.buffers:
        offsets.append(None if rng.random() < 0.1 else top)
        top += b.size
    for i in range(n):
        if rng.random() < clash:
            offsets[i] = int(rng.integers(0, max(top, 1)))
    with pytest.MonkeyPatch.context() as mp:
        reference, native = _both(mp, p, offsets)
    assert native == reference


def test_native_sweep_runs_compiled(monkeypatch):
    """With the native engine the Python sweep's sorted blocks are never built (they cost ~14 s at 1M buffers)."""
    p = layered_network(400, seed=2)
    offsets = [None] * p.n
    offsets[0] = 0
    clash = next(j for j in range(1, p.n) if p.buffers[j].start < p.buffers[0].end)
    offsets[clash] = 0

    def no_python_sweep():
        raise AssertionError("the Python sweep ran")

    monkeypatch.setenv("MALLOCGAME_ENGINE", "native")
    monkeypatch.setattr(validator_module, "_SortedBlocks", no_python_sweep)
    assert first_overlap(p, offsets).startswith(f"buffers {p.buffers[0].id!r} and {p.buffers[clash].id!r} overlap")
    assert first_overlap(p, [None] * p.n) is None


def test_offsets_past_64_bits_and_floats_are_judged_by_the_reference(monkeypatch):
    """Offsets that no int64 holds (or floats) go to the Python sweep: the same verdict as the reference."""
    p = Problem("big", (Buffer("a", 8, 0, 2), Buffer("b", 8, 1, 3), Buffer("c", 8, 0, 3)), capacity=None, mode="map")
    for offsets in ([2 ** 70, 2 ** 70 + 4, None], [2 ** 63 - 4, None, 0], [0.0, 8.0, 16.0], [0.0, 4.0, None]):
        reference, native = _both(monkeypatch, p, offsets)
        assert native == reference
    monkeypatch.setenv("MALLOCGAME_ENGINE", "native")
    assert "overlap" in validate(p, [2 ** 70, 2 ** 70 + 4, None])


def test_prefetch_intervals_sweep_agrees_across_engines(monkeypatch):
    """validate_intervals past the pair limit sweeps the intervals as rectangles: both engines, one verdict."""
    p = layered_network(120, seed=5).replace(mode="prefetch", capacity=None)
    intervals = [FastInterval(i, 0 if i % 2 else 64 * i, b.start, b.end, None) for i, b in enumerate(p.buffers)]
    monkeypatch.setattr(validator_module, "PAIR_LIMIT", 0)
    verdicts = []
    for name in ("python", "native"):
        monkeypatch.setenv("MALLOCGAME_ENGINE", name)
        verdicts.append(validate_intervals(p, intervals))
    assert verdicts[0] == verdicts[1] and verdicts[0] is not None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 2**40), st.integers(-1, 99), st.integers(0, 99),
                          st.one_of(st.none(), st.integers(-1, 99))), max_size=30))
def test_interval_columns_are_the_same_in_both_engines(fields):
    """A prefetch answer's columns: the compiled reading equals the Python one, field by field, copy starts of
    ``None`` as (0, 0), a list or a tuple of intervals."""
    intervals = [FastInterval(*f) for f in fields]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MALLOCGAME_ENGINE", "python")
        reference = validator_module.interval_columns(intervals)
        mp.setenv("MALLOCGAME_ENGINE", "native")
        native, native_tuple = validator_module.interval_columns(intervals), validator_module.interval_columns(tuple(intervals))
    assert reference.dtype == native.dtype == np.int64 and reference.shape == native.shape == (len(fields), 6)
    assert native.tolist() == reference.tolist() == native_tuple.tolist()
    assert native.tolist() == [[b, o, s, e, c is not None, c or 0] for b, o, s, e, c in fields]


def test_interval_columns_read_other_numbers_as_the_python_engine_and_say_none_when_they_cannot():
    """Fields that are not plain ints (numpy integers, bools) read as the Python engine reads them; a field beyond
    64 bits or not a number gives ``None`` (the validator then looks interval by interval) in both engines."""
    odd = [FastInterval(np.int64(3), 0, 1, np.int32(4), True), FastInterval(1, 8, 0, 2)]
    with pytest.MonkeyPatch.context() as mp:
        for name in ("python", "native"):
            mp.setenv("MALLOCGAME_ENGINE", name)
            assert validator_module.interval_columns(odd).tolist() == [[3, 0, 1, 4, 1, 1], [1, 8, 0, 2, 0, 0]]
            assert validator_module.interval_columns([FastInterval(0, 2**64, 0, 1)]) is None
            assert validator_module.interval_columns([FastInterval(0, "eight", 0, 1)]) is None


def _mutated(rng, p, good):
    """``good`` (a valid packing) and answers that break each rule: a buffer left out, a negative, misaligned or
    too high offset, two buffers moved onto each other, numpy integers, an array with -1 slow, a wrong length."""
    answers = [list(good)]
    for _ in range(6):
        bad = list(good)
        i = int(rng.integers(0, p.n))
        kind = int(rng.integers(0, 5))
        if kind == 0:
            bad[i] = None
        elif kind == 1:
            bad[i] = -int(p.buffers[i].alignment)
        elif kind == 2:
            bad[i] = good[i] + 1
        elif kind == 3:
            bad[i] = (p.capacity or 64) + int(p.buffers[i].alignment)
        else:
            bad[i] = good[int(rng.integers(0, p.n))]
        answers.append(bad)
    answers += [[None if o is None else np.int64(o) for o in good], np.array(good, np.int64),
                np.array([-1] + list(good[1:]), np.int64), list(good[:-1]), tuple(good)]
    return answers


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40), st.sampled_from(["pack", "map"]), st.booleans())
def test_validate_gives_the_reference_verdict_on_valid_and_mutated_answers(seed, n, mode, aligned):
    """The native engine's verdict read from columns (no object per buffer) is the Python engine's, word for word,
    on a valid packing and on answers that break each rule; the peak and the count of placed buffers too."""
    rng = np.random.default_rng(seed)
    p, good = packed_instance(n, seed=seed, capacity=64, horizon=8)
    if aligned:  # offsets of a packing scaled by 4, alignments of 4 or 1
        p = p.replace(buffers=tuple(Buffer(b.id, 4 * b.size, b.start, b.end, None, int(rng.choice([1, 4])))
                                    for b in p.buffers), capacity=256)
        good = [4 * o for o in good]
    p = p.replace(mode=mode)
    for answer in _mutated(rng, p, good):
        seen = []
        for name in ("python", "native"):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("MALLOCGAME_ENGINE", name)
                readable = len(answer) == p.n
                seen.append((validate(p, answer), validate(p, answer, capacity=10 ** 30), validate(p, answer, mode="map"),
                             validator_module.peak(p, answer) if readable else None,
                             validator_module.count_placed(answer)))
        assert seen[0] == seen[1], answer
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MALLOCGAME_ENGINE", "native")
        assert validate(p, good) is None


def test_a_valid_answer_is_validated_from_its_columns(monkeypatch):
    """With the native engine a valid pack answer is judged from its columns and the compiled sweep: neither the
    pair listing of the reference nor its per-buffer loop runs (at 2M buffers they took seconds)."""
    p = layered_network(400, seed=2).replace(mode="pack", capacity=None)
    top, offsets = 0, []
    for b in p.buffers:
        top = -(-top // b.alignment) * b.alignment
        offsets.append(top)
        top += b.size

    def reference(*args, **kwargs):
        raise AssertionError("the reference path ran")

    monkeypatch.setenv("MALLOCGAME_ENGINE", "native")
    monkeypatch.setattr(validator_module, "_valid_at_once", reference)
    monkeypatch.setattr(validator_module, "_buffer_violation", reference)
    answer = validator_module.AnswerTuple(offsets)
    assert validate(p, answer) is None and validate(p, np.array(offsets)) is None
    cols = validator_module.offset_columns(answer)
    assert validator_module.offset_columns(answer) is cols and not cols[0].flags.writeable  # kept: read once
    assert cols[0].tolist() == offsets and cols[1].all()
    clash = list(offsets)
    clash[1] = offsets[0]
    monkeypatch.undo()
    monkeypatch.setenv("MALLOCGAME_ENGINE", "python")
    expected = validate(p, clash)
    monkeypatch.setenv("MALLOCGAME_ENGINE", "native")
    monkeypatch.setattr(validator_module, "_valid_at_once", reference)
    assert validate(p, clash) == expected and "overlap" in expected


def test_offset_columns_read_what_validate_reads():
    """``None`` (and, in an integer array, a negative entry) is not placed; numpy integers are read as the Python
    engine reads them; floats, bools and ints past 64 bits give ``None``."""
    cols = validator_module.offset_columns([8, None, np.int64(4)])
    assert cols[0].tolist() == [8, 0, 4] and cols[1].tolist() == [True, False, True]
    cols = validator_module.offset_columns(np.array([8, -1, 0]))
    assert cols[0].tolist() == [8, 0, 0] and cols[1].tolist() == [True, False, True]
    for odd in ([0.0, 8.0], [True, None], [2 ** 64, 0], np.array([0.5])):
        assert validator_module.offset_columns(odd) is None



def _first_column(cols):
    """The int64 column of what ``offset_columns`` (a pair) or ``interval_columns`` (one table) read."""
    return cols[0] if isinstance(cols, tuple) else cols


@pytest.mark.parametrize("what", ["offsets", "intervals"])
def test_an_answer_s_columns_go_with_the_answer_that_keeps_them(what):
    """The validator kept the last tuple read and its columns in a module cache, dropped by reference counts: now
    an AnswerTuple keeps its own columns (read once, freed with it, pickled as a plain tuple) and nothing keeps those
    of any other answer."""
    import gc
    import pickle
    import weakref

    if what == "offsets":
        read, plain = validator_module.offset_columns, tuple(range(1000, 1000 + 64 * 500, 64))
    else:
        read, plain = validator_module.interval_columns, tuple(FastInterval(i, 64 * i, i, i + 2) for i in range(500))
    column = weakref.ref(_first_column(read(plain)))
    gc.collect()
    assert column() is None and plain  # a plain tuple's columns: the caller's alone, though the tuple lives on
    answer = validator_module.AnswerTuple(plain)
    cols = read(answer)
    assert read(answer) is cols and answer == plain  # read once
    column = weakref.ref(_first_column(cols))
    del cols
    gc.collect()
    assert _first_column(read(answer)) is column()  # kept while the answer lives, through a collection
    again = pickle.loads(pickle.dumps(answer))
    assert type(again) is tuple and again == plain  # the columns stay in this process
    del answer
    gc.collect()
    assert column() is None  # freed with the answer


def test_a_judged_and_scored_answer_is_read_once(monkeypatch):
    """``score`` validates, counts, times and (a child's report) pickles an answer from one reading of its columns,
    in prefetch mode (intervals) as in map mode (offsets)."""
    import pickle

    from mallocgame.engine.report import score
    from mallocgame.engine.runner import run_solver
    from mallocgame.inputs.load import prepare, read_problem
    from mallocgame.problem.model import Solution, Status

    reads = []
    for name in ("_read_interval_columns", "_read_offset_columns"):
        inner = getattr(validator_module, name)
        monkeypatch.setattr(validator_module, name, lambda answer, inner=inner: reads.append(1) or inner(answer))
    for mode, solver in (("prefetch", "msa"), ("map", "greedy-xla")):
        problem, hw = prepare(read_problem("example:layered150"), mode=mode)
        found = run_solver(solver, problem, hw, seed=0, time_limit=5.0)
        solution = Solution(tuple(found.offsets) or (None,) * problem.n, Status.FEASIBLE, mode,
                            intervals=tuple(found.intervals))
        reads.clear()
        report = score(problem, hw, solution, seconds=0.0, bound=None, solver_name="t")
        pickle.dumps(report)
        assert report.valid and report.placed > 0 and len(reads) == 1, (mode, reads)
