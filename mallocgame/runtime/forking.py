"""The one fork primitive: a call in a forked child that the parent can read, stop at a limit and kill.

:class:`ChildCall` runs ``fn(*args, **kwargs)`` in a forked child (in its own process group by
default, so a kill reaches whatever the call started). The parent waits in Python (half-second
polls), so SIGINT/SIGTERM (:mod:`mallocgame.runtime.interrupts`) reach it at once even while the child is
in native code (CP-SAT's search, HiGHS's presolve); on any exit -- the answer, the limit, an
interrupt -- the child's group is killed and reaped, and a child whose parent dies gets SIGKILL
(:func:`die_with_parent`), so no run is left orphaned. The child's file descriptor 1 points at
stderr: native code may print, and stdout may carry a ``--json`` document.

The limit is an option of the same call: with a ``channel`` the child sends each better answer as
found (:mod:`mallocgame.runtime.incumbents`), and :meth:`ChildCall.keep_limit` reads them from a thread of
the parent and kills the child at its deadline whatever the parent does meanwhile; the best answer
sent stays in :attr:`ChildCall.incumbent`. What runs in children: ``solve`` and the API's solver
(:func:`mallocgame.engine.solving.solve_beside_bound`), the pools' runs (:mod:`mallocgame.engine.pools`:
``compare`` and the portfolio's members), the bounds' HiGHS (:func:`call_forked`), the portfolio's
map bound, the conformance suite's busy loops.

Example:
    >>> call_in_child(pow, 2, 10)
    1024
    >>> call_forked(pow, 2, 10, timeout=30)
    1024
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable

from mallocgame.runtime import incumbents
from mallocgame.runtime.interrupts import child_signals


class ChildDied(RuntimeError):
    """The child ended without an answer (killed, or it exited)."""


def native_output_to_stderr() -> None:
    """In a forked child: file descriptor 1 becomes a copy of 2, for good.

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


def die_with_parent() -> None:
    """Linux: this (forked) process gets SIGKILL when its parent dies, even by SIGKILL.

    A parent killed with ``kill -9`` runs no cleanup; without this its solver runs would go on
    until their time limits, orphaned. Chains: a portfolio's own runs die with the portfolio.
    Elsewhere (no ``prctl``) it does nothing.
    """
    parent = mp.parent_process()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent.pid:  # the parent died before the prctl
        os._exit(1)


def _child_main(conn, fn: Callable, args: tuple, kwargs: dict, own_group: bool, channel) -> None:
    """Child-process entry of :class:`ChildCall`: ``("ok", result)`` or ``("raise", exception)`` on ``conn``;
    ``channel`` ``(problem, source)``: the call's better answers go to the parent as found."""
    native_output_to_stderr()
    if own_group:
        os.setpgid(0, 0)  # a kill of the group reaches any processes the call starts
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
                if channel is not None:  # the parent judges no sent answer ahead now: this call's answer comes next
                    conn.send(("returned", None))
                conn.send(result)
        except Exception:  # an exception that does not pickle: its type and text
            exc = result[1]
            conn.send(("raise", RuntimeError(f"{exc.__class__.__name__}: {exc}")))
    finally:
        conn.close()


# Held while a reader thread of this process runs a caller's callback (it may write to stderr): a fork waits for
# it, so no child starts with a lock taken by a thread the child does not have.
_CALLBACK = threading.Lock()
os.register_at_fork(before=_CALLBACK.acquire, after_in_parent=_CALLBACK.release, after_in_child=_CALLBACK.release)


class ChildCall:
    """``fn(*args, **kwargs)`` started at once in a forked child in its own process group; :meth:`result` collects it.

    Whatever happens before :meth:`result`, call :meth:`cancel`. :meth:`start` gives the options:
    ``channel=(problem, source)`` opens the child's channel of better answers, ``own_group=False``
    keeps the child in the caller's process group (a portfolio's members die with the portfolio).
    A caller that waits on many children at once (:class:`mallocgame.engine.pools.ProcessPool`) waits on
    :attr:`connection` and reads each message with :meth:`receive`.
    """

    def __init__(self, fn: Callable, *args: Any, **kwargs: Any):
        self._start(fn, args, kwargs, own_group=True, channel=None)

    @classmethod
    def start(cls, fn: Callable, args: tuple = (), kwargs: dict | None = None, *, channel: tuple | None = None,
              own_group: bool = True) -> ChildCall:
        """``fn(*args, **kwargs)`` in a child, with ``channel`` ``(problem, source)`` (its better answers of
        ``problem`` go to this process, ``source`` by default) and in a process group of its own or not."""
        call = cls.__new__(cls)
        call._start(fn, args, dict(kwargs or {}), own_group=own_group, channel=channel)
        return call

    def _start(self, fn: Callable, args: tuple, kwargs: dict, *, own_group: bool, channel) -> None:
        self.name = getattr(fn, "__name__", "the call")
        self.own_group = own_group
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self.started = time.monotonic()
        self.sent = incumbents.Received(float("inf"))  # what the child sent; ``until``: its deadline
        self.stopped: float | None = None  # monotonic time the child was stopped at its deadline
        self._done = threading.Event()
        self._final: tuple[str, Any] | None = None
        self._reader: threading.Thread | None = None
        # Not a daemon: a call may start processes of its own (a portfolio does).
        self._proc = ctx.Process(target=_child_main, args=(send, fn, args, kwargs, own_group, channel), daemon=False)
        self._proc.start()
        send.close()

    @property
    def connection(self):
        """The parent's end of the child's pipe (to wait on with :func:`multiprocessing.connection.wait`)."""
        return self._recv

    @property
    def incumbent(self) -> incumbents.Incumbent | None:
        """The best answer the child sent (with a channel)."""
        return self.sent.incumbent

    @property
    def improvements(self) -> list[incumbents.Improvement]:
        return self.sent.improvements

    def receive(self) -> tuple[str, Any] | None:
        """One message of the child: its answer ``("ok", result)`` or ``("raise", exception)``, or ``None`` for a
        channel message (kept in :attr:`sent`). :class:`ChildDied` when the child ended without an answer."""
        try:
            kind, payload = self._recv.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            raise ChildDied(f"solver process died (exit code {self._proc.exitcode})") from None
        return None if self.sent.take(kind, payload) else (kind, payload)

    def drain(self) -> tuple[str, Any] | None:
        """Every message the child has sent by now: its answer if it came, else ``None`` (an answer that comes
        just in time counts)."""
        while self._recv.poll():
            final = self.receive()
            if final is not None:
                return final
        return None

    def keep_limit(self, until: float, on_improvement: Callable | None = None) -> None:
        """Read the child from a thread of this process from now on; kill it at monotonic time ``until`` (moved on
        by the time the child spends scoring its answer). ``on_improvement`` is called (from that thread) with
        each better answer's :class:`~mallocgame.runtime.incumbents.Improvement`."""
        if self._reader is None:
            self.sent.until = until
            self._reader = threading.Thread(target=self._read, args=(on_improvement,), daemon=True,
                                            name="mallocgame-child-reader")
            self._reader.start()

    def _read(self, on_improvement) -> None:
        recv, proc, sent = self._recv, self._proc, self.sent
        try:
            while True:
                if sent.due():
                    self._final = self.drain()
                    if self._final is not None:
                        return
                    if sent.due():
                        kill_group(proc, self.own_group)
                        self.stopped = time.monotonic()
                        self._final = ("limit", None)
                        return
                if recv.poll(min(sent.left(), 0.5)):
                    self._final = self.receive()
                    if self._final is not None:
                        return
                    if on_improvement is not None:
                        with _CALLBACK:
                            for event in sent.unseen():
                                on_improvement(event)
                elif not proc.is_alive() and not recv.poll():
                    proc.join(5)
                    self._final = ("raise", ChildDied(f"solver process died (exit code {proc.exitcode})"))
                    return
        except ChildDied as exc:  # the child died mid-answer
            self._final = ("raise", exc)
        except (OSError, ValueError, EOFError):  # cancelled: the pipe is closed
            self._final = ("raise", ChildDied("cancelled"))
        finally:
            if on_improvement is not None:
                with _CALLBACK:
                    for event in sent.unseen():
                        on_improvement(event)
            self._done.set()

    def result(self, timeout: float | None = None, on_improvement: Callable | None = None) -> Any:
        """Wait for the child (read by :meth:`keep_limit`'s thread, started here if not yet, with ``timeout``
        seconds from now); its result, or its exception raised here. ``TimeoutError`` when the child was stopped
        at its deadline (with a channel, its best answer is in :attr:`incumbent`); :class:`ChildDied` when it
        ended without an answer. The child is gone afterwards either way."""
        self.keep_limit(float("inf") if timeout is None else time.monotonic() + timeout, on_improvement)
        try:
            while not self._done.wait(0.5):  # half-second waits: SIGINT/SIGTERM reach this thread at once
                pass
        finally:
            self.cancel()
        kind, payload = self._final or ("raise", ChildDied("its reader stopped without an answer"))
        if kind == "limit":
            raise TimeoutError("stopped at the limit")
        if kind == "raise":
            raise payload
        return payload

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child to finish (its answer, its death or its stop at the limit,
        read by :meth:`keep_limit`'s thread, which must be running); has it?"""
        return self._done.wait(timeout)

    def ready(self) -> bool:
        """Has the child finished (so :meth:`result` returns at once)?"""
        if self._reader is not None:
            return self._done.is_set()
        try:
            return self._recv.poll() or not self._proc.is_alive()
        except (OSError, ValueError):  # collected or cancelled already
            return True

    def cancel(self) -> None:
        """Kill the child's group, let the reader thread end, then reap the child and close the pipe."""
        if self._proc.exitcode is None:
            kill_group(self._proc, self.own_group, reap=False)
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5)  # it sees the dead child or the closed pipe and ends
        kill_group(self._proc, self.own_group)
        self._recv.close()


def kill_group(proc, own_group: bool = True, *, reap: bool = True) -> None:
    """SIGKILL the process group led by ``proc`` (``own_group``; or ``proc`` alone when it leads none) and reap it."""
    try:
        if own_group:
            os.killpg(proc.pid, signal.SIGKILL)  # after the leader's exit too: what it started in its group goes
        elif proc.exitcode is None:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        if proc.exitcode is None:
            proc.kill()
    if reap:
        proc.join(5)


def call_in_child(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a forked child in its own process group; its result or its exception.

    A call inside native code (CP-SAT's C++ search) does not see a Python signal handler until it
    returns, but the parent waits in Python, so SIGINT/SIGTERM (as
    :class:`~mallocgame.runtime.interrupts.Interrupted`) reach it at once; it then kills the child's whole
    group (the call and anything it started) and re-raises.
    """
    return ChildCall(fn, *args, **kwargs).result()


def call_forked(fn: Callable, *args: Any, timeout: float, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a forked child; ``None`` when it has not answered within ``timeout`` seconds
    (or died); ``RuntimeError`` (with the child's exception as text) when it raised."""
    call = ChildCall(fn, *args, **kwargs)
    try:
        return call.result(timeout)
    except (TimeoutError, ChildDied):
        return None
    except Exception as exc:
        raise RuntimeError(f"{call.name} failed in its child: {exc.__class__.__name__}: {exc}") from None
