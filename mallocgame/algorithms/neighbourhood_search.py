"""One large-neighbourhood-search driver: free part of an incumbent, re-solve it, keep what the judge accepts.

The loop every neighbourhood search of the project runs (map and pack mode in
:mod:`mallocgame.hybrid.lns`, prefetch mode in :mod:`mallocgame.solvers.cpsat.prefetch_windows`):

1. a round begins: the mode *plans* the neighbourhoods to try next from the incumbent (a time
   window of buffers, a set of candidate stays, ...), in order;
2. each neighbourhood gets a budget of *seconds* from what is left to the deadline, and the mode
   re-solves it (CP-SAT, in both modes) around the incumbent, giving a whole trial answer or none;
3. the mode *judges* the trial against the incumbent; an accepted trial becomes the incumbent, a
   strictly better one is a new point of the history;
4. the mode *learns* from the step (grow or shrink the neighbourhood, mark it proven, reorder the rest
   of the round: the driver walks the very list ``plan`` returned, so the mode may rearrange the
   entries after the current one in place) and may stop the search; at the end of a round it is told
   whether anything was gained and whether every neighbourhood of the round was proven, and may stop
   the search.

The search stops at the deadline (no neighbourhood starts within :data:`MARGIN` of it), or when
the mode says nothing is left. The incumbent's value never decreases (an accepted trial worth less,
within a mode's tolerance, keeps the old value), so the answer is never worse than the start. All
randomness comes from one generator seeded with ``seed``, handed to the mode's hooks in a fixed
order: the same seed gives the same answer whenever no budget binds.

The driver imports nothing of the solvers; the modes' hooks are a :class:`Neighbourhoods`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Generic, Protocol, Sequence, TypeVar

import numpy as np

A = TypeVar("A")  # an answer (offsets, fast intervals, ...)
N = TypeVar("N")  # a neighbourhood (buffer indices, a window of stays, ...)

MARGIN = 0.02  # seconds: no neighbourhood starts this close to the deadline


@dataclass(frozen=True)
class Trial(Generic[A]):
    """One re-solved neighbourhood: the whole answer it gives (``None``: none found in time) and whether
    the neighbourhood's model was solved to the end (nothing better to find there around this incumbent)."""

    answer: A | None
    proven: bool


@dataclass(frozen=True)
class Verdict:
    """The judge's word on a trial answer: its ``value`` (higher is better), whether to ``accept`` it as
    the incumbent, and whether it is strictly ``better`` (a new point of the history)."""

    value: float
    accept: bool
    better: bool


@dataclass(frozen=True)
class Step(Generic[A, N]):
    """What one step did: the neighbourhood, its trial, whether the trial was accepted, and the
    incumbent's value after the step."""

    neighbourhood: N
    trial: Trial[A]
    accepted: bool
    value: float


@dataclass(frozen=True)
class Round:
    """How a round ended: ``gained``, some trial was accepted; ``complete``, every planned
    neighbourhood was re-solved and proven (none cut by the deadline)."""

    gained: bool
    complete: bool


class Neighbourhoods(Protocol[A, N]):
    """A mode's hooks. ``rng`` is the driver's one generator (the only randomness of the search)."""

    def plan(self, incumbent: A, rng: np.random.Generator) -> Sequence[N] | None:
        """The neighbourhoods of the next round, in order (may be empty); ``None``: stop, nothing left."""

    def seconds(self, plan: Sequence[N], w: int, left: float) -> float:
        """The budget of ``plan[w]``, seconds, when ``left`` seconds remain to the deadline."""

    def solve(self, incumbent: A, neighbourhood: N, until: float, rng: np.random.Generator) -> Trial[A]:
        """Re-solve ``neighbourhood`` around ``incumbent``, done by the monotonic time ``until``."""

    def judge(self, incumbent: A, value: float, trial: A) -> Verdict:
        """Judge ``trial`` against ``incumbent``, worth ``value``."""

    def learn(self, step: Step[A, N]) -> bool:
        """Adapt after a step; ``True``: stop the search (e.g. the whole problem was one proven neighbourhood)."""

    def end_round(self, result: Round, rng: np.random.Generator) -> bool:
        """Adapt after a round; ``True``: stop the search."""


@dataclass(frozen=True)
class Outcome(Generic[A]):
    """The best answer found and how the search went: ``history`` holds ``(seconds since t0, value)`` at
    every strictly better answer; ``steps`` neighbourhoods were re-solved, ``accepted`` of them kept,
    ``improved`` strictly better; ``stopped_by`` is ``"deadline"`` or ``"mode"`` (the hooks said stop)."""

    answer: A
    value: float
    history: tuple[tuple[float, float], ...]
    steps: int
    accepted: int
    improved: int
    rounds: int
    stopped_by: str


def proportional_share(weights: Sequence[float], w: int, left: float, floor: float) -> float:
    """Seconds for item ``w`` of a round when ``left`` seconds remain: its weight's share of the weights
    from ``w`` on, but at least ``floor`` (and never more than ``left`` for the floor's sake)."""
    share = left * weights[w] / max(sum(weights[w:]), 1)
    return max(share, min(floor, left))


def search(space: Neighbourhoods[A, N], start: A, value: float, *, deadline: float, t0: float, seed: int,
           clock: Callable[[], float] = time.monotonic,
           on_better: Callable[[A, float], None] | None = None) -> Outcome[A]:
    """Run the neighbourhood search of ``space`` from ``start`` (worth ``value``) until ``deadline``
    (monotonic seconds) or until the hooks stop it; never returns an answer worth less than ``value``.
    ``on_better(answer, value)`` is called with each strictly better answer as it is accepted (to send it on:
    :func:`mallocgame.runtime.incumbents.offer`)."""
    rng = np.random.default_rng(seed)
    answer, history = start, []
    steps = accepted = improved = rounds = 0
    stopped_by = "deadline"
    while clock() < deadline - MARGIN:
        plan = space.plan(answer, rng)
        if plan is None:
            stopped_by = "mode"
            break
        gained, complete, stop = False, True, False
        for w, neighbourhood in enumerate(plan):
            now = clock()
            if now >= deadline - MARGIN:
                complete = False
                break
            until = min(deadline, now + space.seconds(plan, w, deadline - now))
            trial = space.solve(answer, neighbourhood, until, rng)
            steps += 1
            verdict = None if trial.answer is None else space.judge(answer, value, trial.answer)
            taken = verdict is not None and verdict.accept
            if taken:
                answer, value = trial.answer, max(value, verdict.value)
                accepted += 1
                gained = True
                if verdict.better:
                    improved += 1
                    history.append((clock() - t0, value))
                    if on_better is not None:
                        on_better(answer, value)
            complete = complete and trial.proven
            if space.learn(Step(neighbourhood, trial, taken, value)):
                stop = True
                break
        rounds += 1
        if stop or space.end_round(Round(gained, complete and not stop), rng):
            stopped_by = "mode"
            break
    return Outcome(answer, value, tuple(history), steps, accepted, improved, rounds, stopped_by)
