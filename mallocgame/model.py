"""Problem model: buffers, ops, problems and solutions (docs/architecture.md, "The model").

Every type here is a frozen dataclass; solvers work on the numpy views in
[`ProblemArrays`][mallocgame.model.ProblemArrays], which are computed once per problem.

Examples:
    >>> from mallocgame.model import Buffer, Problem
    >>> p = Problem(name="tiny", buffers=(Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5)), capacity=8)
    >>> p.arrays.size.tolist(), p.n
    ([4, 4], 2)
"""

from __future__ import annotations

import dataclasses
import enum
import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Mapping, Sequence

import numpy as np

MODES = ("map", "pack", "prefetch")
BUFFER_KINDS = ("activation", "weight", "input", "output", "scratch")


class InputError(ValueError):
    """Bad input: the message is one line naming the file, row/field and reason."""


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def check_regular_file(path: str | os.PathLike, what: str = "file") -> None:
    """``InputError`` (one line) unless ``path`` is a regular file (or a link to one).

    Called before a file is opened for reading: opening a FIFO would block until a writer
    comes, a device could be read forever. ``what`` names the file in the not-found message.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
        raise InputError(f"{path}: not a regular file ({kind})")


class Status(str, enum.Enum):
    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    DOES_NOT_FIT = "DOES_NOT_FIT"  # pack mode: every buffer placed without overlap, the peak above the capacity

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Buffer:
    """A tensor live on the half-open op range ``[start, end)``.

    ``benefit`` is the value of holding it in fast memory when the input gives one
    (the CSV ``benefit`` column); ``None`` lets the cost evaluator derive it.
    """

    id: str
    size: int
    start: int
    end: int
    benefit: float | None = None
    alignment: int = 1
    kind: str = "activation"

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Operand:
    buffer: str
    access: str  # "read" | "write"
    bytes: int


@dataclass(frozen=True)
class Op:
    """One scheduled op; its index in ``Problem.ops`` is its time step.

    ``transcendentals`` (exp, log, tanh, ...) are counted apart from ``flops``, as XLA's cost
    analysis does; the evaluator's compute time is ``(flops + transcendentals) / peak``.
    """

    id: str
    kind: str = "op"
    flops: float = 0.0
    fixed_bytes: int = 0
    operands: tuple[Operand, ...] = ()
    transcendentals: float = 0.0


@dataclass(frozen=True)
class FastInterval:
    """One stay of buffer ``buffer`` (an index) in fast memory at ``offset`` (prefetch mode, docs/prefetch.md).

    It serves the ops in ``[start, end)`` that touch the buffer and occupies its addresses from
    ``occupied_from`` to ``end``. ``copy_start`` is ``None`` when the value is produced in place
    (``start`` is a pure write of the buffer), else the op after which a prefetch copy starts.
    """

    buffer: int
    offset: int
    start: int
    end: int
    copy_start: int | None = None

    @property
    def occupied_from(self) -> int:
        return self.start if self.copy_start is None else self.copy_start + 1


KEY_WIDTH = 2**32  # op indices of Touches.keys are below this (no program has 4e9 ops)


@dataclass(frozen=True)
class Touches:
    """What the ops do to each buffer (docs/prefetch.md section 1), as CSR arrays over buffers.

    ``ops[ptr[i]:ptr[i+1]]`` are the op indices touching buffer ``i`` (sorted, int64), with
    ``reads``/``writes`` (bool, same shape) saying how. ``defining[i]`` is the first write
    (-1 for a parameter); ``output[i]`` whether the buffer's final value must end in slow memory.
    """

    ptr: np.ndarray  # int64 [n + 1]
    ops: np.ndarray  # int64 [touches]
    reads: np.ndarray  # bool [touches]
    writes: np.ndarray  # bool [touches]
    defining: np.ndarray  # int64 [n]
    output: np.ndarray  # bool [n]

    def of(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ops, reads, writes)`` of buffer ``i``."""
        lo, hi = int(self.ptr[i]), int(self.ptr[i + 1])
        return self.ops[lo:hi], self.reads[lo:hi], self.writes[lo:hi]

    @cached_property
    def keys(self) -> np.ndarray:
        """int64 ``[touches]``: ``buffer * KEY_WIDTH + op``, sorted (CSR over buffers, each buffer's ops sorted), so
        the touches of buffer ``b`` in ops ``[lo, hi)`` are ``keys.searchsorted(b * KEY_WIDTH + [lo, hi])`` for
        ``0 <= lo, hi <= KEY_WIDTH - 1``: every buffer's touches at once (the evaluator's copies, the validator)."""
        buf = np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))
        return buf * KEY_WIDTH + self.ops

    @cached_property
    def last_write(self) -> np.ndarray:
        """int64 ``[touches]``: the index of the last write at or before each touch, over all buffers (-1: none);
        the last write of buffer ``b`` among touches ``[lo, hi)`` is ``last_write[hi - 1]`` when it is ``>= lo``."""
        idx = np.where(self.writes, np.arange(len(self.ops), dtype=np.int64), -1)
        return np.maximum.accumulate(idx) if len(idx) else idx


@dataclass(frozen=True)
class ProblemArrays:
    """Column views of a problem's buffers, each of shape ``[n]`` (int64 unless noted)."""

    size: np.ndarray
    start: np.ndarray
    end: np.ndarray
    alignment: np.ndarray
    benefit: np.ndarray  # float64; NaN where the input gave none


@dataclass(frozen=True)
class Problem:
    """A planning instance: buffers (and optionally ops) plus mode and fast-memory capacity.

    ``capacity`` is ``None`` when unknown; in pack mode that means "minimise the peak".
    """

    name: str
    buffers: tuple[Buffer, ...]
    ops: tuple[Op, ...] = ()
    inplace: tuple[tuple[str, str], ...] = ()
    capacity: int | None = None
    mode: str = "map"
    source: str = ""
    # Dependencies beyond the operands (docs/architecture.md, "Schedules"): ``(before, after)`` op-id
    # pairs, e.g. HLO control-predecessors and token chains; ``original_order`` lists the op ids
    # in the order the program had before a re-scheduling (empty when never re-scheduled).
    control_deps: tuple[tuple[str, str], ...] = ()
    original_order: tuple[str, ...] = ()
    # The hardware spec the problem was prepared for (mallocgame.inputs.load.prepare); not part of
    # its identity. Typed Any: the model sits below hardware/ and must not import it.
    hardware: Any = field(default=None, compare=False, repr=False)

    @property
    def n(self) -> int:
        return len(self.buffers)

    @property
    def has_ops(self) -> bool:
        return bool(self.ops)

    @cached_property
    def arrays(self) -> ProblemArrays:
        bufs = self.buffers
        return ProblemArrays(
            size=np.fromiter(map(attrgetter("size"), bufs), np.int64, len(bufs)),
            start=np.fromiter(map(attrgetter("start"), bufs), np.int64, len(bufs)),
            end=np.fromiter(map(attrgetter("end"), bufs), np.int64, len(bufs)),
            alignment=np.fromiter(map(attrgetter("alignment"), bufs), np.int64, len(bufs)),
            benefit=np.array(list(map(attrgetter("benefit"), bufs)), np.float64).reshape(len(bufs)),  # None: NaN
        )

    @cached_property
    def derived(self) -> dict[Any, Any]:
        """The one store of facts derived from this problem
        ([`derived_facts`][mallocgame.model.derived_facts], `mallocgame.session`)."""
        return {}

    @cached_property
    def index(self) -> dict[str, int]:
        return {b.id: i for i, b in enumerate(self.buffers)}

    @cached_property
    def fingerprint(self) -> tuple:
        """Identity of the buffer set, used to check that a hint belongs to this problem."""
        return tuple((b.id, b.size, b.start, b.end) for b in self.buffers)

    @cached_property
    def touches(self) -> Touches:
        """Per-buffer touches by the ops (empty for problems without ops)."""
        idx = self.index
        access: dict[tuple[int, int], list[bool]] = {}
        for t, op in enumerate(self.ops):
            for o in op.operands:
                flags = access.setdefault((idx[o.buffer], t), [False, False])
                flags[0 if o.access == "read" else 1] = True
        keys = sorted(access)
        buf = np.fromiter((k[0] for k in keys), np.int64, len(keys))
        ops = np.fromiter((k[1] for k in keys), np.int64, len(keys))
        reads = np.fromiter((access[k][0] for k in keys), bool, len(keys))
        writes = np.fromiter((access[k][1] for k in keys), bool, len(keys))
        ptr = np.concatenate(([0], np.cumsum(np.bincount(buf, minlength=self.n)))).astype(np.int64)
        defining = np.full(self.n, -1, np.int64)
        first_write = np.flatnonzero(writes)
        # keys are sorted by (buffer, op): the first write seen for a buffer is its defining op
        for j in first_write[::-1].tolist():
            defining[buf[j]] = ops[j]
        output = np.fromiter((b.kind == "output" for b in self.buffers), bool, self.n)
        return Touches(ptr, ops, reads, writes, defining, output)

    def replace(self, **changes: Any) -> "Problem":
        """A copy with ``changes``; it keeps these buffers' [`arrays`][mallocgame.model.Problem.arrays] when
        the buffers are the same tuple (the arrays depend on nothing else)."""
        new = dataclasses.replace(self, **changes)
        if "arrays" in self.__dict__ and new.buffers is self.buffers:
            new.__dict__["arrays"] = self.__dict__["arrays"]
        return new

    def with_arrays(self, **columns: np.ndarray) -> "Problem":
        """This problem with its [`arrays`][mallocgame.model.Problem.arrays] given (a reader that parsed the
        columns in bulk has them already): ``columns`` are the fields of ``ProblemArrays`` and must hold exactly
        what the buffers say."""
        self.__dict__["arrays"] = ProblemArrays(**columns)
        return self

    def dependencies(self, order: Sequence[str] | None = None) -> list[tuple[int, int]]:
        """Edges ``(u, v)`` between op indices: op ``u`` must run before op ``v`` (sorted, no duplicates).

        Derived from the operands in the op order ``order`` (op ids; default: ``ops`` as they
        stand), per buffer: a write before every later touch up to the next write (reads of
        the value, the next write), every read before the next write; plus ``control_deps``.
        Reads between two writes commute. The buffers of an in-place pair (``inplace``, when not
        yet merged) count as one, so the write into the shared storage stays after every read
        of the old value. Any topological order of these edges is a valid program
        (docs/architecture.md, "Schedules").
        """
        storage: dict[str, str] = {}  # in-place members -> one key per group

        def key(buf: str) -> str:
            while buf in storage:
                buf = storage[buf]
            return buf

        for src, dst in self.inplace:
            a, b = key(src), key(dst)
            if a != b:
                storage[b] = a
        pos = {op.id: t for t, op in enumerate(self.ops)}
        seq = [pos[i] for i in order] if order is not None else range(len(self.ops))
        edges: set[tuple[int, int]] = set()
        last_write: dict[str, int] = {}
        reads_since: dict[str, list[int]] = {}
        for t in seq:
            op = self.ops[t]
            acc: dict[str, list[bool]] = {}
            for o in op.operands:
                acc.setdefault(key(o.buffer), [False, False])[0 if o.access == "read" else 1] = True
            for buf, (r, w) in acc.items():
                lw = last_write.get(buf)
                if lw is not None and lw != t:
                    edges.add((lw, t))
                if w:
                    for u in reads_since.get(buf, ()):
                        if u != t:
                            edges.add((u, t))
                    last_write[buf] = t
                    reads_since[buf] = []
                elif r:
                    reads_since.setdefault(buf, []).append(t)
        for a, b in self.control_deps:
            if a in pos and b in pos and a != b:
                edges.add((pos[a], pos[b]))
        return sorted(edges)


@dataclass(frozen=True)
class Solution:
    """A solver's answer (docs/architecture.md, "Solvers").

    ``offsets[i]`` is the fast-memory offset of ``problem.buffers[i]`` or ``None`` (slow).
    ``objective`` is the solver's own view; the runner re-scores every answer with the
    evaluator. ``history`` holds ``(seconds, objective)`` incumbents for anytime curves.
    """

    offsets: tuple[int | None, ...]
    status: Status
    mode: str = "map"
    objective: float | None = None
    bound: float | None = None
    wall_time: float = 0.0
    history: tuple[tuple[float, float], ...] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)
    solver: str = ""
    # Prefetch mode: the answer is these fast intervals (docs/prefetch.md); ``offsets`` is then
    # all ``None`` and unused.
    intervals: tuple[FastInterval, ...] = ()

    @property
    def placed(self) -> int:
        if self.mode == "prefetch":
            return len({iv.buffer for iv in self.intervals})
        return sum(o is not None for o in self.offsets)

    def replace(self, **changes: Any) -> "Solution":
        return dataclasses.replace(self, **changes)


def offsets_array(offsets: Sequence[int | None]) -> np.ndarray:
    """``offsets`` as int64 ``[n]`` with -1 for slow memory."""
    return np.fromiter((-1 if o is None else o for o in offsets), np.int64, len(offsets))


def offsets_tuple(arr: np.ndarray) -> tuple[int | None, ...]:
    """Inverse of [`offsets_array`][mallocgame.model.offsets_array]."""
    if arr.dtype.kind not in "iu":
        return tuple(None if o < 0 else int(o) for o in arr.tolist())
    values = arr.tolist()  # Python ints already; only the slow ones change (a generator took 1.6 s at 1M)
    for i in np.flatnonzero(arr < 0).tolist():
        values[i] = None
    return tuple(values)


# ---------------------------------------------------------------------------- derived facts

def derived_facts(problem: Problem) -> dict[Any, Any]:
    """The one store of what is derived from ``problem`` and shared by every user in this process.

    Keys are declared by their owners: ``"overlap_index"`` and ``"max_live"`` (`mallocgame.intervals`),
    ``("evaluator", hardware)`` and ``("prefetch_evaluator", hardware)`` (the hardware evaluators'
    ``of``), ``("session", hardware)`` (`mallocgame.session.session_for`, which holds the rest:
    the bound, the baselines) and ``("prefetch_game", hardware)`` (search's prefetch game data).
    It is the problem's declared attribute [`Problem.derived`][mallocgame.model.Problem.derived], below every layer, because
    hardware/ may import only the model and the intervals; held by the problem, it goes with it
    (a global table would keep every problem alive: the facts refer back to it). Per process: a
    forked child inherits what its parent built (copy-on-write) and builds the rest itself. A
    Problem is frozen, so its facts never go stale; ``problem.replace(...)`` starts an empty store.
    """
    return problem.derived
