"""Select then pack: the no-fragmentation relaxation picks the fast set, best fit places it, CP-SAT repairs the rest.

Map mode, one round:

1. *select*: solve the relaxation of :mod:`mallocgame.bounds.bounds` (a knapsack row per maximal
   moment, the evaluator's exact per-op saving for workloads with ops) as a MIP with
   HiGHS, minus the buffers forbidden by earlier rounds; its choice ``S`` would reach the
   bound if it packed without fragmentation;
2. *pack*: best-fit placement of ``S`` in three orders (greedy-xla density, start time,
   size), keeping the most valuable; in the first round, if some of ``S`` finds no hole,
   the pack search (:mod:`mallocgame.solvers.pack_search`) tries all of ``S`` within a
   share of the time; the buffers of ``S`` still without a place are the failures;
3. *repair*: around each cluster of failures, CP-SAT re-solves the window (chosen and
   unchosen candidates free, everything else fixed, the packing as hint) for the most
   valuable fit;
4. *fill*: the leftover holes take the remaining candidates in greedy-xla order.

greedy-xla's answer (and the hint, if better) is built first and is the answer unless a round
beats it, so select-pack never ends below the greedy baseline.

The chosen buffers that still end up slow are forbidden (a cut on the relaxation:
dropping the least dense buffers the packer could not place) and the next round
re-selects; the best valid placement of all rounds is returned. When a round packs the
whole choice, its value equals the relaxation's and is optimal.

Pack mode: the choice is every buffer; pack within a target capacity with best fit (the
two heap-simulator orders), then CP-SAT feasibility on the buffers that do not fit plus
the placed buffers around them, widening the neighbourhood until it fits or covers
everything. With ``minimize_peak`` (or no capacity) the target is bisected between the
max-live bound and the best answer so far.
"""

from __future__ import annotations

import time

import numpy as np

from mallocgame.algorithms.placement import greedy_place, heap_orders, push_down, xla_order
from mallocgame.bounds.bounds import no_fragmentation_relaxation
from mallocgame.engine.request import SolveRequest
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hybrid.lns import ModeDispatch, fixed_rectangles, neighbourhood, window_around
from mallocgame.problem.model import Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.runtime.budget import Budget
from mallocgame.solvers.cpsat.model import Limits, Part, solve_part, value_terms
from mallocgame.solvers.pack_search.search import pack

REPAIR_WINDOW = 120  # buffers freed around a failure
# Map mode: when best fit leaves some of the choice out, the pack search (MiniMalloc's method) tries the whole
# choice within this share of the time left, at most PACK_SEARCH_SECONDS, in the first round only (the choice is
# then the relaxation's optimum; where the choice is tight, best fit and the windows leave buffers slow that the
# search packs in a fraction of a second: docs/results.md, "select-pack's defaults")
PACK_SEARCH_SHARE = 0.25
PACK_SEARCH_SECONDS = 5.0
REPAIR_LIMIT = 2000  # pack mode: more buffers left over than this and the target is given up


def relaxation_choice(problem: Problem, ev: Evaluator, candidates: np.ndarray, *, time_limit: float) -> np.ndarray:
    """The fast set (bool ``[n]``) maximising the no-fragmentation relaxation over ``candidates`` (bool ``[n]``).

    The relaxation of :func:`mallocgame.bounds.bounds.no_fragmentation_relaxation`, always as a MIP.
    """
    return _relaxation(problem, ev, candidates, time_limit=time_limit).chosen


def _relaxation(problem: Problem, ev: Evaluator, candidates: np.ndarray, *, time_limit: float):
    return no_fragmentation_relaxation(problem, ev, candidates, time_limit=time_limit,
                                       mip_nonzeros=np.iinfo(np.int64).max, lp_nonzeros=np.iinfo(np.int64).max)


class SelectPack(ModeDispatch):
    name = "select-pack"

    # ------------------------------------------------------------------ map mode

    def _solve_map(self, problem, hardware, budget: Budget, seed, hint, workers, facts):

        rng = np.random.default_rng(seed)
        a = problem.arrays
        session = facts
        ev, index = session.evaluator, session.overlap
        candidates = (ev.benefits > 0) & (a.size <= problem.capacity)
        density_order = xla_order(problem, ev.benefits)
        # greedy-xla's answer first (the solve session's): the rounds never end below it, nor below the hint.
        t0, deadline = budget.started, budget.deadline
        greedy = session.baseline("greedy-xla", budget.part(0.5).deadline)
        best = greedy.offsets
        best_value = ev.value(best)
        if hint is not None:
            hinted = push_down(problem, offsets_array(hint.offsets), index=index, deadline=budget.part(0.2).deadline)
            if ev.value(hinted) > best_value:
                best, best_value = hinted, ev.value(hinted)
        history = [(time.monotonic() - t0, best_value)]
        allowed = candidates.copy()
        rounds = 0
        whole_choice_packed = proven = False
        seen: set[bytes] = set()
        while budget.left() > 0.02:
            relaxation = _relaxation(problem, ev, allowed, time_limit=budget.share(0.3, at_most=10.0).seconds)
            chosen = relaxation.chosen
            proven = relaxation.kind == "mip"  # solved to optimality (not cut off by its time limit)
            key = np.packbits(chosen).tobytes()
            if key in seen or not chosen.any():
                break
            seen.add(key)
            rounds += 1
            placed = self._pack_choice(problem, index, chosen, density_order, deadline)
            failed = np.flatnonzero(chosen & (placed < 0))
            if len(failed) and rounds == 1:
                packing = budget.share(PACK_SEARCH_SHARE, at_most=PACK_SEARCH_SECONDS)
                placed = self._pack_search_choice(problem, chosen, placed, seed, packing)
                failed = np.flatnonzero(chosen & (placed < 0))
            if len(failed):
                placed = self._repair(problem, ev, index, candidates, placed, failed, rng, budget, workers)
            fill = density_order[candidates[density_order] & (placed[density_order] < 0)]
            placed = greedy_place(problem, fill, problem.capacity, index=index, offsets=placed, deadline=deadline)
            value = ev.value(placed)
            if value > best_value:
                best, best_value = placed, value
                history.append((time.monotonic() - t0, value))
            dropped = chosen & (placed < 0)
            if not dropped.any():
                whole_choice_packed = True
                break
            allowed &= ~dropped
        # Optimal only when the first choice, proven optimal for the relaxation, packed whole.
        status = Status.OPTIMAL if whole_choice_packed and rounds == 1 and proven else Status.FEASIBLE
        return Solution(offsets_tuple(best), status, "map", objective=best_value, wall_time=time.monotonic() - t0,
                        history=tuple(history), stats={"rounds": rounds, "choice_packed": whole_choice_packed,
                                                       **({} if greedy.complete else {"greedy_cut_short": True})},
                        solver=self.name)

    @staticmethod
    def _pack_choice(problem, index, chosen, density_order, deadline: float) -> np.ndarray:
        """Best-fit placement of the chosen buffers in three orders until ``deadline``; the one placing the most
        bytes."""
        a = problem.arrays
        ids = np.arange(problem.n)
        orders = [density_order,
                  np.lexsort((ids, -a.size, a.start)),
                  np.lexsort((ids, a.start, -a.size))]
        best, best_bytes = None, -1
        for order in orders:
            if best is not None and time.monotonic() >= deadline:
                break
            out = greedy_place(problem, order[chosen[order]], problem.capacity, index=index, deadline=deadline)
            placed_bytes = int(a.size[out >= 0].sum())
            if placed_bytes > best_bytes:
                best, best_bytes = out, placed_bytes
        return best

    @staticmethod
    def _pack_search_choice(problem, chosen, placed, seed, packing: Budget) -> np.ndarray:
        """The whole choice packed by the pack search (best fit's placement as its hint) within ``packing``,
        else ``placed`` as it was."""
        if packing.seconds <= 0.05:
            return placed
        a = problem.arrays
        idx = np.flatnonzero(chosen)
        res = pack(a.size[idx], a.start[idx], a.end[idx], capacity=problem.capacity, alignment=a.alignment[idx],
                   budget=packing, seed=seed, hint=placed[idx])
        if res.status != "OPTIMAL":
            return placed
        out = np.full(problem.n, -1, dtype=np.int64)
        out[idx] = res.offsets
        return out

    @staticmethod
    def _repair(problem, ev, index, candidates, placed, failed, rng, budget: Budget, workers) -> np.ndarray:
        """CP-SAT on a window around each failure within ``budget``, at most 2 s each, the most valuable fit kept
        (never worse than ``placed``)."""
        a = problem.arrays
        x = placed.copy()
        horizon = (int(a.start.min()), int(a.end.max()))
        todo = list(failed[np.argsort(a.start[failed], kind="stable")].tolist())
        while todo and budget.left() > 0.05:
            u = todo.pop(0)
            if x[u] >= 0:
                continue
            center = int((a.start[u] + a.end[u]) // 2)
            free = window_around(index, candidates, center, REPAIR_WINDOW, horizon)
            free = np.union1d(free, [u])
            win = neighbourhood(problem, index, x, free)
            fast_fixed = x >= 0
            fast_fixed[free] = False
            part = Part(free, "value", capacity=problem.capacity, terms=value_terms(ev, free, fast_fixed),
                        hint=x[free], **fixed_rectangles(problem, x, win.fixed))
            step = budget.share(1.0, at_most=2.0)
            res = solve_part(problem, part, Limits(step.seconds, seed=int(rng.integers(2**31 - 1)), workers=workers,
                                                   deadline=step.deadline))
            if res.offsets is not None:
                trial = x.copy()
                trial[free] = res.offsets
                if ev.value(trial) >= ev.value(x):
                    x = trial
        return x

    # ------------------------------------------------------------------ pack mode

    def _solve_pack(self, request: SolveRequest, budget: Budget):
        problem, hint, seed, session = request.problem, request.hint, request.seed, request.facts
        workers, minimize_peak = request.options.workers, request.options.minimize_peak
        rng = np.random.default_rng(seed)
        a = problem.arrays
        index = session.overlap
        orders = list(heap_orders(problem).values())
        floor = session.max_live
        t0 = budget.started
        # best fit until the session's deadline for a search's start (cut short, it stacks most buffers of a large input)
        best = session.baseline("best-fit", session.start_deadline(request.budget)).offsets
        if hint is not None and all(o is not None for o in hint.offsets):
            h = offsets_array(hint.offsets)
            if (h + a.size).max() < (best + a.size).max():
                best = h
        best = push_down(problem, best, index=index, deadline=budget.part(0.6).deadline)
        best_peak = int((best + a.size).max())
        history = [(time.monotonic() - t0, float(best_peak))]
        if not minimize_peak and problem.capacity is not None:
            if best_peak <= problem.capacity:
                return self._pack_solution(best, Status.OPTIMAL, floor, t0, history, {"target": problem.capacity})
            got, proven_infeasible = self._pack_within(problem, index, orders, problem.capacity, rng, budget,
                                                       workers)
            if got is None:
                status = Status.INFEASIBLE if proven_infeasible else Status.UNKNOWN
                return Solution((None,) * problem.n, status, "pack", wall_time=time.monotonic() - t0,
                                history=tuple(history), solver=self.name)
            history.append((time.monotonic() - t0, float((got + a.size).max())))
            return self._pack_solution(got, Status.OPTIMAL, floor, t0, history, {"target": problem.capacity})
        lo, hi = floor, best_peak  # the answer lies in [lo, hi]; hi is achieved by ``best``
        attempts = 0
        while lo < hi and budget.left() > 0.05:
            target = (lo + hi) // 2
            attempts += 1
            got, proven_infeasible = self._pack_within(problem, index, orders, target, rng,
                                                       budget.share(1 / 3), workers)
            if got is not None:
                best, hi = got, int((got + a.size).max())
                history.append((time.monotonic() - t0, float(hi)))
            else:
                lo = target + 1  # proven infeasible, or too hard in the time given: look higher
        status = Status.OPTIMAL if hi <= floor else Status.FEASIBLE
        return self._pack_solution(best, status, floor, t0, history, {"attempts": attempts})

    def _pack_solution(self, offsets, status, floor, t0, history, stats) -> Solution:
        peak = float(history[-1][1])
        return Solution(offsets_tuple(offsets), status, "pack", objective=peak, bound=float(floor),
                        wall_time=time.monotonic() - t0, history=tuple(history), stats=stats, solver=self.name)

    @staticmethod
    def _pack_within(problem, index, orders, target, rng, within: Budget, workers) -> tuple[np.ndarray | None, bool]:
        """Every buffer within ``target`` bytes, found ``within`` the budget, or ``(None, proven_infeasible)``."""
        a = problem.arrays
        x = max((greedy_place(problem, o, target, index=index, deadline=within.deadline) for o in orders),
                key=lambda o: int((o >= 0).sum()))
        missing = np.flatnonzero(x < 0)
        if len(missing) == 0:
            return x, False
        if len(missing) > REPAIR_LIMIT:  # too far from fitting (or out of time) for a CP-SAT repair
            return None, False
        free = missing
        while within.left() > 0.05:
            # Free the missing buffers and everything placed that overlaps them in time.
            span = np.unique(np.concatenate([index.query(int(a.start[i]), int(a.end[i])) for i in free.tolist()]))
            free = span if len(span) > len(free) else np.arange(problem.n)
            win = neighbourhood(problem, index, x, free)
            hint = x[free] if (x[free] >= 0).all() else None
            part = Part(free, "feasible", capacity=target, hint=hint, **fixed_rectangles(problem, x, win.fixed))
            step = within.share(1.0 if len(free) == problem.n else 0.3)
            res = solve_part(problem, part, Limits(step.seconds, seed=int(rng.integers(2**31 - 1)), workers=workers,
                                                   deadline=step.deadline))
            if res.offsets is not None:
                x = x.copy()
                x[free] = res.offsets
                return x, False
            if len(free) == problem.n:
                return None, res.status is Status.INFEASIBLE
        return None, False
