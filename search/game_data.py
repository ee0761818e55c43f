"""Immutable per-problem data shared by every copy of a game (docs/architecture.md, "The game").

:class:`GameData` is built once per ``(problem, hardware)`` and never changes; a game
state and all its clones point at the same instance. It holds

* the buffer columns both as numpy arrays (vectorised filters) and as Python lists
  (scalar lookups in the per-step loops, where numpy's call overhead would dominate);
* the incremental **reward model**: for every buffer, the ops it touches and the seconds
  each op's memory time drops when the buffer is fast (the evaluator's flat operand
  arrays, aggregated per ``(buffer, op)`` pair), so a step updates only those ops;
* scales used to normalise observations.

Reward (map mode): ``time_before - time_after`` of the evaluator's roofline program
time, undecided buffers counted as slow, divided by ``time(all slow)``; the rewards of an
episode therefore sum to ``Evaluator.value(offsets) / time(all slow)``. Pack mode:
``size / total bytes`` per placed buffer (with no capacity: ``(size - peak increase) /
total bytes``, so the return is ``1 - peak / total bytes``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from mallocgame.algorithms.placement import xla_order
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.problem.intervals import max_live, overlap_index
from mallocgame.problem.model import BUFFER_KINDS, BufferTable, Problem


class GameDataCutShort(TimeoutError):
    """The game data's build reached its ``until`` (a monotonic deadline) before it was done: no game can be
    played within the time left; the caller answers with what it holds."""


def check_until(until: float, what: str) -> None:
    """Raise :class:`GameDataCutShort` naming ``what`` when the monotonic clock is past ``until``."""
    if time.monotonic() >= until:
        raise GameDataCutShort(f"the game data's build reached its deadline before {what}")


def buffer_order(problem: Problem, benefits: np.ndarray, kind: str) -> np.ndarray:
    """Decision order of the fixed-order game, shape ``[n]``.

    ``start``: start ascending, then size descending, then index; ``xla``: greedy-xla's
    order; ``size``: size descending, then start, then index.
    """
    a = problem.arrays
    idx = np.arange(problem.n)
    if kind == "start":
        return np.lexsort((idx, -a.size, a.start))
    if kind == "xla":
        return xla_order(problem, benefits)
    if kind == "size":
        return np.lexsort((idx, a.start, -a.size))
    raise ValueError(f"unknown buffer order {kind!r} (known: start, xla, size)")


class GameData:
    """Everything about one problem that the game reads but never writes.

    Shapes: ``size, start, end, align`` int64 ``[n]``; ``benefit`` float64 ``[n]`` (the
    evaluator's per-buffer benefit, seconds or CSV units); ``op_compute, op_slow_mem``
    float64 ``[n_ops]``; ``buf_ops[i]`` / ``buf_deltas[i]`` the ops buffer ``i`` touches
    and its saving on each.
    """

    def __init__(self, problem: Problem, hardware, *, mode: str | None = None, until: float = math.inf):
        """``until``: a monotonic deadline, checked between the build's steps (:class:`GameDataCutShort` past it)."""
        self.problem = problem
        self.mode = mode or problem.mode
        self.n = problem.n
        a = problem.arrays
        self.size, self.start, self.end, self.align = a.size, a.start, a.end, a.alignment
        self.size_l, self.start_l, self.end_l = a.size.tolist(), a.start.tolist(), a.end.tolist()
        self.align_l = a.alignment.tolist()
        self.capacity: int | None = problem.capacity
        if self.mode == "map" and self.capacity is None:
            raise ValueError(f"{problem.name}: map mode needs a fast-memory capacity")
        check_until(until, "the overlap index")
        live = max_live(problem)
        # Addresses are normalised by the capacity, or by the max live bytes when there is none.
        self.scale = float(self.capacity if self.capacity is not None else max(live, 1))
        self.t0 = int(a.start.min()) if self.n else 0
        self.horizon = float(max(int(a.end.max()) - self.t0, 1)) if self.n else 1.0
        self.index = overlap_index(problem)
        self.start_order = np.lexsort((np.arange(self.n), a.start))  # buffers by start, [n]
        self.sorted_starts = a.start[self.start_order]
        self.total_bytes = float(max(int(a.size.sum()), 1))
        self.orders: dict = {}  # decision orders of the order variant (search.game_order), built on first use
        self.skyline = None  # the address variant's compressed time and ranks, built on first use
        bufs = problem.buffers  # a table's kind column, or the objects' kinds
        self.is_weight = ((bufs.kind == BUFFER_KINDS.index("weight")).astype(np.float64) if isinstance(bufs, BufferTable)
                          else np.array([b.kind == "weight" for b in bufs], np.float64))
        check_until(until, "the evaluator")
        ev = Evaluator.of(problem, hardware)
        self.evaluator = ev
        self.benefit = ev.benefits if self.n else np.zeros(0)
        self.time_all_slow = float(ev.time_all_slow) if self.n else 0.0
        self.max_benefit = float(self.benefit.max()) if self.n and self.benefit.max() > 0 else 1.0
        density = self.benefit / np.maximum(a.size, 1)
        self.density = density / (density.max() if self.n and density.max() > 0 else 1.0)
        self.additive = ev.additive
        check_until(until, "the reward model")
        self._build_reward_model(ev)

    def _build_reward_model(self, ev: Evaluator) -> None:
        norm = self.time_all_slow if self.time_all_slow > 0 else 1.0
        self.reward_norm = norm
        if self.mode == "pack":
            self.buf_ops = self.buf_deltas = None
            self.op_compute = self.op_slow_mem = []
            self.n_ops = 0
            return
        if self.additive:
            self.buf_ops = self.buf_deltas = None
            self.op_compute = self.op_slow_mem = []
            self.n_ops = 0
            self.additive_reward = (self.benefit / norm).tolist()
            return
        n_ops = ev.n_ops
        # One entry per (buffer, op) pair: an op reading a buffer twice saves both operands.
        key = ev.buf_of * n_ops + ev.op_of
        uniq, inv = np.unique(key, return_inverse=True)
        delta = np.bincount(inv, ev.delta)
        bufs, ops = uniq // n_ops, uniq % n_ops
        ptr = np.searchsorted(bufs, np.arange(self.n + 1))
        ops_l, delta_l = ops.tolist(), delta.tolist()
        self.buf_ops = [ops_l[ptr[i]:ptr[i + 1]] for i in range(self.n)]
        self.buf_deltas = [delta_l[ptr[i]:ptr[i + 1]] for i in range(self.n)]
        self.op_compute = ev.compute.tolist()
        self.op_slow_mem = ev.slow_mem.tolist()
        self.n_ops = n_ops

    def place_reward(self, i: int, saved: list[float] | None, commit: bool) -> float:
        """Map-mode reward of making buffer ``i`` fast, given the per-op ``saved`` seconds.

        With ``commit`` the saving is added to ``saved`` (the caller's own copy).
        """
        if self.buf_ops is None:
            return self.additive_reward[i]
        compute, slow_mem = self.op_compute, self.op_slow_mem
        gain = 0.0
        for t, d in zip(self.buf_ops[i], self.buf_deltas[i]):
            c = compute[t]
            m = slow_mem[t] - saved[t]
            old = c if c > m else m
            m -= d
            gain += old - (c if c > m else m)
            if commit:
                saved[t] += d
        return gain / self.reward_norm

    def buffer_features(self, i: int) -> list[float]:
        """The ``BUFFER_FEATURES`` numbers describing buffer ``i`` (see ``mallocgame.search.game``)."""
        s, e = self.start_l[i], self.end_l[i]
        return [1.0, self.size_l[i] / self.scale, (s - self.t0) / self.horizon, (e - self.t0) / self.horizon,
                (e - s) / self.horizon, float(self.benefit[i]) / self.max_benefit, float(self.density[i]),
                float(self.is_weight[i])]
