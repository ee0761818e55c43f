"""Run a solver, validate its answer and score it: the one path every result takes.

Data flows one way (problem -> solver -> validator and evaluator -> report), so whatever
a solver claims, the report's ``valid``, ``objective``, ``peak`` and ``estimated_time``
come from :func:`mallocgame.verdict.judge` (:mod:`mallocgame.hardware.validator` and the evaluators).
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from multiprocessing.connection import wait
from typing import Any

# solving imports this module: each reads the other's names at call time, so either may be imported first.
from mallocgame import incumbents, solving  # solving: the one solve path (compare's runs, portfolio's members)
from mallocgame.bounds import Bound
from mallocgame.interrupts import child_signals
from mallocgame.model import InputError, Problem, Solution, Status, offsets_tuple
from mallocgame.protocol import LIMIT_GRACE, options_of
from mallocgame.registry import load_solver
from mallocgame.request import Budget, SolveRequest
from mallocgame.session import session_for
from mallocgame.units import SAME, distinct, format_bytes, format_number, format_percent, format_seconds
from mallocgame.verdict import judge


class UnsupportedMode(ValueError):
    """The solver asked for does not handle the problem's mode."""


@dataclass(frozen=True)
class Report:
    """One solver's validated, scored answer (the report JSON of ``mallocgame solve --json``).

    The fields are attributes (`report.speedup`); `report["speedup"]` reads the same field by its name
    (the JSON report's keys), and [`as_json`][mallocgame.runner.Report.as_json] gives them as a dict.

    Attributes:
        solver: The registered name of the solver that ran.
        mode: The problem's mode: `"map"`, `"pack"` or `"prefetch"`.
        status: `"OPTIMAL"`, `"FEASIBLE"`, `"INFEASIBLE"` or `"UNKNOWN"` (a valid answer is at least
            `"FEASIBLE"`, an invalid one never).
        valid: Whether the validator accepted the answer.
        objective: Seconds saved against all-slow (map and prefetch modes) or the peak address in
            bytes (pack mode); `None` without a valid answer.
        bound: An upper bound on the saving (map and prefetch modes) or a lower bound on the peak
            (pack mode).
        bound_kind: Which bound `bound` is (`"max-live"`, `"lp"`, `"mip"`, `"per-op"`, `"residency"`, ...).
        gap: `(bound - objective) / bound` (map and prefetch) or `(objective - bound) / bound` (pack).
        placed: Buffers in fast memory (map, prefetch) or placed (pack).
        total: Buffers in the problem.
        peak: The highest address in use, in bytes.
        seconds: Wall-clock seconds of the solve.
        estimated_time: The program's estimated run time in seconds with this answer (map and
            prefetch modes).
        time_all_slow: The program's estimated run time in seconds with every buffer in slow memory.
        speedup: `time_all_slow / estimated_time` (map and prefetch modes).
        violation: The first rule an invalid answer breaks (`None` when valid).
        history: The incumbents as `(seconds, objective)` pairs, for anytime curves.
        stats: The solver's own statistics (nodes, iterations, what it fell back to, ...).
        offsets: The validated offsets (map and pack modes; `None` is slow memory); empty when invalid.
        intervals: The validated fast intervals (prefetch mode); empty otherwise.
        bounds: Every bound computed for the problem, by kind (prefetch mode: per-op and residency).
    """

    solver: str
    mode: str
    status: str
    valid: bool
    objective: float | None
    bound: float | None
    bound_kind: str | None
    gap: float | None
    placed: int
    total: int
    peak: int
    seconds: float
    estimated_time: float | None
    time_all_slow: float | None
    speedup: float | None
    violation: str | None = None
    history: list[tuple[float, float]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    offsets: tuple[int | None, ...] = ()
    intervals: tuple = ()  # prefetch mode: the validated FastIntervals
    bounds: dict[str, float] = field(default_factory=dict)  # every bound computed, by kind (prefetch: per-op, residency)

    def __getitem__(self, name: str) -> Any:
        """The field ``name`` (a key of the JSON report), as ``report.name``."""
        if name not in self.__dataclass_fields__:
            raise KeyError(f"{name!r}: a Report has {', '.join(self.__dataclass_fields__)}")
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self.__dataclass_fields__

    def as_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (the report of ``mallocgame solve --json``), without the offsets and intervals."""
        d = asdict(replace(self, offsets=(), intervals=()))  # not a deep copy of 100k offsets to drop
        d.pop("offsets")
        d.pop("intervals")
        d["history"] = [list(h) for h in self.history]
        return d

    def summary(self, *, has_ops: bool = True) -> str:
        """The one line ``solve`` prints, in units a person reads (:mod:`mallocgame.units`): the objective
        and bound as times (map and prefetch modes; plain numbers for a map problem without ops,
        ``has_ops=False``) or bytes (pack mode), the peak in bytes, the solver's wall time.

        >>> r = Report("best-fit", "pack", "FEASIBLE", True, 80.0, 64.0, "max-live", 0.25, 40, 40, 80, 0.0123,
        ...            None, None, None)
        >>> r.summary()
        'best-fit: FEASIBLE objective=80B bound=64B (max-live) gap=25.00% placed=40/40 peak=80B wall=12.3ms'
        """
        pack = self.mode == "pack"
        if pack:
            obj, bound, peak_ = distinct(format_bytes, [None if v is None else int(v)  # byte counts: exact
                                                        for v in (self.objective, self.bound, self.peak)])
        else:
            obj, bound = distinct(format_seconds if has_ops else format_number, [self.objective, self.bound])
            peak_ = format_bytes(self.peak)
        bound = "" if self.bound is None else f" bound={bound}" + (f" ({self.bound_kind})" if self.bound_kind else "")
        gap = "" if self.gap is None else f" gap={format_percent(self.gap)}"
        wall = format_seconds(self.seconds)
        if self.status == str(Status.DOES_NOT_FIT):  # its own status: the peak above the capacity says it all
            return f"{self.solver}: {self.violation}{bound} placed={self.placed}/{self.total} wall={wall}"
        extra = "" if self.valid else f" INVALID: {self.violation}" if self.violation else ""
        if self.stats.get("cut_short"):  # a solver whose time limit left part of the problem undecided says so
            extra += " WARNING: cut short by the time limit (undecided buffers left slow; a longer limit may do better)"
        if self.stats.get("fallback"):  # a solver that left its own method for part of the problem says what it did
            extra += f" NOTE: {self.stats['fallback']}"
        if self.stats.get("stopped_at_limit") and self.valid:  # the parent stopped a solver past its limit
            extra += f" NOTE: {self.stats['stopped_at_limit']}"
        source = self.stats.get("winner") or self.stats.get("source")  # a portfolio's winning member, say
        won = f" source={source}" if self.valid and source else ""
        return (f"{self.solver}: {self.status} objective={obj}{bound}{gap} placed={self.placed}/{self.total} "
                f"peak={peak_} wall={wall}{won}{extra}")


def problem_bound(problem: Problem, hardware, *, tighten: float = 0.0) -> Bound:
    """The tightest bound known for the problem without waiting (:meth:`mallocgame.session.Session.bound`:
    the instant bound or the cached one); ``tighten`` > 0 seconds compute the expensive bound too, once per
    problem (it is kept in the bound cache, :mod:`mallocgame.bound_cache`)."""
    with stdout_to_stderr():  # HiGHS may print; stdout may be a --json document
        return session_for(problem, hardware).bound(tighten=tighten)


def shared_caches(problem: Problem, hardware) -> None:
    """Build what every run of ``problem`` reads (arrays, overlap index, evaluator) once, here.

    Before a fork (``solve``'s :class:`ChildCall`) this is done once for both sides: the child
    solves and the parent computes the bound with the same evaluator, instead of each building
    its own from the problem's objects (on 100k buffers that doubled work and copy-on-write faults).
    """
    session_for(problem, hardware).warm()


def status_at_gap(status: str, gap: float | None, stats: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """OPTIMAL only at gap 0: ``(status, stats)`` of a report whose gap to the reported bound is ``gap``.

    A solver's OPTIMAL (proven for its own model) with a positive gap is reported FEASIBLE, its claim
    kept in ``stats["solver_status"]``; that claim is OPTIMAL again under a bound that closes the gap.

    >>> status_at_gap("OPTIMAL", 0.0262, {})
    ('FEASIBLE', {'solver_status': 'OPTIMAL'})
    >>> status_at_gap("FEASIBLE", 0.0, {'solver_status': 'OPTIMAL'}), status_at_gap("OPTIMAL", None, {})
    (('OPTIMAL', {'solver_status': 'OPTIMAL'}), ('OPTIMAL', {}))
    """
    optimal = str(Status.OPTIMAL)
    if status != optimal and not (status == str(Status.FEASIBLE) and stats.get("solver_status") == optimal):
        return status, stats
    if gap is None or gap == 0:
        return optimal, stats
    return str(Status.FEASIBLE), {**stats, "solver_status": optimal}


def reported_status(status: Status, valid: bool) -> Status:
    """The status a report shows: a valid answer is at least FEASIBLE, an invalid one never OPTIMAL/FEASIBLE."""
    if valid and status in (Status.UNKNOWN, Status.INFEASIBLE):
        return Status.FEASIBLE
    if not valid and status in (Status.OPTIMAL, Status.FEASIBLE):
        return Status.UNKNOWN
    return status


def answer(report: Report, problem: Problem) -> Solution:
    """The validated answer of a report as a Solution (to hand on as a hint)."""
    return Solution(offsets=report.offsets if report.offsets else (None,) * problem.n, status=Status.FEASIBLE,
                    mode=problem.mode, solver=report.solver, intervals=tuple(report.intervals))


def _refusal(problem: Problem, solution: Solution) -> str | None:
    """Why ``solution`` is no answer before any check: proven infeasible, offsets of the wrong length, or
    (pack mode) nothing placed; ``None`` when it goes to the validator."""
    if solution.status is Status.INFEASIBLE:
        return "proven infeasible"
    if problem.mode == "prefetch":
        return None
    offsets = solution.offsets
    complete = len(offsets) == problem.n
    has_answer = complete and (problem.n == 0 or any(o is not None for o in offsets) or problem.mode == "map")
    return None if has_answer else "no solution"


def score(problem: Problem, hardware, solution: Solution, *, seconds: float, bound: Bound | None,
          solver_name: str) -> Report:
    """Validate and score ``solution``; invalid or empty answers yield ``valid=False``.

    Map and prefetch modes report the time saved against all-slow, pack mode the peak.
    """
    prefetch = problem.mode == "prefetch"
    answer_ = tuple(solution.intervals) if prefetch else tuple(solution.offsets)
    with incumbents.scoring():  # in a solving child, the parent's clock of the limit stops meanwhile
        verdict = judge(problem, hardware, answer_, violation=_refusal(problem, solution))
    valid, violation, placed, pk = verdict.valid, verdict.violation, verdict.placed, verdict.peak
    est, slow = verdict.estimated_time, verdict.time_all_slow
    speedup = objective = None
    if valid and est is not None:
        objective = verdict.value
        speedup = slow / est if est > 0 else None
    elif valid:
        objective = float(pk)
    gap = _gap(objective, bound, saving=est is not None)
    status, stats = status_at_gap(str(reported_status(solution.status, valid)), gap, dict(solution.stats))
    if verdict.does_not_fit:
        status = str(Status.DOES_NOT_FIT)
    return Report(
        solver=solver_name, mode=problem.mode, status=status, valid=valid,
        objective=objective, bound=None if bound is None else bound.value,
        bound_kind=None if bound is None else bound.kind, gap=gap, placed=placed, total=problem.n, peak=pk,
        seconds=seconds, estimated_time=est, time_all_slow=slow, speedup=speedup, violation=violation,
        history=[(float(t), float(v)) for t, v in solution.history], stats=stats,
        offsets=answer_ if valid and not prefetch else (), intervals=answer_ if valid and prefetch else (),
        bounds=_bounds_of(bound),
    )


def _gap(objective: float | None, bound: Bound | None, *, saving: bool) -> float | None:
    """``(bound - saving) / bound`` for a time saving (map, prefetch), ``(peak - bound) / bound`` for a peak.

    A saving within :data:`mallocgame.units.SAME` (relative) of its bound is at it (gap 0): the two are
    sums of the same float terms in another order, so they may differ in the last bits.
    """
    if objective is None or bound is None or not bound.value > 0:
        return None
    if saving:
        gap = (bound.value - objective) / bound.value
        return 0.0 if gap <= SAME else gap
    return (objective - bound.value) / bound.value


def _bounds_of(bound: Bound | None) -> dict[str, float]:
    return {} if bound is None else dict(bound.others) or {bound.kind: bound.value}


def with_bound(report: Report, bound: Bound | None) -> Report:
    """``report`` with ``bound`` and the gap it gives (for a bound computed beside the solver)."""
    gap = _gap(report.objective, bound, saving=report.estimated_time is not None)
    status, stats = status_at_gap(report.status, gap, report.stats)
    return replace(report, bound=None if bound is None else bound.value,
                   bound_kind=None if bound is None else bound.kind, bounds=_bounds_of(bound), gap=gap,
                   status=status, stats=stats)


def stopped_at_limit(problem: Problem, hardware, incumbent: incumbents.Incumbent | None, *, solver_name: str,
                     seconds: float, time_limit: float, bound: Bound | None = None, hint: Solution | None = None,
                     improvements: tuple = ()) -> Report:
    """The report of a solver its parent stopped at ``time_limit`` + :data:`~mallocgame.protocol.LIMIT_GRACE`:
    the best answer it sent (``incumbent``, or the ``hint`` it was given if better), validated and scored,
    FEASIBLE, with the note "stopped at the limit" (``stats["stopped_at_limit"]``, its source in
    ``stats["source"]``); with neither, an invalid report that says the solver sent no answer."""
    note = f"stopped at the limit: still running at {time_limit:g} s + {LIMIT_GRACE:g} s grace"
    history = tuple((float(e.seconds), float(e.value)) for e in improvements)
    candidates = []
    if incumbent is not None:
        offsets = (None,) * problem.n if incumbent.offsets is None else offsets_tuple(incumbent.offsets)
        candidates.append((Solution(offsets=offsets, status=Status.FEASIBLE, mode=problem.mode, history=history,
                                    solver=solver_name, intervals=tuple(incumbent.intervals)),
                           incumbent.improvement.source))
    if hint is not None:
        candidates.append((hint.replace(history=history), "hint"))
    best = None
    for solution, source in candidates:
        report = score(problem, hardware, solution, seconds=seconds, bound=bound, solver_name=solver_name)
        report = replace(report, stats={"stopped_at_limit": note, "source": source})
        if best is None or solving.better(report, best):
            best = report
    if best is not None:
        return best
    return Report(solver=solver_name, mode=problem.mode, status=str(Status.UNKNOWN), valid=False, objective=None,
                  bound=None if bound is None else bound.value, bound_kind=None if bound is None else bound.kind,
                  gap=None, placed=0, total=problem.n, peak=0, seconds=seconds, estimated_time=None,
                  time_all_slow=None, speedup=None, violation=f"{note}, and it sent no answer",
                  history=list(history), stats={"stopped_at_limit": note}, bounds=_bounds_of(bound))


def preload(solver: Any) -> None:
    """Import the heavy modules a solver declares (``preload = ("ortools.sat.python.cp_model",)``) before
    its clock starts: OR-Tools' first import takes 0.3-0.8 s, which would come off the solver's time."""
    for module in getattr(solver, "preload", ()) or ():
        try:
            importlib.import_module(module)
        except ImportError:  # the solver says what is missing when it runs
            pass


def run_solver(name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
               hint: Solution | None = None, options: dict[str, Any] | None = None,
               bound: Bound | None = None) -> Report:
    """Load solver ``name``, solve, validate and score. Raises ``SolverLoadError`` for a bad name.

    ``options``: ``{name: value}``; the solver receives those its ``Options`` has (options given to every solver
    of a run, such as ``workers``, reach only those that take them), each value checked."""
    solver = load_solver(name)
    modes = getattr(solver, "modes", frozenset({"map", "pack"}))
    if problem.mode not in modes:
        raise UnsupportedMode(f"solver {name!r} does not support {problem.mode} mode (supports: {', '.join(sorted(modes))})")
    typed = options_of(solver).taken(dict(options or {}))
    preload(solver)
    request = SolveRequest(problem, hardware, Budget.start(time_limit), seed, hint, typed)
    solution = solver.solve(request)
    seconds = time.monotonic() - request.budget.started
    return score(problem, hardware, solution, seconds=seconds, bound=bound, solver_name=name)


# ---------------------------------------------------------------------------- processes

def native_output_to_stderr() -> None:
    """In a forked solver child: file descriptor 1 becomes a copy of 2, for good.

    Solvers never print, but native libraries under them do (HiGHS's ``HighsMipSolverData::...``
    lines, a plugin's C ``printf``); the parent's stdout carries ``--json`` / ``-o -`` documents,
    so whatever a child writes to fd 1 (C or Python) goes to stderr instead.
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr to point at: stdout stays, better than failing the run
        pass


@contextmanager
def stdout_to_stderr():
    """File descriptor 1 points at stderr inside the block and is restored after it: for native code
    run in the main process (the bound's HiGHS) while stdout must stay a document."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


def _child_main(conn, own_group: bool, name: str, problem: Problem, hardware, time_limit: float, seed: int,
                hint: Solution | None, options: dict[str, Any], bound: Bound | None) -> None:
    """Child-process entry of :class:`ProcessPool`: run one solver and send back its Report or one error line."""
    native_output_to_stderr()
    if own_group:
        os.setpgid(0, 0)  # a kill of the group reaches any processes the solver starts
    die_with_parent()
    child_signals()
    lock = threading.Lock()
    incumbents.open_channel(conn, lock, problem, source=name)
    try:
        result = _run_one(name, problem, hardware, time_limit, seed, hint, options, bound)
        incumbents.close_channel()
        with lock:
            conn.send(result)
    finally:
        conn.close()


def _run_one(name: str, problem: Problem, hardware, time_limit: float, seed: int, hint: Solution | None,
             options: dict[str, Any], bound: Bound | None) -> tuple[str, Any]:
    """One run of any executor: ``("ok", Report)`` or ``("error", one line)``, never an exception."""
    try:
        return "ok", solving.solve_with_warm_start(name, problem, hardware, time_limit=time_limit, seed=seed, hint=hint,
                                           options=options, compute_bound=False, bound=bound, keep_hint=False)
    except BaseException as exc:  # any failure of a solver is its run's error, never a traceback
        text = " ".join(str(exc).split())
        return "error", f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def _call_main(conn, fn, args, kwargs, channel=None) -> None:
    """Child-process entry of :func:`call_in_child`; ``channel`` ``(problem, source)``: the solver's better answers
    go to the parent as found (:mod:`mallocgame.incumbents`)."""
    native_output_to_stderr()
    os.setpgid(0, 0)
    die_with_parent()
    child_signals()
    lock = threading.Lock()
    if channel is not None:
        incumbents.open_channel(conn, lock, channel[0], source=channel[1])
    try:
        try:
            result = ("ok", fn(*args, **kwargs))
        except SystemExit as exc:  # a solver's sys.exit is its failure, never the command's exit code
            result = ("raise", RuntimeError(f"it raised SystemExit({exc.code!r})"))
        except BaseException as exc:
            result = ("raise", exc)
        incumbents.close_channel()
        try:
            with lock:
                conn.send(result)
        except Exception:  # an exception that does not pickle: its type and text
            exc = result[1]
            conn.send(("raise", RuntimeError(f"{exc.__class__.__name__}: {exc}")))
    finally:
        conn.close()


def die_with_parent() -> None:
    """Linux: this (forked) process gets SIGKILL when its parent dies, even by SIGKILL.

    A parent killed with ``kill -9`` runs no cleanup; without this its solver runs would go on
    until their time limits, orphaned. Chains: a portfolio's own runs die with the portfolio.
    Elsewhere (no ``prctl``) it does nothing.
    """
    parent = multiprocessing.parent_process()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent.pid:  # the parent died before the prctl
        os._exit(1)


def call_in_child(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a forked child in its own process group; its result or its exception.

    What ``solve`` runs a solver through: a solver inside native code (CP-SAT's C++ search)
    does not see a Python signal handler until it returns, but the parent waits in Python, so
    SIGINT/SIGTERM (as :class:`Interrupted`, see :func:`raise_on_signals`) reach it at once;
    it then kills the child's whole group (the solver and anything it started) and re-raises.
    """
    return ChildCall(fn, *args, **kwargs).result()


class ChildCall:
    """:func:`call_in_child` started now and collected later, so the parent can work meanwhile.

    ``solve`` computes the problem's bound while the solver runs (two cores, and the solver
    keeps its whole time limit). Whatever happens before :meth:`result`, call :meth:`cancel`.
    """

    def __init__(self, fn, *args, **kwargs):
        self._start(fn, args, kwargs, None)

    def _start(self, fn, args, kwargs, channel) -> None:
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self.started = time.monotonic()
        self.sent = incumbents.Received(float("inf"))  # what the child sent (a SolvingCall's)
        self._proc = ctx.Process(target=_call_main, args=(send, fn, args, kwargs, channel), daemon=False)
        self._proc.start()
        send.close()

    @property
    def incumbent(self) -> incumbents.Incumbent | None:
        """The best answer the child sent (:class:`SolvingCall`)."""
        return self.sent.incumbent

    @property
    def improvements(self) -> list[incumbents.Improvement]:
        return self.sent.improvements

    def result(self, timeout: float | None = None):
        """Wait for the child; its result, or its exception raised here.

        With ``timeout`` (seconds), a child still running then is killed and ``TimeoutError`` raised.
        """
        recv, proc = self._recv, self._proc
        until = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                left = None if until is None else max(until - time.monotonic(), 0.0)
                if wait([recv], timeout=0.5 if left is None else min(0.5, left)):
                    message = self._receive()
                    if message is not None:
                        break
                elif not proc.is_alive() and not recv.poll():
                    proc.join(5)
                    raise RuntimeError(f"solver process died (exit code {proc.exitcode})")
                if until is not None and time.monotonic() >= until:
                    raise TimeoutError(f"no answer within {timeout:g} s")
            kind, payload = message
        finally:
            self.cancel()
        if kind == "raise":
            raise payload
        return payload

    def _receive(self):
        """One message of the child: its answer ``(kind, payload)``, or ``None`` for a channel message (kept)."""
        try:
            kind, payload = self._recv.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            raise RuntimeError(f"solver process died (exit code {self._proc.exitcode})") from None
        return None if self.sent.take(kind, payload) else (kind, payload)

    def ready(self) -> bool:
        """Has the child finished (so :meth:`result` returns at once)?"""
        try:
            return self._recv.poll() or not self._proc.is_alive()
        except (OSError, ValueError):  # collected or cancelled already
            return True

    def cancel(self) -> None:
        """Kill the child's group and reap it (a no-op once collected)."""
        self._recv.close()
        _kill_group(self._proc)


# Held while a reader thread of this process runs a caller's callback (it may write to stderr): a fork waits for
# it, so no child starts with a lock taken by a thread the child does not have.
_CALLBACK = threading.Lock()
os.register_at_fork(before=_CALLBACK.acquire, after_in_parent=_CALLBACK.release, after_in_child=_CALLBACK.release)


class SolvingCall(ChildCall):
    """A :class:`ChildCall` whose child sends each better answer of ``problem`` as found
    (:mod:`mallocgame.incumbents`, ``source`` by default), read by a thread of this process.

    :meth:`keep_limit` starts that thread: it keeps the answers (the best in :attr:`incumbent`, each
    :class:`~mallocgame.incumbents.Improvement` in :attr:`improvements`) and kills the child at its
    deadline whatever this process is doing meanwhile (computing the bound, say); :meth:`result` then
    raises ``TimeoutError`` and the best answer sent stays in :attr:`incumbent`.
    """

    def __init__(self, problem: Problem, source: str, fn, *args, **kwargs):
        self._start(fn, args, kwargs, (problem, source))
        self._done = threading.Event()
        self._final: tuple[str, Any] | None = None
        self._reader: threading.Thread | None = None
        self.stopped: float | None = None  # monotonic time the child was stopped at its deadline

    def keep_limit(self, until: float, on_improvement=None) -> None:
        """Read the child from a thread of this process from now on; kill it at monotonic time ``until`` (moved on
        by the time the child spends scoring its answer). ``on_improvement`` is called (from that thread) with
        each better answer's Improvement."""
        if self._reader is None:
            self.sent.until = until
            self._reader = threading.Thread(target=self._read, args=(on_improvement,), daemon=True,
                                            name="mallocgame-solving-child")
            self._reader.start()

    def _read(self, on_improvement) -> None:
        recv, proc, sent = self._recv, self._proc, self.sent
        try:
            while True:
                if sent.due():
                    while recv.poll():  # what it sent by now counts; its answer too, if it came just in time
                        final = self._receive()
                        if final is not None:
                            self._final = final
                            return
                    if sent.due():
                        _kill_group(proc)
                        self.stopped = time.monotonic()
                        self._final = ("limit", None)
                        return
                if recv.poll(min(sent.left(), 0.5)):
                    final = self._receive()
                    if final is not None:
                        self._final = final
                        return
                    if on_improvement is not None:
                        with _CALLBACK:
                            for event in sent.unseen():
                                on_improvement(event)
                elif not proc.is_alive() and not recv.poll():
                    proc.join(5)
                    self._final = ("raise", RuntimeError(f"solver process died (exit code {proc.exitcode})"))
                    return
        except RuntimeError as exc:  # the child died mid-answer
            self._final = ("raise", exc)
        except (OSError, ValueError, EOFError):  # cancelled: the pipe is closed
            self._final = ("raise", RuntimeError("cancelled"))
        finally:
            if on_improvement is not None:
                with _CALLBACK:
                    for event in sent.unseen():
                        on_improvement(event)
            self._done.set()

    def result(self, timeout: float | None = None, on_improvement=None):
        """As :meth:`ChildCall.result`, read by :meth:`keep_limit`'s thread (started here if not yet, with
        ``timeout`` from now): ``TimeoutError`` when the child was stopped at its deadline (its best answer
        is in :attr:`incumbent`)."""
        self.keep_limit(float("inf") if timeout is None else time.monotonic() + timeout, on_improvement)
        try:
            while not self._done.wait(0.5):  # half-second waits: SIGINT/SIGTERM reach this thread at once
                pass
        finally:
            self.cancel()
        kind, payload = self._final
        if kind == "limit":
            raise TimeoutError("stopped at the limit")
        if kind == "raise":
            raise payload
        return payload

    def cancel(self) -> None:
        """Kill the child's group, let the reader thread end, then reap the child and close the pipe."""
        if self._proc.exitcode is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5)  # it sees the closed pipe and ends
        _kill_group(self._proc)
        self._recv.close()


def _kill_group(proc) -> None:
    """SIGKILL the process group led by ``proc`` (or ``proc`` alone when it has no group yet) and reap it."""
    if proc.exitcode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    else:  # the leader is gone; anything it started in its group goes too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.join(5)


class _Pool:
    """What both executors share: ``jobs`` slots, the runs in ``_running``, and a ``with`` block that closes."""

    jobs: int
    _running: dict

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    @property
    def free(self) -> int:
        return self.jobs - len(self._running)

    @property
    def busy(self) -> bool:
        return bool(self._running)


class ProcessPool(_Pool):
    """Solver runs in forked child processes: the one pool of ``compare`` and ``portfolio``.

    The caller schedules (:meth:`start` while :attr:`free` > 0), collects with :meth:`wait`,
    and may :meth:`kill` a run; leaving the ``with`` block kills whatever still runs. With
    ``own_groups`` every run gets its own process group, so a kill also reaches processes
    its solver started (a portfolio inside a comparison); without, runs stay in the
    caller's group and die with it.
    """

    def __init__(self, jobs: int, *, own_groups: bool = True, on_incumbent=None):
        self.jobs = max(int(jobs), 1)
        self.own_groups = own_groups
        self.on_incumbent = on_incumbent
        self._ctx = mp.get_context("fork")
        self._running: dict[Any, tuple[Any, Any, float]] = {}  # connection -> (key, process, started)
        self._runs: dict[Any, _PoolRun] = {}  # connection -> what the run's limit report needs

    def running(self) -> list[tuple[Any, float]]:
        """``(key, started)`` of every run still going (``started`` in monotonic seconds)."""
        return [(key, started) for key, _, started in self._running.values()]

    def start(self, key: Any, name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
              hint: Solution | None = None, options: dict[str, Any] | None = None, bound: Bound | None = None) -> None:
        recv, send = self._ctx.Pipe(duplex=False)
        # Not a daemon: a solver may start processes of its own (portfolio does).
        proc = self._ctx.Process(target=_child_main, args=(send, self.own_groups, name, problem, hardware, time_limit,
                                                           seed, hint, dict(options or {}), bound), daemon=False)
        proc.start()
        send.close()
        self._running[recv] = (key, proc, time.monotonic())
        self._runs[recv] = _PoolRun(name, problem, hardware, time_limit, bound,
                                    incumbents.Received(time.monotonic() + time_limit + LIMIT_GRACE))

    def wait(self, timeout: float | None) -> list[tuple[Any, str, Any]]:
        """Finished runs as ``(key, "ok", Report)`` or ``(key, "error", line)``; waits at most ``timeout`` s.

        A run still going at its time limit + :data:`~mallocgame.protocol.LIMIT_GRACE` is killed and finishes
        with the best answer it sent (:func:`stopped_at_limit`); the answers runs send meanwhile go to
        ``on_incumbent(key, improvements, incumbent)``.
        """
        if not self._running:
            return []
        until = None if timeout is None else time.monotonic() + timeout
        done = []
        while not done and self._running:
            now = time.monotonic()
            due = min(run.sent.left() for run in self._runs.values())
            left = due if until is None else min(until - now, due)
            for conn in wait(list(self._running), timeout=max(left, 0.0)):
                key, proc, _ = self._running[conn]
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)
                    kind, payload = "error", f"solver process died (exit code {proc.exitcode})"
                if self._runs[conn].sent.take(kind, payload):
                    self._improved(key, kind, payload)
                    continue
                del self._running[conn], self._runs[conn]
                conn.close()
                proc.join(5)
                done.append((key, kind, payload))
            now = time.monotonic()
            for conn, run in list(self._runs.items()):
                if run.sent.due() and conn in self._running:
                    key = self._running[conn][0]
                    done.append((key, *self._stop(conn)))
            if until is not None and time.monotonic() >= until:
                break
        return done

    def _improved(self, key, kind: str, payload) -> None:
        if kind == "incumbent" and self.on_incumbent is not None:
            self.on_incumbent(key, *payload)

    def _stop(self, conn) -> tuple[str, Any]:
        """Kill run ``conn`` now: ``("ok", Report)`` of the best answer it sent, else ``("error", line)``."""
        key, proc, started = self._running.pop(conn)
        run = self._runs.pop(conn)
        try:
            while conn.poll():  # what it sent by now counts; its answer too, if it came just in time
                kind, payload = conn.recv()
                if not run.sent.take(kind, payload):
                    self._kill(proc)
                    conn.close()
                    return kind, payload
                self._improved(key, kind, payload)
        except (EOFError, OSError):
            pass
        self._kill(proc)
        conn.close()
        report = stopped_at_limit(run.problem, run.hardware, run.sent.incumbent, solver_name=run.name,
                                  seconds=time.monotonic() - started, time_limit=run.time_limit, bound=run.bound,
                                  improvements=tuple(run.sent.improvements))
        return ("ok", report) if report.valid else ("error", report.violation)

    def sent_answers(self) -> list[tuple[Any, incumbents.Incumbent]]:
        """``(key, best answer sent)`` of every run still going that sent one."""
        return [(self._running[conn][0], run.sent.incumbent) for conn, run in self._runs.items()
                if run.sent.incumbent is not None and conn in self._running]

    def stop(self, key: Any) -> tuple[str, Any] | None:
        """Kill run ``key`` now and report the best answer it sent, as at its limit (``None``: no such run)."""
        for conn, (k, _, _) in list(self._running.items()):
            if k == key:
                return self._stop(conn)
        return None

    def kill(self, key: Any) -> None:
        for conn, (k, proc, _) in list(self._running.items()):
            if k == key:
                self._kill(proc)
                conn.close()
                del self._running[conn]
                self._runs.pop(conn, None)

    def close(self) -> None:
        for conn, (_, proc, _) in list(self._running.items()):
            self._kill(proc)
            conn.close()
        self._running.clear()
        self._runs.clear()

    def _kill(self, proc) -> None:
        try:
            if self.own_groups:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.join(5)


@dataclass
class _PoolRun:
    """What :class:`ProcessPool` keeps of a run to report it should it pass its limit: the request, and what it
    sent (with the time it may run: its limit + :data:`~mallocgame.protocol.LIMIT_GRACE`)."""

    name: str
    problem: Problem
    hardware: Any
    time_limit: float
    bound: Bound | None
    sent: incumbents.Received


# ---------------------------------------------------------------------------- Ray

def check_ray_address(address: str | None) -> None:
    """A ``HOST:PORT`` address that nothing answers on is one line at once (Ray itself retries for minutes)."""
    if not address or address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"--address: expected HOST:PORT, auto or ray://HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise InputError(f"--executor ray: cannot reach a Ray cluster at {address} "
                         f"({exc.strerror or exc.__class__.__name__})") from None


def _ray_run(name: str, problem: Problem, hardware, time_limit: float, seed: int, hint: Solution | None,
             options: dict[str, Any], bound: Bound | None) -> tuple[str, Any]:
    """A Ray task: exactly the local path's run (:func:`run_solver`, so the same validation and scoring).

    In a forked child of the worker (:func:`call_in_child`): the worker waits in Python, so a
    cancel (``KeyboardInterrupt`` in the task) reaches it even while the solver is in native
    code, and kills the solver's whole process group; a solver that dies is this run's error.
    """
    try:
        return call_in_child(_run_one, name, problem, hardware, time_limit, seed, hint, options, bound)
    except RuntimeError as exc:  # the child died
        return "error", str(exc)


class RayPool(_Pool):
    """Solver runs as Ray tasks, with :class:`ProcessPool`'s interface (``compare --executor ray``).

    ``address`` None starts a local Ray runtime (stopped again on close) unless one is already
    running in this process; else it joins that cluster. At most ``max(jobs, cluster CPUs)``
    tasks are in flight, so a run's clock starts about when it does. Results stream back as
    they finish (``ray.wait``); a task whose worker dies or raises is an error of that run alone.
    Ray is imported here only: local runs never need it.
    """

    def __init__(self, jobs: int, *, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray: ray is not installed (pip install 'mallocgame[ray]')") from None
        self._ray = ray
        self._owned = False
        if not ray.is_initialized():
            check_ray_address(address)
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                where = f"at {address}" if address else "locally"
                raise InputError(f"--executor ray: cannot start or reach a Ray cluster {where} "
                                 f"({' '.join(str(exc).split())[:200]})") from None
            self._owned = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.jobs = max(int(jobs), cpus, 1)
        self._task = ray.remote(num_cpus=1, max_retries=0)(_ray_run)
        self._running: dict[Any, tuple[Any, float]] = {}  # ObjectRef -> (key, started)

    def running(self) -> list[tuple[Any, float]]:
        return list(self._running.values())

    def start(self, key: Any, name: str, problem: Problem, hardware, *, time_limit: float, seed: int,
              hint: Solution | None = None, options: dict[str, Any] | None = None, bound: Bound | None = None) -> None:
        ref = self._task.remote(name, problem, hardware, time_limit, seed, hint, dict(options or {}), bound)
        self._running[ref] = (key, time.monotonic())

    def wait(self, timeout: float | None) -> list[tuple[Any, str, Any]]:
        if not self._running:
            return []
        ray = self._ray
        refs = list(self._running)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:  # and whatever else is done by now
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        done = []
        for ref in ready:
            key, _ = self._running.pop(ref)
            try:
                kind, payload = ray.get(ref)
            except Exception as exc:  # the worker died or the task could not run: this run's error only
                text = " ".join(str(exc).split())
                kind, payload = "error", f"ray task failed: {exc.__class__.__name__}: {text[:300]}"
            done.append((key, kind, payload))
        return done

    def kill(self, key: Any) -> None:
        for ref, (k, _) in list(self._running.items()):
            if k == key:
                self._cancel(ref, force=False)  # the task kills its solver's process group
                del self._running[ref]

    def close(self) -> None:
        refs = list(self._running)
        for ref in refs:  # a cancel raises KeyboardInterrupt in the task: it kills its solver's process group
            self._cancel(ref, force=False)
        if refs:
            try:
                _, stuck = self._ray.wait(refs, num_returns=len(refs), timeout=5)
            except Exception:
                stuck = refs
            for ref in stuck:  # still going: kill the worker
                self._cancel(ref)
        self._running.clear()
        if self._owned:
            self._ray.shutdown()  # the local runtime and its workers end with us
            self._owned = False

    def _cancel(self, ref, force: bool = True) -> None:
        try:
            self._ray.cancel(ref, force=force)
        except Exception:  # already finished or gone
            pass
