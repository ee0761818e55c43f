"""The cost of a prefetch-mode answer: op times, async copies on XLA's copy resource, stalls.

The rules are those of docs/prefetch.md (sections 4 and 5); this module is their one
implementation. An answer is a set of :class:`~mallocgame.problem.model.FastInterval`. An operand of op
``t`` on buffer ``b`` is served fast when an interval of ``b`` has ``start <= t < end``. Every
prefetch and every needed eviction is a copy of ``size / copy_bw`` seconds that may use the DMA
budgets of the slots strictly inside its window; each op's budget is its own estimated time,
once for prefetches and once for evictions. Copies of one kind are served in deadline order,
each taking the earliest budget left; demand left at the deadline stalls the program.

Example:
    >>> from mallocgame.problem.model import Buffer, FastInterval, Op, Operand, Problem
    >>> from mallocgame.hardware.spec import PRESETS
    >>> ops = (Op("a", flops=0.0, operands=(Operand("w", "read", 8),)),) * 3
    >>> p = Problem("t", (Buffer("w", 8, 0, 3, kind="weight"),), ops=ops, capacity=8, mode="prefetch")
    >>> ev = PrefetchEvaluator(p, PRESETS["unit"])
    >>> ev.time([]), ev.time([FastInterval(0, 0, 1, 3, copy_start=0)])  # ops 1, 2 fast; copy window empty
    (24.0, 17.6)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from mallocgame._native import serve_copies_left as _compiled_serve
from mallocgame._native import serve_queue  # noqa: F401 (the prefetch game's door to it)
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import HardwareSpec
from mallocgame.hardware.validator import interval_columns
from mallocgame.problem.model import KEY_WIDTH, FastInterval, Problem, ProblemRef, derived_facts


@dataclass(frozen=True)
class Copy:
    """One async copy: ``kind`` "prefetch" or "eviction" of buffer ``buffer``, may use slots ``first..deadline-1``."""

    kind: str
    buffer: int
    first: int  # first slot it may use (the op after its start op)
    deadline: int  # op before which it must be done
    seconds: float  # DMA time it needs
    stall: float = 0.0  # what was left at the deadline


@dataclass(frozen=True)
class Breakdown:
    """Where the time of an answer goes: ``op_times`` ``[T]``, the copies and their stalls."""

    op_times: np.ndarray
    copies: tuple[Copy, ...]

    @property
    def stall(self) -> float:
        return float(sum(c.stall for c in self.copies))

    @property
    def time(self) -> float:
        return float(self.op_times.sum()) + self.stall


def eviction_of(problem: Problem, iv: FastInterval) -> tuple[int, int] | None:
    """``(last write served, deadline)`` of the eviction interval ``iv`` needs, or ``None`` (docs/prefetch.md section 4)."""
    ops, reads, writes = problem.touches.of(iv.buffer)
    lo, hi = ops.searchsorted(iv.start), ops.searchsorted(iv.end)  # the method: no numpy dispatch layer (a hot call)
    served_writes = np.flatnonzero(writes[lo:hi])
    if len(served_writes) == 0:
        return None
    last_write = int(ops[lo + served_writes[-1]])
    if hi < len(ops):
        needed = bool(reads[hi])  # the next touch after the interval reads the value (not a pure write)
    else:
        needed = bool(problem.touches.output[iv.buffer])
    return (last_write, iv.end) if needed else None


class PrefetchEvaluator:
    """Scores interval answers of one problem on one hardware spec.

    ``mode="map"`` charges no copies (a map answer written as intervals scores its map time);
    ``mode="prefetch"`` charges prefetches, evictions and stalls.
    """

    problem = ProblemRef()  # held weakly: the store of derived facts keeps no problem alive

    def __init__(self, problem: Problem, hardware: HardwareSpec):
        self.problem = problem
        self.hardware = hardware
        self.base = Evaluator.of(problem, hardware)
        if self.base.additive:
            raise ValueError(f"{problem.name}: prefetch mode needs a workload with ops")
        # Operands sorted by (buffer, op), so an interval's served operands are one slice.
        base = self.base
        self._order = np.lexsort((base.op_of, base.buf_of))
        self._key = base.buf_of[self._order] * (base.n_ops + 1) + base.op_of[self._order]
        self.sizes = problem.arrays.size

    @classmethod
    def of(cls, problem: Problem, hardware: HardwareSpec) -> "PrefetchEvaluator":
        """Built once per (problem, hardware), like :meth:`Evaluator.of`."""
        facts = derived_facts(problem)
        ev = facts.get(("prefetch_evaluator", hardware))
        if ev is None:
            ev = facts["prefetch_evaluator", hardware] = cls(problem, hardware)
        return ev

    @cached_property
    def operand_touch(self) -> np.ndarray:
        """int64 ``[n_operands]`` (the evaluator's operand order): each operand's index in ``problem.touches``."""
        touches, width = self.problem.touches, self.base.n_ops + 1
        touch_key = np.repeat(np.arange(self.problem.n, dtype=np.int64), np.diff(touches.ptr)) * width + touches.ops
        return np.searchsorted(touch_key, self.base.buf_of * width + self.base.op_of)

    @property
    def time_all_slow(self) -> float:
        return self.base.time_all_slow

    def served(self, intervals: Sequence[FastInterval]) -> np.ndarray:
        """bool ``[n_operands]`` (the evaluator's operand order): which operands are served fast."""
        width = self.base.n_ops + 1
        n_keys = len(self._key)
        # every interval's operand range [lo, hi) marked at once: +1 at lo, -1 at hi, covered where the sum > 0
        spans = span_columns(intervals)[:, :3]
        lo = self._key.searchsorted(spans[:, 0] * width + np.maximum(spans[:, 1], 0))
        hi = self._key.searchsorted(spans[:, 0] * width + np.minimum(spans[:, 2], self.base.n_ops))
        keep = hi > lo
        cover = np.bincount(lo[keep], minlength=n_keys + 1) - np.bincount(hi[keep], minlength=n_keys + 1)
        fast = np.cumsum(cover[:n_keys]) > 0
        out = np.zeros(n_keys, bool)
        out[self._order] = fast
        return out

    def saved(self, intervals: Sequence[FastInterval]) -> np.ndarray:
        """float ``[T]``: the memory time each op saves by the operands ``intervals`` serve fast."""
        base = self.base
        return np.bincount(base.op_of, base.delta * self.served(intervals), minlength=base.n_ops)

    def op_times(self, intervals: Sequence[FastInterval]) -> np.ndarray:
        base = self.base
        return np.maximum(base.compute, base.slow_mem - self.saved(intervals)) + base.fixed

    def copy_arrays(self, intervals: Sequence[FastInterval]) -> dict[str, tuple[np.ndarray, ...]]:
        """Every prefetch and needed eviction as arrays, per kind, in the service order of docs/prefetch.md
        section 5 (deadline, first slot, buffer, then interval start): ``kind -> (first, deadline, seconds,
        buffer)``, each ``[copies of that kind]``. The eviction rule is :func:`eviction_of`'s, for all intervals
        at once (a Python call per interval cost 0.13 s per evaluation at 10k intervals)."""
        spans = span_columns(intervals)
        spans = spans[np.lexsort((spans[:, 1], spans[:, 0]))]  # (buffer, start): the last tie-break
        buf, start, end, has_copy, copy_start = spans.T
        n_ops = self.base.n_ops
        seconds = self.sizes[buf].astype(np.float64) / self.hardware.copy_bw
        touches = self.problem.touches
        key, last_write, width = touches.keys, touches.last_write, KEY_WIDTH
        if len(key) == 0:
            evict, first_evict = np.zeros(len(buf), bool), np.zeros(0, np.int64)
        else:
            # clipped to [0, T] as a per-buffer searchsorted would place them: no key of another buffer between
            lo = key.searchsorted(buf * width + np.clip(start, 0, n_ops))
            hi = key.searchsorted(buf * width + np.clip(end, 0, n_ops))
            w = last_write[np.maximum(hi - 1, 0)]  # the last write among the served touches, if >= lo
            after = np.minimum(hi, len(key) - 1)  # the next touch after the interval, if it is the buffer's
            needed = np.where(hi < touches.ptr[buf + 1], touches.reads[after], touches.output[buf])
            evict = (hi > lo) & (w >= lo) & needed
            first_evict = touches.ops[w[evict]] + 1
        pre = has_copy == 1
        kinds = {"prefetch": (pre, copy_start[pre] + 1, start), "eviction": (evict, first_evict, end)}
        out = {}
        for kind, (mask, first, deadline) in kinds.items():
            deadline, b, sec = deadline[mask], buf[mask], seconds[mask]
            order = np.lexsort((np.arange(len(b)), b, first, deadline))  # stable: (buffer, start) order kept
            out[kind] = (first[order], deadline[order], sec[order], b[order])
        return out

    def copies(self, intervals: Sequence[FastInterval]) -> list[Copy]:
        """Every prefetch and needed eviction, unserved (stall 0), per kind in service order (prefetches first)."""
        return [Copy(kind, b, f, d, s) for kind, arrays in self.copy_arrays(intervals).items()
                for f, d, s, b in zip(*(a.tolist() for a in arrays))]

    def serve(self, intervals: Sequence[FastInterval], times: np.ndarray) -> dict[str, tuple]:
        """Every copy of ``intervals`` served on the budgets ``times`` ``[T]`` (the answer's op times), per kind:
        ``kind -> (first, deadline, seconds, buffer, stalls, left)``: :meth:`copy_arrays`' lists in service order,
        each copy's stall and the budget left per slot (lists). The one place copies are served for an answer."""
        out = {}
        for kind, arrays in self.copy_arrays(intervals).items():
            first, deadline, seconds, buf = (a.tolist() for a in arrays)
            stalls, left = serve_copies_left(list(zip(first, deadline, seconds)), times)
            out[kind] = (first, deadline, seconds, buf, stalls, left)
        return out

    def breakdown(self, intervals: Sequence[FastInterval], *, mode: str = "prefetch") -> Breakdown:
        times = self.op_times(intervals)
        if mode == "map":
            return Breakdown(times, ())
        served = [Copy(kind, b, f, d, s, st) for kind, (first, deadline, seconds, buf, stalls, _)
                  in self.serve(intervals, times).items()
                  for b, f, d, s, st in zip(buf, first, deadline, seconds, stalls)]
        return Breakdown(times, tuple(served))

    def breakdown_time(self, intervals: Sequence[FastInterval]) -> float:
        """:meth:`breakdown`'s ``time``, the same float (the stalls summed in the same order), without a
        :class:`Copy` per copy (a report's scoring calls it: at 200k intervals the objects took a second)."""
        times = self.op_times(intervals)
        stalls = (stall for served in self.serve(intervals, times).values() for stall in served[4])
        return float(times.sum()) + float(sum(stalls))

    def time(self, intervals: Sequence[FastInterval], *, mode: str = "prefetch") -> float:
        """:meth:`breakdown`'s total, without building a :class:`Copy` per copy (the searches' judge calls it)."""
        times = self.op_times(intervals)
        total = float(times.sum())
        if mode == "map":
            return total
        return total + float(sum(sum(served[4]) for served in self.serve(intervals, times).values()))

    def value(self, intervals: Sequence[FastInterval], *, mode: str = "prefetch") -> float:
        """Time saved against all-slow (may be negative when copies stall more than they save)."""
        return self.time_all_slow - self.time(intervals, mode=mode)


def span_columns(intervals: Sequence[FastInterval]) -> np.ndarray:
    """int64 ``[len(intervals), 5]``: each interval's buffer, start, end, whether it has a copy, and its copy start
    (0 without one), from :func:`mallocgame.hardware.validator.interval_columns` (read once per AnswerTuple);
    ``ValueError`` when a field is not an integer of 64 bits."""
    cols = interval_columns(intervals)
    if cols is None:
        raise ValueError("an interval's field is not an integer of 64 bits")
    return cols[:, [0, 2, 3, 4, 5]]


def serve_copies(copies: Sequence[tuple[int, int, float]], budgets: Sequence[float]) -> list[float]:
    """Serve ``(first, deadline, seconds)`` copies in the given order from ``budgets`` ``[T]``
    (seconds of DMA per slot, not modified), each from its earliest slot with budget left in
    ``[first, deadline)``; returns each copy's stall (demand left at its deadline).

    >>> serve_copies([(0, 2, 3.0), (0, 3, 3.0)], np.array([1.0, 1.0, 1.0]))
    [1.0, 2.0]
    """
    return serve_copies_left(copies, budgets)[0]


def serve_copies_left(copies: Sequence[tuple[int, int, float]], budgets: Sequence[float]) -> tuple[list[float], list[float]]:
    """:func:`serve_copies`, also returning the budget left per slot (a list of ``T`` floats).

    The one implementation of XLA's async-copy service here, compiled (``hardware/_copy_service.pxi``, in ``mallocgame._native``):
    the evaluator and ``msa`` call it, the prefetch game calls ``serve_queue``, the same loop on the
    copies it keeps in service order, on every step. Exhausted slots are skipped with a union-find
    "next slot" pointer (as :func:`mallocgame.problem.intervals.next_open`), so the cost is
    O((copies + slots) * alpha) however long the windows are.

    >>> serve_copies_left([(0, 2, 1.5)], [1.0, 1.0, 1.0])
    ([0.0], [0.0, 0.5, 1.0])
    """
    return _compiled_serve(copies, budgets)
