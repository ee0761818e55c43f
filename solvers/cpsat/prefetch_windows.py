"""CP-SAT in prefetch mode: optional fast stays per use segment, copies on budget axes, the exact roofline saving.

docs/prefetch.md is the specification this follows; ``CpSat.solve`` hands prefetch problems here.

**Candidates** (:func:`candidates`): per buffer, a bounded set of *stays* with fixed times, each a
possible :class:`~mallocgame.problem.model.FastInterval` serving a run of consecutive touches, produced in
place or prefetched with copy starts picked like XLA's interval picker. **The model** of a set of
free stays (:func:`solve_window`): presence, offset and occupied-time intervals per stay, each copy
an interval on its kind's budget axis, the exact per-op roofline saving less the stalls. Both in
full: docs/cpsat.md, "Prefetch mode".

**What it approximates.** (1) Each copy is served in one contiguous piece, the rest stalls; the
evaluator serves copies in deadline order from the earliest budget left, which serves at least
as much of any set of copies as such a schedule (for interval windows that greedy maximises
what is served), so over the whole program the model's value of an answer never exceeds the
evaluator's. (2) Only candidate stays are considered. (3) Large programs are solved by
neighbourhoods (below): a neighbourhood's model sees the copies of the intervals that meet its
free stays, not those of the others, which may compete for the same slots in the evaluator.
(4) Seconds are rounded to :data:`SECOND_UNITS` units per neighbourhood. Every answer is
therefore scored by the real evaluator (:class:`~mallocgame.hardware.prefetch_cost.PrefetchEvaluator`) and kept
only when it beats the incumbent, so the result is never worse than the hint or the start
(always computed, first): the baselines of the solve session (:meth:`mallocgame.engine.session.Session.baselines`:
:func:`~mallocgame.formats.lift.lift_map_answer` of greedy-xla's map answer, also with each prefetch's start
moved up to its first served touch by :func:`tighten`, the same rectangles and a longer copy window,
never worse; then ``msa``'s answer within :data:`~mallocgame.engine.session.BASELINE_SHARE` of the time).

**Decomposition** (:func:`solve_prefetch`): stays only interact when their occupied ops overlap
(memory, op savings and copy windows all lie inside them), so the time line splits into
independent spans, and large ones are solved by neighbourhoods, one model each with the
incumbent's intervals that meet the free stays kept fixed around them: *windows* of ops holding
about :data:`WINDOW_STAYS` candidate stays, those with most to gain first (room below the
per-op bound, stalls due in them), then *buffer groups* (every candidate of the buffers that
hold the most memory, so a long stay can split into short ones). Ties go to the answer that
holds less memory (a secondary objective, and an equally fast answer holding less is kept), which
leaves room to the next neighbourhoods. A round without gain doubles the size, up to one model
per span; the search stops when every span's single model is proven optimal (then the same seed
gives the same answer) or at the deadline. Windows over repeated layers share a *shape* (the sequence of
their ops' kinds and operand sizes): a round interleaves its most-to-gain order with one window of each shape,
shapes by what all their windows have to gain, and a gain brings the rest of its shape forward (:func:`shapes_first`,
:func:`promote_shape`). The loop is the core's neighbourhood-search driver
(:func:`mallocgame.algorithms.neighbourhood_search.search`); :class:`PrefetchWindows` supplies its hooks.
Measurements: experiments/results/cpsat_history.md.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from mallocgame.algorithms.memory_space_assignment import msa_run
from mallocgame.algorithms.neighbourhood_search import Round, Step, Trial, Verdict, proportional_share, search
from mallocgame.algorithms.packing_model import add_cumulative, add_no_overlap, add_rectangles
from mallocgame.algorithms.placement import best_fit_offset
from mallocgame.bounds.bounds import prefetch_op_savings
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import BASELINE_SHARE, VARIANTS_SHARE, held_baselines, no_worse_than_held
from mallocgame.formats.lift import hint_intervals, split_idle
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import eviction_of
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.intervals import component_runs, maximal_live_sets
from mallocgame.problem.model import FastInterval, Problem, Solution, Status
from mallocgame.problem.objective import at_least, better
from mallocgame.runtime.budget import Budget, fits_again
from mallocgame.runtime.collection import gc_paused
from mallocgame.solvers.cpsat.model import grid_unit

PREFETCH_RATIOS = (1.0, 1.5, 4.0)  # window budget / copy time of the candidate copy starts
EVICTION_RATIOS = (1.0, 1.5)  # the same for the extended ends of stays that are evicted
RUN_LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # touches served by one candidate stay (plus: to the last)
WINDOW_STAYS = 30  # candidate stays per CP-SAT model at first (doubled at each local optimum)
MIN_SLICE = 0.3  # seconds: the least a window gets while time is left
BUILD_RATE = 2000  # free stays per second of its budget, at most, in a window's model (building costs time per stay)
SETUP_SHARE = 0.5  # of the time left after the starts: the most the candidate stays may take
CUT_CHECK = 256  # runs of touches between two looks at the clock while one buffer's candidate stays are built
SECOND_UNITS = 2**14  # integer units of seconds per window's total headroom (finer units slow the propagation)
# The model's settings, chosen on layered networks and realistic workloads (docs/results.md, "cpsat's defaults"):
# the formulations "2d", "cliques" (one 1-D no-overlap per maximal moment) and "both" search alike, so the plain
# "2d"; CP-SAT's own search with one worker, not our decision strategy (PARTIAL_FIXED_SEARCH); no probing (it takes
# seconds on models of a thousand stays); ties to less memory (LEAN_TIES); 2^14 units, whose budget axes propagate
# fast where 2^24's do not.
FORMULATION = "2d"
# The fixed stays around a window as holes in the free stays' offset domains rather than rectangles in the
# no_overlap_2d (packing_model.add_no_overlap's pinned_as_holes; an exact rewrite): with hundreds of fixed rectangles
# CP-SAT spends seconds before its search whatever its limit, with holes a fraction of one. Only from HOLES_FROM fixed
# stays on: windows with few fixed stays gained more as rectangles (docs/results.md, "cpsat's defaults").
PINNED_AS_HOLES = True
HOLES_FROM = 200
FIXED_SEARCH = False
PROBING_LEVEL = 0
LEAN_TIES = True
# Windows of repeated layers: one of each shape early, a gain brings its shape forward (docs/cpsat.md, "Repeated
# layers"); off, the rounds go most-to-gain first only (experiments/window_shapes.py measures both).
SHAPES_FIRST = True
# The first window of a shape tried in a round without gain sends the rest of its shape to the round's end. Off: it
# lost on one program and was level on another (docs/cpsat.md "Repeated layers").
DEMOTE_SHAPES = False
# A window's gain is tried first on the later windows of its shape, moved layer to layer (repeat_gain): kept when the
# evaluator scores it better and it is valid, without a CP-SAT solve (experiments/window_shapes.py measures it).
REPEAT_GAINS = True


# ---------------------------------------------------------------- stays


class Stay(NamedTuple):
    """A candidate fast interval of ``buffer`` with everything the model needs about it.

    ``prefetch``: ``(first slot, deadline)`` of its prefetch copy, or ``None`` (produced in
    place); ``eviction``: the same for its eviction, or ``None``. A named tuple, not a frozen dataclass:
    the search makes millions of them on a training step, and a tuple is built faster.
    """

    buffer: int
    start: int
    end: int
    copy_start: int | None
    prefetch: tuple[int, int] | None
    eviction: tuple[int, int] | None

    @property
    def occupied_from(self) -> int:
        return self.start if self.copy_start is None else self.copy_start + 1

    def interval(self, offset: int) -> FastInterval:
        return FastInterval(self.buffer, offset, self.start, self.end, self.copy_start)


def stay_of(problem: Problem, iv: FastInterval) -> Stay:
    prefetch = None if iv.copy_start is None else (iv.copy_start + 1, iv.start)
    evict = eviction_of(problem, iv)
    return Stay(iv.buffer, iv.start, iv.end, iv.copy_start, prefetch,
                None if evict is None else (evict[0] + 1, evict[1]))


def op_saving_bound(problem: Problem, ev: Evaluator) -> np.ndarray:
    """The most any valid answer can save on each op, seconds ``[T]``: the per-op relaxation of
    :func:`mallocgame.bounds.bounds.prefetch_op_savings`, always by the fractional knapsack (cheap, and
    an upper bound all the same)."""
    return prefetch_op_savings(problem, ev, exact_up_to=0)[0]


def op_time_floor(problem: Problem, ev: Evaluator) -> np.ndarray:
    """A lower bound on every op's time in any valid answer, seconds ``[T]`` (its time with the saving of
    :func:`op_saving_bound`)."""
    return np.maximum(ev.compute, ev.slow_mem - op_saving_bound(problem, ev)) + ev.fixed


def _latest_start(cum: Sequence[float], lo: int, hi: int, t: int, need: float) -> int:
    """Latest ``cs`` in ``[lo, hi]`` whose window (slots ``cs+1 .. t-1``) offers ``need`` seconds; ``lo`` if none.

    The window budget ``cum[t] - cum[cs + 1]`` never grows with ``cs`` (``cum`` is a running sum of budgets,
    which are not negative, and rounding keeps a difference monotone), so a binary search over the same
    test finds what a scan down from ``hi`` finds."""
    top = cum[t]
    if top - cum[lo + 1] < need:
        return lo
    a, b = lo, hi  # the test holds at a; the answer is in [a, b]
    while a < b:
        m = (a + b + 1) // 2
        if top - cum[m + 1] >= need:
            a = m
        else:
            b = m - 1
    return a


def _earliest_end(cum: Sequence[float], w: int, lo: int, hi: int, need: float) -> int:
    """Smallest ``end`` in ``[lo, hi]`` whose eviction window (slots ``w+1 .. end-1``) offers ``need``; ``hi`` if none.

    The budget ``cum[end] - cum[w + 1]`` never shrinks as ``end`` grows: a binary search over the same test."""
    base = cum[w + 1]
    if cum[hi] - base < need:
        return hi
    a, b = lo, hi  # the test holds at b; the answer is in [a, b]
    while a < b:
        m = (a + b) // 2
        if cum[m] - base >= need:
            b = m
        else:
            a = m + 1
    return a


def _runs(k: int) -> list[tuple[int, int]]:
    out = set()
    for i in range(k):
        for length in RUN_LENGTHS:
            if i + length <= k:
                out.add((i, i + length - 1))
        out.add((i, k - 1))
    return sorted(out)


class _BufferStays:
    """The candidate copy starts and stay ends of one buffer's runs of touches, each computed once.

    A run ``i .. j`` of touches has its copy starts from touch ``i`` alone and its ends from touch ``j`` and the
    last write it serves, so the runs that share them (up to ``len(RUN_LENGTHS) + 1`` per touch) share the work.
    """

    def __init__(self, ops: list[int], reads: list[int], writes: list[int], cums: Sequence[Sequence[float]],
                 copy: float, limit_end: int, output: bool):
        self.ops, self.reads, self.writes, self.cums = ops, reads, writes, cums
        self.copy, self.limit_end, self.output = copy, limit_end, output
        self.last_write = []  # touch index of the last write at or before touch i (-1 if none)
        lw = -1
        for i in range(len(ops)):
            if writes[i]:
                lw = i
            self.last_write.append(lw)
        self._starts: dict[int, list | None] = {}
        self._ends: dict[tuple[int, int], tuple[list[int], int | None]] = {}

    def starts(self, i: int) -> list | None:
        """The copy starts of a stay from touch ``i`` (``[None]``: produced in place; ``None``: no valid start)."""
        got = self._starts.get(i, False)
        if got is not False:
            return got
        ops, t = self.ops, self.ops[i]
        if self.writes[i] and not self.reads[i]:
            got = [None]
        else:
            lw = self.last_write[i - 1] if i > 0 else -1
            lo = ops[lw] if lw >= 0 else -1  # the value must exist in slow memory
            hi = t - 1
            if lo > hi:
                got = None
            else:
                # the latest start of all (no window: the copy stalls, the stay holds least memory) and
                # the latest starts whose windows offer each ratio x the copy time
                got = sorted({hi, *(_latest_start(cum, lo, hi, t, r * self.copy)
                                    for cum in self.cums for r in PREFETCH_RATIOS)})
        self._starts[i] = got
        return got

    def ends(self, j: int, w: int) -> tuple[list[int], int | None]:
        """The ends of a stay to touch ``j`` whose last served write is at op ``w`` (-1: none served), and
        the first op of its eviction window (``None``: the write is not needed after it, no eviction)."""
        key = (j, w)
        got = self._ends.get(key)
        if got is not None:
            return got
        ops, k = self.ops, len(self.ops)
        after = min(ops[j + 1], self.limit_end) if j + 1 < k else self.limit_end
        needed = w >= 0 and bool(self.reads[j + 1] if j + 1 < k else self.output)
        ends = [ops[j] + 1]
        if needed:
            ends = sorted({ops[j] + 1, *(_earliest_end(cum, w, ops[j] + 1, after, r * self.copy)
                                         for cum in self.cums for r in EVICTION_RATIOS)})
        got = self._ends[key] = (ends, w + 1 if needed else None)
        return got


def candidates(problem: Problem, hardware, budgets: Sequence[np.ndarray], extra: Sequence[FastInterval] = (),
               *, deadline: float | None = None, report: dict | None = None) -> list[Stay]:
    """The candidate stays of every buffer (see the module docstring), plus those of ``extra``; no duplicates.
    ``deadline`` (monotonic): no more buffers' stays after it (those of ``extra`` are always there); ``report``
    gets ``"buffers_with_candidates"``, how many buffers (in index order) got theirs before it."""
    with gc_paused():  # hundreds of thousands of tuples, no cycles: each collection would walk them all again
        return _candidates(problem, hardware, budgets, extra, deadline=deadline, report=report)



def _candidates(problem: Problem, hardware, budgets: Sequence[np.ndarray], extra: Sequence[FastInterval],
                *, deadline: float | None, report: dict | None) -> list[Stay]:
    """:func:`candidates`, built."""
    T = len(problem.ops)
    touches = problem.touches
    a = problem.arrays
    capacity = problem.capacity if problem.capacity is not None else np.iinfo(np.int64).max
    cums = [np.concatenate(([0.0], np.cumsum(b))).tolist() for b in budgets]
    out: dict[tuple, Stay] = {}
    reached = problem.n
    for b in range(problem.n):
        # checked at every buffer, and every CUT_CHECK runs inside one: a buffer touched thousands of times (a
        # weight read at every step of a scan) has hundreds of thousands of stays, seconds of work on its own
        if deadline is not None and time.monotonic() > deadline:
            reached = b
            break
        size = int(a.size[b])
        if size > capacity or size <= 0:
            continue
        ops, reads, writes = touches.of(b)
        ops, reads, writes = ops.tolist(), reads.tolist(), writes.tolist()
        k = len(ops)
        if k == 0:
            continue
        limit_end = min(T, int(a.end[b]))
        runs = _BufferStays(ops, reads, writes, cums, size / hardware.copy_bw, limit_end, bool(touches.output[b]))
        for r, (i, j) in enumerate(_runs(k)):
            if deadline is not None and r % CUT_CHECK == CUT_CHECK - 1 and time.monotonic() > deadline:
                reached = b  # this buffer's stays so far are kept, it does not count as one with its candidates
                break
            t = ops[i]
            if ops[j] + 1 > limit_end:
                continue
            starts = runs.starts(i)
            if starts is None:
                continue
            lw = runs.last_write[j]
            w = ops[lw] if lw >= i else -1  # the last write the stay serves
            ends, eviction_from = runs.ends(j, w)
            for cs in starts:
                prefetch = None if cs is None else (cs + 1, t)
                for end in ends:
                    key = (b, t, end, cs)
                    if key in out:
                        continue
                    out[key] = Stay(b, t, end, cs, prefetch, None if eviction_from is None else (eviction_from, end))
        if reached < problem.n:
            break
    for iv in extra:
        key = (iv.buffer, iv.start, iv.end, iv.copy_start)
        if key not in out:
            out[key] = stay_of(problem, iv)
    if report is not None:
        report["buffers_with_candidates"] = reached
    return list(out.values())


def tighten(problem: Problem, intervals: Sequence[FastInterval]) -> list[FastInterval]:
    """Move every prefetch's start up to its first served touch: the same rectangle and served ops,
    a copy window at least as long, so never worse and still valid."""
    touches = problem.touches
    out = []
    for iv in intervals:
        if iv.copy_start is not None:
            ops = touches.of(iv.buffer)[0]
            k = int(np.searchsorted(ops, iv.start))
            if k < len(ops) and ops[k] < iv.end and ops[k] > iv.start:
                iv = FastInterval(iv.buffer, iv.offset, int(ops[k]), iv.end, iv.copy_start)
        out.append(iv)
    return out


def spans(stays: Sequence[Stay]) -> list[list[int]]:
    """Stay indices grouped by connected spans of occupied ops (stays of different spans never interact)."""
    occ = np.fromiter((s.occupied_from for s in stays), np.int64, len(stays))
    end = np.fromiter((s.end for s in stays), np.int64, len(stays))
    return [group.tolist() for group in component_runs(occ, end)]


# ---------------------------------------------------------------- one model


@dataclass
class WindowResult:
    intervals: list[FastInterval] | None  # the free stays chosen, or None (no answer)
    status: str  # CP-SAT's status name
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, model value of the free part)
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Model:
    """One window's CP-SAT model while it is built: the stays (``items``: the ``n_free`` free ones, then
    the fixed intervals as present stays), their presences under the hint (``on``) and hinted offsets,
    the address grid (``unit``, ``s_align``), the occupied ops, the op headroom and the integer unit of
    seconds (``scale``); ``present`` and ``k_vars`` are the stays' presence literals and offset steps."""

    cp_model: Any
    model: Any
    problem: Problem
    hardware: Any
    ev: Evaluator
    items: list[Stay]
    n_free: int
    on: list[bool]
    hint: dict[int, int]
    unit: int
    s_align: np.ndarray
    occ: np.ndarray
    end: np.ndarray
    headroom: np.ndarray
    scale: float
    present: list
    k_vars: list


def _build_stays(cp_model, problem: Problem, hardware, free: Sequence[Stay], fixed: Sequence[FastInterval],
                 base_times: np.ndarray, hint: dict[int, int]) -> _Model:
    """A new model with the stays' rectangles: every stay optional, the fixed intervals pinned (present, at
    their offsets), one buffer's stays never on the same op, memory as no-overlap and cumulative rows."""
    ev = Evaluator.of(problem, hardware)
    a = problem.arrays
    items = list(free) + [stay_of(problem, iv) for iv in fixed]
    m, n_free = len(items), len(free)
    on = [c in hint for c in range(n_free)] + [True] * (m - n_free)  # the hint's presences
    fixed_offset = [None] * n_free + [iv.offset for iv in fixed]
    buf = np.array([s.buffer for s in items], np.int64)
    size, align = a.size[buf], a.alignment[buf]
    known = np.array(list(hint.values()) + [iv.offset for iv in fixed], np.int64)
    unit = grid_unit(size, align, known if len(known) else None)
    s_size, s_align = size // unit, np.maximum(align // unit, 1)
    top = problem.capacity // unit
    occ = np.array([s.occupied_from for s in items], np.int64)
    end = np.array([s.end for s in items], np.int64)
    first_op, last_op = max(int(occ[:n_free].min()), 0), int(end[:n_free].max())

    # Seconds as integers: one unit for savings, stalls and budgets.
    headroom = np.maximum(ev.slow_mem - ev.compute, 0.0)
    scale = SECOND_UNITS / max(float(headroom[first_op:last_op].sum()), float(base_times[first_op:last_op].sum()) * 1e-3,
                               1e-30)

    model = cp_model.CpModel()
    rect = add_rectangles(model, occ, end, s_size, top=top, align=s_align, optional=True,
                          fixed_offsets=[None if o is None else o // unit for o in fixed_offset], name="s")
    if len(rect.placed) < m:
        raise ValueError("solve_window: a candidate stay is taller than the capacity")  # candidates() never makes one
    present = rect.present

    by_buffer: dict[int, list[int]] = {}
    for c, s in enumerate(items):
        by_buffer.setdefault(s.buffer, []).append(c)
    for members in by_buffer.values():
        if len(members) < 2:
            continue
        mem = np.array(members)
        for row in maximal_live_sets(occ[mem], end[mem]):
            if len(row) > 1:
                model.add_at_most_one(present[c] for c in mem[row].tolist())

    # Memory: the rectangles, a cumulative over time and the knapsack rows (both redundant).
    add_no_overlap(model, rect, formulation=FORMULATION, knapsack_top=top,
                   pinned_as_holes=PINNED_AS_HOLES and len(fixed) >= HOLES_FROM)
    add_cumulative(model, rect, top)
    return _Model(cp_model, model, problem, hardware, ev, items, n_free, on, hint, unit, s_align, occ, end, headroom,
                  scale, present, rect.steps)


def _served_deltas(w: _Model) -> dict[int, dict[int, float]]:
    """op -> {stay: the seconds of slow traffic the stay saves on that op} (the evaluator's deltas)."""
    ev, n_ops = w.ev, w.ev.n_ops
    order = np.lexsort((ev.op_of, ev.buf_of))
    key = ev.buf_of[order] * (n_ops + 1) + ev.op_of[order]
    served_at: dict[int, dict[int, float]] = {}
    for c, s in enumerate(w.items):
        lo = np.searchsorted(key, s.buffer * (n_ops + 1) + s.start)
        hi = np.searchsorted(key, s.buffer * (n_ops + 1) + min(s.end, n_ops))
        for r in order[lo:hi].tolist():
            per = served_at.setdefault(int(ev.op_of[r]), {})
            per[c] = per.get(c, 0.0) + float(ev.delta[r])
    return served_at


def _add_savings(w: _Model) -> tuple[dict[int, tuple], np.ndarray, list]:
    """The exact roofline saving of every op a free stay serves, as a gain over the base times.

    Returns ``gains`` (op -> (expression, largest value, value under the hint)), the linear
    ``weights`` of the stays whose ops cannot saturate, and ``op_terms`` (cap, coefficients,
    constant, sum variable, saturated saving variable, hint value of the sum) of the others.
    """
    model, present, n_free, scale = w.model, w.present, w.n_free, w.scale
    gains: dict[int, tuple] = {}
    weights = np.zeros(len(w.items), np.int64)
    op_terms = []
    for t, per in sorted(_served_deltas(w).items()):
        cap = float(w.headroom[t])
        if cap <= 0 or not any(c < n_free for c in per):
            continue  # nothing to decide there
        coefs = [(int(round(d * scale)), c) for c, d in sorted(per.items()) if c < n_free]
        coefs = [(wt, c) for wt, c in coefs if wt > 0]
        constant = int(round(sum(d for c, d in per.items() if c >= n_free) * scale))
        best: dict[int, int] = {}  # one buffer's stays are exclusive: the most each buffer adds
        for wt, c in coefs:
            best[w.items[c].buffer] = max(best.get(w.items[c].buffer, 0), wt)
        cap_int = int(round(cap * scale))
        most = sum(best.values())
        at_hint = sum(wt for wt, c in coefs if w.on[c])
        if not coefs or constant >= cap_int:
            continue
        if most + constant <= cap_int:
            for wt, c in coefs:
                weights[c] += wt
            gains[t] = (sum(wt * present[c] for wt, c in coefs), most, at_hint)
            continue
        e = model.new_int_var(constant, constant + most, f"e{t}")
        model.add(e == constant + sum(wt * present[c] for wt, c in coefs))
        sv = model.new_int_var(constant, cap_int, f"s{t}")
        model.add_min_equality(sv, [e, cap_int])
        op_terms.append((cap_int, coefs, constant, e, sv, constant + at_hint))
        gains[t] = (sv - constant, cap_int - constant, min(cap_int, constant + at_hint) - constant)
    return gains, weights, op_terms


def _copy_windows(w: _Model) -> list[tuple[int, str, tuple[int, int]]]:
    """Every copy of the stays: (stay, "prefetch" or "eviction", (first slot, deadline))."""
    return [(c, kind, win) for c, s in enumerate(w.items)
            for kind, win in (("prefetch", s.prefetch), ("eviction", s.eviction)) if win is not None]


def _budget_axis(w: _Model, base_times: np.ndarray, gains: dict[int, tuple]) -> dict[int, tuple]:
    """The budget axis: op t lasts ``base_times[t]`` less its gain, laid end to end from the first slot any
    copy may use; slot -> (where it begins: an expression, its lower and upper bounds, its hint value)."""
    n_ops = w.ev.n_ops
    slots = [x for _, _, win in _copy_windows(w) for x in (max(win[0], 0), min(win[1], n_ops))]
    axis_lo, axis_hi = (min(slots), max(slots)) if slots else (0, 0)
    pos: dict[int, tuple] = {}
    expr, lb, ub, at_hint = 0, 0, 0, 0
    for t in range(axis_lo, axis_hi + 1):
        pos[t] = (expr, lb, ub, at_hint)
        if t == axis_hi:
            break
        base = int(round(base_times[t] * w.scale))
        if t in gains:
            g, most, g_hint = gains[t]
            var = w.model.new_int_var(lb + base - most, ub + base, f"P{t + 1}")
            w.model.add(var == expr + base - g)
            expr, lb, ub, at_hint = var, lb + base - most, ub + base, at_hint + base - g_hint
        else:
            expr, lb, ub, at_hint = expr + base, lb + base, ub + base, at_hint + base
    return pos


def _add_copies(w: _Model, pos: dict[int, tuple], objective: list) -> dict[tuple[int, str], tuple]:
    """Copies: on each kind's axis the served parts do not overlap and lie inside their windows; what is
    not served stalls (each copy's length is a cost in ``objective``, its served part a gain).
    Returns (stay, kind) -> (start, served, end variables, length, hint values of the window's ends)."""
    model, present, scale = w.model, w.present, w.scale
    n_ops, size = w.ev.n_ops, w.problem.arrays.size
    copy_vars: dict[tuple[int, str], tuple] = {}
    windows_ = _copy_windows(w)
    for kind in ("prefetch", "eviction"):
        axis = []
        for c, kind_c, (first, last) in windows_:
            if kind_c != kind:
                continue
            dur = int(math.ceil(size[w.items[c].buffer] / w.hardware.copy_bw * scale))
            objective.append(-dur * present[c])
            first, last = max(first, 0), min(last, n_ops)
            if first >= last or dur == 0:
                continue
            lo_e, lo_lb, _, lo_h = pos[first]
            hi_e, _, hi_ub, hi_h = pos[last]
            room = min(dur, hi_ub - lo_lb)
            if room <= 0:
                continue
            v = model.new_int_var(0, room, f"v{kind[0]}{c}")
            q = model.new_int_var(lo_lb, hi_ub, f"q{kind[0]}{c}")
            e = model.new_int_var(lo_lb, hi_ub, f"z{kind[0]}{c}")
            model.add(v <= room * present[c])
            model.add(q >= lo_e).only_enforce_if(present[c])
            model.add(e <= hi_e).only_enforce_if(present[c])
            axis.append(model.new_optional_interval_var(q, v, e, present[c], f"c{kind[0]}{c}"))
            objective.append(v)
            copy_vars[(c, kind)] = (q, v, e, dur, lo_h, hi_h)
        if len(axis) > 1:
            model.add_no_overlap(axis)
    return copy_vars


def _set_objective(w: _Model, objective: list) -> int:
    """Maximise the objective; ties go to the answer that holds less memory (size x occupied ops, about
    2^10 units for the whole strip): it leaves room to the next neighbourhoods. One unit of seconds
    outweighs all of it. Returns the multiplier of the seconds (``tie``)."""
    size, n_ops = w.problem.arrays.size, w.ev.n_ops
    area_unit = max(w.problem.capacity * max(n_ops, 1) / 2**10, 1.0)
    area = [int(math.ceil(size[s.buffer] * (s.end - s.occupied_from) / area_unit)) for s in w.items[:w.n_free]]
    tie = 1 + sum(area) if LEAN_TIES else 1
    w.model.maximize(tie * sum(objective) - sum(z * w.present[c] for c, z in enumerate(area)))
    return tie


def _add_strategy(w: _Model, weights: np.ndarray, op_terms: list, copy_vars: dict) -> list:
    """Search: stays (most valuable first), the savings at their largest, the copies served as much and
    as early as possible in deadline order, offsets bottom-up. Returns the copies in that order."""
    cp_model, model = w.cp_model, w.model
    value_of = weights.astype(np.float64)
    for _, coefs, *_ in op_terms:
        for wt, c in coefs:
            value_of[c] += wt
    ranked = sorted(range(w.n_free), key=lambda c: (-value_of[c], c))
    if ranked:
        model.add_decision_strategy([w.present[c] for c in ranked], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    if op_terms:
        model.add_decision_strategy([x[4] for x in op_terms], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    copies = sorted(copy_vars.items(), key=lambda kv: (kv[1][5], kv[1][4], kv[0][1], kv[0][0]))
    if copies:
        model.add_decision_strategy([x[1] for _, x in copies], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
        model.add_decision_strategy([x[0] for _, x in copies], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    model.add_decision_strategy(w.k_vars[:w.n_free], cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    return copies


def _add_hints(w: _Model, op_terms: list, pos: dict[int, tuple], copies: list) -> None:
    """The hint, complete: presences, offsets, savings, axis positions, the copies served one after
    another in deadline order."""
    model, on = w.model, w.on
    for c in range(w.n_free):
        model.add_hint(w.present[c], on[c])
        model.add_hint(w.k_vars[c], w.hint[c] // w.unit // int(w.s_align[c]) if on[c] else 0)
    for cap_int, _, _, e, sv, e_hint in op_terms:
        model.add_hint(e, e_hint)
        model.add_hint(sv, min(cap_int, e_hint))
    hinted = set()
    for expr_t, _, _, value in pos.values():
        if isinstance(expr_t, w.cp_model.IntVar) and expr_t.index not in hinted:
            hinted.add(expr_t.index)
            model.add_hint(expr_t, value)
    for kind in ("prefetch", "eviction"):
        cursor = None
        for (c, kind_c), (q, v, e, dur, lo_h, hi_h) in copies:
            if kind_c != kind:
                continue
            start = lo_h if cursor is None else max(lo_h, cursor)
            served = min(dur, hi_h - start) if (on[c] and start < hi_h) else 0
            q_h = start if served else lo_h if not on[c] else max(lo_h, min(start, hi_h))
            model.add_hint(q, q_h)
            model.add_hint(v, served)
            model.add_hint(e, q_h + served)
            if served:
                cursor = start + served


def _run(w: _Model, stats: dict, tie: int, *, deadline: float, seed: int, workers: int, deterministic: bool,
         t0: float) -> WindowResult:
    """Solve the built model by ``deadline``; the free stays it makes present, at their offsets."""
    cp_model = w.cp_model
    remaining = deadline - time.monotonic()
    if remaining <= 0.02:
        return WindowResult(None, "NOT_RUN", [], stats)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = remaining
    prm.num_workers = max(1, int(workers))
    prm.random_seed = int(seed) % (2**31 - 1)
    if deterministic and prm.num_workers > 1:
        prm.interleave_search = True
        prm.ignore_subsolvers.append("core")  # see solvers.cpsat.model: ignores the stop signal when interleaved
    if prm.num_workers == 1 and FIXED_SEARCH:
        prm.search_branching = cp_model.PARTIAL_FIXED_SEARCH
    # Probing takes seconds on models of a thousand stays; keep it to a slice of the time.
    prm.cp_model_probing_level = PROBING_LEVEL
    prm.presolve_probing_deterministic_time_limit = max(0.005, 0.01 * remaining)
    prm.log_search_progress = False
    history: list[tuple[float, float]] = []

    class Recorder(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            history.append((time.monotonic() - t0, self.objective_value / tie / w.scale))

    code = solver.solve(w.model, Recorder())
    stats |= {"cp_status": solver.status_name(code), "wall": round(solver.wall_time, 4),
              "conflicts": solver.num_conflicts, "branches": solver.num_branches}
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return WindowResult(None, solver.status_name(code), history, stats)
    out = [w.items[c].interval(int(solver.value(w.k_vars[c])) * int(w.s_align[c]) * w.unit)
           for c in range(w.n_free) if solver.boolean_value(w.present[c])]
    return WindowResult(out, solver.status_name(code), history, stats)


def solve_window(problem: Problem, hardware, free: Sequence[Stay], fixed: Sequence[FastInterval], base_times: np.ndarray,
                 hint: dict[int, int], *, deadline: float, seed: int, workers: int, deterministic: bool,
                 t0: float) -> WindowResult:
    """CP-SAT over the candidate stays ``free``, around the intervals ``fixed`` (kept as they are).

    ``base_times`` ``[T]`` are the op times of the answer without the free stays (the evaluator's).
    ``hint`` maps free stay indices to offsets (a complete hint: every other stay absent).
    The model is the module docstring's; the fixed intervals take part as present stays with
    fixed offsets (their memory, their savings at the ops the free stays serve, their copies).
    """
    from ortools.sat.python import cp_model

    w = _build_stays(cp_model, problem, hardware, free, fixed, base_times, hint)
    gains, weights, op_terms = _add_savings(w)
    objective: list = [int(weights[c]) * w.present[c] for c in range(w.n_free) if weights[c]]
    objective += [sv for _, _, _, _, sv, _ in op_terms]
    pos = _budget_axis(w, base_times, gains)
    copy_vars = _add_copies(w, pos, objective)
    tie = _set_objective(w, objective)
    copies = _add_strategy(w, weights, op_terms, copy_vars)
    _add_hints(w, op_terms, pos, copies)
    stats = {"stays": w.n_free, "fixed": len(w.items) - w.n_free, "unit": w.unit,
             "variables": len(w.model.proto.variables), "constraints": len(w.model.proto.constraints)}
    return _run(w, stats, tie, deadline=deadline, seed=seed, workers=workers, deterministic=deterministic, t0=t0)


# ---------------------------------------------------------------- windows


def windows(stays: Sequence[Stay], size: int, phase: float, *, occ: np.ndarray | None = None,
            end: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Op ranges ``[a, b)`` that each hold about ``size`` candidate stays (counted by the ops they occupy),
    overlapping by half, over every span of ``stays``; ``phase`` (in [0, 1)) shifts where they begin.
    ``occ`` and ``end``: the stays' occupied-from and end ops ``[len(stays)]``, if the caller has them."""
    if occ is None or end is None:
        occ = np.fromiter((s.occupied_from for s in stays), np.int64, len(stays))
        end = np.fromiter((s.end for s in stays), np.int64, len(stays))
    out = []
    for group in component_runs(occ, end):
        group_occ, group_end = occ[group], end[group]
        lo, hi = int(group_occ.min()), int(group_end.max())
        if len(group) <= size:
            out.append((lo, hi))
            continue
        order = np.argsort(group_occ, kind="stable")
        by_occ, ends_from = group_occ[order], group_end[order]
        a = lo
        first = True
        while a < hi:
            k = int(np.searchsorted(by_occ, a))
            b = _kth_end(by_occ, ends_from, k, size) if k < len(by_occ) else hi
            if first and phase > 0:
                b = a + max(1, int((b - a) * phase))
            first = False
            b = max(b, a + 1)
            out.append((a, min(b, hi) if b < hi else hi))
            if b >= hi:
                break
            a = max(a + 1, (a + b) // 2)
    return out


def _kth_end(by_occ: np.ndarray, ends_from: np.ndarray, k: int, size: int) -> int:
    """The ``size``-th smallest end of the stays ``k ..`` (by occupied-from order; all of them if fewer).

    Read from a prefix, doubled until its answer ``v`` is at most the next stay's occupied-from: every later
    stay ends after that, so none of them is among the smallest (the answer of the whole tail, in time linear
    in the prefix, not in the tail: a partition of the tail per window was quadratic on 10^6 stays)."""
    n = len(by_occ)
    rank = min(size, n - k) - 1
    m = max(2 * size, 64)
    while True:
        if k + m >= n:
            return int(np.partition(ends_from[k:], rank)[rank])
        v = int(np.partition(ends_from[k:k + m], rank)[rank])
        if v <= by_occ[k + m]:
            return v
        m *= 2


# ---------------------------------------------------------------- the solver


def _remember(cache: dict, answer, compute):
    """``compute()`` for ``answer``, kept in ``cache`` (id -> (answer, value)) for the last two answers asked about
    (a search's incumbent and its last trial); the answer itself is kept so that its id is not reused."""
    known = cache.get(id(answer))
    if known is None or known[0] is not answer:
        known = (answer, compute())
        if len(cache) >= 2:
            cache.pop(next(iter(cache)))
        cache[id(answer)] = known
    return known[1]


def _key(x) -> tuple:
    return (x.buffer, x.start, x.end, x.copy_start)


def _same_stays(chosen: Sequence[FastInterval], free: Sequence[Stay], hint: dict[int, int]) -> bool:
    """Are the stays a window chose, at their offsets, exactly the incumbent's (its hint)?"""
    return (len(chosen) == len(hint)
            and {(*_key(iv), iv.offset) for iv in chosen} == {(*_key(free[c]), o) for c, o in hint.items()})


def held(problem: Problem, answer: Sequence[FastInterval]) -> int:
    """The memory ``answer`` holds: size x occupied ops, summed over its intervals."""
    return sum(int(problem.arrays.size[iv.buffer]) * (iv.end - iv.occupied_from) for iv in answer)


def op_shapes(problem: Problem) -> np.ndarray:
    """int64 ``[T]``: one id per distinct op *shape* (its kind and its operands' accesses and bytes, in order), so
    that the ops of repeated layers (a transformer's blocks, an unrolled scan's steps) get the same ids."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault((op.kind, tuple((o.access, o.bytes) for o in op.operands)), len(ids))
                     for op in problem.ops], np.int64)


def window_shape(op_shape: np.ndarray, key: tuple) -> int:
    """The shape of neighbourhood ``key``: the sequence of its ops' shapes (an op window), or its own (a buffer group)."""
    if key[0] != "ops":
        return hash(key)
    return hash(op_shape[max(key[1], 0):key[2]].tobytes())


def shapes_first(plan: list, shape_of: dict[tuple, int], worth: dict[tuple, float]) -> list:
    """``plan`` (most to gain first) interleaved with one window of every shape, shapes in order of what all their
    windows have to gain (``worth`` per key, summed): the 1st, 3rd, ... windows are the plan's next, the 2nd, 4th,
    ... the next shape's first, each window once. Windows of one shape (repeated layers: a transformer's blocks,
    an unrolled scan's steps) tend to gain or not together, so a shape that repeats 24 times is tried early, and
    a gain brings the rest of its shape forward (:func:`promote_shape`); the plan's own order keeps half the turns
    (on an unrolled LSTM the gains were in windows of shapes that do not repeat)."""
    total: dict[int, float] = {}
    for nb in plan:
        total[shape_of[nb.key]] = total.get(shape_of[nb.key], 0.0) + worth[nb.key]
    seen: set[int] = set()
    firsts = []
    for nb in plan:
        if nb.key[0] == "ops" and shape_of[nb.key] not in seen:  # buffer groups keep their place, the round's end
            seen.add(shape_of[nb.key])
            firsts.append(nb)
    firsts.sort(key=lambda nb: -total[shape_of[nb.key]])  # stable: equal totals keep the plan's order
    out, taken = [], set()
    for pair in itertools.zip_longest(plan, firsts):
        for nb in pair:
            if nb is not None and nb.key not in taken:
                taken.add(nb.key)
                out.append(nb)
    return out


def promote_shape(plan: list, cursor: int, shape_of: dict[tuple, int]) -> int:
    """Move the windows after ``cursor`` with the same shape as ``plan[cursor]`` right after it, in place (the
    driver walks this same list); returns how many moved."""
    shape = shape_of[plan[cursor].key]
    rest = plan[cursor + 1:]
    same = [nb for nb in rest if shape_of[nb.key] == shape]
    plan[cursor + 1:] = same + [nb for nb in rest if shape_of[nb.key] != shape]
    return len(same)


def demote_shape(plan: list, cursor: int, shape_of: dict[tuple, int]) -> int:
    """Move the windows after ``cursor`` with the same shape as ``plan[cursor]`` to the end of the round, in place
    (after the first window of a shape failed to gain: its repeats rarely do); returns how many moved."""
    shape = shape_of[plan[cursor].key]
    rest = plan[cursor + 1:]
    same = [nb for nb in rest if shape_of[nb.key] == shape]
    plan[cursor + 1:] = [nb for nb in rest if shape_of[nb.key] != shape] + same
    return len(same)


@dataclass(frozen=True)
class Gain:
    """A window's gain, to repeat on the windows of its shape (:func:`repeat_gain`): the window's first op
    ``lo``, the keys of the incumbent's stays it dropped and the stays it chose instead (with their offsets)."""

    lo: int
    dropped: frozenset
    chosen: tuple[FastInterval, ...]


def layer_map(problem: Problem, lo: int, to: int, length: int) -> dict[int, int] | None:
    """Buffer of ops ``[lo, lo + length)`` -> the buffer in the same place of ops ``[to, to + length)`` (operand by
    operand), or ``None`` when the two runs of ops do not correspond one to one."""
    ops, index = problem.ops, problem.index
    there: dict[int, int] = {}
    back: dict[int, int] = {}
    for k in range(length):
        a, b = ops[lo + k], ops[to + k]
        if len(a.operands) != len(b.operands):
            return None
        for x, y in zip(a.operands, b.operands):
            bx, by = index[x.buffer], index[y.buffer]
            if there.setdefault(bx, by) != by or back.setdefault(by, bx) != bx:
                return None
    return there


def _moved(key: tuple, bmap: dict[int, int], d: int) -> tuple | None:
    buffer, start, end, copy_start = key
    if buffer not in bmap:
        return None
    return (bmap[buffer], start + d, end + d, None if copy_start is None else copy_start + d)


def repeat_gain(problem: Problem, gain: Gain, lo: int, dropped_here: set, around: Sequence[FastInterval],
                is_candidate) -> list[FastInterval] | None:
    """``gain`` moved to the window starting at op ``lo`` of the same shape: its chosen stays with their buffers
    mapped layer to layer (:func:`layer_map`) and their ops shifted, placed best-fit (largest first) among the
    intervals ``around`` the window; ``None`` when it does not apply there: the incumbent's stays in this window
    (``dropped_here``, keys) are not the image of those the gain dropped, a moved stay is not a candidate here
    (``is_candidate(key)``), or one does not fit or meets a stay of its own buffer around the window. The caller
    scores and validates the result."""
    d = lo - gain.lo
    keys = [*gain.dropped, *(_key(iv) for iv in gain.chosen)]
    if d == 0 or not keys:
        return None
    first = min(k[1] if k[3] is None else k[3] + 1 for k in keys)
    last = max(k[2] for k in keys)
    bmap = layer_map(problem, first, first + d, last - first) if first + d >= 0 and last + d <= len(problem.ops) else None
    if bmap is None:
        return None
    moved_dropped = {_moved(k, bmap, d) for k in gain.dropped}
    if moved_dropped != dropped_here:
        return None
    arrays = problem.arrays
    stays = []
    for iv in gain.chosen:
        key = _moved(_key(iv), bmap, d)
        if key is None or not is_candidate(key):
            return None
        stays.append(FastInterval(key[0], 0, key[1], key[2], key[3]))
    placed: list[FastInterval] = []
    for s in sorted(stays, key=lambda s: (-int(arrays.size[s.buffer]), s.buffer, s.start)):
        a, e = s.occupied_from, s.end
        meet = [iv for iv in (*around, *placed) if iv.occupied_from < e and iv.end > a]
        if any(iv.buffer == s.buffer for iv in meet):
            return None  # the buffer is in fast memory there already (a stay around the window, kept as it is)
        offset = best_fit_offset(np.array([iv.offset for iv in meet], np.int64),
                                 np.array([iv.offset + int(arrays.size[iv.buffer]) for iv in meet], np.int64),
                                 int(arrays.size[s.buffer]), int(arrays.alignment[s.buffer]), problem.capacity)
        if offset is None:
            return None
        placed.append(FastInterval(s.buffer, int(offset), s.start, s.end, s.copy_start))
    return placed


@dataclass(frozen=True)
class Neighbourhood:
    """Free candidate stays: ``key`` names them (``("ops", lo, hi)``: those inside ops ``[lo, hi)``;
    ``("buffers", b, ...)``: every candidate of those buffers), ``inside`` their indices, ``lo`` and
    ``hi`` the ops they occupy."""

    key: tuple
    inside: np.ndarray
    lo: int
    hi: int


class PrefetchWindows:
    """Prefetch mode's neighbourhoods for :func:`mallocgame.algorithms.neighbourhood_search.search` (module docstring,
    "Decomposition"): a round is every unproven window of about ``size`` stays with something to gain,
    most first, then the buffer groups; each gets its share of the time left by its stays; a trial is
    kept when the evaluator scores it better, or as fast and holding less memory, and it is valid."""

    def __init__(self, problem: Problem, hardware, pev, incumbent: Sequence[FastInterval],
                 extra: Sequence[FastInterval], *, seed: int, workers: int, deterministic: bool, t0: float,
                 until: float | None = None, value: float = math.inf) -> None:
        ev = Evaluator.of(problem, hardware)
        self.problem, self.hardware, self.pev = problem, hardware, pev
        self.seed, self.workers, self.deterministic, self.t0 = seed, workers, deterministic, t0
        profiles = [op_time_floor(problem, ev), pev.op_times(incumbent)]
        self.setup: dict = {}
        with gc_paused():  # the candidates' tuples and their indexes hold no cycles
            self.stays = candidates(problem, hardware, profiles, extra, deadline=until, report=self.setup)
            self.index = {_key(s): c for c, s in enumerate(self.stays)}
            self.occ = np.fromiter((s.occupied_from for s in self.stays), np.int64, len(self.stays))
            self.end = np.fromiter((s.end for s in self.stays), np.int64, len(self.stays))
            self.by_occ = np.argsort(self.occ, kind="stable")  # a window's stays by a binary search, not a scan
            self.occ_sorted = self.occ[self.by_occ]
            self.by_buffer: dict[int, list[int]] = {}
            for c, s in enumerate(self.stays):
                self.by_buffer.setdefault(s.buffer, []).append(c)
        self.reach = op_saving_bound(problem, ev)
        self.slow_times = np.maximum(ev.compute, ev.slow_mem) + ev.fixed
        self.scale_of_value = max(float(self.reach.sum()), 1e-300)
        self.size, self.phase = WINDOW_STAYS, 0.0
        self.largest = max((len(g) for g in component_runs(self.occ, self.end)), default=0)
        self.proven_at: dict[tuple, tuple[int, int]] = {}  # proven neighbourhood -> the ops its free stays occupy
        self.last: dict = {}  # the statistics of the last window solved
        self.op_shape = op_shapes(problem)
        self._plan: list[Neighbourhood] = []  # the round's plan, in the order the driver walks it (reordered by learn)
        self._cursor = -1  # where in it the window being solved is
        self._shape_of: dict[tuple, int] = {}  # neighbourhood key -> its window's shape (repeated layers share one)
        self.promoted = 0  # windows moved up because a window of the same shape gained
        self.demoted = 0  # windows moved to the round's end because the first of their shape did not gain
        self.repeated = 0  # windows whose trial was a gain of their shape repeated (no CP-SAT solve)
        self._gains: dict[int, Gain] = {}  # shape -> its last window's gain (repeated on the others)
        self._tried: set[int] = set()  # shapes with a window solved this round
        self._batch_failed: set[int] = set()  # shapes whose last gain did not pay when repeated on all at once
        self._change: tuple | None = None  # (key, Gain) of the last trial, learnt from when it is a gain
        self._scored: tuple | None = None  # (trial, value) of a repeated gain, scored in solve (judge reuses it)
        self._held: dict[int, tuple] = {}  # id -> (answer, held(answer)) of the incumbent and the last trial
        self._arrays: dict[int, tuple] = {}  # id -> (answer, its arrays) of the incumbent and the last trial
        # the incumbent's value before the next step: ``value``, the start's (then set by learn); infinite when not
        # given, so that the first step is no gain (it was so for every search before the start's value was passed)
        self._value_before = value

    def _potential(self, answer):
        """``gap(lo, hi)``: what ``answer`` leaves below the per-op bound in ops ``[lo, hi)``, plus its stalls due there."""
        b = self.pev.breakdown(answer)
        room = np.maximum(self.reach - (self.slow_times - b.op_times), 0.0)
        stall = np.zeros(len(room) + 1)
        for c in b.copies:
            stall[min(max(c.deadline, 0), len(room))] += c.stall
        cum_room = np.concatenate(([0.0], np.cumsum(room)))
        cum_stall = np.concatenate(([0.0], np.cumsum(stall)))
        return lambda lo, hi: (cum_room[min(hi, len(room))] - cum_room[max(lo, 0)]
                               + cum_stall[min(hi, len(room)) + 1] - cum_stall[max(lo, 0)])

    def _buffer_groups(self, answer, size: int) -> list[tuple]:
        """Buffers in order of the memory their intervals hold (size x occupied ops), most first, in groups of
        about ``size`` candidate stays: freeing all of a buffer's stays at once lets a long stay split."""
        area: dict[int, int] = {}
        for iv in answer:
            area[iv.buffer] = area.get(iv.buffer, 0) + int(self.problem.arrays.size[iv.buffer]) * (iv.end - iv.occupied_from)
        groups, group, count = [], [], 0
        for b in sorted(area, key=lambda b: (-area[b], b)):
            group.append(b)
            count += len(self.by_buffer.get(b, ()))
            if count >= size:
                groups.append(("buffers", *sorted(group)))
                group, count = [], 0
        if group:
            groups.append(("buffers", *sorted(group)))
        return groups

    def _free_of(self, key: tuple) -> np.ndarray:
        if key[0] == "ops":  # the stays occupying only ops [lo, hi), ascending (no scan of all)
            lo, hi = np.searchsorted(self.occ_sorted, [key[1], key[2]])
            inside = self.by_occ[lo:hi]
            return np.sort(inside[self.end[inside] <= key[2]])
        return np.array(sorted(c for b in key[1:] for c in self.by_buffer.get(b, ())), np.int64)

    def plan(self, current, rng: np.random.Generator) -> list[Neighbourhood]:
        """Most to gain first: the windows' room below the per-op bound, plus the stalls due in them; then
        the buffers that hold most memory. Windows with nothing to gain and empty ones count as proven."""
        gap = self._potential(current)
        keys = []
        for k in (("ops", lo, hi) for lo, hi in windows(self.stays, self.size, self.phase,
                                                                 occ=self.occ, end=self.end)):
            if k in self.proven_at:
                continue
            if gap(k[1], k[2]) > 1e-9 * self.scale_of_value:  # a window's potential gain, not an answer
                keys.append(k)
            else:
                self.proven_at[k] = (k[1], k[2])  # nothing below the bound and no stall there: nothing to gain
        keys.sort(key=lambda k: (-gap(k[1], k[2]), k))
        if self.size < self.largest:
            keys += [k for k in self._buffer_groups(current, self.size) if k not in self.proven_at]
        plan = []
        for key in keys:
            inside = self._free_of(key)
            if len(inside) == 0:
                self.proven_at[key] = (0, 0)
            else:
                plan.append(Neighbourhood(key, inside, int(self.occ[inside].min()), int(self.end[inside].max())))
        self._shape_of = {nb.key: window_shape(self.op_shape, nb.key) for nb in plan}
        worth = {k: (gap(k[1], k[2]) if k[0] == "ops" else 0.0) for k in self._shape_of}
        self._plan, self._cursor = (shapes_first(plan, self._shape_of, worth) if SHAPES_FIRST else plan), -1
        self._tried = set()
        return self._plan

    def seconds(self, plan: Sequence[Neighbourhood], w: int, left: float) -> float:
        """The window's share of the time left, by its stays among the round's rest, at least MIN_SLICE."""
        return proportional_share([len(nb.inside) for nb in plan], w, left, MIN_SLICE)

    def _arrays_of(self, answer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``answer``'s intervals as arrays ``[len(answer)]``: candidate index (``-1``: none), occupied from, end;
        remembered for the incumbent and the last trial (each window asked for them by a scan of ~10k intervals)."""
        index = self.index
        return _remember(self._arrays, answer, lambda: (
            np.fromiter((index.get(_key(iv), -1) for iv in answer), np.int64, len(answer)),
            np.fromiter((iv.occupied_from for iv in answer), np.int64, len(answer)),
            np.fromiter((iv.end for iv in answer), np.int64, len(answer))))

    def _split(self, current, nb: Neighbourhood) -> tuple[dict[int, int], list[FastInterval], list[FastInterval]]:
        """The incumbent around ``nb``: the hint of its free stays (local index -> offset), the intervals
        that meet the ops they occupy (fixed in the model) and the rest (outside the model), in ``current``'s order."""
        n_ops = len(self.problem.ops)
        inside = nb.inside  # ascending (_free_of)
        covered = np.zeros(n_ops + 2, np.int64)  # ops occupied by some free stay, as prefix sums
        np.add.at(covered, np.maximum(self.occ[inside], 0), 1)
        np.add.at(covered, np.minimum(self.end[inside], n_ops + 1), -1)
        covered = np.concatenate(([0], np.cumsum(np.cumsum(covered) > 0)))
        cidx, occ, end = self._arrays_of(current)
        local = np.minimum(np.searchsorted(inside, cidx), len(inside) - 1)
        free = (cidx >= 0) & (inside[local] == cidx)
        meets = covered[np.minimum(end, n_ops + 1)] > covered[np.maximum(occ, 0)]
        hint_map = {int(local[i]): current[i].offset for i in np.flatnonzero(free).tolist()}
        around = [current[i] for i in np.flatnonzero(~free & meets).tolist()]
        rest = [current[i] for i in np.flatnonzero(~free & ~meets).tolist()]
        return hint_map, around, rest

    def solve(self, current, nb: Neighbourhood, until: float, rng: np.random.Generator) -> Trial:
        """CP-SAT on the free stays around the incumbent's intervals that meet them (:func:`solve_window`)."""
        self._cursor = next((w for w in range(self._cursor + 1, len(self._plan)) if self._plan[w] is nb), -1)
        if len(nb.inside) > max(BUILD_RATE * (until - time.monotonic()), WINDOW_STAYS):
            # its model would not even be built in time (one buffer can have tens of thousands of stays)
            return Trial(None, False)
        batch = self._repeat_all(current, nb)
        if batch is not None:
            return batch
        hint_map, around, rest = self._split(current, nb)
        free = [self.stays[c] for c in nb.inside.tolist()]
        dropped = {_key(free[c]) for c in hint_map}
        repeated = self._repeat(nb, dropped, around, rest)
        if repeated is not None:
            return repeated
        result = solve_window(self.problem, self.hardware, free, around, self.pev.op_times(rest + around), hint_map,
                              deadline=until, seed=self.seed, workers=self.workers,
                              deterministic=self.deterministic, t0=self.t0)
        self.last = result.stats
        trial = None if result.intervals is None else rest + around + result.intervals
        if trial is not None and _same_stays(result.intervals, free, hint_map):
            trial = None  # the incumbent itself: nothing to judge (a whole-program evaluation saved)
        if trial is not None and nb.key[0] == "ops":
            self._change = (nb.key, Gain(nb.key[1], frozenset(dropped), tuple(result.intervals)))
        # nothing more to find there (the last two cannot happen)
        return Trial(trial, result.status in ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID"))

    def _repeat_all(self, current, nb: Neighbourhood) -> Trial | None:
        """The last gain of ``nb``'s shape repeated at once on ``nb`` and every later window of its shape in the
        round (they are disjoint), one evaluation for all: kept when better than the incumbent and valid; the
        windows it changed leave the round. ``None`` (the windows are taken one by one): no gain of that shape,
        fewer than two windows, or the whole is not better (not tried again for that shape until its next gain)."""
        shape = self._shape_of.get(nb.key)
        gain = self._gains.get(shape) if REPEAT_GAINS and nb.key[0] == "ops" else None
        if gain is None or shape in self._batch_failed or self._cursor < 0 or not math.isfinite(self._value_before):
            return None
        group = [nb] + [o for o in self._plan[self._cursor + 1:] if self._shape_of[o.key] == shape]
        if len(group) < 2:
            return None
        index = self.index
        owner = np.full(len(self.stays), -1, np.int64)  # candidate -> the window of the group that frees it
        for w, o in enumerate(group):
            owner[o.inside] = w
        cidx, occ_all, end_all = self._arrays_of(current)
        window_of = np.where(cidx >= 0, owner[np.maximum(cidx, 0)], -1)
        in_base = np.flatnonzero(window_of < 0)
        base = [current[i] for i in in_base.tolist()]
        mine: list[list[FastInterval]] = [[] for _ in group]
        for i in np.flatnonzero(window_of >= 0).tolist():
            mine[int(window_of[i])].append(current[i])
        occ, end = occ_all[in_base], end_all[in_base]
        parts, applied = [base], []
        for w, o in enumerate(group):
            near = [base[i] for i in np.flatnonzero((occ < o.hi) & (end > o.lo)).tolist()]
            inside = set(o.inside.tolist())
            chosen = repeat_gain(self.problem, gain, o.key[1], {_key(iv) for iv in mine[w]}, near,
                                 lambda key, inside=inside: index.get(key) in inside)
            parts.append(mine[w] if chosen is None else chosen)
            if chosen is not None:
                applied.append(o)
        trial = [iv for part in parts for iv in part]
        value = self.pev.value(trial) if len(applied) > 1 else -math.inf
        if (not better("prefetch", value, self._value_before)
                or validate_intervals(self.problem, trial) is not None):
            self._batch_failed.add(shape)
            return None
        gone = {id(o) for o in applied if o is not nb}
        self._plan[self._cursor + 1:] = [o for o in self._plan[self._cursor + 1:] if id(o) not in gone]
        self.repeated += len(applied)
        self._scored = (trial, value)
        self._change = (nb.key, gain)
        return Trial(trial, False)

    def _repeat(self, nb: Neighbourhood, dropped: set, around: list, rest: list) -> Trial | None:
        """The last gain of ``nb``'s shape repeated here (:func:`repeat_gain`), when it applies, scores better
        than the incumbent and is valid: then no CP-SAT solve (the windows of a repeated layer tend to gain alike).
        ``None``: solve the window."""
        gain = self._gains.get(self._shape_of.get(nb.key)) if REPEAT_GAINS and nb.key[0] == "ops" else None
        if gain is None or not math.isfinite(self._value_before):
            return None
        index, inside = self.index, set(nb.inside.tolist())
        chosen = repeat_gain(self.problem, gain, nb.key[1], dropped, around,
                             lambda key: index.get(key) in inside)
        if chosen is None:
            return None
        trial = rest + around + chosen
        value = self.pev.value(trial)
        if (not better("prefetch", value, self._value_before)
                or validate_intervals(self.problem, trial) is not None):
            return None  # the window is solved instead
        self.repeated += 1
        self._scored = (trial, value)
        self._change = (nb.key, gain)  # the same gain: a repeat is no new gain to batch again
        return Trial(trial, False)

    def _held_of(self, answer) -> int:
        """:func:`held`, remembered for the incumbent and the last trial (the judge asks for both every time)."""
        return _remember(self._held, answer, lambda: held(self.problem, answer))

    def judge(self, current, best_value: float, trial) -> Verdict:
        """The evaluator's value; kept when better, or as fast and holding less memory, and valid."""
        scored, self._scored = self._scored, None
        if scored is not None and scored[0] is trial:  # a repeated gain: scored and validated in _repeat
            return Verdict(scored[1], True, better("prefetch", scored[1], best_value))
        value = self.pev.value(trial)
        gain = better("prefetch", value, best_value)
        leaner = value >= best_value and self._held_of(trial) < self._held_of(current)
        return Verdict(value, (gain or leaner) and validate_intervals(self.problem, trial) is None, gain)

    def learn(self, step: Step) -> bool:
        """A kept trial changes the surroundings of the neighbourhoods that meet its ops (no longer proven);
        a window solved to its optimum is proven."""
        nb = step.neighbourhood
        shape = self._shape_of.get(nb.key)
        gained = step.accepted and step.value > self._value_before
        change, self._change = self._change, None
        if step.accepted:
            self.proven_at = {k: span for k, span in self.proven_at.items() if span[1] <= nb.lo or span[0] >= nb.hi}
            if SHAPES_FIRST and gained and self._cursor >= 0:
                self.promoted += promote_shape(self._plan, self._cursor, self._shape_of)
        if gained and change is not None and change[0] == nb.key:
            if self._gains.get(shape) is not change[1]:
                self._batch_failed.discard(shape)
            self._gains[shape] = change[1]
        if SHAPES_FIRST and DEMOTE_SHAPES and self._cursor >= 0 and nb.key[0] == "ops" and shape not in self._tried:
            self._tried.add(shape)
            if not gained:
                self.demoted += demote_shape(self._plan, self._cursor, self._shape_of)
        self._value_before = step.value
        if step.trial.proven:
            self.proven_at[nb.key] = (nb.lo, nb.hi)
        return False

    def end_round(self, result: Round, rng: np.random.Generator) -> bool:
        """After a gain the same size again, windows cut elsewhere; at a local optimum look wider; stop when
        every span is one window, each solved to the model's optimum."""
        if result.gained:
            self.phase = float(rng.uniform(0.25, 0.75))
        elif self.size >= self.largest:
            if result.complete:
                return True
            self.phase = 0.0
        else:
            self.size, self.phase = min(2 * self.size, self.largest), 0.0
        return False


def _starts(problem: Problem, hardware, session, hint: Solution | None, budget: Budget, build: bool = True,
            held: list | None = None) -> list[tuple[str, list[FastInterval], float | None]]:
    """The search's starts, each with its value where the session knows it: the hint (as given and
    tightened), the baselines of the solve session (the lifted greedy, also tightened when time allows,
    then the msa runs within their share of the time: the search never ends below the best of them), msa
    with the hint's intervals committed first, cut at their idle gaps (:func:`mallocgame.formats.lift.split_idle`)
    and as given (each when a run as long as msa's fits in that share), all-slow.

    ``build=False`` (a portfolio built the baselines before it forked this run, and its hint is the best answer
    so far): only the baselines the session has, and no msa around a hint that is one of them (msa around its
    own answer gains nothing and can take a large share of a member's time). ``held``: the baselines the search
    holds (`mallocgame.engine.session.held_baselines`, built already), starts whatever the clock says."""
    given = hint_intervals(problem, hint)
    starts: list[tuple[str, list[FastInterval], float | None]] = []
    if given is not None:
        starts += [("hint", given, None), ("hint-tightened", tighten(problem, given), None)]
    until = budget.part(BASELINE_SHARE).deadline
    baselines = session.baselines(until, variants_until=budget.part(VARIANTS_SHARE).deadline) if build else session.built()
    held = list(held or ())
    baselines = held + [b for b in baselines if all(b.name != h.name for h in held)]
    if not build and given is not None and any(set(b.intervals) == set(given) for b in baselines):
        given = None  # the hint is a baseline: nothing new for msa to fill around
    for b in baselines:
        label = "greedy-xla-lifted" if b.name == "greedy-xla" else b.name
        starts.append((label, list(b.intervals), b.objective))
        if b.name == "greedy-xla" and time.monotonic() < until:
            starts.append(("greedy-xla-lifted-tightened", tighten(problem, list(b.intervals)), None))
    # past the share (the baselines before it took it all) msa is not started: its first decisions alone take
    # seconds at 200k buffers, and the lifted greedy is an answer already
    msa = session.baseline("msa", until) if build and time.monotonic() < until else \
        next((b for b in baselines if b.name == "msa"), None)
    if given and msa is not None and msa.complete:
        # msa around the hint's intervals (a lifted map answer's whole-life stays, say): above the lifted
        # select-pack answer on the xla suite's LSTM steps (docs/results.md, "cpsat's defaults"); first around them
        # cut at their idle gaps
        # (split_idle: the memory held between far-apart touches freed for msa to fill; more on the LSTM steps,
        # experiments/results/prefetch_split_xla.md)
        # (only when a run as long as msa's fits: msa around the cut hint is slower, as it has more room to fill,
        # and can overrun: experiments/results/prefetch_split_xla.md)
        cut = split_idle(problem, hardware, given, deadline=until)
        seeds = [("msa+hint-split", cut)] if len(cut) > len(given) else []  # a cut adds a stay
        for label, seed_intervals in [*seeds, ("msa+hint", given)]:
            if not fits_again(msa.seconds, until):
                break
            seeded, _ = msa_run(problem, hardware, until, start=list(seed_intervals))
            if seeded is not None:
                starts.append((label, seeded, None))
    starts.append(("all-slow", [], 0.0))
    return starts


def _best_start(pev, starts) -> tuple[float, str, list[FastInterval]]:
    """The best start's value, label and intervals (the earlier of equals)."""
    scored = [(pev.value(ivs) if v is None else v, -k, label, ivs) for k, (label, ivs, v) in enumerate(starts)]
    value, _, label, intervals = max(scored, key=lambda x: (x[0], x[1]))
    return value, label, intervals


def solve_prefetch(request: SolveRequest, *, workers: int = 1, deterministic: bool = True, name: str = "cpsat",
                   build_baselines: bool = True) -> Solution:
    """The cpsat solver's prefetch mode (module docstring) for ``request``: never worse than the hint or the start.
    ``build_baselines=False``: the starts are the hint and the baselines the solve session built already
    (:func:`_starts`; the portfolio's members)."""
    problem, hardware, seed, hint = request.problem, request.hardware, request.seed, request.hint
    t0, time_limit = request.budget.started, request.budget.seconds
    n = problem.n
    search_budget = request.budget.search_part(n=n)
    deadline = search_budget.deadline
    session = request.facts
    if not problem.has_ops or problem.capacity is None:
        bound = session.bound().value if problem.has_ops else 0.0
        return Solution((None,) * n, Status.OPTIMAL if not problem.has_ops else Status.FEASIBLE, problem.mode,
                        objective=0.0, bound=bound, wall_time=time.monotonic() - t0, solver=name, intervals=())
    # The baselines this search is held to, each to its end, before it spends its own time: never below them.
    held = held_baselines(session, time_limit)
    pev = session.prefetch_evaluator
    starts = _starts(problem, hardware, session, hint, request.budget, build=build_baselines, held=held)
    bound = session.bound().value
    best_value, start_label, incumbent = _best_start(pev, starts)
    history = [(time.monotonic() - t0, best_value)]
    stats = {"start": start_label, "start_value": best_value}
    if time.monotonic() >= search_budget.part(0.7).deadline:  # no time left to search: the best start, on time
        answer = Solution((None,) * n, Status.FEASIBLE, problem.mode, objective=best_value, bound=bound,
                          wall_time=time.monotonic() - t0, history=tuple(history),
                          stats=stats | {"windows_solved": 0, "cut": "no time left after the starts"},
                          solver=name, intervals=tuple(sorted(incumbent, key=lambda iv: (iv.buffer, iv.start))))
        return no_worse_than_held(problem, hardware, answer, held, answer_from=_held_label(start_label),
                                  value=best_value)
    # the candidates stop at SETUP_SHARE of the time to the deadline: the rest of the set-up and the search's
    # first plan take about as long again (docs/results.md, "Deadlines")
    space = PrefetchWindows(problem, hardware, pev, incumbent, [iv for _, ivs, _ in starts for iv in ivs],
                            seed=seed, workers=workers, deterministic=deterministic, t0=t0,
                            until=search_budget.share(SETUP_SHARE).deadline, value=best_value)
    from ortools.sat.python import cp_model  # noqa: F401  (imported before the clock is shared out)
    out = search(space, list(incumbent), best_value, deadline=deadline, t0=t0, seed=seed)
    status = Status.OPTIMAL if at_least("prefetch", out.value, bound) else Status.FEASIBLE
    stats |= {"stays": len(space.stays), "windows_solved": out.steps, "windows_improved": out.accepted,
              "rounds": out.rounds, "workers": workers, "last_window": space.last, "window_size": space.size,
              "promoted": space.promoted, "demoted": space.demoted, "repeated": space.repeated,
              # fewer than the buffers: the candidate stays were cut at SETUP_SHARE (the rest: only their starts')
              "buffers_with_candidates": space.setup.get("buffers_with_candidates", n)}
    answer = Solution((None,) * n, status, problem.mode, objective=out.value, bound=bound,
                      wall_time=time.monotonic() - t0, history=tuple(history) + out.history, stats=stats, solver=name,
                      intervals=tuple(sorted(out.answer, key=lambda iv: (iv.buffer, iv.start, iv.end))))
    return no_worse_than_held(problem, hardware, answer, held,
                              answer_from=_held_label(start_label) if not out.accepted else name, value=out.value)


def _held_label(label: str) -> str:
    """A start's label as ``stats["baselines"]["answer_from"]`` names it (a baseline by its own name)."""
    return "greedy-xla" if label == "greedy-xla-lifted" else label
