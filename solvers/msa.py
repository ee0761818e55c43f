"""XLA's memory-space assignment (MSA) re-implemented for prefetch mode: per-use prefetches and evictions.

The baseline of prefetch mode (docs/prefetch.md). The algorithm, and what each part of XLA's
``MsaAlgorithm`` becomes in our model, is in :mod:`mallocgame.algorithms.memory_space_assignment` (the core, because the
searches of prefetch mode build its answer first and never end below it); this module is the
registered solver. Deterministic: ``seed`` is ignored. With a hint (a prefetch answer, or a map
answer lifted by :func:`mallocgame.formats.lift.lift_map_answer`) MSA also runs with the hint's
intervals committed first and returns the best of the two runs and the hint.

Unless ``variants=False``, when time permits (a run as long as those so far still fits in the first
10% of the time limit, or in the first ``variants_seconds`` if given: a caller that gives msa a part of its own
limit, the portfolio above ``LARGE`` buffers, passes its own limit's tenth, so that its msa answer is the msa
solver's of that limit) it also runs two other XLA configurations and keeps the best answer: XLA's
cross-program prefetch of one buffer, and the other max-overlap rule (``stats["variants_tried"]``
and ``stats["variants_skipped"]`` say which: the answer depends on the machine only at sizes where
the variants are near that share, and says so). ``overlap_ratio`` (default 10, XLA's
``max_overlap_to_async_copy_ratio``): the longest no-copy stay and prefetch window in copy times.
A run its time limit cuts short is still
FEASIBLE (a valid answer) but says so: ``stats["cut_short"]`` (the CLI's summary line warns).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mallocgame.algorithms.memory_space_assignment import MAX_OVERLAP_RATIO, MAX_RETRIES, _Msa, msa_run  # noqa: F401  (_Msa: tests)
from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.session import MSA_VARIANTS, VARIANTS_SHARE
from mallocgame.formats.lift import hint_intervals
from mallocgame.hardware.validator import interval_columns
from mallocgame.problem.model import FastInterval, Problem, Solution, Status
from mallocgame.problem.objective import better
from mallocgame.runtime.budget import Budget, fits_again


@dataclass(frozen=True)
class MsaOptions(Options):
    """The options of the ``msa`` solver."""

    max_retries: int = option(MAX_RETRIES, "XLA's retries of a buffer's allocation with fewer uses", low=1)
    max_overlap: str = option("buffer", "XLA's max-overlap rule: per buffer or per memory",
                              choices=("buffer", "memory"))
    variants: bool = option(True, "also run two other XLA configurations when time permits; keep the best")
    overlap_ratio: float = option(MAX_OVERLAP_RATIO, "the longest no-copy stay and prefetch window, in copy times",
                                  low=1)
    variants_seconds: float | None = option(None, "seconds from the start the variants must fit in "
                                                  "(default: a tenth of the time limit)", low=0)


class MemorySpaceAssignment(Solver):
    name = "msa"
    modes = frozenset({"prefetch"})
    greedy = True  # a one-pass heuristic: the baseline of prefetch mode, not held to never-below-greedy
    Options = MsaOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, hardware, hint, opts = request.problem, request.hardware, request.hint, request.options
        max_retries, max_overlap, overlap_ratio = opts.max_retries, opts.max_overlap, opts.overlap_ratio
        # the variants' time, from msa's own start: the first VARIANTS_SHARE of its budget unless given
        variants = Budget.start(request.budget.part(VARIANTS_SHARE).seconds if opts.variants_seconds is None
                                else opts.variants_seconds)
        t0 = variants.started
        n = problem.n
        empty = Solution(offsets=(None,) * n, status=Status.FEASIBLE, mode=problem.mode, objective=0.0,
                         solver=self.name, intervals=())
        if n == 0 or not problem.has_ops:
            return empty.replace(wall_time=time.monotonic() - t0)
        deadline = request.budget.search_part(n=n, extra=0.02).deadline
        ev = request.facts.prefetch_evaluator
        # (label, intervals, stats, value or None: not evaluated yet; a session baseline's is its objective)
        candidates: list[tuple[str, list[FastInterval], dict, float | None]] = [("all-slow", [], {}, 0.0)]
        hinted = self._hint_intervals(problem, hint)
        if hinted is not None:
            candidates.append(("hint", hinted, {}, None))
        history: list[tuple[float, float]] = []
        timed_out = False
        runs = [None] + ([hinted] if hinted else [])
        # with XLA's defaults msa's runs are the solve session's baselines (built once, shared with the searches)
        xla_defaults = (max_retries, max_overlap, overlap_ratio) == (MAX_RETRIES, "buffer", MAX_OVERLAP_RATIO)
        for start in runs:
            if time.monotonic() > deadline and start is not None:
                break
            value = None
            if start is None and xla_defaults:
                built = request.facts.baseline("msa", deadline)  # once per solve session
                answer, stats = (None, {"timed_out": False}) if built is None else (list(built.intervals), built.stats)
                value = None if built is None else built.objective
            else:
                answer, stats = msa_run(problem, hardware, deadline, start=start, max_retries=max_retries,
                                        max_overlap=max_overlap, overlap_ratio=overlap_ratio)
            timed_out = timed_out or stats["timed_out"]
            if answer is not None:
                candidates.append(("msa" if start is None else "msa+hint", answer, stats, value))
        variants_until = min(deadline, variants.deadline)
        tried, skipped = self._variants(problem, hardware, variants_until, t0, candidates, max_retries, max_overlap,
                                        opts.variants and not timed_out, overlap_ratio,
                                        shared=xla_defaults, facts=request.facts)
        best_label, best, best_stats, best_value = "all-slow", [], {}, 0.0
        for label, ivs, stats, value in candidates:
            if not ivs:
                value = 0.0
            elif value is None:
                value = ev.value(ivs)
            if better("prefetch", value, best_value):
                best_label, best, best_stats, best_value = label, ivs, stats, value
                history.append((time.monotonic() - t0, value))
        # timed_out / cut_short speak of the search, whichever candidate won (a run cut off early may lose to
        # all-slow): the limit left buffers undecided, so the answer depends on the clock (the summary says so)
        stats = dict(best_stats, source=best_label, timed_out=timed_out, cut_short=timed_out, variants_tried=tried,
                     variants_skipped=skipped)
        return Solution(offsets=(None,) * n, status=Status.FEASIBLE, mode=problem.mode, objective=best_value,
                        wall_time=time.monotonic() - t0, history=tuple(history), stats=stats, solver=self.name,
                        intervals=by_buffer_and_start(best))

    @staticmethod
    def _variants(problem, hardware, deadline, t0, candidates, max_retries, max_overlap, on,
                  overlap_ratio=MAX_OVERLAP_RATIO, *, shared: bool = False, facts=None) -> tuple[list, list]:
        """Runs of other XLA configurations, each only when a run as long as those so far still fits before
        ``deadline`` (and kept only if it finished): XLA's cross-program prefetch of one buffer, then the other
        max-overlap rule. Their answers join the candidates; returns the labels tried and skipped. ``shared``
        (XLA's default options): the runs are the solve session's baselines (:data:`MSA_VARIANTS`) in ``facts``."""
        other = "memory" if max_overlap == "buffer" else "buffer"
        runs = [("msa+cross-program-prefetch", {"cross_program_prefetch": 1, "max_overlap": max_overlap}),
                (f"msa+{other}-overlap", {"max_overlap": other})]
        if not on:
            return [], []
        tried, skipped = [], []
        took = time.monotonic() - t0
        for label, opts in runs:
            if not fits_again(took, deadline):
                skipped.append(label)
                continue
            if shared and label in MSA_VARIANTS:
                built = facts.baseline(label, deadline)
                if built is None:  # the session's own check: a run as long as msa's does not fit
                    skipped.append(label)
                    continue
                answer, stats = list(built.intervals), dict(built.stats, timed_out=not built.complete)
                value = built.objective
            else:
                answer, stats = msa_run(problem, hardware, deadline, max_retries=max_retries,
                                        overlap_ratio=overlap_ratio, **opts)
                value = None
            tried.append(label)
            if answer is not None and not stats["timed_out"]:
                candidates.append((label, answer, stats, value))
        return tried, skipped

    @staticmethod
    def _hint_intervals(problem: Problem, hint: Solution | None) -> list[FastInterval] | None:
        """The hint as valid prefetch intervals (a map answer is lifted), or None."""
        return hint_intervals(problem, hint)


def by_buffer_and_start(intervals: list[FastInterval]) -> tuple[FastInterval, ...]:
    """``intervals`` sorted by (buffer, start), ties in their given order (``sorted``'s, by a stable sort of the
    intervals' columns when they are plain ints)."""
    cols = interval_columns(intervals)
    if cols is None:
        return tuple(sorted(intervals, key=lambda iv: (iv.buffer, iv.start)))
    return tuple([intervals[i] for i in np.lexsort((cols[:, 2], cols[:, 0])).tolist()])
