"""OR-Tools CP-SAT, all modes: per-moment no-overlap + knapsack rows, exact roofline objective; prefetch: stays and copies.

Pack mode: every buffer gets an offset within the capacity (feasibility; the deadline-safe
greedy pack start, best fit when time allows, is tried first and is the answer when it fits;
CP-SAT then cycles through branching orders in doubling slices), or with
``minimize_peak`` (or no capacity) the highest address is minimised; there the best-fit
answer bounds the address range and is the first hint, so the result is never worse
than best-fit. Map mode: optional intervals (presence = fast memory); the objective is
the evaluator's exact roofline saving for workloads with ops and the sum of benefits
otherwise (see :mod:`mallocgame.solvers.cpsat.model`). Prefetch mode (docs/prefetch.md) is its own
model, in :mod:`mallocgame.solvers.cpsat.prefetch_windows`: optional fast stays per use segment, prefetch and
eviction copies as intervals on the copy budget, windows of ops solved one by one, every
answer scored by the prefetch evaluator and never worse than the hint or the lifted greedy.

In map and pack mode, the interference graph's connected components are solved one by one, smallest first,
each with a share of the remaining time proportional to its buffer count. A component
too large for a model (``MAX_MODEL_BUFFERS`` buffers or ``MAX_MODEL_PAIRS`` interfering
pairs) is placed greedily instead (greedy-xla order in map mode; in pack mode best fit if
it finishes in time, else an online free-list allocator, see :class:`Fallbacks`),
so the solver returns a valid answer within the limit on any input. A ``hint`` goes to
CP-SAT as ``AddHint`` (after :func:`~mallocgame.solvers.cpsat.model.push_down`, which puts every
offset on the model's grid without making it worse) and is kept as the answer for any
component where CP-SAT ends with nothing better.

``workers``: CP-SAT workers. The default is 1, which follows our branching strategy
first and is deterministic given the seed. With more, they search with
``interleave_search`` (deterministic too, whatever the thread timing), which was slower in
both modes here (experiments/results/cpsat_history.md). Either way the same seed gives the same answer whenever the
search ends on its own (proved) rather than on the clock.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from mallocgame.algorithms.placement import push_down
from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.session import held_baselines, no_worse_than_held
from mallocgame.problem.intervals import count_overlapping_pairs
from mallocgame.problem.model import Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.problem.objective import better
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.incumbents import offer, offering
from mallocgame.solvers.cpsat.model import PACK_ORDERS, SMALL_MODEL, Limits, Part, PartResult, solve_part, value_terms
from mallocgame.solvers.cpsat.prefetch_windows import solve_prefetch

IMPORT_SECONDS = 0.8  # OR-Tools' first import takes 0.3-0.8 s: with less time left, map mode keeps the greedy
MAX_MODEL_BUFFERS = 20_000
OFFER_EVERY = 0.5  # seconds between the answers sent to a solving child's parent (each costs an evaluation)
MAX_MODEL_PAIRS = 2_000_000


def solve_with_restarts(problem: Problem, part: Part, limits: Limits, t0: float) -> PartResult:
    """Pack feasibility as short CP-SAT runs that cycle through branching orders with doubling time slices.

    Which tie-break order lets the bottom-up worker finish fast differs a lot between
    instances (on MiniMalloc's A-K, earliest-start-first solves A-H in seconds and
    longest-first solves C, F, G, I, K, each failing elsewhere), so every order gets a
    slice of ``total / 20``, then twice that, and so on; the last slice takes what is left.
    """
    whole = Budget.start(limits.time_limit) if limits.deadline is None else Budget.until(limits.deadline)
    if part.hint is not None:
        return solve_part(problem, part, limits, t0=t0)
    # A small model is built in milliseconds, so its slices may be short: example:pack40 takes 0.76 s
    # in start order and 0.01 s in the others, and a 1 s limit must reach them.
    base = max(whole.left() / 20, 0.05 if len(part.free) < SMALL_MODEL else 0.5)
    k, result = 0, None
    while (remaining := whole.left()) > 0.05:
        order = PACK_ORDERS[k % len(PACK_ORDERS)]
        share = base * 2 ** (k // len(PACK_ORDERS))
        piece = whole.share(1.0, at_most=None if remaining < 1.5 * share else share)  # the last slice: what is left
        result = solve_part(problem, part, Limits(piece.seconds, seed=limits.seed, workers=limits.workers,
                                                  deterministic=limits.deterministic,
                                                  deadline=piece.deadline), t0=t0, pack_order=order)
        k += 1
        if result.status is not Status.UNKNOWN:
            break
    if result is None:
        return PartResult(Status.UNKNOWN, None, None, None)
    return PartResult(result.status, result.offsets, result.objective, result.bound, result.history,
                      dict(result.stats) | {"restarts": k, "order": PACK_ORDERS[(k - 1) % len(PACK_ORDERS)]})


def time_shares(sizes: list[int], remaining: float) -> float:
    """Seconds for the first of ``sizes`` (buffer counts still to solve) out of ``remaining``."""
    return remaining * sizes[0] / max(sum(sizes), 1)


class Fallbacks:
    """The greedy answers of the solve session (:mod:`mallocgame.engine.session`): greedy-xla (map) and the pack start."""

    def __init__(self, problem: Problem, session, deadline: float):
        self.problem, self.deadline = problem, deadline
        self.session = session
        self.index = self.session.overlap

    def map_offsets(self) -> np.ndarray:
        """greedy-xla's placement, int64 ``[n]`` (built once per session until the solver's deadline, before
        OR-Tools is imported; the buffers a cut leaves unplaced stay slow)."""
        return self.session.baseline("greedy-xla", self.deadline).offsets

    def cut_short(self) -> bool:
        """Whether a greedy answer built so far was cut short by the deadline."""
        return any(not b.complete for b in self.session.built())

    def pack_component(self, comp: np.ndarray) -> np.ndarray:
        """A complete placement of ``comp`` (offsets ``[m]``): best fit if time allows, else the online allocator."""
        # a component too big for a model has nothing better to do with the time
        return self.session.baseline("best-fit", self.deadline).offsets[comp]


@dataclass(frozen=True)
class ComponentsRun:
    """What the component loop of :meth:`CpSat.solve` found: the offsets ``out`` (``-1`` = none), per
    component its status, bound and best known objective (``current``), the history, the largest
    component's model stats, how many components had a model or a greedy placement, and whether one
    was proven infeasible (the loop stops there)."""

    out: np.ndarray
    statuses: list[Status]
    bounds: list[float | None]
    current: list[float]
    history: list[tuple[float, float]]
    part_stats: dict
    models: int
    greedy_comps: int
    infeasible: bool


@dataclass(frozen=True)
class CpSatOptions(Options):
    """The options of the ``cpsat`` solver."""

    workers: int = option(1, "CP-SAT's parallel search workers", low=1)
    minimize_peak: bool = option(False, "pack mode: minimise the peak address, not only fit the capacity")
    deterministic: bool = option(True, "CP-SAT's interleaved search: the same seed gives the same answer")
    build_baselines: bool = option(True, "prefetch mode: build the baselines it starts from (a portfolio's "
                                         "members start from those built already)")


class CpSat(Solver):
    name = "cpsat"
    modes = frozenset({"map", "pack", "prefetch"})
    preload = ("ortools.sat.python.cp_model",)  # imported before the clock starts (mallocgame.engine.runner.preload)
    Options = CpSatOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, hardware, opts = request.problem, request.hardware, request.options
        if problem.mode == "prefetch":
            return solve_prefetch(request, workers=opts.workers, deterministic=opts.deterministic, name=self.name,
                                  build_baselines=opts.build_baselines)
        # The baselines this search is held to, each to its end, before it spends its own time: never below them.
        held = held_baselines(request.facts, request.budget.seconds)
        answer = self._solve(request, workers=opts.workers, minimize_peak=opts.minimize_peak,
                             deterministic=opts.deterministic)
        return no_worse_than_held(problem, hardware, answer, held, answer_from=self.name)

    def _solve(self, request: SolveRequest, *, workers, minimize_peak, deterministic):
        """Map and pack mode (:meth:`solve`)."""
        problem, seed, hint = request.problem, request.seed, request.hint
        t0 = request.budget.started
        n = problem.n
        # Reading a large model's answer back and scoring it takes time too.
        search = request.budget.search_part(n=n)
        deadline = search.deadline
        pack = problem.mode == "pack"
        goal = ("peak" if (minimize_peak or problem.capacity is None) else "feasible") if pack else "value"
        evaluator = None if pack else request.facts.evaluator
        fallbacks = Fallbacks(problem, request.facts, deadline)
        # Map mode: greedy-xla's answer first (milliseconds, and before OR-Tools' import of 0.3-0.8 s eats
        # the clock), so the answer is never below it whatever CP-SAT manages in the time.
        greedy = fallbacks.map_offsets() if goal == "value" else None
        if greedy is not None and "ortools.sat.python.cp_model" not in sys.modules \
                and deadline - time.monotonic() < IMPORT_SECONDS:  # no time to import OR-Tools and search
            return self._greedy_answer(problem, hint, greedy, evaluator, t0, cut=fallbacks.cut_short())
        from ortools.sat.python import cp_model  # noqa: F401  (before the clock is shared out)

        hint_offsets = None
        if hint is not None and len(hint.offsets) == n:
            hint_offsets = push_down(problem, offsets_array(hint.offsets), index=fallbacks.index,
                                     deadline=request.budget.part(0.2).deadline)
            if pack and (hint_offsets < 0).any():
                hint_offsets = None
        comps = [np.asarray(c, np.int64) for c in fallbacks.session.conflicts.components()]
        comps.sort(key=len)
        global_floor = fallbacks.session.max_live if (pack and n) else 0
        run = self._solve_components(problem, comps, goal, evaluator, fallbacks, hint_offsets, global_floor,
                                     search, seed=seed, workers=workers, deterministic=deterministic)
        wall = time.monotonic() - t0
        stats = {"components": len(comps), "cpsat_components": run.models, "greedy_components": run.greedy_comps,
                 "workers": workers, "deterministic": deterministic, "largest_component": run.part_stats}
        if not pack and fallbacks.cut_short() and run.greedy_comps:  # a greedy placement the deadline cut is part of the answer
            stats["cut_short"] = True  # (its undecided buffers are slow: the summary line warns)
        if run.infeasible:
            return Solution((None,) * n, Status.INFEASIBLE, problem.mode, wall_time=wall,
                            history=tuple(run.history), stats=stats, solver=self.name)
        if pack and (run.out < 0).any():
            return Solution((None,) * n, Status.UNKNOWN, problem.mode, wall_time=wall, history=tuple(run.history),
                            stats=stats, solver=self.name)
        return self._answer(problem, run, goal, evaluator, bool(comps), global_floor,
                            (("greedy-xla", greedy), ("hint", hint_offsets)), stats, t0)

    def _greedy_answer(self, problem, hint, greedy: np.ndarray, evaluator, t0: float, *, cut: bool) -> Solution:
        """Map mode without the time to import OR-Tools: greedy-xla's answer (``cut``: the deadline cut it short),
        or the hint if better."""
        n = problem.n
        better_hint = hint is not None and len(hint.offsets) == n and evaluator.value(offsets_array(hint.offsets)) \
            > evaluator.value(greedy)
        out = offsets_array(hint.offsets) if better_hint else greedy
        stats = {"greedy_components": "all", "cut": "no time to import OR-Tools",
                 "start": "hint" if better_hint else "greedy-xla"}
        if not better_hint and cut:
            stats["cut_short"] = True  # greedy-xla's placement itself was cut: the buffers it did not reach are slow
        return Solution(offsets_tuple(out), Status.FEASIBLE, problem.mode, objective=evaluator.value(out),
                        wall_time=time.monotonic() - t0, solver=self.name, stats=stats)

    def _solve_components(self, problem, comps: list[np.ndarray], goal: str, evaluator, fallbacks,
                          hint_offsets, global_floor: int, search: Budget, *, seed: int,
                          workers: int, deterministic: bool) -> ComponentsRun:
        """Solve the components one by one within ``search``, smallest first, each with a share of the time left
        proportional to its buffer count (:func:`time_shares`)."""
        t0 = search.started
        pack = problem.mode == "pack"
        out = np.full(problem.n, -1, np.int64)
        statuses: list[Status] = []
        bounds: list[float | None] = []
        # per component: best known objective (value, or peak) for the history
        current = [self._initial_objective(problem, comp, goal, hint_offsets, evaluator) for comp in comps]
        history: list[tuple[float, float]] = []
        part_stats: dict = {}
        models = greedy_comps = 0
        infeasible = False
        # map mode, in a solving child: the components solved so far with greedy-xla's answer elsewhere (the
        # components are time-disjoint, so any mix is an answer) go to the parent every OFFER_EVERY seconds
        solved = np.zeros(problem.n, bool) if goal == "value" and offering() else None
        next_offer = time.monotonic() + OFFER_EVERY
        for c, comp in enumerate(comps):
            part = search.share(time_shares([len(x) for x in comps[c:]], 1.0))
            result, used_model = self._solve_component(
                problem, comp, goal, evaluator, fallbacks, hint_offsets, global_floor,
                Limits(part.seconds, seed=seed, workers=workers, deterministic=deterministic,
                       deadline=part.deadline), t0)
            models += used_model
            if c == len(comps) - 1 and result.stats:
                part_stats = dict(result.stats)
            greedy_comps += not used_model
            statuses.append(result.status)
            bounds.append(result.bound)
            if result.status is Status.INFEASIBLE:
                infeasible = True
                break
            if result.offsets is None:
                if pack:
                    continue  # no placement for this component: the pack answer is UNKNOWN
            else:
                out[comp] = result.offsets
                if solved is not None:
                    solved[comp] = True
                    if time.monotonic() >= next_offer or c == len(comps) - 1:
                        mixed = np.where(solved, out, fallbacks.map_offsets())
                        offer(value=evaluator.value(mixed), offsets=mixed, problem=problem)
                        next_offer = time.monotonic() + OFFER_EVERY
            for t, v in result.history if goal != "feasible" else ():
                current[c] = v
                history.append((t, self._combine(current, goal)))
            if result.objective is not None:
                current[c] = result.objective
        return ComponentsRun(out, statuses, bounds, current, history, part_stats, models, greedy_comps, infeasible)

    def _answer(self, problem, run: ComponentsRun, goal: str, evaluator, any_component: bool, global_floor: int,
                starts, stats: dict, t0: float) -> Solution:
        """The complete answer of the component loop: its objective, bound and status; in map mode the
        best of it and the ``starts`` (label, offsets or None), whichever is higher."""
        n, size = problem.n, problem.arrays.size
        out, bounds, history = run.out, run.bounds, run.history
        objective = self._combine(run.current, goal) if any_component else 0.0
        bound = None
        if all(b is not None for b in bounds) and bounds:
            bound = (max(max(bounds), float(global_floor)) if goal == "peak" else
                     float(sum(bounds)) if goal == "value" else None)
        elif goal == "peak":
            bound = float(global_floor)
        if goal == "peak":
            objective = float((out + size).max()) if n else 0.0
            optimal = bound is not None and objective <= bound
        elif goal == "feasible":
            objective = float((out + size).max()) if n else 0.0
            optimal = True
        else:
            objective = evaluator.value(out)
            optimal = all(s is Status.OPTIMAL for s in run.statuses)
            for label, start in starts:
                if start is not None and better(problem.mode, evaluator.value(start), objective):
                    out, objective, optimal = start.copy(), evaluator.value(start), False
                    stats["answer_from"] = label
        status = Status.OPTIMAL if optimal else Status.FEASIBLE
        if not history or history[-1][1] != objective:
            history.append((time.monotonic() - t0, objective))
        return Solution(offsets_tuple(out), status, problem.mode, objective=objective, bound=bound,
                        wall_time=time.monotonic() - t0, history=tuple(history), stats=stats, solver=self.name)

    # ------------------------------------------------------------ per component

    @staticmethod
    def _combine(current: list[float], goal: str) -> float:
        if goal == "peak" or goal == "feasible":
            return float(max(current, default=0.0))
        return float(sum(current))

    @staticmethod
    def _initial_objective(problem, comp, goal, hint_offsets, evaluator) -> float:
        if hint_offsets is None:
            return 0.0
        if goal == "value":
            fast = np.zeros(problem.n, bool)
            fast[comp] = hint_offsets[comp] >= 0
            terms = value_terms(evaluator, comp)
            return terms.value(fast[comp])
        return float((hint_offsets[comp] + problem.arrays.size[comp]).max())

    def _solve_component(self, problem, comp, goal, evaluator, fallbacks, hint_offsets, global_floor,
                         limits: Limits, t0: float) -> tuple[PartResult, bool]:
        """Answer for one component, and whether CP-SAT was used (else a greedy placement)."""
        a = problem.arrays
        size = a.size[comp]
        hint = None if hint_offsets is None else hint_offsets[comp]
        terms = value_terms(evaluator, comp) if goal == "value" else None
        too_big = len(comp) > MAX_MODEL_BUFFERS or count_overlapping_pairs(a.start[comp], a.end[comp]) > MAX_MODEL_PAIRS
        if goal == "value":
            greedy = None
            if too_big:
                greedy = fallbacks.map_offsets()[comp]
                if hint is not None and terms.value(hint >= 0) > terms.value(greedy >= 0):
                    greedy = hint
                v = terms.value(greedy >= 0)
                return PartResult(Status.FEASIBLE, greedy, v, terms.total, ((time.monotonic() - t0, v),)), False
            part = Part(comp, "value", capacity=problem.capacity, terms=terms, hint=hint)
            result = solve_part(problem, part, limits, t0=t0)
            best = hint if hint is not None else None
            if result.offsets is not None:
                if best is None or result.objective >= terms.value(best >= 0):
                    return result, True
            if best is None:
                best = fallbacks.map_offsets()[comp]
            v = terms.value(best >= 0)
            return PartResult(Status.FEASIBLE, best, v, result.bound if result.bound is not None else terms.total,
                              result.history, result.stats | {"fallback": "hint" if hint is not None else "greedy"}), True
        if goal == "feasible":
            if len(comp) == 1:
                if size[0] > problem.capacity:
                    return PartResult(Status.INFEASIBLE, None, None, None), False
                return PartResult(Status.OPTIMAL, np.zeros(1, np.int64), float(size[0]), float(size[0])), False
            # The deadline-safe greedy pack start (best fit if time allows) first: when it fits,
            # that is the answer, so cpsat never reports no packing where best-fit has one.
            greedy = hint if hint is not None else fallbacks.pack_component(comp)
            peak = int((greedy + size).max())
            if peak <= problem.capacity:
                return PartResult(Status.FEASIBLE, greedy, float(peak), None), False
            if too_big:
                return PartResult(Status.UNKNOWN, None, None, None), False
            part = Part(comp, "feasible", capacity=problem.capacity, hint=hint)
            result = solve_with_restarts(problem, part, limits, t0)
            if result.offsets is None and hint is not None:
                return PartResult(Status.FEASIBLE, hint, float((hint + size).max()), None), True
            return result, True
        # Peak: best-fit (or the hint, if lower) bounds the address range and is the first hint.
        greedy = fallbacks.pack_component(comp)
        if hint is not None and (hint + size).max() < (greedy + size).max():
            greedy = hint
        greedy_peak = int((greedy + size).max())
        comp_floor = int(max(size.max(), 0))
        if greedy_peak <= global_floor or len(comp) == 1 or too_big:
            return PartResult(Status.OPTIMAL if greedy_peak <= max(global_floor, comp_floor) else Status.FEASIBLE,
                              greedy, float(greedy_peak), float(global_floor)), False
        full = np.full(problem.n, -1, np.int64)
        full[comp] = greedy
        greedy = push_down(problem, full, index=fallbacks.index, deadline=limits.deadline)[comp]
        part = Part(comp, "peak", hint=greedy, peak_floor=global_floor, peak_ceiling=greedy_peak)
        result = solve_part(problem, part, limits, t0=t0)
        if result.offsets is None or result.objective > greedy_peak:
            bound = result.bound if result.bound is not None else float(global_floor)
            return PartResult(Status.FEASIBLE, greedy, float(greedy_peak), bound, result.history, result.stats), True
        return result, True
