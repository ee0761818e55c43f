"""The channel from a solving child to its parent: every better answer a solver finds, sent as it finds it.

A solver runs in a forked child (:class:`mallocgame.runtime.forking.ChildCall` with a channel: ``solve`` and the API,
:class:`mallocgame.engine.pools.ProcessPool`: ``compare`` and a portfolio's members). Whatever makes a
new best answer -- a solve session's baseline, a search's accepted step, a portfolio's member, a
plugin -- calls :func:`offer` with the answer, its value and its source. In that child the answer goes
to the parent at once (a thread of the child sends it, so the solver never waits on the pipe); the
parent keeps the best one received and, should the solver still run at its time limit plus
:data:`mallocgame.engine.protocol.LIMIT_GRACE`, stops the child and reports that answer, validated, with
the note "stopped at the limit". In a process with no channel open (a solver called in-process)
:func:`offer` does nothing and costs one global read.

Only improvements travel: an offer worth no more than the best already offered (a lower value in
map and prefetch modes, a higher peak in pack mode, or a peak over the capacity) is dropped. Every
offer is one :class:`Improvement` for the parent's log; the answers are coalesced: when offers come
faster than the pipe takes them, the latest (the best) is sent.

Example (a plugin's search loop; outside a solving child it does nothing)::

    from mallocgame.runtime.incumbents import offer
    offer(value=peak, source="my-search", offsets=offsets)   # offsets: int64 [n], -1 slow
"""

from __future__ import annotations

import math
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame._native import interval_columns_loop, intervals_of_columns_loop
from mallocgame.problem.model import FastInterval
from mallocgame.problem.objective import better
from mallocgame.runtime.collection import gc_paused
from mallocgame.runtime.native_engine import engine

# Seconds an answer's pickling may cost per second of the solver's time, at most (the sender waits
# this many times its last send's cost before the next answer; values and sources go every time). The cost is
# the sending thread's CPU time: a send that waits for a busy parent to read costs the solver nothing.
SEND_SHARE = 0.1


@dataclass(frozen=True)
class Improvement:
    """One better answer, as the parent logs it: ``seconds`` since the solve started, its ``value`` (time saved in
    map and prefetch modes, the peak in pack mode) and its ``source`` (a solver, a baseline, a member)."""

    seconds: float
    value: float
    source: str


@dataclass(frozen=True)
class Incumbent:
    """The best answer a child sent: ``offsets`` (int64 ``[n]``, -1 slow; map and pack modes) or ``intervals``
    (prefetch mode), with its :class:`Improvement`. The parent validates it before it reports it. ``order``: the op
    order (indices of the child's problem's ops) of the problem it answers, when the child re-schedules
    (:func:`answering`); ``None``: the child's problem as it was given. The intervals travel as columns
    (``interval_columns``: an object per interval took seconds to pickle at 200k) and are made when asked for."""

    improvement: Improvement
    offsets: np.ndarray | None = None
    interval_columns: np.ndarray | None = None
    order: tuple[int, ...] | None = None

    @property
    def intervals(self) -> tuple:
        """The prefetch answer's fast intervals (empty in map and pack modes)."""
        return intervals_of_columns(self.interval_columns)


def columns_of_intervals(intervals) -> np.ndarray:
    """int64 ``[k, 6]``: each fast interval's buffer, offset, start, end, copy start (0 without one) and whether it
    has a copy."""
    if engine() == "native" and isinstance(intervals, (list, tuple)):
        cols = interval_columns_loop(intervals)  # exact ints only; anything else is read below
        if cols is not None:
            return cols[:, [0, 1, 2, 3, 5, 4]]
    intervals = list(intervals)
    out = np.empty((len(intervals), 6), np.int64)
    if intervals:
        out[:, :4] = np.array([(iv.buffer, iv.offset, iv.start, iv.end) for iv in intervals], np.int64)
        copy = [iv.copy_start for iv in intervals]
        out[:, 4] = [0 if c is None else c for c in copy]
        out[:, 5] = [c is not None for c in copy]
    return out


def intervals_of_columns(columns: np.ndarray | None) -> tuple:
    """The fast intervals :func:`columns_of_intervals` encoded."""
    if columns is None or not len(columns):
        return ()
    with gc_paused():  # an object per interval, no cycle among them
        if engine() == "native":
            return intervals_of_columns_loop(np.ascontiguousarray(columns, np.int64), FastInterval)
        buf, off, start, end, copy, has = (c.tolist() for c in columns.T)
        return tuple(map(FastInterval, buf, off, start, end, [c if h else None for c, h in zip(copy, has)]))


class _Channel:
    """The sending end in one child: ``conn`` (a multiprocessing Connection) shared with the child's final
    answer under ``lock``; a daemon thread sends what :func:`offer` queued."""

    def __init__(self, conn, lock: threading.Lock, problem: Any, *, source: str):
        self.conn, self.lock, self.problem, self.source = conn, lock, problem, source
        self.mode, self.capacity, self.n = problem.mode, problem.capacity, problem.n
        self.t0 = time.monotonic()
        self.order: tuple[int, ...] | None = None  # the op order the offers answer (answering)
        self.flushing = False  # answering: the answer waiting is sent at once
        self.best: float | None = None
        self.events: list[Improvement] = []
        self.answer: tuple | None = None  # the best answer not sent yet: (event, offsets, intervals, order)
        self.wake = threading.Condition()
        self.stopped = False
        self.thread: threading.Thread | None = None

    def improves(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.mode == "pack" and self.capacity is not None and value > self.capacity:
            return False
        return self.best is None or better(self.mode, value, self.best)

    def fits(self, problem: Any, offsets, intervals) -> bool:
        """Is this an answer of the child's own problem (not of a sub-problem, or of the map problem of a
        prefetch one)?"""
        if problem is not None and problem is not self.problem:
            return False
        if self.mode == "prefetch":
            return intervals is not None and offsets is None
        return offsets is not None and len(offsets) == self.n

    def offer(self, value: float, source: str | None, offsets, intervals, problem: Any) -> None:
        if not self.fits(problem, offsets, intervals):
            return
        with self.wake:
            if self.stopped or not self.improves(value):
                return
            self.best = value
            event = Improvement(time.monotonic() - self.t0, value, source or self.source)
            if offsets is not None:  # a copy: the caller goes on changing its array
                offsets = np.array(offsets if isinstance(offsets, np.ndarray) else
                                   [-1 if o is None else o for o in offsets], dtype=np.int64)
            self.events.append(event)
            # encoded by the sender (only the answer it sends: offers may come faster)
            self.answer = (event, offsets, None if intervals is None else tuple(intervals), self.order)
            if self.thread is None:
                self.thread = threading.Thread(target=self._send_loop, name="mallocgame-incumbents", daemon=True)
                self.thread.start()
            self.wake.notify()

    def _send_loop(self) -> None:
        quiet_until = 0.0
        while True:
            with self.wake:
                while not self.stopped and not self.events:
                    if self.answer is not None and (time.monotonic() >= quiet_until or self.flushing):
                        break
                    self.wake.wait(None if self.answer is None else max(quiet_until - time.monotonic(), 1e-3))
                if self.stopped:
                    return
                events, self.events = self.events, []
                answer = None
                if time.monotonic() >= quiet_until or self.flushing:  # else it waits for the end of the quiet time
                    answer, self.answer = self.answer, None
            started = time.thread_time()
            if answer is not None:
                event, offsets, intervals, order = answer
                answer = Incumbent(event, offsets, None if intervals is None else columns_of_intervals(intervals),
                                   order)
            try:
                with self.lock:
                    if self.stopped:
                        return
                    self.conn.send(("incumbent", (events, answer)))
            except (OSError, ValueError, EOFError):  # the parent is gone or closed the pipe: nothing more to send
                return
            if answer is not None:
                quiet_until = time.monotonic() + (time.thread_time() - started) / SEND_SHARE

    def answering(self, problem: Any, order) -> None:
        """Later offers answer ``problem`` (the child's problem with its ops in ``order``); what waits is sent first."""
        with self.wake:
            self.flushing = True
            self.wake.notify()
            while (self.answer is not None or self.events) and not self.stopped and self.thread is not None \
                    and self.thread.is_alive():
                self.wake.wait(0.05)
            self.flushing = False
            self.problem, self.order = problem, tuple(int(t) for t in order)

    def mark(self, scoring: bool) -> None:
        """Tell the parent an answer is being scored (``True``) or is scored (``False``)."""
        try:
            with self.lock:
                self.conn.send(("scoring", scoring))
        except (OSError, ValueError, EOFError):
            pass

    def close(self) -> None:
        with self.wake:
            self.stopped = True
            self.wake.notify()
        with self.lock:  # a send under way ends before the child's final answer goes on the same pipe
            pass


_channel: _Channel | None = None


def open_channel(conn, lock: threading.Lock, problem: Any, *, source: str) -> None:
    """In a solving child: send :func:`offer`'s answers on ``conn`` (``lock`` guards it), ``source`` by default."""
    global _channel
    _channel = _Channel(conn, lock, problem, source=source)


def close_channel() -> None:
    """Stop sending (before the child's final answer goes on the same connection)."""
    global _channel
    channel, _channel = _channel, None
    if channel is not None:
        channel.close()


def _forget_after_fork() -> None:  # a child's own children (a portfolio's members) get channels of their own
    global _channel
    _channel = None


os.register_at_fork(after_in_child=_forget_after_fork)


def answering(problem: Any, order) -> None:
    """In a solving child that re-schedules (``solve --reschedule``): later offers answer ``problem``, the child's
    problem with its ops in ``order`` (indices of its ops), and carry that order (:attr:`Incumbent.order`), so the
    parent that stops the child reports the answer with its schedule. The answer offered before is sent first.
    Values stay comparable: only an answer better than every one offered before, in any order, is sent."""
    channel = _channel
    if channel is not None:
        channel.answering(problem, order)


def offer(*, value: float, source: str | None = None, offsets=None, intervals=None, problem: Any = None) -> None:
    """Report a valid answer worth ``value`` (time saved in map and prefetch modes, peak in pack mode) to the parent.

    ``offsets`` (map, pack: int64 ``[n]`` with -1 slow, or offsets with ``None``) or ``intervals`` (prefetch
    mode: fast intervals); ``source`` names who made it (the solver's name by default); ``problem``, when
    given, must be the problem the child solves (an answer of another, a sub-problem say, is dropped).
    Does nothing outside a solving child or when the answer is no better than the best offered so far.
    """
    channel = _channel
    if channel is not None:
        channel.offer(float(value), source, offsets, intervals, problem)


def offering() -> bool:
    """Is a channel open in this process (so an offer is worth building)?"""
    return _channel is not None


@contextmanager
def scoring():
    """Around the scoring of an answer in a solving child: the parent's clock of the time limit stops meanwhile
    (the solver has returned; validating a big answer is no overrun of the solver's)."""
    channel = _channel
    if channel is None:
        yield
        return
    channel.mark(True)
    try:
        yield
    finally:
        channel.mark(False)


class Received:
    """What a parent holds of one solving child: the best answer it sent (:attr:`incumbent`, come at
    :attr:`incumbent_at`; :attr:`own`, the best of its problem as given, when it re-schedules), every
    :class:`Improvement` in order, the monotonic time :attr:`until` it may run (moved on by the time its answers were
    being scored), whether it is scoring an answer now (:attr:`scoring`; the last scoring ended at :attr:`scored_at`)
    and whether its call has returned (:attr:`returned`: its final answer comes next)."""

    def __init__(self, until: float):
        self.until = until
        self.incumbent: Incumbent | None = None
        self.own: Incumbent | None = None  # the best answer of the child's problem as given (order None)
        self.improvements: list[Improvement] = []
        self.incumbent_at = 0.0  # monotonic time the incumbent came
        self.scored_at = 0.0  # monotonic time the child's last scoring of an answer ended
        self.returned = False  # the child's call has returned: its final answer comes next
        self._scoring_since: float | None = None
        self._seen = 0

    def take(self, kind: str, payload: Any) -> bool:
        """Keep a channel message (True); False for the child's final answer."""
        if kind == "incumbent":
            events, answer = payload
            self.improvements.extend(events)
            if answer is not None:
                self.incumbent, self.incumbent_at = answer, time.monotonic()
                if answer.order is None:
                    self.own = answer
            return True
        if kind == "scoring":
            now = time.monotonic()
            if payload:
                self._scoring_since = now
            elif self._scoring_since is not None:
                self.until += now - self._scoring_since
                self._scoring_since = None
                self.scored_at = now
            return True
        if kind == "returned":
            self.returned = True
            return True
        return False

    @property
    def scoring(self) -> bool:
        """Is the child scoring an answer now (its own judge at work)?"""
        return self._scoring_since is not None

    def due(self) -> bool:
        """Is the child past its time (and not scoring an answer)?"""
        return self._scoring_since is None and time.monotonic() >= self.until

    def left(self) -> float:
        """Seconds to :attr:`until` (half a second while an answer is being scored)."""
        return 0.5 if self._scoring_since is not None else max(self.until - time.monotonic(), 0.0)

    def unseen(self) -> list[Improvement]:
        """The improvements received since the last call."""
        new = self.improvements[self._seen:]
        self._seen = len(self.improvements)
        return new
