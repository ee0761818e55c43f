"""The solve session: one problem on one hardware spec, its derived facts built once and shared.

A :class:`Session` owns what every part of one solve reads from a problem — the evaluators, the
overlap index, the max live bytes, the interference graph and its conflicts (:mod:`mallocgame.problem.graph`), the
bound and the mode's baseline answers (:data:`BASELINES`)
— builds each once, on first use, and keeps it in the problem's one store of derived facts
(:func:`mallocgame.problem.model.derived_facts`). :func:`session_for` is the process-local way in, so
the solver protocol is unchanged (docs/architecture.md, "The solve session"): the runner warms
the session before it forks a solver (the child inherits what was built, copy-on-write), and a
solver, a plugin included, asks ``session_for(problem, hardware)`` for what it needs.

Example:
    >>> from mallocgame.inputs.load import load_problem
    >>> p = load_problem("example:layered150", mode="prefetch")
    >>> s = session_for(p, p.hardware)
    >>> s is session_for(p, p.hardware), [b.name for b in s.baselines()]
    (True, ['greedy-xla', 'msa', 'msa+overlap-100', 'msa+greedy-xla', 'msa+cross-program-prefetch', 'msa+memory-overlap'])
    >>> s.baseline("greedy-xla") is s.baseline("greedy-xla")
    True
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame.algorithms.memory_space_assignment import msa_run
from mallocgame.algorithms.placement import greedy_place, pack_start, stack_above, xla_order
from mallocgame.bounds import bound_cache
from mallocgame.bounds.bounds import Bound, map_instant_bound, map_upper_bound, prefetch_upper_bound
from mallocgame.bounds.prefetch_bound import tightened
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.problem import graph
from mallocgame.problem.intervals import max_live, overlap_index
from mallocgame.problem.model import FastInterval, Problem, ProblemRef, Solution, Status, derived_facts, offsets_tuple
from mallocgame.problem.objective import better
from mallocgame.runtime.budget import Budget, fits_again
from mallocgame.runtime.incumbents import offer

# The registered solver whose answer is each mode's reference: compare's ``speedup_vs_greedy``
# column, the portfolio's fast members, the conformance suite's never-below check.
BASELINE_SOLVER = {"map": "greedy-xla", "pack": "best-fit", "prefetch": "msa"}
# The baseline answers of each mode, cheapest first: every search builds them first (a small
# share of its time) and never ends below the best. Prefetch mode: greedy-xla's map answer
# lifted (:func:`mallocgame.formats.lift.lift_map_answer`, O(n log n)), then XLA's memory-space assignment,
# then msa with stays and windows up to 100x (not 10x) the copy time (``msa+overlap-100``: long-lived
# buffers kept fast without a copy), then msa with the lifted greedy's whole-life stays committed first
# (``msa+greedy-xla``), then the ``msa`` solver's two other XLA configurations (:data:`MSA_VARIANTS`: XLA's
# cross-program prefetch of one buffer, the per-memory max-overlap rule), so that a search that has the time
# never ends below the ``msa`` solver; each after msa only when msa finished and a run as long still fits.
MSA_VARIANTS = {"msa+cross-program-prefetch": {"cross_program_prefetch": 1},
                "msa+memory-overlap": {"max_overlap": "memory"}}
BASELINES = {"map": ("greedy-xla",), "pack": ("best-fit",),
             "prefetch": ("greedy-xla", "msa", "msa+overlap-100", "msa+greedy-xla", *MSA_VARIANTS)}
LONG_OVERLAP_RATIO = 100.0  # msa+overlap-100's overlap_ratio (docs/results.md, "msa's defaults")
# Of a solver's time, the part the prefetch baselines may take (msa is cut at this share; the
# lifted greedy takes milliseconds): the rest is the search's.
BASELINE_SHARE = 0.5
# An expensive bound that took less than this share of its seconds finished: it is not computed again.
COMPLETE_SHARE = 0.8
# Of a solver's time, the part msa's XLA variants may take (the msa solver's rule; the searches pass it too, so
# that they build the variants whenever the msa solver would, and spend no more on them).
VARIANTS_SHARE = 0.1
# Of a solver's time, the part the baselines it holds (:func:`held_names`) may take by their estimated CPU seconds,
# msa's XLA variants aside (:data:`VARIANTS_SHARE`): they are built to their end whatever the clock says, so a
# machine that gives the solver a quarter of a core still has them back within the limit.
HELD_SHARE = 0.25
# Seconds per buffer a search keeps back from its whole budget after the baseline it starts from
# (:meth:`Session.start_deadline`): sending back an answer that is one tuple of offsets.
START_PER_BUFFER = 1e-6
# The CPU seconds each baseline takes at most per unit of work (:func:`work_units`): about twice the most measured
# on the generated layered networks and the xla suite's programs (experiments/results/held_baselines.md). They decide,
# with the time limit alone, which baselines a search holds (:func:`held_names`): no clock, so the same at any load.
BASELINE_COST = {"greedy-xla": 4e-6, "best-fit": 1e-5, "msa": 1.5e-5, "msa+overlap-100": 1.5e-5,
                 "msa+greedy-xla": 1.5e-5, "msa+cross-program-prefetch": 1.5e-5, "msa+memory-overlap": 3e-5}


@dataclass(frozen=True)
class Baseline:
    """One baseline answer: offsets int64 ``[n]`` (-1 slow; map, pack) or fast intervals (prefetch).

    ``objective`` is the value (map, prefetch: time saved, higher is better) or the peak (pack);
    ``complete`` is False when a deadline cut the construction short (the answer is valid still).
    """

    name: str
    objective: float
    complete: bool
    seconds: float
    offsets: np.ndarray | None = None
    intervals: tuple[FastInterval, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # the monotonic deadline it was built with

    def solution(self, problem: Problem, solver: str | None = None) -> Solution:
        """This answer as a :class:`Solution` of ``problem`` (status FEASIBLE)."""
        offsets = (None,) * problem.n if self.offsets is None else offsets_tuple(self.offsets)
        return Solution(offsets=offsets, status=Status.FEASIBLE, mode=problem.mode, objective=self.objective,
                        wall_time=self.seconds, stats={"baseline": self.name, **self.stats},
                        solver=solver or self.name, intervals=tuple(self.intervals))

    def better_than(self, other: "Baseline | None", mode: str) -> bool:
        return other is None or better(mode, self.objective, other.objective)


class Session:
    """The derived facts of ``problem`` on ``hardware``; each built once, on first use (see the module)."""

    problem = ProblemRef()  # held weakly: the store of derived facts keeps no problem alive

    def __init__(self, problem: Problem, hardware: Any):
        self.problem = problem
        self.hardware = hardware
        self._baselines: dict[str, Baseline] = {}
        self._bound = self._instant = None
        self._full_seconds = 0.0  # the seconds the expensive bound was given (here or in the cache)
        self._complete = False  # it finished within them

    # ------------------------------------------------------------------ facts
    @property
    def evaluator(self):
        """The map-mode :class:`~mallocgame.hardware.evaluator.Evaluator` (also prefetch mode's base)."""
        return Evaluator.of(self.problem, self.hardware)

    @property
    def prefetch_evaluator(self):
        return PrefetchEvaluator.of(self.problem, self.hardware)

    @property
    def overlap(self):
        """The :class:`~mallocgame.problem.intervals.OverlapIndex` of the buffers' live ranges."""
        return overlap_index(self.problem)

    @property
    def conflicts(self) -> graph.Conflicts:
        """Which buffers conflict (:class:`~mallocgame.problem.graph.Conflicts`): read from the networkx
        :attr:`interference_graph` when it was built, else from its compressed form, the clique path (no
        networkx import); built once per problem (:func:`mallocgame.problem.graph.conflicts`)."""
        return graph.conflicts(self.problem)

    @property
    def interference_graph(self):
        """The interference graph as a ``networkx.Graph`` (:func:`mallocgame.problem.graph.interference_graph`), built once
        per problem; ``ValueError`` above :data:`~mallocgame.problem.graph.MAX_GRAPH_EDGES` edges, where
        :attr:`conflicts` serves."""
        return graph.problem_graph(self.problem)

    @property
    def max_live(self) -> int:
        """The most bytes live at once (:func:`mallocgame.problem.intervals.max_live`, built once per problem)."""
        return max_live(self.problem)

    def bound(self, *, tighten: float = 0.0):
        """The tightest :class:`~mallocgame.bounds.bounds.Bound` known for the problem without waiting for one.

        That is the tighter of the mode's instant bound (milliseconds at any size: max live in pack
        mode, the per-op bound in map and prefetch modes, :func:`instant_bound`) and the problem's
        entry in the on-disk cache (:mod:`mallocgame.bounds.bound_cache`), if any. ``tighten`` > 0 computes
        the expensive bound too, with that many seconds (the no-fragmentation relaxation in map mode,
        the residency bound in prefetch mode, in a killable child; :func:`expensive_bound`), unless the
        cache holds one given at least as long or one that finished in its time, and stores the tighter
        result in the cache: a solve never waits for it, ``info`` and ``compare`` compute it once per problem.
        """
        if self._bound is None:
            self._instant = self._bound = instant_bound(self.problem, self.hardware)
            entry = bound_cache.load(self.problem, self.hardware)
            if entry is not None:
                self._bound = bound_cache.tighter(self.problem.mode, self._bound, entry.bound)
                self._full_seconds, self._complete = entry.full_seconds, entry.complete
        if tighten > self._full_seconds and not self._complete and self.problem.mode != "pack":
            t0 = time.monotonic()
            found = expensive_bound(self.problem, self.hardware, self._instant, seconds=tighten)
            self._bound = bound_cache.tighter(self.problem.mode, self._bound, found)
            # done well within its time: more time would not change it
            self._full_seconds, self._complete = tighten, time.monotonic() - t0 < COMPLETE_SHARE * tighten
            entry = bound_cache.store(self.problem, self.hardware, self._bound, full_seconds=tighten,
                                      complete=self._complete)
            if entry is not None:  # another process may have stored a tighter one meanwhile
                self._bound = entry.bound
        return self._bound

    def known_bound(self):
        """The bound if it was built in this process already, else ``None`` (never builds it)."""
        return self._bound

    def warm(self) -> None:
        """Build what every run reads (overlap index, evaluator) before a fork, so both sides share it."""
        self.overlap  # noqa: B018
        if self.problem.mode == "prefetch":
            if self.problem.has_ops:
                self.prefetch_evaluator  # noqa: B018
                # every prefetch baseline reads the ops' touches (seconds at 200k buffers): off the solvers' clocks
                self.problem.touches  # noqa: B018
        elif self.problem.mode == "map":
            self.evaluator  # noqa: B018

    # ------------------------------------------------------------------ baselines
    def start_deadline(self, budget: Budget) -> float:
        """Until when the baseline a search starts from may be built, for a search given ``budget`` (its request's):
        past the search's own part of it (`Budget.search_part`), until only the time to send back one answer of
        the problem's buffers is left (:data:`START_PER_BUFFER` each, greedy-xla's rule). A large input's best fit
        needs more than the search's part, and cut short it stacks most buffers: a poor start. The one rule of the
        pack searches' starts (lns, select-pack).

        Examples:
            >>> from mallocgame.inputs.load import load_problem
            >>> p = load_problem("example:layered150", mode="pack")
            >>> session_for(p, p.hardware).start_deadline(Budget(10.0, 0.0))
            9.94985
        """
        return budget.search_part(n=self.problem.n, per_buffer=START_PER_BUFFER).deadline

    def baseline(self, name: str, deadline: float | None = None) -> Baseline | None:
        """Baseline ``name`` of the mode (:data:`BASELINES`), built once until ``deadline`` (monotonic).

        A baseline a deadline cut short is kept only until a later call gives it more time.
        ``None`` when it has no valid answer (msa without ops or capacity, say).
        """
        have = self._baselines.get(name)
        if have is not None and (have.complete or not self._more_time(have, deadline)):
            return have
        t0 = time.monotonic()
        built = self._build(name, deadline)
        if built is not None:
            built = Baseline(name, built[0], built[1], time.monotonic() - t0, *built[2:])
            if built.offsets is not None:
                built.offsets.setflags(write=False)  # shared by every user: a solver copies before it changes it
            built = dataclasses.replace(built, deadline=deadline)
            if have is None or built.better_than(have, self.problem.mode) or built.complete:
                self._baselines[name] = built
                # a solving child sends it to its parent as an answer (a no-op elsewhere; only improvements travel)
                offer(value=built.objective, source=f"baseline {name}", problem=self.problem,
                      **({"intervals": built.intervals} if self.problem.mode == "prefetch" else {"offsets": built.offsets}))
        return self._baselines.get(name)

    @staticmethod
    def _more_time(have: Baseline, deadline: float | None) -> bool:
        """Would a rebuild of the cut-short ``have`` get at least twice its time (so a forked member does not
        redo, with the same time, what its portfolio built)?"""
        if deadline is None:
            return True
        before = have.deadline
        if before is None:
            return time.monotonic() < deadline
        return deadline - before >= have.seconds and time.monotonic() < deadline

    def baselines(self, deadline: float | None = None, *, names: tuple[str, ...] | None = None,
                  variants_until: float | None = None) -> list[Baseline]:
        """The mode's baselines (:data:`BASELINES`, cheapest first; only ``names`` if given) built until
        ``deadline``, msa's XLA variants (:data:`MSA_VARIANTS`) only until ``variants_until`` if given (a search
        passes :data:`VARIANTS_SHARE` of its time, as the ``msa`` solver gives them); those with an answer."""
        out = []
        for name in BASELINES[self.problem.mode] if names is None else names:
            if out and deadline is not None and time.monotonic() >= deadline:
                break
            until = deadline
            if name in MSA_VARIANTS and variants_until is not None:
                until = variants_until if deadline is None else min(deadline, variants_until)
                if time.monotonic() >= until:
                    continue
            b = self.baseline(name, until)
            if b is not None:
                out.append(b)
        return out

    def built(self) -> list[Baseline]:
        """The baselines built so far in this process (or before its fork), in :data:`BASELINES` order; builds
        nothing."""
        return [self._baselines[name] for name in BASELINES[self.problem.mode] if name in self._baselines]

    def all_slow(self) -> Baseline | None:
        """The empty answer (everything slow: value 0) of map and prefetch mode; ``None`` in pack mode."""
        if self.problem.mode == "pack":
            return None
        if self.problem.mode == "prefetch":
            return Baseline("all-slow", 0.0, True, 0.0)
        return Baseline("all-slow", 0.0, True, 0.0, offsets=np.full(self.problem.n, -1, np.int64))

    def best_baseline(self, deadline: float | None = None, *, names: tuple[str, ...] | None = None,
                      variants_until: float | None = None) -> Baseline | None:
        """The best of :meth:`baselines` (same arguments) and all-slow (ties go to the cheaper one)."""
        best = self.all_slow()
        for b in self.baselines(deadline, names=names, variants_until=variants_until):
            if b.better_than(best, self.problem.mode):
                best = b
        return best

    def _build(self, name: str, deadline: float | None):
        problem, mode = self.problem, self.problem.mode
        if name == "greedy-xla":
            greedy_until = deadline
            if mode == "prefetch" and deadline is not None and problem.has_ops:
                # the lift and its scoring after the placement take about as long (O(n log n), seconds at 200k)
                greedy_until = Budget.until(deadline).share(0.5).deadline
            offsets, complete = self._greedy(greedy_until)
            if mode == "prefetch":
                if not problem.has_ops:
                    return 0.0, complete, None, ()
                ivs = lift_map_answer(problem, offsets)  # valid by construction (the runner validates what it returns)
                return self.prefetch_evaluator.value(ivs), complete, None, tuple(ivs), {"lifted": True}
            if mode == "pack":  # capacity lifted: every buffer placed (a peak over the capacity is no packing)
                # cut short: the buffers it did not reach stacked above the rest, still a packing
                stacked = 0
                if not complete:
                    offsets = offsets.copy()
                    stacked = stack_above(problem, offsets)
                peak = float((offsets + problem.arrays.size).max()) if problem.n else 0.0
                return peak, complete, offsets, (), ({"stacked": stacked} if stacked else {})
            return self.evaluator.value(offsets), complete, offsets
        if name == "best-fit" and mode == "pack":
            offsets, label = pack_start(problem, float("inf") if deadline is None else deadline, index=self.overlap)
            peak = float((offsets + problem.arrays.size).max()) if problem.n else 0.0
            # else the online allocator's, maybe with the buffers it did not reach stacked on top (the label says)
            complete = deadline is None or time.monotonic() < deadline
            return peak, complete, offsets, (), {"order": label}
        if name == "msa" and mode == "prefetch":
            if problem.n == 0 or not problem.has_ops or problem.capacity is None:
                return None

            answer, stats = msa_run(problem, self.hardware, float("inf") if deadline is None else deadline)
            if answer is None:
                return None
            return self.prefetch_evaluator.value(answer), not stats["timed_out"], None, tuple(answer), stats
        if name == "msa+greedy-xla" and mode == "prefetch":
            return self._msa_again(deadline, seeded=True)
        if name == "msa+overlap-100" and mode == "prefetch":
            return self._msa_again(deadline, seeded=False, overlap_ratio=LONG_OVERLAP_RATIO)
        if name in MSA_VARIANTS and mode == "prefetch":
            return self._msa_again(deadline, seeded=False, **MSA_VARIANTS[name])
        raise ValueError(f"no baseline {name!r} in {mode} mode (baselines: {', '.join(BASELINES[mode])})")

    def _msa_again(self, deadline: float | None, *, seeded: bool, **options):
        """msa once more: with the lifted greedy's intervals committed first (``seeded``), else with ``options``
        (:func:`~mallocgame.algorithms.memory_space_assignment.msa_run`'s); ``None`` when there is nothing to seed, no ops or
        capacity, msa did not finish, or a run as long as msa's would not fit before ``deadline``; an answer the
        deadline cut short is kept as cut short (``complete`` false)."""
        problem = self.problem
        if problem.n == 0 or not problem.has_ops or problem.capacity is None:
            return None
        greedy = self.baseline("greedy-xla", deadline) if seeded else None
        msa = self._baselines.get("msa")
        if (seeded and (greedy is None or not greedy.intervals)) or msa is None or not msa.complete:
            return None
        if not fits_again(msa.seconds, deadline):
            return None
        until = float("inf") if deadline is None else deadline
        if seeded:
            answer, stats = msa_run(problem, self.hardware, until, start=list(greedy.intervals))
        else:
            answer, stats = msa_run(problem, self.hardware, until, **options)
        if answer is None:
            return None
        return self.prefetch_evaluator.value(answer), not stats["timed_out"], None, tuple(answer), stats

    def _greedy(self, deadline: float | None) -> tuple[np.ndarray, bool]:
        """greedy-xla's placement (capacity lifted in pack mode); False when ``deadline`` cut it short."""
        problem = self.problem
        order = xla_order(problem, self.evaluator.benefits)
        capacity = None if problem.mode == "pack" else problem.capacity
        cut = deadline is not None and deadline != float("inf")
        out = greedy_place(problem, order, capacity, index=self.overlap, deadline=deadline if cut else None)
        return out, not (cut and time.monotonic() >= deadline)


def instant_bound(problem: Problem, hardware: Any) -> Bound:
    """The mode's bound in milliseconds at any size: max live (pack), the per-op bound (map:
    :func:`~mallocgame.bounds.bounds.map_instant_bound`, prefetch: :func:`~mallocgame.bounds.bounds.prefetch_upper_bound`)."""
    if problem.mode == "pack":
        return Bound(float(max_live(problem)), "max-live")
    if problem.mode == "prefetch":
        return prefetch_upper_bound(problem, hardware)
    return map_instant_bound(problem, hardware)


def expensive_bound(problem: Problem, hardware: Any, instant: Bound, *, seconds: float) -> Bound:
    """The mode's tight bound given ``seconds``: the no-fragmentation relaxation (map,
    :func:`~mallocgame.bounds.bounds.map_upper_bound`) or the residency bound (prefetch,
    :func:`~mallocgame.bounds.prefetch_bound.tightened`), the tighter of it and ``instant`` with both in ``others``."""
    if problem.mode == "prefetch":
        return tightened(problem, hardware, instant, seconds=seconds)
    if problem.mode == "map":
        return bound_cache.tighter(problem.mode, instant, map_upper_bound(problem, hardware, time_limit=seconds))
    return instant


def session_for(problem: Problem, hardware: Any) -> Session:
    """The :class:`Session` of ``problem`` on ``hardware`` in this process (built on first call)."""
    facts = derived_facts(problem)
    session = facts.get(("session", hardware))
    if session is None:
        session = facts["session", hardware] = Session(problem, hardware)
    return session


def baseline_solution(problem: Problem, hardware: Any, *, budget: Budget, solver: str,
                      share: float = BASELINE_SHARE) -> Solution | None:
    """The best baseline answer of ``problem``'s mode built within the first ``share`` of ``budget``, as
    a Solution named ``solver``; what a search returns when it finds nothing better (``None``: none)."""
    best = session_for(problem, hardware).best_baseline(budget.part(share).deadline,
                                                        variants_until=budget.part(VARIANTS_SHARE).deadline)
    return None if best is None else best.solution(problem, solver)


def work_units(problem: Problem) -> int:
    """The size of ``problem`` a baseline's time grows with: buffers + pairs of overlapping live ranges + touches
    by the ops (each pair counted at the later start); O(n log n), built once per problem."""
    facts = derived_facts(problem)
    units = facts.get("work_units")
    if units is None:
        a = problem.arrays
        live = np.searchsorted(np.sort(a.start), a.start, side="right") - np.searchsorted(np.sort(a.end), a.start,
                                                                                           side="right")
        touches = _touch_count(problem) if problem.has_ops else 0
        units = facts["work_units"] = problem.n + int(live.sum()) + touches
    return units


def _touch_count(problem: Problem) -> int:
    """The (buffer, op) pairs the ops touch, ``len(problem.touches.ops)``, counted from the operands without building
    the touches (which map and pack modes never read otherwise)."""
    if "touches" in problem.__dict__:  # built already (prefetch mode's session builds it)
        return len(problem.touches.ops)
    ops = problem.op_arrays  # columns: iterating problem.ops would make an object per op and operand
    if len(ops.op_of) == 0:
        return 0
    return len(np.unique(ops.op_of * (problem.n + 1) + ops.buf_of))


def held_names(problem: Problem, time_limit: float) -> tuple[str, ...]:
    """The baselines a search of ``time_limit`` seconds holds before it spends its own time, and that the
    conformance suite holds it to: those of :data:`BASELINES` (in order) whose estimated CPU seconds
    (:data:`BASELINE_COST` x :func:`work_units`) fit their share of the limit, counted with those held before them
    (:data:`HELD_SHARE`; msa's XLA variants :data:`VARIANTS_SHARE`, counted with msa's and each other's, as the
    ``msa`` solver counts them). Decided from the problem and the limit alone, never from a clock, so a busy
    machine does not change which baselines a search must beat (it only makes them take longer to build).

    Example:
        >>> from mallocgame.inputs.load import load_problem
        >>> p = load_problem("example:layered150", mode="prefetch")
        >>> held_names(p, 1.0)[:2], held_names(p, 0.001)
        (('greedy-xla', 'msa'), ())
    """
    units = work_units(problem)
    held: list[str] = []
    spent = msa_runs = 0.0  # estimated seconds of the held baselines; of msa and its variants among them
    for name in BASELINES[problem.mode]:
        cost = BASELINE_COST[name] * units
        if name in MSA_VARIANTS:
            if "msa" in held and msa_runs + cost <= VARIANTS_SHARE * time_limit:
                held.append(name)
                msa_runs += cost
            continue
        if spent + cost > HELD_SHARE * time_limit:
            break  # the later ones build on msa (and cost more): a prefix
        held.append(name)
        spent += cost
        msa_runs += cost if name == "msa" else 0.0
    return tuple(held)


def held_baselines(session: Session, time_limit: float, *, first: tuple[str, ...] | None = None) -> list[Baseline]:
    """The baselines :func:`held_names` names for ``time_limit``, each built to its end in ``session`` (no
    deadline, even when the limit is spent already: they fit a share of it by their estimate), those with an
    answer (``first``: only those of them named there). What a search calls first, before it spends its own time."""
    out = []
    for name in held_names(session.problem, time_limit):
        if first is not None and name not in first:
            continue
        built = session.baseline(name)
        if built is not None:
            out.append(built)
    return out


def best_held(session: Session, held: list[Baseline]) -> Baseline | None:
    """The best of ``held`` and all-slow (map, prefetch; ties go to the cheaper one); in pack mode only a packing
    within the capacity counts."""
    best = session.all_slow()
    problem = session.problem
    for b in held:
        if problem.mode == "pack" and problem.capacity is not None and b.objective > problem.capacity:
            continue
        if b.better_than(best, problem.mode):
            best = b
    return best


def held_stats(held: list[Baseline], answer_from: str | None) -> dict[str, Any]:
    """``stats["baselines"]`` of a search's answer: the baselines it held (:func:`held_baselines`) with their
    objectives, and where its answer came from (a held baseline's name, or the search's own label)."""
    return {"held": {b.name: b.objective for b in held}, "answer_from": answer_from}


def objective_of(problem: Problem, hardware: Any, solution: Solution) -> float:
    """The objective a report gives ``solution`` (map, prefetch: the evaluator's time saved; pack: the peak, inf
    with a buffer left out)."""
    if problem.mode == "prefetch":
        return float(PrefetchEvaluator.of(problem, hardware).value(list(solution.intervals)))
    offsets = np.fromiter((-1 if o is None else o for o in solution.offsets), np.int64, problem.n)
    if problem.mode == "pack":
        if problem.n and (offsets < 0).any():
            return float("inf")
        return float((offsets + problem.arrays.size).max()) if problem.n else 0.0
    return float(Evaluator.of(problem, hardware).value(offsets))


def no_worse_than_held(problem: Problem, hardware: Any, solution: Solution, held: list[Baseline], *,
                       answer_from: str | None = None, value: float | None = None) -> Solution:
    """``solution``, or the best held baseline's answer (named as ``solution``'s solver, status FEASIBLE) where that
    is strictly better, with ``stats["baselines"]`` (:func:`held_stats`) saying which. The last step of a search:
    whatever its own budget let it do, it never ends below a baseline it held. ``value``: the answer's objective by
    the mode's evaluator if the caller has it (else it is scored here: :func:`objective_of`)."""
    session = session_for(problem, hardware)
    best = best_held(session, held)
    packed = problem.mode == "pack" and problem.capacity is not None and solution.placed == problem.n
    if held and best is not None and not packed:  # a packing within the capacity is as good as any
        mine = Baseline("answer", objective_of(problem, hardware, solution) if value is None else value, True, 0.0)
        if best.better_than(mine, problem.mode):
            stats = dict(solution.stats, baselines=held_stats(held, best.name))
            return best.solution(problem, solution.solver).replace(
                stats=stats, wall_time=solution.wall_time, history=solution.history)
    return solution.replace(stats=dict(solution.stats, baselines=held_stats(held, answer_from)))
