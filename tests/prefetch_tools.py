"""Helpers shared by the prefetch-mode tests (tests/test_prefetch.py, tests/test_cpsat_prefetch.py): tiny
programs written by hand, and every interval set of one buffer for exhaustive search over their answers."""

from __future__ import annotations

import itertools

from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.model import Buffer, FastInterval, Op, Operand, Problem


def program(ops: list[list[tuple[str, str, int]]], buffers: list[tuple[str, int, str]], *, capacity: int = 16,
            flops: float | list[float] = 0.0) -> Problem:
    """Ops given as ``[(buffer, "read"|"write", bytes), ...]``; live ranges from the touches (outputs to the end).
    ``flops``: one number for every op, or one per op."""
    first, last = {}, {}
    for t, operands in enumerate(ops):
        for b, _, _ in operands:
            first.setdefault(b, t)
            last[b] = t
    flops = flops if isinstance(flops, list) else [flops] * len(ops)
    bufs = tuple(Buffer(b, size, first.get(b, 0), len(ops) if kind == "output" else last.get(b, 0) + 1, kind=kind)
                 for b, size, kind in buffers)
    return Problem("tiny", bufs, ops=tuple(Op(f"op{t}", flops=f, operands=tuple(Operand(*o) for o in operands))
                                         for t, (operands, f) in enumerate(zip(ops, flops))),
                   capacity=capacity, mode="prefetch")


def interval_sets(problem: Problem, b: int) -> list[list[tuple[int, int, int | None]]]:
    """Every set of at most two valid ``(start, end, copy_start)`` intervals of buffer ``b`` with disjoint
    occupancy (validity ignoring the capacity), the empty set first."""
    T = len(problem.ops)
    singles = [(s, e, c) for s in range(T) for e in range(s + 1, T + 1) for c in [None, *range(-1, s)]]
    roomy = problem.replace(capacity=None)
    singles = [x for x in singles if validate_intervals(roomy, [FastInterval(b, 0, *x)]) is None]
    out = [[]] + [[x] for x in singles]
    for x, y in itertools.combinations(singles, 2):
        first, second = sorted((x, y), key=lambda z: z[0] if z[2] is None else z[2] + 1)
        if (second[0] if second[2] is None else second[2] + 1) >= first[1]:
            out.append([first, second])
    return out


def value(problem: Problem, hw, intervals) -> float:
    """The prefetch evaluator's time saved by ``intervals`` (the objective every prefetch solver reports)."""
    return PrefetchEvaluator.of(problem, hw).value(list(intervals))
