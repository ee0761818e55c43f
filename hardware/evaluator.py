"""The hardware cost evaluator: one score for every answer (docs/architecture.md, "Scoring").

Roofline time of op t: ``max((flops_t + transcendentals_t) / peak, sum over operands of bytes / bw(level))``
plus ``fixed_bytes_t / slow_bw``; program time = sum over ops. For problems without ops
(MiniMalloc CSVs) the model is additive: each buffer left in slow memory costs its
``benefit`` (default: its size), so time = sum of the slow buffers' benefits.

The map-mode **value** of a placement is ``time(all slow) - time(placement)``: the time
saved. It is what every report, bound and game reward is expressed in.

Examples:
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> from mallocgame.hardware.spec import PRESETS
    >>> p = Problem("t", (Buffer("a", 4, 0, 2, benefit=3.0), Buffer("b", 4, 1, 3)), capacity=8)
    >>> ev = Evaluator(p, PRESETS["unit"])
    >>> ev.time_all_slow, ev.value([0, None])
    (7.0, 3.0)
"""

from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np

from mallocgame._native import operand_benefits_loop
from mallocgame.hardware.spec import HardwareSpec
from mallocgame.problem.model import Problem, ProblemRef, derived_facts
from mallocgame.runtime.native_engine import engine


class Evaluator:
    """Scores placements of one problem on one hardware spec.

    Operand data is kept in flat arrays of shape ``[n_operands]`` (op index, buffer index,
    bytes), so one evaluation is a few vectorised passes.
    """

    @classmethod
    def of(cls, problem: Problem, hardware: HardwareSpec) -> "Evaluator":
        """The evaluator of ``problem`` on ``hardware``, built once per (problem, hardware) and shared.

        The runner, the bound and the solvers of one ``solve`` all score with the same one.
        """
        facts = derived_facts(problem)  # the one store of derived facts (mallocgame.engine.session)
        ev = facts.get(("evaluator", hardware))
        if ev is None:
            ev = facts["evaluator", hardware] = cls(problem, hardware)
        return ev

    problem = ProblemRef()  # held weakly: the store of derived facts keeps no problem alive

    def __init__(self, problem: Problem, hardware: HardwareSpec):
        self.problem = problem
        self.n = problem.n
        self.hardware = hardware
        self.additive = not problem.has_ops
        if self.additive:
            benefit = problem.arrays.benefit
            self._benefit = np.where(np.isnan(benefit), problem.arrays.size.astype(np.float64), benefit)
            return
        oa = problem.op_arrays  # the operand columns (mallocgame.problem.model.OpArrays)
        self.op_of = oa.op_of
        self.buf_of = oa.buf_of
        self.nbytes = oa.nbytes.astype(np.float64)
        n_ops = len(problem.ops)
        self.compute = (oa.flops + oa.transcendentals) / hardware.peak_flops
        self.fixed = oa.fixed_bytes.astype(np.float64) / hardware.slow_bw
        self.slow_mem = np.bincount(self.op_of, self.nbytes / hardware.slow_bw, minlength=n_ops)
        # Seconds saved on op t's memory time by holding an operand fast; shape [n_operands].
        self.delta = self.nbytes * (1.0 / hardware.slow_bw - 1.0 / hardware.fast_bw)
        self.n_ops = n_ops

    def op_times(self, fast: np.ndarray) -> np.ndarray:
        """Roofline time of every op, shape ``[n_ops]``, given ``fast`` (bool ``[n]``)."""
        saved = np.bincount(self.op_of, self.delta * fast[self.buf_of], minlength=self.n_ops)
        return np.maximum(self.compute, self.slow_mem - saved) + self.fixed

    def time(self, offsets: Sequence[int | None] | np.ndarray) -> float:
        """Estimated program time of a placement (``None``/-1 = slow memory)."""
        fast = _fast_mask(offsets, self.n)
        if self.additive:
            return float(self._benefit[~fast].sum())
        return float(self.op_times(fast).sum())

    @cached_property
    def time_all_slow(self) -> float:
        return self.time(np.full(self.n, -1, np.int64))

    @cached_property
    def time_all_fast(self) -> float:
        return self.time(np.zeros(self.n, np.int64))

    def value(self, offsets: Sequence[int | None] | np.ndarray) -> float:
        """Time saved against all-slow: the map-mode objective (higher is better)."""
        return self.time_all_slow - self.time(offsets)

    @cached_property
    def benefits(self) -> np.ndarray:
        """``time(all slow) - time(only buffer i fast)`` for every buffer, shape ``[n]``.

        Summed over a set they bound the set's value from above (op time is concave in the
        bytes made fast), which is what makes the knapsack relaxation a valid bound. With ops, one compiled pass
        over the operands op by op (``mallocgame._native.operand_benefits_loop``; ``MALLOCGAME_ENGINE=python``: a
        sort of the (op, buffer) pairs, the same floats).
        """
        if self.additive:
            return self._benefit.copy()
        headroom = np.maximum(self.slow_mem - self.compute, 0.0)  # [n_ops]
        if engine() == "native":
            out = operand_benefits_loop(np.ascontiguousarray(self.op_of, np.int64),
                                        np.ascontiguousarray(self.buf_of, np.int64),
                                        np.ascontiguousarray(self.delta, np.float64),
                                        np.ascontiguousarray(headroom, np.float64), self.n)
            if out is not None:
                return out
        # A buffer touched twice by one op: the two operands share that op's headroom.
        key = self.op_of * self.n + self.buf_of
        uniq, inv = np.unique(key, return_inverse=True)
        per_pair = np.minimum(np.bincount(inv, self.delta), headroom[uniq // self.n])
        return np.bincount(uniq % self.n, per_pair, minlength=self.n)


def _fast_mask(offsets: Sequence[int | None] | np.ndarray, n: int) -> np.ndarray:
    if isinstance(offsets, np.ndarray):
        return offsets >= 0
    return np.fromiter((o is not None for o in offsets), bool, n)
