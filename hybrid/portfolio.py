"""Portfolio: run several registered solvers (in parallel processes where cores allow), keep the best valid answer.

Members come from the ``solvers`` option (a list or a comma-separated string) or the
defaults below, skipping any that is not registered or does not support the mode. The
fast constructive members (greedy-xla, best-fit) run first, in this process; their best
valid answer (or the caller's hint, if better) becomes the hint of every other member, so
CP-SAT-based members start warm. Above ``LARGE`` buffers the default list leaves them
out: best fit is not fast there (tens of seconds on 10^8-pair traces, with no time
limit), and the other members run it themselves as their start when it fits their time;
the portfolio builds the cheapest baseline of the solve session (:mod:`mallocgame.engine.session`) instead,
and msa (which keeps a deadline) stays with half the time. The other members run in child
processes, at most ``workers`` at a time, each with one CP-SAT worker and an equal share of
the time left (children still running at the deadline are terminated). A member that returns a
valid answer it proved optimal (any placement within the capacity, for a pack
feasibility problem), or an answer at the bound (then reported OPTIMAL; the map bound is computed
in a child of its own beside the members), ends the race at once. Every answer is validated and scored by
:func:`mallocgame.engine.runner.run_solver`; the best valid one wins (ties go to the earlier member, so
the same seed gives the same choice).

Prefetch mode: the map members (their answers are lifted; they need no hint) start in a child at once,
beside msa in this process; then the window search (``cpsat``, with ``build_baselines=False``: it starts from
the best answer so far and the baselines built here) at once, while this process builds the session's other
baselines (the best of them, ``msa+greedy-xla`` included, is an answer) and the prefetch game played greedily
(``game-greedy``, within ``GAME_GREEDY_SHARE`` of the time) once the map members have reported, at the latest at
``EARLY_WAIT_SHARE`` of the time; the msa member builds msa's XLA variants in the tenth of the portfolio's limit
the msa solver of that limit gives them (its ``variants_seconds``). A better answer with ``REFILL_SHARE``
of the time left runs the window search again from it, once per answer's source (a lifted select-pack answer
that finished early, a baseline built meanwhile): in a free slot, else in the place of the running window
search whose start is worth least, if less. Every member's heavy imports
(``preload``) happen here, before the forks: a child's import is outside its own clock but not the race's.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Sequence

from mallocgame.bounds.bounds import map_upper_bound
from mallocgame.engine.pools import ProcessPool
from mallocgame.engine.protocol import Solver
from mallocgame.engine.registry import SolverLoadError, load_solver, solver_entries
from mallocgame.engine.report import Report, answer, better, score
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.runner import preload, run_solver
from mallocgame.engine.session import (
    BASELINE_SHARE,
    BASELINE_SOLVER,
    BASELINES,
    MSA_VARIANTS,
    VARIANTS_SHARE,
    best_held,
    held_baselines,
    held_stats,
)
from mallocgame.formats.lift import lift_map_answer
from mallocgame.problem.model import InputError, Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import ChildCall
from mallocgame.runtime.incumbents import offer
from mallocgame.search.game import GameConfig
from mallocgame.search.uct import PREFETCH_K, greedy_prefetch_intervals

# The members per mode: the solvers that end best on each kind of problem -- lns and select-pack on layered
# networks, pack-search and cpsat on MiniMalloc's instances; for the peak of the real traces pack-search settles
# the small ones at once and cpsat and lns share the large ones (docs/results.md, "portfolio's defaults").
DEFAULT_MEMBERS = {
    "map": ("greedy-xla", "best-fit", "lns", "select-pack"),
    "pack": ("best-fit", "pack-search", "cpsat"),
    "peak": ("best-fit", "pack-search", "cpsat", "lns"),
    # msa first (XLA's own algorithm), then the searches start from its answer; select-pack runs in map mode and
    # its answer is lifted (a lifted map answer can beat every prefetch solver). Two members beside msa, so that on
    # two workers each has the whole time.
    "prefetch": ("msa", "select-pack", "cpsat"),
}
# The baselines' solvers (one table in the core, mallocgame.engine.session) and greedy-xla: constructive, run first.
FAST_MEMBERS = frozenset({*BASELINE_SOLVER.values(), "greedy-xla"})
COLLECT = 0.10  # seconds more than a solver's margin: collecting answers, stopping children
LARGE = 5000  # buffers; above this the default members leave out the constructive ones without a deadline
TIMED_MEMBERS = frozenset({"msa"})  # constructive members that keep a deadline: kept above LARGE
# Prefetch mode: a slot that frees up with at least this share of the time left runs the window search again,
# from the best answer so far (a lifted map answer that finished early, with a core idle).
REFILL_SOLVER = "cpsat"
# Prefetch mode: the other baselines are built while the members run, once the map members started early have
# reported, but no later than this share of the time (a map member may use all of its time while a baseline is the
# best start: docs/results.md, "portfolio's defaults").
EARLY_WAIT_SHARE = 0.25
# A better answer takes the place of a running window search only when it beats that search's start by this share:
# a restart costs the search's progress, which a start a hair better does not repay (docs/results.md, "portfolio's
# defaults").
REPLACE_MARGIN = 0.02
# Prefetch mode: the prefetch game played greedily (mcts's finish) is a start of its own, built in this process with
# the other baselines within this share of the time: on some programs it is the best start, on the largest it
# takes long and ends below msa, so it is cut there (docs/results.md, "portfolio's defaults"). A better answer takes a
# running window search's place (REFILL).
GAME_GREEDY = "game-greedy"
GAME_GREEDY_SHARE = 0.1
REFILL_SHARE = 0.15
CHILD_MARGIN = 0.02  # of a member's share, kept for its child's exit: a loaded machine delays a child's exit
MIN_SHARE = 0.05  # seconds: a member with no more than this is not started (skipped: no time left)
# Prefetch mode: the baselines built beside the members before msa's XLA variants (one msa run each at most); the
# others after them
CHEAP_BASELINES = ("greedy-xla", "msa", "msa+overlap-100")
FIRST_HELD = ("greedy-xla", "best-fit", "msa")  # the held baselines built before the members run (Race.hold)


def reaches(mode: str, objective: float | None, bound: float) -> bool:
    """Is ``objective`` at ``bound`` (a peak at the max-live bound, or a saving at the upper bound)?"""
    if objective is None:
        return False
    if mode == "pack":
        return objective <= bound
    # a bound, not an answer: computed another way (an LP, a sum over ops) with rounding of its own, so compared
    # more loosely than two answers scored by the same evaluator (mallocgame.problem.objective.TOLERANCE)
    return bound >= 0 and objective >= bound - 1e-9 * max(1.0, abs(bound))


def member_names(mode: str, solvers: Any = None, *, goal: str | None = None) -> list[str]:
    """The members to run: registered, supporting ``mode``, not the portfolio itself, in order.

    ``goal`` picks the default list (``map``, ``pack`` or ``peak``); it defaults to the mode.
    """
    if solvers is None:
        wanted = list(DEFAULT_MEMBERS[goal or mode])
    elif isinstance(solvers, str):
        wanted = [s.strip() for s in solvers.split(",") if s.strip()]
    else:
        wanted = list(solvers)
    registered = solver_entries()
    names = []
    for name in wanted:
        if name == Portfolio.name or name not in registered or name in names:
            continue
        try:
            modes = getattr(load_solver(name), "modes", frozenset({"map", "pack"}))
        except SolverLoadError:
            continue
        if mode in modes or (mode == "prefetch" and "map" in modes):  # a map member's answer is lifted
            names.append(name)
    return names


def lifted_members(names: list[str]) -> set[str]:
    """The members of a prefetch portfolio that solve map mode only: their answers are lifted."""
    return {n for n in names if "prefetch" not in getattr(load_solver(n), "modes", frozenset({"map", "pack"}))}


def lifted_report(problem, hardware, report: Report, *, name: str) -> Report:
    """A map member's report on ``problem`` (prefetch mode) as a prefetch report: its answer lifted
    (:func:`mallocgame.formats.lift.lift_map_answer`), validated and scored."""
    if not report.valid:
        return dataclasses.replace(report, mode=problem.mode)
    intervals = lift_map_answer(problem, report.offsets)
    solution = Solution((None,) * problem.n, Status(report.status) if report.status in (
        str(Status.OPTIMAL), str(Status.FEASIBLE)) else Status.FEASIBLE, problem.mode, intervals=tuple(intervals))
    lifted = score(problem, hardware, solution, seconds=report.seconds, bound=None, solver_name=name)
    # a map optimum is not a prefetch optimum: never report the lift as proven
    return dataclasses.replace(lifted, status=str(Status.FEASIBLE) if lifted.valid else lifted.status,
                               stats=dict(report.stats) | {"lifted_from": "map"})


class _Race:
    """The state of one portfolio solve: every member's report, the errors, the history of the best
    answer, the best report so far and the bound once known in this process (``None``: not yet;
    ``False``: the bound's child failed). ``lifted``: the map members, whose answers are lifted. ``budget``: the
    portfolio's; ``race``: the part of it the members race in (`Budget.search_part`: its answer is back in time), of
    which each member gets a child budget (:meth:`member_budget`)."""

    def __init__(self, problem, hardware, budget: Budget, *, minimize_peak: bool, lifted: set[str], session):
        self.problem, self.hardware, self.budget = problem, hardware, budget
        self.race = budget.search_part(n=problem.n, extra=COLLECT)
        self.minimize_peak, self.lifted = minimize_peak, lifted
        self.map_problem = problem.replace(mode="map") if lifted else None
        self.reports: dict[str, Report] = {}
        self.errors: dict[str, str] = {}
        self.history: list[tuple[float, float]] = []
        self.best: Report | None = None
        self.session = session  # the request's facts
        self.bound = self.session.known_bound()  # map mode: computed beside the members
        self.calls: list = []  # the map bound's child (killed at the deadline: HiGHS may overrun its limit)
        self.window_runs: dict[str, float] = {}  # prefetch mode: the window searches started, key -> their start's value
        self.held: list = []  # the baselines the portfolio holds (hold)

    def hold(self, time_limit: float, *, first: bool = False) -> None:
        """Build the baselines a search of ``time_limit`` holds (:func:`mallocgame.engine.session.held_baselines`: each to
        its end, whatever the clock says) and enter the best as a member's report: the answer is never below it.
        ``first``: only the cheapest and msa (the members' starts; a member forked later inherits them), before the
        members run; msa's other runs are built while they run (:meth:`baselines_once`), and whatever of them is
        still missing or cut short after the race (a second call), so the race does not wait for them."""
        held = held_baselines(self.session, time_limit, first=FIRST_HELD if first else None)
        if not first:
            self.held = held
        best = best_held(self.session, held)
        if best is not None and best.name in {b.name for b in held} and best.name not in self.reports:
            problem, hardware = self.problem, self.hardware
            self.consider(best.name, score(problem, hardware, best.solution(problem), seconds=best.seconds,
                                           bound=None, solver_name=best.name))

    def consider(self, name: str, report: Report) -> bool:
        """Record a member's report; True when it settles the problem (valid and proved optimal, or
        at the bound, when the bound is known in this process)."""
        problem = self.problem
        self.reports[name] = report
        if self.best is None or better(report, self.best):
            self.best = report
            if report.valid:
                self.history.append((time.monotonic() - self.budget.started, float(report.objective)))
                prefetch = problem.mode == "prefetch"
                offer(value=report.objective, source=name, problem=problem,  # to our parent, in a solving child
                      **({"intervals": report.intervals} if prefetch else {"offsets": report.offsets}))
        feasibility = problem.mode == "pack" and not self.minimize_peak and problem.capacity is not None
        return report.valid and (feasibility or report.status == str(Status.OPTIMAL) or self.at_bound(name, report))

    def consider_member(self, name: str, report: Report) -> bool:
        """:meth:`consider` a member's report, lifted first for a map member."""
        if name in self.lifted:
            report = lifted_report(self.problem, self.hardware, report, name=name)
        return self.consider(name, report)

    def at_bound(self, name: str, report: Report) -> bool:
        """Is ``report`` at the bound (so proven optimal)? Then the race ends and the answer says OPTIMAL."""
        found = self.bound or self.session.known_bound()
        if not report.valid or not found or not reaches(self.problem.mode, report.objective, found.value):
            return False
        if report.status != str(Status.OPTIMAL):
            proven = dataclasses.replace(report, status=str(Status.OPTIMAL))
            self.reports[name] = proven
            if self.best is report:
                self.best = proven
        return True

    def best_at_bound(self) -> bool:
        """Is the best answer so far at the bound?"""
        return self.best is not None and self.at_bound(self.best.solver, self.best)

    def map_bound(self) -> bool:
        """Start the map bound's child, or collect its bound; True when the best answer is at it."""
        if self.bound is not None:
            return False
        if not self.calls:
            self.calls.append(ChildCall(map_upper_bound, self.problem, self.hardware,
                                        time_limit=max(self.race.left(), 0.05)))
        elif self.calls[0].ready():
            try:
                self.bound = self.calls[0].result()
            except Exception as exc:
                self.errors["bound"] = f"{exc.__class__.__name__}: {exc}"
                self.bound = False
                return False
            return self.best_at_bound()
        return False

    def cancel_bound(self) -> None:
        """Stop the map bound's child, if any."""
        for c in self.calls:
            c.cancel()

    def run_baselines(self, until: float, *, cheapest: bool = False, names: tuple[str, ...] | None = None,
                      variants_until: float | None = None) -> None:
        """The best baseline of the solve session (``cheapest``: of the cheapest only; else ``names``, by default
        all but msa's XLA variants, which its msa member builds: ``variants_seconds``), built in this process
        until ``until`` (the variants until ``variants_until``), as a member's report (once per baseline)."""
        problem, hardware = self.problem, self.hardware
        if cheapest:
            names = BASELINES[problem.mode][:1]
        elif names is None:
            names = tuple(n for n in BASELINES[problem.mode] if n not in MSA_VARIANTS)
        best = self.session.best_baseline(until, names=names, variants_until=variants_until)
        if best is not None and best.name not in self.reports:
            self.consider(best.name, score(problem, hardware, best.solution(problem), seconds=best.seconds,
                                           bound=None, solver_name=best.name))

    def run_variants(self, until: float) -> None:
        """msa's XLA variants (:data:`MSA_VARIANTS`) built in this process until ``until`` (those msa's member built
        are in the session already), the best of them as a member's report."""
        problem, hardware = self.problem, self.hardware
        built = self.session.baselines(until, names=tuple(MSA_VARIANTS), variants_until=until)
        best = None
        for b in built:
            if best is None or b.better_than(best, problem.mode):
                best = b
        if best is not None and best.name not in self.reports:
            self.consider(best.name, score(problem, hardware, best.solution(problem), seconds=best.seconds,
                                           bound=None, solver_name=best.name))

    def baselines_once(self, until: float, *, after: list[str], latest: float):
        """A ``later`` hook for :meth:`Portfolio._run_parallel`: :meth:`run_baselines` once (msa's XLA variants
        included), on the first call when the members ``after`` have reported (or failed), or at ``latest``
        (monotonic) if they still run; never settles the race. (Building them beside the members from the start
        would run three processes on two cores, which cuts the members short: docs/results.md, "portfolio's
        defaults".)"""
        done = []

        def hook() -> bool:
            if not done and (time.monotonic() >= latest or all(n in self.reports or n in self.errors for n in after)):
                done.append(True)
                # msa's XLA variants too, if the msa member had no time for them (with the baselines' deadline, not
                # their tenth of the limit): the msa solver of this limit may have built them on a quieter core,
                # and the portfolio must not end below it. Before msa+greedy-xla, which can take several msa
                # runs' time on a large program and leave them none (docs/results.md, the prefetch portfolio)
                self.run_baselines(until, names=CHEAP_BASELINES)
                self.run_variants(until)
                self.run_baselines(until)
                if self.problem.mode == "prefetch":
                    self.run_game_greedy(self.race.share(1.0, at_most=self.race.part(GAME_GREEDY_SHARE).seconds))
            return False
        return hook

    def run_game_greedy(self, budget: Budget) -> None:
        """The prefetch game played greedily to its end in this process (what ``mcts`` finishes its episodes with),
        as a member's report when it ends within ``budget`` (a cut game is dropped: its undecided buffers are slow)."""
        problem, hardware = self.problem, self.hardware
        t = time.monotonic()
        try:
            played = greedy_prefetch_intervals(problem, hardware, GameConfig(variant="prefetch", k=PREFETCH_K,
                                                                             order="xla"), budget.deadline)
        except Exception as exc:  # noqa: BLE001  (a failed start is one error line, the race goes on)
            self.errors[GAME_GREEDY] = f"{exc.__class__.__name__}: {exc}"
            return
        if played is None:
            self.errors[GAME_GREEDY] = "stopped: the game's greedy did not end in its share of the time"
            return
        intervals = tuple(sorted(played, key=lambda iv: (iv.buffer, iv.start)))
        solution = Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode,
                            wall_time=time.monotonic() - t, solver=GAME_GREEDY, intervals=intervals)
        self.consider(GAME_GREEDY, score(problem, hardware, solution, seconds=time.monotonic() - t, bound=None,
                                         solver_name=GAME_GREEDY))

    def run_fast(self, fast: list[str], seed: int, hint, options: dict, large: bool) -> bool:
        """Run the constructive members in this process; True when one settles the problem."""
        settled = False
        for name in fast:
            # The time the baseline would have on its own (not less: never below the greedy); above LARGE
            # buffers the baselines' share, so that the searches get the rest.
            member = self.budget.share(1.0, at_most=self.budget.part(BASELINE_SHARE).seconds if large else None)
            # msa's XLA variants get the tenth of the portfolio's limit they get from the msa solver of that limit,
            # not a tenth of the member's cut limit (above LARGE buffers they never fit that, and the portfolio
            # would end below the msa solver: docs/results.md, "portfolio's defaults")
            given = dict(options, variants_seconds=self.budget.part(VARIANTS_SHARE).seconds)
            try:
                settled = self.consider(name, run_solver(name, self.problem, self.hardware, budget=member,
                                                         seed=seed, hint=hint, options=given,
                                                         facts=self.session)) or settled
            except Exception as exc:
                self.errors[name] = f"{exc.__class__.__name__}: {exc}"
        return settled

    def warm_start(self, hint):
        """The hint of the other members: the best valid answer so far, or the caller's hint if better."""
        warm = hint
        if self.best is not None and self.best.valid:
            warm = answer(self.best, self.problem)
            if hint is not None:
                given = score(self.problem, self.hardware, hint, seconds=0.0, bound=None, solver_name="hint")
                if better(given, self.best):
                    warm = hint
        return warm

    def run_sequential(self, heavy: list[str], seed: int, warm, options: dict) -> None:
        """Run the members one after another in this process, each with an equal share of the time left."""
        for k, name in enumerate(heavy):
            member = self.race.share(1.0 / (len(heavy) - k))
            if member.seconds <= 0.01:
                break
            try:
                lifted = name in self.lifted  # a map member solves the map problem (its own facts)
                if self.consider_member(name, run_solver(name, self.map_problem if lifted else self.problem,
                                                         self.hardware, budget=member, seed=seed,
                                                         hint=None if lifted else warm, options=options,
                                                         facts=None if lifted else self.session)):
                    break
            except Exception as exc:
                self.errors[name] = f"{exc.__class__.__name__}: {exc}"

    def refill(self, seed: int, started: set, free: bool,
               running: list) -> tuple[str, str, Solution, int, str | None] | None:
        """Prefetch mode: ``(key, solver, hint, seed, stop)`` to run the window search again from the best answer so
        far, when no run started from it yet and at least ``REFILL_SHARE`` of the time is left: in a ``free`` slot,
        else in the place of the ``running`` window search whose start is worth least and ``REPLACE_MARGIN`` less
        than it (``stop``,
        its key: a baseline built while the members run, msa+overlap-100, say, can be a better start than msa's
        answer the first search started from)."""
        best = self.best
        if (self.problem.mode != "prefetch" or best is None or not best.valid or best.solver in started
                or REFILL_SOLVER not in solver_entries()
                or self.race.left() < self.budget.part(REFILL_SHARE).seconds):
            return None
        stop = None
        if not free:
            worse = [(v, k) for k, v in self.window_runs.items()
                     if k in running and v * (1 + REPLACE_MARGIN) < float(best.objective)]
            if not worse:
                return None
            stop = min(worse)[1]
        started.add(best.solver)
        key = f"{REFILL_SOLVER}-from-{best.solver}"
        self.window_runs[key] = float(best.objective)
        return key, REFILL_SOLVER, answer(best, self.problem), seed + len(started), stop

    def solution(self, solver_name: str) -> Solution:
        """The portfolio's answer: the best valid report, else INFEASIBLE (a member proved it) or UNKNOWN."""
        problem, best = self.problem, self.best
        stats = {"members": {n: {"status": r.status, "valid": r.valid, "objective": r.objective,
                                 "seconds": round(r.seconds, 3)} for n, r in self.reports.items()},
                 "errors": self.errors, "winner": best.solver if best is not None and best.valid else None}
        stats["baselines"] = held_stats(self.held, stats["winner"])
        wall = time.monotonic() - self.budget.started
        history = tuple(self.history)
        if best is None or not best.valid:  # every member's report was validated by the runner
            proven = any(r.status == str(Status.INFEASIBLE) for r in self.reports.values())
            return Solution((None,) * problem.n, Status.INFEASIBLE if proven else Status.UNKNOWN, problem.mode,
                            wall_time=wall, history=history, stats=stats, solver=solver_name)
        status = Status(best.status) if best.status in (str(Status.OPTIMAL), str(Status.FEASIBLE)) else Status.FEASIBLE
        return answer(best, problem).replace(status=status, objective=best.objective, wall_time=wall,
                                             history=history, stats=stats, solver=solver_name)


@dataclass(frozen=True)
class PortfolioOptions(Options):
    """The options of the ``portfolio`` solver."""

    workers: int = option(2, "members run at a time, each in a child process", low=1)
    minimize_peak: bool = option(False, "pack mode: minimise the peak address, not only fit the capacity")
    solvers: str | Sequence[str] | None = option(None, "the members, in order (default: per mode and goal)",
                                                  kind="names")


class Portfolio(Solver):
    name = "portfolio"
    modes = frozenset({"map", "pack", "prefetch"})
    # imported before the clock starts (mallocgame.engine.runner.preload): the default members' heavy modules, and the
    # members' own, whose first import would otherwise run on the portfolio's clock (docs/results.md, "portfolio's
    # defaults")
    preload = ("ortools.sat.python.cp_model", "scipy.optimize", *(f"mallocgame.{m}" for m in (
        "solvers.greedy_xla", "solvers.best_fit", "solvers.msa", "solvers.cpsat.solver", "solvers.pack_search.solver",
        "hybrid.lns", "hybrid.select_pack")))
    Options = PortfolioOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, options = request.problem, request.options
        peak_goal = problem.mode == "pack" and (options.minimize_peak or problem.capacity is None)
        names = member_names(problem.mode, options.solvers, goal="peak" if peak_goal else None)
        if options.solvers is not None and not names:  # an explicit list with nothing to run is bad input
            raise InputError(f"portfolio: none of the solvers {options.solvers!r} is registered and supports "
                             f"{problem.mode} mode (registered: {', '.join(sorted(solver_entries()))})")
        lifted = lifted_members(names) if problem.mode == "prefetch" else set()
        race = _Race(problem, request.hardware, request.budget, minimize_peak=options.minimize_peak, lifted=lifted,
                     session=request.facts)
        fast, heavy, large = _split_members(names, lifted, large=problem.n > LARGE and options.solvers is None)
        # The cheapest baseline, built in this process (no fork), is an answer before any member runs: with a
        # short limit on a busy machine a forked greedy-xla member can be cut before it reports, and the portfolio
        # must not end below the greedy.
        race.hold(request.budget.seconds, first=True)  # the members' starts, each to its end (even at a spent limit)
        race.run_baselines(request.budget.part(BASELINE_SHARE).deadline, cheapest=True)
        if problem.mode != "map" and race.bound is None:  # the bound in milliseconds: an answer at it ends the race
            race.bound = race.session.bound()
        for name in heavy:
            # Here, before the forks: a child's own import of its heavy modules is outside its clock, but not
            # outside ours (docs/results.md, "portfolio's defaults").
            preload(load_solver(name))
        workers = max(int(options.workers), 1)
        # Members stay in the portfolio's process group, so a kill of the portfolio reaches them. Their better
        # answers go on to our parent as they come (a map member's, lifted only at its end, do not).
        with ProcessPool(workers, own_groups=False, on_incumbent=_forward(problem)) as pool:
            self._race_members(race, request, pool, fast, heavy, large, workers, race.best_at_bound())
        race.hold(request.budget.seconds)  # every baseline it is held to, those not built yet to their end now
        return race.solution(self.name)

    def _race_members(self, race: _Race, request: SolveRequest, pool: ProcessPool, fast: list[str],
                      heavy: list[str], large: bool, workers: int, settled: bool) -> None:
        """The members' race in ``pool``: the map members of a prefetch portfolio start at once, the constructive
        members run here, then the others run, ``workers`` at a time (in this process with one worker)."""
        problem, seed, budget = race.problem, request.seed, request.budget
        options = {"minimize_peak": request.options.minimize_peak, "workers": 1}
        if problem.mode == "prefetch":
            # the baselines are built here, before the members fork (run_baselines): a cpsat member starts from
            # them and the best answer so far, and builds none of its own (cpsat's build_baselines)
            options["build_baselines"] = False
        parallel = workers > 1 and len(heavy) > 1
        # A prefetch portfolio's map members need no hint (their answers are lifted): they start now, on the
        # other core, while msa runs here (msa can take a large share of the limit on a training step, with
        # the second core idle otherwise).
        early = [n for n in heavy if n in race.lifted][:workers - 1] if parallel and not settled else []
        if member_budget(problem, race.race).seconds <= MIN_SHARE:  # no time for a member: no fork (they cost time)
            early = []
        for name in early:
            pool.start(name, name, race.map_problem, race.hardware, budget=member_budget(problem, race.race),
                       seed=seed, hint=None, options=options)
        settled = race.run_fast(fast, seed, request.hint, options, large) or settled
        warm = race.warm_start(request.hint)
        if settled:  # leaving the block stops the members started early
            race.errors.update({n: "stopped: another member settled the problem" for n, _ in pool.running()})
        heavy = [] if settled else [n for n in heavy if n not in early]
        if not heavy and (not early or settled):
            return
        # The baselines built here, once: every forked member inherits them from the facts (the best of them is an
        # answer too: msa+greedy-xla is no member's). Prefetch mode, in parallel: while the members run (the
        # window search starts from msa's answer at once; a better baseline starts another from it, ``refill``):
        # on a large program they take seconds.
        baselines_later = parallel and problem.mode == "prefetch"
        if not baselines_later:
            race.run_baselines(budget.part(BASELINE_SHARE).deadline)
        if not parallel:
            race.run_sequential(heavy, seed, warm, options)
            return
        try:
            # a cpsat member starts from the best answer so far: no rerun from that one
            started = {race.best.solver} if REFILL_SOLVER in heavy and race.best is not None else set()
            if started and problem.mode == "prefetch" and race.best.objective is not None:
                race.window_runs[REFILL_SOLVER] = float(race.best.objective)
            later = (race.map_bound if problem.mode == "map" else
                     race.baselines_once(budget.part(BASELINE_SHARE).deadline, after=early,
                                         latest=budget.part(EARLY_WAIT_SHARE).deadline)
                     if baselines_later else None)
            self._run_parallel(heavy, race, seed, warm, options, workers, pool, later=later,
                               refill=lambda free, running: race.refill(seed, started, free, running))
        finally:
            race.cancel_bound()

    @staticmethod
    def _run_parallel(names, race: _Race, seed, hint, options, workers, pool, later=None, refill=None) -> bool:
        """Run ``names`` in child processes, ``workers`` at a time, each with an equal share of the race's time.

        ``later``: called while the members run (the map bound's child); True from it settles the
        problem (the best answer is at the bound). ``pool``: the caller's open :class:`ProcessPool`, perhaps
        with members running already (they are collected too; leaving the caller's block stops the rest).
        ``refill``: called once the queue is empty, with whether a slot is free and the keys running;
        ``(key, solver, hint, seed, stop)`` starts one more run, in the place of run ``stop`` if not ``None`` (it is
        killed). Returns True when a member settled the problem (the others are then stopped).
        """
        problem, errors = race.problem, race.errors
        waves = -(-len(names) // workers)  # members per slot, run one after another
        queue = list(names)
        while queue or pool.busy:
            _start_queued(queue, race, pool, seed, hint, options, workers, waves)
            while refill is not None and not queue:
                more = refill(pool.free > 0, [k for k, _ in pool.running()])
                if more is None:
                    break
                key, name, warm, run_seed, stop = more
                if stop is not None:
                    pool.kill(stop)
                    errors[stop] = f"stopped: {key} took its place (a better start)"
                pool.start(key, name, problem, race.hardware, budget=member_budget(problem, race.race),
                           seed=run_seed, hint=warm, options=options, facts=race.session)
            if not pool.busy:
                break
            if later is not None:  # the map bound, in a child of its own while the members run
                if later():
                    for other, _ in pool.running():
                        errors[other] = "stopped: the best answer is at the bound"
                    return True
                finished = pool.wait(timeout=min(0.05, race.race.left()))
                if not finished and not race.race.expired():
                    continue
            else:
                finished = pool.wait(timeout=race.race.left())
            if not finished:
                break  # deadline: leaving the caller's block stops whatever still runs
            settled = False
            for name, kind, payload in finished:  # every run that ended counts, also those after one that settles
                if kind != "ok":
                    errors[name] = payload
                elif race.consider_member(name, payload):
                    settled = True
            if settled:
                for other, _ in pool.running():
                    errors[other] = "stopped: another member settled the problem"
                return True
        for other, _ in pool.sent_answers():  # a member past the deadline: the best answer it sent counts
            kind, payload = pool.stop(other)
            if kind == "ok":
                race.consider_member(other, payload)
            else:
                errors[other] = payload
        for other, _ in pool.running():
            errors[other] = "stopped: time limit"
        return False


def member_budget(problem, race: Budget, slots_left: int = 1) -> Budget:
    """A member's child budget: its share of the race's time left, less what its child needs to validate, score and
    send back its answer (a time per buffer, larger in prefetch mode, whose validation is the slow one: docs/results.md,
    "portfolio's defaults")."""
    reply_seconds = 0.05 + (2e-4 if problem.mode == "prefetch" else 3e-5) * problem.n
    return race.share((1 - CHILD_MARGIN) / max(slots_left, 1), keep=reply_seconds)


def _split_members(names: list[str], lifted: set[str], *, large: bool) -> tuple[list[str], list[str], bool]:
    """``(fast, heavy, large)``: the constructive members run in this process, the others, and whether the problem
    is ``large`` (the default members above ``LARGE`` buffers).

    Above ``LARGE`` buffers constructive members are not time-limited and can take a minute on 10^8-pair traces:
    the cheapest baseline of the facts (greedy-xla's answer, lifted in prefetch mode) is built here instead, and
    every member starts from it (a forked member inherits it). msa keeps a deadline: it stays, with the baselines'
    share of the time (a cut answer says so)."""
    fast = [n for n in names if n in FAST_MEMBERS and n not in lifted]
    if large:
        names = [n for n in names if n not in FAST_MEMBERS or n in TIMED_MEMBERS]
        fast = [n for n in fast if n in TIMED_MEMBERS]
    return fast, [n for n in names if n not in FAST_MEMBERS or n in lifted], large


def _start_queued(queue: list[str], race: _Race, pool: ProcessPool, seed: int, hint, options: dict, workers: int,
                  waves: int) -> None:
    """Start queued members while ``pool`` has a free slot, each with its child budget (a map member on the map
    problem, with its own facts and no prefetch hint: its answer is lifted)."""
    while queue and pool.free > 0:
        slots_left = -(-len(queue) // workers) if waves > 1 else 1
        member = member_budget(race.problem, race.race, slots_left)
        name = queue.pop(0)
        if member.seconds <= MIN_SHARE:
            race.errors[name] = "skipped: no time left"
        elif name in race.lifted:
            pool.start(name, name, race.map_problem, race.hardware, budget=member, seed=seed, hint=None,
                       options=options)
        else:
            pool.start(name, name, race.problem, race.hardware, budget=member, seed=seed, hint=hint, options=options,
                       facts=race.session)


def _forward(problem):
    """A :class:`ProcessPool`'s ``on_incumbent``: a member's better answer, sent on to the portfolio's parent."""
    def forward(key, improvements, incumbent) -> None:
        if incumbent is not None:
            prefetch = incumbent.offsets is None
            source = incumbent.improvement.source
            offer(value=incumbent.improvement.value, source=key if source == key else f"{key}: {source}",
                  problem=problem, offsets=incumbent.offsets, intervals=incumbent.intervals if prefetch else None)
    return forward
