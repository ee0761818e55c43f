"""The one pool of solver runs: :class:`Pool`, with forked processes (:class:`ProcessPool`) or Ray tasks (:class:`RayPool`).

``compare`` (``--executor local|ray``, :func:`open_pool`) and the portfolio's members run through a
pool. The caller schedules (:meth:`Pool.start` while :attr:`Pool.free` > 0), collects with
:meth:`Pool.wait` (``(key, "ok", Report)`` or ``(key, "error", line)``), may :meth:`Pool.stop` a run
(reported with the best answer it sent) or :meth:`Pool.kill` it; leaving the ``with`` block kills
whatever still runs. Each run is the one solve path (:func:`mallocgame.engine.solving.run_one`) in a
forked child (:class:`mallocgame.runtime.forking.ChildCall`) whose time limit its parent keeps: a run still
going at its limit + :data:`~mallocgame.engine.protocol.LIMIT_GRACE` is stopped and reported with the best
answer it sent (:func:`mallocgame.engine.report.stopped_at_limit`), on a big input judged while the run went
(:class:`mallocgame.engine.solving.StopJudge`: the parent judges while it waits). With Ray the parent is the Ray
task, on whichever node runs it.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable

from mallocgame.bounds.bounds import Bound
from mallocgame.engine.protocol import LIMIT_GRACE
from mallocgame.engine.report import Report
from mallocgame.engine.session import Session
from mallocgame.engine.solving import StopJudge, run_one
from mallocgame.problem.model import InputError, Problem, Solution
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.forking import ChildCall, ChildDied


class Pool:
    """What every pool offers: ``jobs`` slots, the runs going, and a ``with`` block that closes."""

    jobs: int

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def free(self) -> int:
        """Slots free for :meth:`start`."""
        return self.jobs - len(self.running())

    @property
    def busy(self) -> bool:
        """Is any run going?"""
        return bool(self.running())

    def running(self) -> list[tuple[Any, float]]:
        """``(key, started)`` of every run still going (``started`` in monotonic seconds)."""
        raise NotImplementedError

    def start(self, key: Any, name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
              time_limit: float | None = None, hint: Solution | None = None, options: dict[str, Any] | None = None,
              bound: Bound | None = None, facts: Session | None = None) -> None:
        """Start solver ``name`` on ``problem`` as run ``key`` within ``budget`` (a child budget its caller handed
        down; a door gives ``time_limit`` seconds from now instead), its answer scored against ``bound``; ``facts``:
        the problem's derived facts the caller holds, handed to the run (a forked run inherits them)."""
        raise NotImplementedError

    def wait(self, timeout: float | None) -> list[tuple[Any, str, Any]]:
        """Finished runs as ``(key, "ok", Report)`` or ``(key, "error", line)``; waits at most ``timeout`` s."""
        raise NotImplementedError

    def sent_answers(self) -> list[tuple[Any, Any]]:
        """``(key, best answer sent)`` of every run still going that sent one (none where answers do not stream)."""
        return []

    def stop(self, key: Any) -> tuple[str, Any] | None:
        """Kill run ``key`` now and report the best answer it sent, as at its limit (``None``: no such run)."""
        raise NotImplementedError

    def kill(self, key: Any) -> None:
        """Kill run ``key`` (no report)."""
        raise NotImplementedError

    def close(self) -> None:
        """Kill every run still going and free the pool's resources."""
        raise NotImplementedError


def open_pool(executor: str, jobs: int, *, address: str | None = None, on_incumbent: Callable | None = None) -> Pool:
    """The pool of ``executor``: ``"local"`` forked processes, ``"ray"`` Ray tasks (at ``address``, or a local
    runtime). ``on_incumbent(key, improvements, incumbent)``: each better answer a local run sends."""
    if executor == "ray":
        return RayPool(jobs, address=address)
    return ProcessPool(jobs, on_incumbent=on_incumbent)


def _budget(budget: Budget | None, time_limit: float | None) -> Budget:
    """A run's budget: the one handed down, else ``time_limit`` seconds from now (a door's)."""
    if (budget is None) == (time_limit is None):
        raise TypeError("a pool's run takes a budget or a time_limit, one of them")
    return Budget.start(time_limit) if budget is None else budget


def _limit_outcome(report: Report) -> tuple[str, Any]:
    """A run stopped at its limit: ``("ok", Report)`` of the best answer it sent, else ``("error", line)``."""
    return ("ok", report) if report.valid else ("error", report.violation)


def _died(exc: BaseException) -> tuple[str, str]:
    return "error", str(exc)


@dataclass
class _Run:
    """One run of a :class:`ProcessPool`: its key, its child, and its limit's report (judged ahead on a big input)."""

    key: Any
    call: ChildCall
    judge: StopJudge

    def limit_report(self) -> tuple[str, Any]:
        """The run stopped now: the best answer it sent, validated and scored ("stopped at the limit")."""
        return _limit_outcome(self.judge.report(time.monotonic() - self.call.started))


class ProcessPool(Pool):
    """Solver runs in forked children (:class:`~mallocgame.runtime.forking.ChildCall`), ``jobs`` at a time.

    With ``own_groups`` every run gets its own process group, so a kill also reaches processes its solver
    started (a portfolio inside a comparison); without, runs stay in the caller's group and die with it.
    The answers runs send meanwhile go to ``on_incumbent(key, improvements, incumbent)``.
    """

    def __init__(self, jobs: int, *, own_groups: bool = True, on_incumbent: Callable | None = None):
        self.jobs = max(int(jobs), 1)
        self.own_groups = own_groups
        self.on_incumbent = on_incumbent
        self._runs: dict[Any, _Run] = {}  # connection -> run

    def running(self) -> list[tuple[Any, float]]:
        return [(run.key, run.call.started) for run in self._runs.values()]

    def start(self, key: Any, name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
              time_limit: float | None = None, hint: Solution | None = None, options: dict[str, Any] | None = None,
              bound: Bound | None = None, facts: Session | None = None) -> None:
        budget = _budget(budget, time_limit)
        call = ChildCall.start(run_one, (name, problem, hardware, budget, seed, hint, dict(options or {}), bound,
                                         facts), channel=(problem, name), own_group=self.own_groups)
        call.sent.until = budget.deadline + LIMIT_GRACE
        judge = StopJudge(call, problem, hardware, name=name, time_limit=budget.seconds, bound=bound)
        self._runs[call.connection] = _Run(key, call, judge)

    def wait(self, timeout: float | None) -> list[tuple[Any, str, Any]]:
        """As :meth:`Pool.wait`; a run still going at its time limit + :data:`~mallocgame.engine.protocol.LIMIT_GRACE` is
        killed and finishes with the best answer it sent. Meanwhile, with nothing else to do, the latest answer of a
        big input's run is judged (:class:`~mallocgame.engine.solving.StopJudge`; the run due first first), so a stop
        leaves only its report to make."""
        if not self._runs:
            return []
        until = None if timeout is None else time.monotonic() + timeout
        done = []
        while not done and self._runs:
            due = min(run.call.sent.left() for run in self._runs.values())
            left = due if until is None else min(until - time.monotonic(), due)
            judging = [(soon, run) for run in self._runs.values() if (soon := run.judge.pending_in()) is not None]
            ahead = min((run for soon, run in judging if soon == 0.0), key=lambda run: run.call.sent.left(),
                        default=None)
            # only look when an answer to judge is waiting; else wake when one is to be judged
            left = min([left] + [soon for soon, _ in judging])
            for conn in wait(list(self._runs), timeout=max(left, 0.0)):
                run = self._runs[conn]
                try:
                    final = run.call.receive()
                except ChildDied as exc:
                    final = ("ok", _died(exc))
                if final is None:
                    self._improved(run)
                    continue
                self._drop(conn)
                done.append((run.key, *_outcome(final)))
            for conn, run in list(self._runs.items()):
                if run.call.sent.due():
                    done.append((run.key, *self._stop(conn)))
            if not done and ahead is not None and ahead.judge.pending():
                ahead.judge.judge()
            if until is not None and time.monotonic() >= until:
                break
        return done

    def _improved(self, run: _Run) -> None:
        if self.on_incumbent is not None:
            events = run.call.sent.unseen()
            if events:
                self.on_incumbent(run.key, events, run.call.incumbent)

    def _drop(self, conn) -> _Run:
        run = self._runs.pop(conn)
        run.call.cancel()
        return run

    def _stop(self, conn) -> tuple[str, Any]:
        """Kill run ``conn`` now: ``("ok", Report)`` of the best answer it sent, else ``("error", line)``."""
        run = self._runs[conn]
        try:
            final = run.call.drain()  # what it sent by now counts; its answer too, if it came just in time
        except ChildDied:
            final = None
        self._improved(run)
        self._drop(conn)
        return _outcome(final) if final is not None else run.limit_report()

    def sent_answers(self) -> list[tuple[Any, Any]]:
        return [(run.key, run.call.incumbent) for run in self._runs.values() if run.call.incumbent is not None]

    def stop(self, key: Any) -> tuple[str, Any] | None:
        for conn, run in list(self._runs.items()):
            if run.key == key:
                return self._stop(conn)
        return None

    def kill(self, key: Any) -> None:
        for conn, run in list(self._runs.items()):
            if run.key == key:
                self._drop(conn)

    def close(self) -> None:
        for conn in list(self._runs):
            self._drop(conn)


def _outcome(final: tuple[str, Any]) -> tuple[str, Any]:
    """A run's final message as ``("ok", Report)`` or ``("error", line)``: :func:`run_one` returns that pair (its
    failures are its error line); a call that raised anyway (an interrupt in the child) is an error too."""
    kind, payload = final
    if kind == "ok":
        return payload
    text = " ".join(str(payload).split())
    return "error", f"{payload.__class__.__name__}: {text}" if text else payload.__class__.__name__


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
    """A Ray task: exactly a :class:`ProcessPool` run, with the task as the parent that keeps the limit.

    The solver runs in a forked child of the worker (:class:`~mallocgame.runtime.forking.ChildCall`, its better
    answers sent as found); the worker waits in Python, so a cancel (``KeyboardInterrupt`` in the task)
    reaches it even while the solver is in native code, and kills the solver's whole process group. A run
    still going at its limit + :data:`~mallocgame.engine.protocol.LIMIT_GRACE` is stopped and reported with the best
    answer it sent (on a big input judged while it ran: :class:`~mallocgame.engine.solving.StopJudge`); a solver
    that dies is this run's error.
    """
    budget = Budget.start(time_limit)
    call = ChildCall.start(run_one, (name, problem, hardware, budget, seed, hint, options, bound),
                           channel=(problem, name))
    judge = StopJudge(call, problem, hardware, name=name, time_limit=time_limit, bound=bound)
    try:
        call.keep_limit(budget.deadline + LIMIT_GRACE)
        judge.while_running()
    except BaseException:  # a cancel of the task: its solver goes too
        call.cancel()
        raise
    try:
        return call.result()
    except TimeoutError:
        return _limit_outcome(judge.report(call.stopped - call.started))
    except ChildDied as exc:
        return _died(exc)


class RayPool(Pool):
    """Solver runs as Ray tasks (``compare --executor ray``).

    ``address`` None starts a local Ray runtime (stopped again on close) unless one is already
    running in this process; else it joins that cluster. At most ``max(jobs, cluster CPUs)``
    tasks are in flight, so a run's clock starts about when it does. Results stream back as
    they finish (``ray.wait``); a task whose worker dies or raises is an error of that run alone.
    A run's better answers stay in its task (which keeps its limit); :meth:`stop` kills a run
    without a report. Ray is imported here only: local runs never need it.
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

    def start(self, key: Any, name: str, problem: Problem, hardware, *, seed: int, budget: Budget | None = None,
              time_limit: float | None = None, hint: Solution | None = None, options: dict[str, Any] | None = None,
              bound: Bound | None = None, facts: Session | None = None) -> None:
        # another node's monotonic clock is not ours: the task gets the seconds and starts its own budget (the
        # facts stay here: the task builds its own)
        seconds = _budget(budget, time_limit).seconds
        ref = self._task.remote(name, problem, hardware, seconds, seed, hint, dict(options or {}), bound)
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

    def stop(self, key: Any) -> tuple[str, Any] | None:
        for k, _ in self.running():
            if k == key:
                self.kill(key)
                return "error", "stopped (a Ray run's answers stay in its task)"
        return None

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
