"""Large neighbourhood search: keep most of an incumbent, re-solve a time window with CP-SAT, keep improvements.

Prefetch mode starts from XLA's answer (``msa``) or the hint, whichever is better, and runs
the window search of cpsat's prefetch mode around it (:func:`mallocgame.solvers.cpsat.prefetch_windows.solve_prefetch`).

Starts from the hint when one is given, else from greedy-xla (map mode) or best fit
(pack mode; an online allocator when best fit would not finish in time), pushed down
onto the address grid (:func:`mallocgame.solvers.cpsat.model.push_down`). Each
step frees the buffers live in a random time window (about ``k`` of them), turns every
other placed buffer that overlaps them in time into a fixed rectangle, and re-solves the
freed part with CP-SAT (:func:`mallocgame.solvers.cpsat.model.solve_part`) hinted with the
incumbent, so a step never makes the part worse:

* map mode: maximise the exact value of the freed buffers given the fixed ones (roofline
  saving per op for workloads with ops, sum of benefits otherwise);
* pack mode: minimise the highest top among the freed buffers, never asking for less
  than the fixed rectangles around them already reach; windows are centred on the
  buffers that touch the peak. With a capacity (feasibility), the search stops as
  soon as the peak fits.

The window adapts: a part proved optimal quickly grows ``k`` by 25%, a part that runs out
of time shrinks it. When one part covers every candidate and is proved optimal the
search stops early (nothing left to improve). All randomness comes from ``seed``; CP-SAT
runs deterministically (``interleave_search``) with a per-step seed drawn from it, so the
trajectory is reproducible except for where the wall clock cuts a step.

The loop itself (budget per step, judging, best so far, deadline, the seeded generator) is the
core's one driver, :func:`mallocgame.algorithms.neighbourhood_search.search`; this module supplies the
neighbourhoods of map and pack mode (:class:`MapWindows`, :class:`PackWindows`), prefetch mode's
are :class:`mallocgame.solvers.cpsat.prefetch_windows.PrefetchWindows`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from mallocgame.algorithms.neighbourhood_search import Round, Step, Trial, Verdict, search
from mallocgame.algorithms.placement import push_down
from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.session import held_baselines, no_worse_than_held
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.problem.intervals import OverlapIndex, live_profile, overlap_index
from mallocgame.problem.model import Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.problem.objective import at_least, better
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.incumbents import offer
from mallocgame.solvers.cpsat.model import Limits, Part, solve_part, value_terms
from mallocgame.solvers.cpsat.prefetch_windows import solve_prefetch

K_MIN, K_START, K_MAX = 12, 40, 600
FIXED_BUDGET = 1500  # fixed rectangles per pack step, so huge traces still give small models


@dataclass
class Window:
    """A neighbourhood: free buffer indices ``[m]`` and the placed buffers around them ``[k]``."""

    free: np.ndarray
    fixed: np.ndarray


def window_around(index: OverlapIndex, candidates: np.ndarray, center: int, k: int, horizon: tuple[int, int]) -> np.ndarray:
    """About ``k`` candidate buffers live in a time window grown around ``center`` (indices, sorted).

    The window ``[center - w, center + w)`` doubles until it holds ``k`` candidates or
    spans the horizon, then the last doubling is bisected back towards ``k``. When even the narrowest
    window holds more than twice ``k`` (one op touching thousands of buffers), the ``k`` that start
    nearest the centre are taken (ties by index): a part of a thousand times ``k`` buffers is a CP-SAT
    model that takes minutes to build, whatever the step's time.
    """
    lo_t, hi_t = horizon

    def live(w: int) -> np.ndarray:
        got = index.query(max(lo_t, center - w), min(hi_t, center + w + 1))
        return got[candidates[got]]

    w, got = 1, live(1)
    while len(got) < k and (center - w > lo_t or center + w + 1 < hi_t):
        w *= 2
        got = live(w)
    if len(got) > k and w > 1:
        lo_w, hi_w = w // 2, w
        while hi_w - lo_w > 1:
            mid = (lo_w + hi_w) // 2
            if len(live(mid)) >= k:
                hi_w = mid
            else:
                lo_w = mid
        got = live(hi_w)
    if len(got) > 2 * k:
        got = got[np.lexsort((got, np.abs(index.start[got] - center)))[:k]]
    return np.sort(got)


def neighbourhood(problem: Problem, index: OverlapIndex, offsets: np.ndarray, free: np.ndarray) -> Window:
    """The placed buffers outside ``free`` whose live range overlaps some free buffer's."""
    a = problem.arrays
    span = index.query(int(a.start[free].min()), int(a.end[free].max()))
    is_free = np.zeros(problem.n, bool)
    is_free[free] = True
    span = span[(offsets[span] >= 0) & ~is_free[span]]
    # Union of the free live ranges as disjoint segments [seg_lo, seg_hi): one overlap test per candidate.
    order = np.argsort(a.start[free], kind="stable")
    lo, hi = a.start[free][order], np.maximum.accumulate(a.end[free][order])
    new_seg = np.concatenate([[True], lo[1:] >= hi[:-1]])
    seg_lo = lo[new_seg]
    seg_hi = np.maximum.reduceat(hi, np.flatnonzero(new_seg))
    k = np.searchsorted(seg_lo, a.end[span], side="left") - 1  # last segment starting before the end
    fixed = span[(k >= 0) & (seg_hi[np.maximum(k, 0)] > a.start[span])]
    return Window(free, fixed)


def fixed_rectangles(problem: Problem, offsets: np.ndarray, fixed: np.ndarray) -> dict[str, np.ndarray]:
    a = problem.arrays
    return {"fixed_start": a.start[fixed], "fixed_end": a.end[fixed], "fixed_lo": offsets[fixed],
            "fixed_hi": offsets[fixed] + a.size[fixed]}


def step_limit(total: float) -> float:
    """Seconds for one CP-SAT step of map and pack mode: a tenth of the budget, within [0.3, 3]."""
    return float(np.clip(total / 10.0, 0.3, 3.0))


class _PartSteps:
    """What map and pack mode's neighbourhoods share: one part per round, re-solved by CP-SAT within the
    step limit with a seed drawn from the driver's generator, and ``k`` (the buffers a part frees)
    growing by 25% after a proved part, shrinking after one that ran out of time."""

    def __init__(self, problem: Problem, index: OverlapIndex, k: float, *, budget: Budget, workers: int) -> None:
        a = problem.arrays
        self.problem, self.index, self.k = problem, index, k
        self.horizon = (int(a.start.min()), int(a.end.max()))
        self.step_seconds = step_limit(budget.seconds)
        self.workers = workers
        self.proved = False

    def seconds(self, plan, w: int, left: float) -> float:
        """The step limit (a tenth of the budget, within [0.3, 3] s), within what is left."""
        return min(self.step_seconds, left)

    def _solve_part(self, part: Part, until: float, rng: np.random.Generator):
        limit = until - time.monotonic()
        return solve_part(self.problem, part, Limits(limit, seed=int(rng.integers(2**31 - 1)), workers=self.workers,
                                                     deadline=until))

    def _adapt(self, proven: bool, most: int) -> None:
        self.k = min(self.k * 1.25, K_MAX, most) if proven else max(self.k / 1.25, K_MIN)

    def end_round(self, result: Round, rng: np.random.Generator) -> bool:
        """Rounds of one part: nothing to do between them."""
        return False


class MapWindows(_PartSteps):
    """Map mode's neighbourhoods for :func:`mallocgame.algorithms.neighbourhood_search.search`.

    A step frees the candidate buffers live in a time window around a random centre (about ``k``
    of them, :func:`window_around`), fixes the placed buffers around them as rectangles and
    re-solves the freed part with CP-SAT for the exact value of the freed buffers given the fixed
    ones; a trial is kept when not worse (ties let the search drift). A part proved optimal grows
    ``k`` by 25%, one that runs out of time shrinks it; a proved part that covers every candidate
    with nothing around it ends the search (``proved``).
    """

    def __init__(self, problem: Problem, ev: Evaluator, index: OverlapIndex, candidates: np.ndarray, *,
                 budget: Budget, workers: int) -> None:
        n_cand = int(candidates.sum())
        super().__init__(problem, index, min(K_START, max(n_cand, 1)), budget=budget, workers=workers)
        self.ev, self.candidates, self.n_cand = ev, candidates, n_cand

    def plan(self, x: np.ndarray, rng: np.random.Generator) -> list[Window]:
        """One window around a random centre (none when no candidate is live there)."""
        center = int(rng.integers(self.horizon[0], self.horizon[1]))
        free = window_around(self.index, self.candidates, center, int(self.k), self.horizon)
        return [neighbourhood(self.problem, self.index, x, free)] if len(free) else []

    def solve(self, x: np.ndarray, win: Window, until: float, rng: np.random.Generator) -> Trial:
        """CP-SAT on the freed buffers for their exact value around the fixed ones, hinted with ``x``."""
        problem, free = self.problem, win.free
        fast_fixed = x >= 0
        fast_fixed[free] = False
        terms = value_terms(self.ev, free, fast_fixed)
        part = Part(free, "value", capacity=problem.capacity, terms=terms, hint=x[free],
                    **fixed_rectangles(problem, x, win.fixed))
        res = self._solve_part(part, until, rng)
        trial = None
        if res.offsets is not None:
            trial = x.copy()
            trial[free] = res.offsets
        return Trial(trial, res.status is Status.OPTIMAL)

    def judge(self, x: np.ndarray, value: float, trial: np.ndarray) -> Verdict:
        """The evaluator's exact value; kept when not worse (within rounding)."""
        trial_value = self.ev.value(trial)
        return Verdict(trial_value, at_least("map", trial_value, value), better("map", trial_value, value))

    def learn(self, step: Step) -> bool:
        """Grow ``k`` after a proved part, shrink it after a cut one; stop when a proved part was everything."""
        win = step.neighbourhood
        if step.trial.proven:
            if len(win.free) >= self.n_cand and len(win.fixed) == 0:
                self.proved = True
                return True
        self._adapt(step.trial.proven, self.n_cand)
        return False


@dataclass(frozen=True)
class PackPart:
    """A pack-mode neighbourhood: the ``free`` buffers, the placed ones ``above`` the address ``band``
    around them (fixed rectangles), the highest fixed top there (``local_floor``), the free buffers'
    old top, and how many placed buffers overlapped them in time (``fixed_around``)."""

    free: np.ndarray
    above: np.ndarray
    band: int
    local_floor: int
    old_top: int
    fixed_around: int


def top_band(problem, index, x, tops, center, k, horizon, rng) -> tuple[np.ndarray, int]:
    """About ``k`` buffers live near ``center`` and the lowest address they may take.

    Half the time a plain time window (everything in it free, address floor 0);
    otherwise a 2-D window: the time window holds up to ``3k`` buffers, the ``k``
    nearest the top (ties broken at random) are freed, and they may move only above
    the lowest of their current offsets, so everything below that band stays out of
    the model.
    """
    if rng.random() < 0.5:  # half the steps: a plain time window, free down to the floor
        free = window_around(index, np.ones(problem.n, bool), center, k, horizon)
        return free, 0
    live = window_around(index, np.ones(problem.n, bool), center, 3 * k, horizon)
    jitter = rng.random(len(live))
    order = np.lexsort((jitter, -tops[live]))
    free = np.sort(live[order[:k]])
    return free, int(x[free].min())


class PackWindows(_PartSteps):
    """Pack mode's neighbourhoods for :func:`mallocgame.algorithms.neighbourhood_search.search` (answers: offsets,
    values: minus the peak).

    A step frees about ``k`` buffers near a random buffer at the peak (:func:`top_band`), fixes the
    placed buffers above their band around them (at most :data:`FIXED_BUDGET`, raising the band)
    and re-solves the freed part with CP-SAT for its highest top, never above the old one; ``k``
    adapts as in :class:`MapWindows`. The search stops when the peak fits the ``capacity`` (when
    given), reaches the ``floor`` (max live) or a proved part was everything (``proved``).
    """

    def __init__(self, problem: Problem, index: OverlapIndex, capacity: int | None, floor: int, *,
                 budget: Budget, workers: int) -> None:
        super().__init__(problem, index, min(K_START, problem.n), budget=budget, workers=workers)
        self.capacity, self.floor = capacity, floor

    def plan(self, x: np.ndarray, rng: np.random.Generator) -> list[PackPart] | None:
        """One part near the peak; none when the fixed budget leaves nothing free (``k`` shrinks);
        ``None`` (stop) once the peak fits the capacity."""
        problem, size = self.problem, self.problem.arrays.size
        tops = x + size
        peak = int(tops.max())
        if self.capacity is not None and peak <= self.capacity:
            return None
        b = int(rng.choice(np.flatnonzero(tops == peak)))
        center = int(rng.integers(problem.arrays.start[b], problem.arrays.end[b]))
        free, band = top_band(problem, self.index, x, tops, center, int(self.k), self.horizon, rng)
        win = neighbourhood(problem, self.index, x, free)
        above = win.fixed[tops[win.fixed] > band]  # rectangles wholly below the band cannot interfere
        if len(above) > FIXED_BUDGET:  # a model of bounded size: raise the band
            band = int(np.sort(tops[above])[-FIXED_BUDGET])
            stay = free[x[free] < band]  # now fixed too: they may reach into the band
            free = free[x[free] >= band]
            above = np.concatenate([above, stay])
            above = above[tops[above] > band]
            if len(free) == 0:
                self.k = max(self.k / 1.25, K_MIN)
                return []
        local_floor = int(tops[above].max()) if len(above) else 0
        return [PackPart(free, above, band, local_floor, int(tops[free].max()), len(win.fixed))]

    def solve(self, x: np.ndarray, part: PackPart, until: float, rng: np.random.Generator) -> Trial:
        """CP-SAT on the freed buffers for their highest top; a trial only when it is not above the old top."""
        problem, free = self.problem, part.free
        model = Part(free, "peak", hint=x[free], peak_floor=part.local_floor, peak_ceiling=part.old_top,
                     offset_floor=part.band, **fixed_rectangles(problem, x, part.above))
        res = self._solve_part(model, until, rng)
        trial = None
        if res.offsets is not None and int((res.offsets + problem.arrays.size[free]).max()) <= part.old_top:
            trial = x.copy()
            trial[free] = res.offsets
        return Trial(trial, res.status is Status.OPTIMAL)

    def judge(self, x: np.ndarray, value: float, trial: np.ndarray) -> Verdict:
        """Minus the new peak; always kept (the part's top is not above the old one), better when lower."""
        peak = int((trial + self.problem.arrays.size).max())
        return Verdict(-float(peak), True, peak < -value)

    def learn(self, step: Step) -> bool:
        """``k`` adapts as in map mode; stop when a proved part was everything or the peak is max live."""
        part = step.neighbourhood
        if step.trial.proven:
            if len(part.free) >= self.problem.n and part.fixed_around == 0:
                self.proved = True
                return True
        self._adapt(step.trial.proven, self.problem.n)
        self.proved = -step.value <= self.floor
        return self.proved


@dataclass(frozen=True)
class HybridOptions(Options):
    """The options of the CP-SAT hybrids (``lns``, ``select-pack``)."""

    workers: int = option(1, "CP-SAT's parallel search workers", low=1)
    minimize_peak: bool = option(False, "pack mode: minimise the peak address, not only fit the capacity")


class ModeDispatch(Solver):
    """Shared entry of the CP-SAT hybrids: one deadline rule, then ``_solve_map`` / ``_solve_pack``."""

    modes = frozenset({"map", "pack"})
    # imported before the clock starts (mallocgame.engine.runner.preload)
    preload = ("ortools.sat.python.cp_model", "scipy.optimize")
    Options = HybridOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, hardware, seed, hint = request.problem, request.hardware, request.seed, request.hint
        workers = request.options.workers
        # Keep a margin for validating and scoring, which grows with the problem.
        budget = request.budget.search_part(n=problem.n)
        if problem.n == 0:
            return Solution((), Status.OPTIMAL, problem.mode, objective=0.0, solver=self.name)
        # The baselines this search is held to, each to its end, before it spends its own time: never below them.
        held = held_baselines(request.facts, request.budget.seconds)
        if problem.mode == "map":
            answer = self._solve_map(problem, hardware, budget, seed, hint, workers, request.facts)
        elif problem.mode == "prefetch":
            answer = self._solve_prefetch(request, workers)
        else:
            answer = self._solve_pack(request, budget)
        return no_worse_than_held(problem, hardware, answer, held, answer_from=self._source(answer))

    def _source(self, answer: Solution) -> str:
        """Where the answer came from: its start (a baseline's name, say) when no step improved it, else the search."""
        stats = answer.stats
        improved = stats.get("improved", stats.get("windows_improved", stats.get("windows_solved", 1)))
        return str(stats["start"]) if "start" in stats and not improved else self.name


class LargeNeighbourhoodSearch(ModeDispatch):
    name = "lns"
    modes = frozenset({"map", "pack", "prefetch"})

    # ------------------------------------------------------------------ prefetch mode

    def _solve_prefetch(self, request: SolveRequest, workers: int):
        """From XLA's answer: ``msa``'s answer, built first with the deadline the ``msa`` solver would
        have, and the hint are the starts; CP-SAT then re-solves time windows and groups of buffers
        around the better (:func:`mallocgame.solvers.cpsat.prefetch_windows.solve_prefetch`, the neighbourhood search of
        cpsat's prefetch mode), keeping only what the evaluator scores better: never below ``msa``."""
        rest = dataclasses.replace(request, budget=request.budget.share(1.0))
        result = solve_prefetch(rest, workers=workers, name=self.name)
        return result.replace(wall_time=time.monotonic() - request.budget.started,
                              stats=dict(result.stats) | {"incumbent": result.stats.get("start")})

    # ------------------------------------------------------------------ map mode

    def _solve_map(self, problem, hardware, budget: Budget, seed, hint, workers, facts):
        """From the hint or greedy-xla's answer: the driver's search over random time windows
        (:class:`MapWindows`), every freed part re-solved by CP-SAT for its exact value."""
        ev = Evaluator.of(problem, hardware)
        index = overlap_index(problem)
        candidates = (ev.benefits > 0) & (problem.arrays.size <= problem.capacity)
        t0, deadline = budget.started, budget.deadline
        # the start to its end when the search's time allows (a greedy cut short leaves most buffers slow)
        x, source = self._map_start(problem, facts, index, hint, deadline)
        # Buffers worth nothing in fast memory only block others (value is monotone in the fast set).
        x[~candidates] = -1
        value = ev.value(x)
        history = [(time.monotonic() - t0, value)]
        space = MapWindows(problem, ev, index, candidates, budget=budget, workers=workers)
        offer(value=value, offsets=x, problem=problem, source=f"lns start ({source})")
        out = search(space, x, value, deadline=deadline, t0=t0, seed=seed,
                     on_better=lambda a, v: offer(value=v, offsets=a, problem=problem)) if space.n_cand else None
        if out is not None:
            x, value, history = out.answer, out.value, history + list(out.history)
        stats = {"start": source, "steps": out.steps if out else 0, "accepted": out.accepted if out else 0,
                 "improved": out.improved if out else 0, "final_k": int(space.k)}
        return Solution(offsets_tuple(x), Status.OPTIMAL if space.proved else Status.FEASIBLE, "map",
                        objective=value, wall_time=time.monotonic() - t0, history=tuple(history), stats=stats,
                        solver=self.name)

    @staticmethod
    def _map_start(problem, facts, index, hint, deadline) -> tuple[np.ndarray, str]:
        """The hint, else greedy-xla's answer (the solve session's baseline), pushed down."""
        if hint is not None and len(hint.offsets) == problem.n:
            x, source = offsets_array(hint.offsets), hint.solver or "hint"
        else:
            base = facts.baseline("greedy-xla", deadline)
            x, source = base.offsets, "greedy-xla" if base.complete else "greedy-xla (cut short by the time limit)"
        return push_down(problem, x, index=index, deadline=deadline), source

    # ------------------------------------------------------------------ pack mode

    def _solve_pack(self, request: SolveRequest, budget: Budget):
        """From the lower-peak of the hint and best fit (built until the session's deadline for the request's start:
        :meth:`mallocgame.engine.session.Session.start_deadline`, never before the search's, ``budget``): the driver's
        search over windows near the peak (:class:`PackWindows`), every freed part re-solved by CP-SAT for its
        highest top."""
        problem, hint, seed, facts = request.problem, request.hint, request.seed, request.facts
        workers, minimize_peak = request.options.workers, request.options.minimize_peak
        index = overlap_index(problem)
        capacity = None if minimize_peak else problem.capacity
        # On 10^8-pair traces best fit takes most of the time but starts far better than
        # the online allocator, and steps there gain little: it may take the search's time (cut short,
        # the buffers it did not reach are stacked on top: a poor start).
        t0, deadline = budget.started, budget.deadline
        # the start may take more than the search's part (the session's rule)
        x, source = self._pack_start(problem, facts, index, hint, facts.start_deadline(request.budget))
        peak = int((x + problem.arrays.size).max())
        floor = int(live_profile(problem)[1].max())
        history = [(time.monotonic() - t0, float(peak))]
        space = PackWindows(problem, index, capacity, floor, budget=budget, workers=workers)
        space.proved = peak <= floor
        offer(value=peak, offsets=x, problem=problem, source=f"lns start ({source})")
        late = time.monotonic() >= deadline  # the start took the search's time
        out = None if space.proved or late else search(space, x, -float(peak), deadline=deadline, t0=t0, seed=seed,
                                                       on_better=lambda a, v: offer(value=-v, offsets=a, problem=problem))
        if out is not None:
            x, peak = out.answer, int(-out.value)
            history += [(t, -v) for t, v in out.history]
        stats = {"start": source, "steps": out.steps if out else 0, "accepted": out.accepted if out else 0,
                 "improved": out.improved if out else 0, "final_k": int(space.k)}
        if capacity is not None and peak > capacity:
            return Solution((None,) * problem.n, Status.UNKNOWN, "pack", wall_time=time.monotonic() - t0,
                            history=tuple(history), stats=stats | {"best_peak": peak}, solver=self.name)
        status = Status.OPTIMAL if (space.proved or capacity is not None and peak <= capacity and
                                    not minimize_peak) else Status.FEASIBLE
        return Solution(offsets_tuple(x), status, "pack", objective=float(peak), bound=float(floor),
                        wall_time=time.monotonic() - t0, history=tuple(history), stats=stats, solver=self.name)

    @staticmethod
    def _pack_start(problem, facts, index, hint, deadline) -> tuple[np.ndarray, str]:
        """The lower-peak of the complete hint and the solve session's pack baseline (``pack_start``).

        Both are computed: on some traces the online allocator beats a best-fit hint.
        """
        x, source = facts.baseline("best-fit", deadline).offsets, "best-fit"
        if hint is not None and len(hint.offsets) == problem.n and all(o is not None for o in hint.offsets):
            h = offsets_array(hint.offsets)
            size = problem.arrays.size
            if int((h + size).max()) <= int((x + size).max()):
                x, source = h, hint.solver or "hint"
        return push_down(problem, x, index=index, deadline=deadline), source
