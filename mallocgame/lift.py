"""Prefetch-mode answers built from map-mode ones (docs/prefetch.md section 6).

Example:
    >>> from mallocgame.model import Buffer, Op, Operand, Problem
    >>> ops = (Op("a", operands=(Operand("w", "read", 8), Operand("x", "write", 4))),
    ...        Op("b", operands=(Operand("x", "read", 4),)))
    >>> p = Problem("t", (Buffer("w", 8, 0, 1, kind="weight"), Buffer("x", 4, 0, 2)), ops=ops, capacity=16)
    >>> [(iv.buffer, iv.start, iv.end, iv.copy_start) for iv in lift_map_answer(p, [0, 8])]
    [(0, 0, 1, -1), (1, 0, 2, None)]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mallocgame.hardware.validator import validate_intervals
from mallocgame.model import FastInterval, Problem, Solution


def map_intervals(problem: Problem, offsets: Sequence[int | None] | np.ndarray) -> list[FastInterval]:
    """A map answer as intervals: one ``[start, end)`` interval per fast buffer, no copies.

    Scored with ``mode="map"`` by :class:`mallocgame.hardware.prefetch_cost.PrefetchEvaluator` it gives the
    map-mode time exactly.
    """
    offs = np.asarray([-1 if o is None else o for o in offsets], np.int64)
    a = problem.arrays
    return [FastInterval(int(i), int(offs[i]), int(a.start[i]), int(a.end[i]), None) for i in np.flatnonzero(offs >= 0)]


def lift_map_answer(problem: Problem, offsets: Sequence[int | None] | np.ndarray) -> list[FastInterval]:
    """A valid prefetch answer holding the same rectangles as a valid map answer.

    A fast buffer whose first touch is a pure write at its start is produced in place; any
    other (a parameter, or one first read) is prefetched by a copy that starts one op before
    its interval (``copy_start = start - 1``), so it occupies exactly the map rectangle.
    """
    touches = problem.touches
    out = []
    for iv in map_intervals(problem, offsets):
        ops, reads, writes = touches.of(iv.buffer)
        k = int(np.searchsorted(ops, iv.start))
        pure_write = k < len(ops) and ops[k] == iv.start and writes[k] and not reads[k]
        if pure_write:
            out.append(iv)
        else:
            out.append(FastInterval(iv.buffer, iv.offset, iv.start, iv.end, iv.start - 1))
    return out


def hint_intervals(problem: Problem, hint: Solution | None) -> list[FastInterval] | None:
    """A hint as valid prefetch intervals (a map answer is lifted by :func:`lift_map_answer`), or
    ``None`` when there is no hint or it is not a valid prefetch answer: the one reading of a hint
    in prefetch mode (msa, cpsat, lns, mcts)."""
    if hint is None:
        return None
    if hint.intervals:
        ivs = list(hint.intervals)
    elif len(hint.offsets) == problem.n and any(o is not None for o in hint.offsets):
        try:
            ivs = lift_map_answer(problem, hint.offsets)
        except (ValueError, IndexError, TypeError):
            return None
    else:
        return None
    return ivs if validate_intervals(problem, ivs) is None else None
