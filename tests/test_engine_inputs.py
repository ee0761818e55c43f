"""The two engines (MALLOCGAME_ENGINE) of greedy-xla's inputs: the overlap index's checkpoint sets
(mallocgame/problem/_overlap_index.pxi against the numpy reference in ``mallocgame.problem.intervals.OverlapIndex``),
the map evaluator's per-buffer benefits with ops (mallocgame/hardware/_operand_benefits.pxi against the sort of
``Evaluator.benefits``) and XLA's order (``mallocgame.algorithms.placement.xla_order``: ids read only where the
numeric keys tie). Each must be identical (``==``, floats included) on generated problems with many ties."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame._native import operand_benefits_loop
from mallocgame.algorithms.placement import xla_order
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.problem import intervals
from mallocgame.problem.intervals import OverlapIndex
from mallocgame.problem.model import Buffer, Op, Operand, Problem
from mallocgame.runtime.native_engine import ENGINE_ENV

HW = PRESETS["tpuv4i"]


def per_engine(monkeypatch, build):
    out = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        out[name] = build()
    return out["python"], out["native"]


@pytest.mark.parametrize("budget", [20_000, 200_000, 4_000_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_checkpoint_sets_are_the_references(monkeypatch, budget, seed):
    monkeypatch.setattr(intervals, "_SWEEP_CHECKPOINTS", 0)  # the many-checkpoints construction at a small size
    p = random_intervals(3000, seed=seed, horizon=200)
    a = p.arrays
    ref, nat = per_engine(monkeypatch, lambda: OverlapIndex(a.start, a.end, budget=budget))
    assert len(ref.cp_time) > 1 and ref.stride == nat.stride and np.array_equal(ref.cp_pos, nat.cp_pos)
    for x, y in zip(ref.checkpoint_csr(), nat.checkpoint_csr()):
        assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y)
    rng = np.random.default_rng(seed)
    for s in rng.integers(0, 200, 50).tolist():
        assert sorted(ref.query(s, s + 7).tolist()) == sorted(nat.query(s, s + 7).tolist())


def problem_with_repeated_operands() -> Problem:
    """Three ops; op 1 touches buffer b twice (the two operands share the op's headroom)."""
    bufs = (Buffer("a", 64, 0, 2), Buffer("b", 4096, 0, 3), Buffer("c", 32, 1, 3))
    ops = (Op("o0", operands=(Operand("a", "write", 64), Operand("b", "write", 4096))),
           Op("o1", flops=1e3, operands=(Operand("b", "read", 4096), Operand("a", "read", 64),
                                         Operand("b", "read", 4096), Operand("c", "write", 32))),
           Op("o2", flops=1e9, operands=(Operand("c", "read", 32), Operand("b", "read", 4096))))
    return Problem("rep", bufs, ops=ops, mode="map", capacity=4096)


@pytest.mark.parametrize("make", [lambda: layered_network(3000, seed=2), problem_with_repeated_operands])
def test_benefits_are_the_references(monkeypatch, make):
    p = make()
    ref, nat = per_engine(monkeypatch, lambda: Evaluator(p, HW).benefits)
    assert ref.dtype == nat.dtype == np.float64
    assert np.array_equal(ref, nat)
    assert (ref > 0).any()


def test_benefits_loop_refuses_operands_out_of_op_order():
    op_of, buf_of = np.array([1, 0], np.int64), np.array([0, 1], np.int64)
    assert operand_benefits_loop(op_of, buf_of, np.ones(2), np.ones(2), 2) is None
    out = operand_benefits_loop(op_of[::-1].copy(), buf_of, np.array([0.5, 2.0]), np.array([1.0, 1.0]), 2)
    assert out.tolist() == [0.5, 1.0]


def tied_problem(seed: int, n: int = 2000) -> tuple[Problem, np.ndarray]:
    """Buffers whose sizes, lengths and benefits take few values (most keys tie), ids in a shuffled order."""
    rng = np.random.default_rng(seed)
    names = [f"t{k}" for k in rng.permutation(n).tolist()]
    names[5] = names[6]  # a repeated id: kept in index order
    start = rng.integers(0, 50, n)
    bufs = tuple(Buffer(names[i], int(rng.choice([8, 16])), int(s), int(s) + int(rng.choice([1, 3])))
                 for i, s in enumerate(start.tolist()))
    benefits = rng.choice([0.0, 1.0, 2.0, np.nan], n)
    return Problem("ties", bufs, mode="map", capacity=64), benefits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_xla_order_is_the_references(monkeypatch, seed):
    p, benefits = tied_problem(seed)
    ref, nat = per_engine(monkeypatch, lambda: xla_order(p, benefits))
    assert np.array_equal(ref, nat)
    assert sorted(nat.tolist()) == list(range(p.n))


def test_xla_order_without_ties_and_with_nul_ids(monkeypatch):
    p = random_intervals(500, seed=4, horizon=10_000, max_size=1 << 20)
    benefits = np.arange(p.n, dtype=float)  # all distinct: no id is read
    ref, nat = per_engine(monkeypatch, lambda: xla_order(p, benefits))
    assert np.array_equal(ref, nat)
    bufs = (Buffer("a\x00", 8, 0, 1), Buffer("a", 8, 0, 1), Buffer("\x00", 8, 0, 1), Buffer("", 8, 0, 1))
    q = Problem("nul", bufs, mode="map", capacity=8)
    ref, nat = per_engine(monkeypatch, lambda: xla_order(q, np.ones(4)))
    assert np.array_equal(ref, nat)
