"""Cost evaluator, validator and hole finding against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.algorithms.placement import best_fit_offset
from mallocgame.bounds.bounds import map_upper_bound
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS, load_hardware
from mallocgame.hardware.validator import validate
from mallocgame.inputs.generate import layered_network, packed_instance
from mallocgame.problem.model import Buffer, InputError, Op, Operand, Problem


def roofline_by_hand(problem: Problem, hw, fast: set[str]) -> float:
    total = 0.0
    for op in problem.ops:
        mem = sum(o.bytes / (hw.fast_bw if o.buffer in fast else hw.slow_bw) for o in op.operands)
        total += max(op.flops / hw.peak_flops, mem) + op.fixed_bytes / hw.slow_bw
    return total


def test_evaluator_matches_roofline_by_hand():
    p = layered_network(60, seed=4)
    hw = PRESETS["tpuv4i"]
    ev = Evaluator(p, hw)
    rng = np.random.default_rng(0)
    for _ in range(5):
        mask = rng.random(p.n) < 0.5
        offsets = [0 if m else None for m in mask]
        fast = {b.id for b, m in zip(p.buffers, mask) if m}
        assert ev.time(offsets) == pytest.approx(roofline_by_hand(p, hw, fast), rel=1e-12)
    for i in range(0, p.n, 7):
        alone = roofline_by_hand(p, hw, {p.buffers[i].id})
        assert ev.benefits[i] == pytest.approx(roofline_by_hand(p, hw, set()) - alone, rel=1e-9, abs=1e-18)


def test_benefits_are_not_additive_when_an_op_turns_compute_bound():
    hw = PRESETS["unit"]  # fast 10 B/s, slow 1 B/s, 1 FLOP/s
    bufs = (Buffer("a", 10, 0, 1), Buffer("b", 10, 0, 1))
    op = Op("op0", "matmul", flops=15.0, operands=(Operand("a", "read", 10), Operand("b", "read", 10)))
    p = Problem("nl", bufs, (op,), capacity=100)
    ev = Evaluator(p, hw)
    # all slow: max(15, 20) = 20; one fast: max(15, 11) = 15; both fast: max(15, 2) = 15
    assert ev.time_all_slow == 20 and list(ev.benefits) == [5.0, 5.0]
    assert ev.value([0, 10]) == 5.0 < ev.benefits.sum()
    assert map_upper_bound(p, hw).value == pytest.approx(5.0)


def test_bound_is_above_every_greedy_answer():
    from mallocgame.engine.runner import run_solver

    for seed in range(3):
        p = layered_network(120, seed=seed)
        bound = map_upper_bound(p, PRESETS["tpuv4i"])
        report = run_solver("greedy-xla", p, PRESETS["tpuv4i"], time_limit=5, seed=0, bound=bound)
        assert report.valid and report.objective <= bound.value * (1 + 1e-9)
        assert 0 <= report.gap < 0.2


def brute_valid(p: Problem, offsets) -> bool:
    for i, (a, oa) in enumerate(zip(p.buffers, offsets)):
        if oa is None:
            continue
        if oa < 0 or oa % a.alignment or (p.capacity is not None and oa + a.size > p.capacity):
            return False
        for b, ob in zip(p.buffers[i + 1:], offsets[i + 1:]):
            if ob is not None and a.start < b.end and b.start < a.end and oa < ob + b.size and ob < oa + a.size:
                return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 12))
def test_validator_agrees_with_brute_force(seed, n):
    rng = np.random.default_rng(seed)
    p, _ = packed_instance(n, seed=seed, capacity=16, horizon=8)
    offsets = [None if rng.random() < 0.2 else int(rng.integers(0, 14)) for _ in range(p.n)]
    assert (validate(p, offsets, mode="map") is None) == brute_valid(p, offsets)


def test_known_packing_is_valid_and_pack_mode_needs_every_buffer():
    p, offsets = packed_instance(30, seed=5)
    assert validate(p, offsets) is None
    broken = list(offsets)
    broken[0] = None
    assert "has no offset" in validate(p, broken)


def test_alignment_violation():
    p = Problem("a", (Buffer("x", 4, 0, 1, alignment=8),), capacity=64)
    assert "alignment" in validate(p, [4])
    assert validate(p, [8]) is None


def best_fit_brute(ranges, size, align, capacity):
    """Every aligned offset that fits, scored by the free hole around it."""
    occupied = sorted(ranges)
    candidates = []
    top = capacity if capacity is not None else max([t for _, t in ranges] + [0]) + size + align
    for off in range(0, top - size + 1, align):
        if all(off + size <= o or off >= t for o, t in occupied):
            lo = max([t for o, t in occupied if t <= off] + [0])
            hi = min([o for o, t in occupied if o >= off + size] + [capacity if capacity is not None else 10**18])
            candidates.append((hi - lo, off))
    return min(candidates)[1] if candidates else None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12)), max_size=70), st.integers(1, 10),
       st.sampled_from([1, 2, 4]), st.sampled_from([64, 80, None]))
def test_best_fit_offset_matches_brute_force(rows, size, align, capacity):
    offs = np.array([o for o, _ in rows], np.int64)
    tops = np.array([o + s for o, s in rows], np.int64)
    got = best_fit_offset(offs, tops, size, align, capacity)
    if capacity is None:
        # Unbounded top: the brute force scores it as a huge hole, which the function does too.
        assert got is not None
        want = best_fit_brute(list(zip(offs.tolist(), tops.tolist())), size, align, None)
        assert got == want
    else:
        assert got == best_fit_brute(list(zip(offs.tolist(), tops.tolist())), size, align, capacity)


def test_hardware_file(tmp_path):
    f = tmp_path / "chip.toml"
    f.write_text('base = "tpuv4i"\ncapacity = 1048576\nslow_bw = 1e11\n')
    spec = load_hardware(str(f))
    assert spec.capacity == 1048576 and spec.slow_bw == 1e11 and spec.peak_flops == PRESETS["tpuv4i"].peak_flops
    f.write_text("capacity = -1\n")
    with pytest.raises(InputError, match="field 'capacity'"):
        load_hardware(str(f))
    with pytest.raises(InputError, match="unknown preset"):
        load_hardware("nochip")


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40), st.booleans())
def test_validator_past_the_pair_limit_agrees_with_brute_force(seed, n, all_live):
    """Past PAIR_LIMIT the validator sweeps over time (its live buffers kept in blocks, here of 2 to split often) or,
    when every buffer is live at one time, sorts the address ranges; either way it judges as the pairs do."""
    from mallocgame.hardware import validator as validator_module

    rng = np.random.default_rng(seed)
    p, _ = packed_instance(n, seed=seed, capacity=64, horizon=8)
    if all_live:  # every live range through time 4
        p = p.replace(buffers=tuple(Buffer(b.id, b.size, min(b.start, 3), max(b.end, 5), b.benefit, b.alignment)
                                    for b in p.buffers))
    offsets = [None if rng.random() < 0.2 else int(rng.integers(0, 60)) for _ in range(p.n)]
    if rng.random() < 0.5:  # a stacking, valid unless a later change breaks it
        top, offsets = 0, []
        for b in p.buffers:
            offsets.append(None if rng.random() < 0.1 else top)
            top += b.size * int(rng.integers(1, 3)) - (b.size if rng.random() < 0.05 else 0)
    p = p.replace(capacity=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(validator_module, "PAIR_LIMIT", 0)
        mp.setattr(validator_module._SortedBlocks, "BLOCK", 2)
        assert (validate(p, offsets, mode="map") is None) == brute_valid(p, offsets)
        violation = validator_module.first_overlap(p, offsets)
    assert (violation is None) == brute_valid(p, offsets)


def test_all_live_at_once_is_judged_without_the_sweep(monkeypatch):
    """One op writing every buffer, one reading them all: every pair interferes (past PAIR_LIMIT at scale), so a
    valid answer is judged by sorting its address ranges, not by the sweep over time."""
    from mallocgame.hardware import validator as validator_module

    n = 3000
    p = Problem("one-op", tuple(Buffer(f"b{i}", 256 * (1 + i % 7), 0, 2) for i in range(n)), capacity=None,
                mode="pack")
    offsets, top = [], 0
    for b in reversed(p.buffers):
        offsets.append(top)
        top += b.size
    offsets.reverse()
    monkeypatch.setattr(validator_module, "PAIR_LIMIT", 1000)

    def no_sweep(*_):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(validator_module, "first_overlap", no_sweep)
    assert validate(p, offsets) is None
    offsets[5] = offsets[6]  # an overlap: the fast path says "look closer" and the sweep names it
    monkeypatch.undo()
    monkeypatch.setattr(validator_module, "PAIR_LIMIT", 1000)
    assert "overlap" in validate(p, offsets)


def test_prefetch_validator_past_the_pair_limit_judges_as_the_pairs_do(monkeypatch):
    """validate_intervals past PAIR_LIMIT (the all-live sort, else the sweep) says what it says below it."""
    import dataclasses

    from mallocgame.engine.session import session_for
    from mallocgame.hardware import validator as validator_module
    from mallocgame.hardware.validator import validate_intervals
    from mallocgame.inputs.load import load_problem

    p = load_problem("example:layered150", mode="prefetch")
    good = list(session_for(p, p.hardware).baseline("greedy-xla").intervals)
    moved = [dataclasses.replace(good[1], offset=good[0].offset)] + good[1:]  # may collide with good[0]'s range
    answers = [good, moved, good[:1] + moved]
    below = [validate_intervals(p, a) for a in answers]
    monkeypatch.setattr(validator_module, "PAIR_LIMIT", 0)
    assert [validate_intervals(p, a) for a in answers] == below
    assert below[0] is None and below[2] is not None
