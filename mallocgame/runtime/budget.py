"""A solver's time: the `Budget` a request carries, and the few rules of time every solver shares.

A budget is ``seconds`` from a monotonic instant; a solver reads its deadline, the time left, and the share of
it a member or a phase gets, from its budget only (docs/architecture.md, "Solvers").

Names: a budget has one instant, its `Budget.deadline`. Every method that cuts a budget returns a `Budget` and is
named by a noun (`Budget.part`, `Budget.share`, `Budget.search_part`); a caller that needs an instant reads that
budget's ``deadline`` (``budget.part(0.2).deadline``). The constructors say what a budget is made from
(`Budget.start`, `Budget.until`); `Budget.left` and `Budget.expired` read the clock.

Examples:
    >>> budget = Budget.start(2.0)
    >>> 0 < budget.left() <= 2.0 and not budget.expired()
    True
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

SAFETY = 0.05  # seconds every solver keeps back for reading its answer and building the Solution
# A run may start again when this many times its last run's seconds are left: a rerun on a fuller state (msa with
# a seed, a variant) is slower than the first, and one that does not fit would end cut short.
RERUN_MARGIN = 1.5


def fits_again(took: float, deadline: float | None) -> bool:
    """Does a run that took ``took`` seconds fit once more before the monotonic ``deadline`` (``None``: no
    deadline), with `RERUN_MARGIN` to spare? The one rule of msa's variants, the session's msa reruns and cpsat's
    seeded msa runs.

    Examples:
        >>> fits_again(1.0, None), fits_again(1.0, time.monotonic() + 10), fits_again(1.0, time.monotonic() + 1)
        (True, True, False)
    """
    return deadline is None or time.monotonic() + RERUN_MARGIN * took <= deadline


# The instant this module was first imported: a floor for `process_started` (a process imports it within seconds of
# its start), and its answer where the OS does not say when the process started.
_IMPORTED = time.monotonic()
# A start the OS reports more than this many seconds before the import above is not believed (a clock of another
# time namespace, say): no command's imports take that long.
_MAX_IMPORT_SECONDS = 60.0


def process_started() -> float:
    """The monotonic instant this process started: what a command's time limit counts from (the interpreter's start,
    its imports included). Linux: the start time in ``/proc/self/stat`` against ``CLOCK_BOOTTIME``, 10 ms
    resolution; elsewhere, or when that is not believable, the instant this module was imported.

    Examples:
        >>> process_started() <= time.monotonic()
        True
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, clock ticks after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
        now = time.monotonic()
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    if not 0.0 <= now - age <= _IMPORTED or _IMPORTED - (now - age) > _MAX_IMPORT_SECONDS:
        return _IMPORTED
    return now - age


@dataclass(frozen=True)
class Budget:
    """``seconds`` of time from the monotonic instant ``started``: the one type of time a solver reads.

    Attributes:
        seconds: The length of the budget (a solver's time limit).
        started: Its start, a ``time.monotonic()`` instant.
    """

    seconds: float
    started: float

    @classmethod
    def start(cls, seconds: float) -> Budget:
        """A budget of ``seconds`` starting now.

        Examples:
            >>> Budget.start(2.0).left() <= 2.0
            True
        """
        return cls(float(seconds), time.monotonic())

    @classmethod
    def until(cls, deadline: float) -> Budget:
        """A budget from now to the monotonic ``deadline`` (spent if that has passed): the budget of a core
        function that is given a deadline.

        Examples:
            >>> Budget.until(time.monotonic() + 2.0).left() <= 2.0, Budget.until(time.monotonic() - 1.0).seconds
            (True, 0.0)
        """
        now = time.monotonic()
        return cls(max(deadline - now, 0.0), now)

    @property
    def deadline(self) -> float:
        """The monotonic instant the budget ends."""
        return self.started + self.seconds

    def left(self) -> float:
        """Seconds left until `deadline` (0 once past it).

        Examples:
            >>> Budget(1.0, time.monotonic() - 5).left()
            0.0
        """
        return max(self.deadline - time.monotonic(), 0.0)

    def expired(self) -> bool:
        """Whether the deadline has passed.

        Examples:
            >>> Budget(1.0, time.monotonic() - 5).expired(), Budget.start(60).expired()
            (True, False)
        """
        return time.monotonic() >= self.deadline

    def part(self, fraction: float, *, keep: float = 0.0) -> Budget:
        """The first ``fraction`` of this budget less ``keep`` seconds: the same start, ``fraction`` of its seconds
        (never below 0). What a phase that must fit a fixed share of the whole limit gets, however much is left;
        ``part(f).deadline`` is the instant ``f`` of the way through, ``part(f, keep=SAFETY)`` a search's that
        takes ``f`` of the budget and keeps `SAFETY` for building its answer.

        Examples:
            >>> Budget(10.0, 100.0).part(0.1)
            Budget(seconds=1.0, started=100.0)
            >>> Budget(10.0, 100.0).part(0.2).deadline, Budget(10.0, 100.0).part(0.9, keep=SAFETY).deadline
            (102.0, 108.95)
        """
        return Budget(max(fraction * self.seconds - keep, 0.0), self.started)

    def share(self, fraction: float, *, keep: float = 0.0, at_most: float | None = None) -> Budget:
        """A child budget of ``fraction`` of the time left less ``keep`` seconds (at most ``at_most`` seconds),
        starting now; it never ends past this one's deadline. What a solver hands a member or a phase.

        Examples:
            >>> parent = Budget.start(4.0)
            >>> child = parent.share(0.25)
            >>> child.seconds <= 1.0 and child.deadline <= parent.deadline
            True
            >>> parent.share(3.0).deadline <= parent.deadline
            True
            >>> parent.share(1.0, keep=1.0).seconds <= 3.0, parent.share(1.0, at_most=0.5).seconds
            (True, 0.5)
            >>> parent.share(0.1, keep=10.0).seconds  # nothing left of it: a spent budget
            0.0
        """
        now = min(time.monotonic(), self.deadline)  # a spent budget's child is spent too, ending at its deadline
        left = self.deadline - now
        seconds = min(max(fraction, 0.0) * left - keep, left)
        if at_most is not None:
            seconds = min(seconds, at_most)
        return Budget(max(seconds, 0.0), now)

    def search_part(self, *, n: int = 0, per_buffer: float = 2e-5, extra: float = 0.0) -> Budget:
        """The first part of this budget, the part a search (or a race of members) may spend so that its answer is
        back within the whole: the same start, ending `SAFETY` + ``extra`` seconds plus ``per_buffer`` seconds for
        each of ``n`` buffers (20 µs: a search's scoring and building the answer) before this budget's deadline, but
        never before half of it.

        Examples:
            >>> b = Budget(1.0, 0.0)
            >>> b.search_part(n=100).deadline, b.search_part(n=10**6).deadline
            (0.948, 0.5)
        """
        return Budget(max(self.seconds - SAFETY - extra - per_buffer * n, self.seconds * 0.5), self.started)
