"""Problem model: buffers, ops, problems and solutions (docs/architecture.md, "The model").

Every type here is a frozen dataclass; solvers work on the numpy views in
[`ProblemArrays`][mallocgame.problem.model.ProblemArrays], which are computed once per problem.

Examples:
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> p = Problem(name="tiny", buffers=(Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5)), capacity=8)
    >>> p.arrays.size.tolist(), p.n
    ([4, 4], 2)
"""

from __future__ import annotations

import dataclasses
import enum
import os
import stat
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Iterator, Mapping, Sequence, TypeVar, overload

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


_KIND_CODE = {k: c for c, k in enumerate(BUFFER_KINDS)}
_CHUNK = 1 << 16  # buffers made per step when a table is iterated: a bounded number of ints at a time


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_Item = TypeVar("_Item")


class _ColumnTable(Sequence[_Item]):
    """What `BufferTable` and `OpTable` share: a sequence of objects held as columns (``ids`` and the subclass's
    arrays), the objects made by ``_make(lo, hi)`` all at once, the first time one is asked for, and kept."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def materialized(self) -> bool:
        """Whether the objects have been made (by a caller that asked for them)."""
        return self._objects is not None

    def objects(self) -> tuple[_Item, ...]:
        """The items as objects (made once, then kept)."""
        if self._objects is None:
            n = len(self)
            self._objects = tuple(x for lo in range(0, n, _CHUNK) for x in self._make(lo, min(lo + _CHUNK, n)))
        return self._objects

    @overload
    def __getitem__(self, i: int) -> _Item: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[_Item, ...]: ...

    def __getitem__(self, i):
        return self.objects()[i]

    def __iter__(self) -> Iterator[_Item]:
        return iter(self.objects())

    def __hash__(self) -> int:
        return hash(self.objects())

    def __add__(self, other: Sequence[_Item]) -> tuple[_Item, ...]:
        return tuple(self) + tuple(other)

    def __radd__(self, other: Sequence[_Item]) -> tuple[_Item, ...]:
        return tuple(other) + tuple(self)

    def __repr__(self) -> str:
        return repr(self.objects())  # as the tuple of the same items

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k != "_objects"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        self._objects = None


class BufferTable(_ColumnTable[Buffer]):
    """A problem's buffers held as columns: what a reader of a large file builds, one numpy array per field
    and one list of ids, instead of one [`Buffer`][mallocgame.problem.model.Buffer] object per buffer.

    It is a sequence of [`Buffer`][mallocgame.problem.model.Buffer], equal to (and hashing as) the tuple of the same
    buffers: the first time one is asked for (``table[i]``, a slice, iteration, a comparison with a tuple) the
    objects are made, all at once, and kept; code that reads the columns (``Problem.arrays``, ``Problem.ids``)
    never makes them. The columns are read-only; ``kind`` holds indices into ``BUFFER_KINDS`` (uint8), ``benefit`` NaN
    where the input gave none.
    """

    __slots__ = ("ids", "size", "start", "end", "alignment", "benefit", "kind", "_objects")

    def __init__(self, ids: list[str], size: np.ndarray, start: np.ndarray, end: np.ndarray,
                 alignment: np.ndarray, benefit: np.ndarray, kind: np.ndarray):
        n = len(ids)
        self.ids = ids
        self.size, self.start, self.end, self.alignment = (
            _readonly(np.asarray(c, np.int64).reshape(n)) for c in (size, start, end, alignment))
        self.benefit = _readonly(np.asarray(benefit, np.float64).reshape(n))
        self.kind = _readonly(np.asarray(kind, np.uint8).reshape(n))
        self._objects: tuple[Buffer, ...] | None = None

    @classmethod
    def of(cls, buffers: Sequence[Buffer]) -> "BufferTable":
        """The table of ``buffers`` (objects)."""
        if isinstance(buffers, BufferTable):
            return buffers
        n = len(buffers)
        return cls([b.id for b in buffers], np.fromiter((b.size for b in buffers), np.int64, n),
                   np.fromiter((b.start for b in buffers), np.int64, n), np.fromiter((b.end for b in buffers), np.int64, n),
                   np.fromiter((b.alignment for b in buffers), np.int64, n),
                   np.array([np.nan if b.benefit is None else b.benefit for b in buffers], np.float64).reshape(n),
                   np.fromiter((_KIND_CODE[b.kind] for b in buffers), np.uint8, n))

    def replace(self, **columns: Any) -> "BufferTable":
        """A table with some columns replaced (the others shared): ``alignment=...`` and so on."""
        cur = {k: getattr(self, k) for k in ("ids", "size", "start", "end", "alignment", "benefit", "kind")}
        return BufferTable(**{**cur, **columns})

    def _make(self, lo: int, hi: int) -> list[Buffer]:
        benefit = [None if b != b else b for b in self.benefit[lo:hi].tolist()]  # NaN: none given
        kinds = [BUFFER_KINDS[k] for k in self.kind[lo:hi].tolist()]
        return list(map(Buffer, self.ids[lo:hi], self.size[lo:hi].tolist(), self.start[lo:hi].tolist(),
                        self.end[lo:hi].tolist(), benefit, self.alignment[lo:hi].tolist(), kinds))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BufferTable):
            return other is self or (self.ids == other.ids and all(
                np.array_equal(getattr(self, c), getattr(other, c), equal_nan=c == "benefit")
                for c in ("size", "start", "end", "alignment", "benefit", "kind")))
        if isinstance(other, tuple):
            return len(other) == len(self) and self.objects() == other
        return NotImplemented

    __hash__ = _ColumnTable.__hash__  # a class that defines __eq__ loses its inherited __hash__


class OpTable(_ColumnTable[Op]):
    """A problem's ops held as columns, their operands in CSR form: the operands of op ``t`` are
    ``ptr[t]:ptr[t+1]`` of ``operand_buffer`` (an index into ``names``, the buffer ids), ``operand_write``
    (the access is ``"write"``, else ``"read"``) and ``operand_bytes``.

    It is a sequence of [`Op`][mallocgame.problem.model.Op], equal to (and hashing as) the tuple of the same ops: as
    for [`BufferTable`][mallocgame.problem.model.BufferTable], the objects (ops and operands) are made, all at once,
    and kept the first time one is asked for; code that reads ``Problem.op_arrays`` never makes them.
    """

    __slots__ = ("ids", "kinds", "flops", "transcendentals", "fixed_bytes", "ptr", "operand_buffer",
                 "operand_write", "operand_bytes", "names", "_objects")

    def __init__(self, ids: list[str], kinds: list[str], flops: np.ndarray, transcendentals: np.ndarray,
                 fixed_bytes: np.ndarray, ptr: np.ndarray, operand_buffer: np.ndarray, operand_write: np.ndarray,
                 operand_bytes: np.ndarray, names: list[str]):
        self.ids, self.kinds, self.names = ids, kinds, names
        self.flops = _readonly(np.asarray(flops, np.float64))
        self.transcendentals = _readonly(np.asarray(transcendentals, np.float64))
        self.fixed_bytes = _readonly(np.asarray(fixed_bytes, np.int64))
        self.ptr = _readonly(np.asarray(ptr, np.int64))
        self.operand_buffer = _readonly(np.asarray(operand_buffer, np.int64))
        self.operand_write = _readonly(np.asarray(operand_write, bool))
        self.operand_bytes = _readonly(np.asarray(operand_bytes, np.int64))
        self._objects: tuple[Op, ...] | None = None

    def _make(self, lo: int, hi: int) -> list[Op]:
        a, b = int(self.ptr[lo]), int(self.ptr[hi])
        names = self.names
        operands = list(map(Operand, [names[k] for k in self.operand_buffer[a:b].tolist()],
                            ["write" if w else "read" for w in self.operand_write[a:b].tolist()],
                            self.operand_bytes[a:b].tolist()))
        cuts = (self.ptr[lo:hi + 1] - a).tolist()
        return [Op(i, k, f, x, tuple(operands[cuts[j]:cuts[j + 1]]), transcendentals=tr)
                for j, (i, k, f, x, tr) in enumerate(zip(self.ids[lo:hi], self.kinds[lo:hi], self.flops[lo:hi].tolist(),
                                                         self.fixed_bytes[lo:hi].tolist(),
                                                         self.transcendentals[lo:hi].tolist()))]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (OpTable, tuple)):
            return other is self or (len(other) == len(self) and self.objects() == tuple(other))
        return NotImplemented

    __hash__ = _ColumnTable.__hash__  # a class that defines __eq__ loses its inherited __hash__



@dataclass(frozen=True)
class OpArrays:
    """Column views of a problem's ops and operands: ``op_of``, ``buf_of`` (an index into
    ``problem.buffers``), ``nbytes`` and ``write`` (bool) of shape ``[n_operands]``, in op order then operand
    order; ``flops``, ``transcendentals`` (float64) and ``fixed_bytes`` of shape ``[n_ops]``."""

    op_of: np.ndarray
    buf_of: np.ndarray
    nbytes: np.ndarray
    write: np.ndarray
    flops: np.ndarray
    transcendentals: np.ndarray
    fixed_bytes: np.ndarray


@dataclass(frozen=True)
class Problem:
    """A planning instance: buffers (and optionally ops) plus mode and fast-memory capacity.

    ``capacity`` is ``None`` when unknown; in pack mode that means "minimise the peak".
    ``buffers`` and ``ops`` are tuples, or, as the readers build large inputs, a
    [`BufferTable`][mallocgame.problem.model.BufferTable] and an [`OpTable`][mallocgame.problem.model.OpTable]: sequences
    of the same objects held as columns ([`arrays`][mallocgame.problem.model.Problem.arrays] and
    [`op_arrays`][mallocgame.problem.model.Problem.op_arrays] are then those columns).
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
        if isinstance(bufs, BufferTable):
            return ProblemArrays(size=bufs.size, start=bufs.start, end=bufs.end, alignment=bufs.alignment,
                                 benefit=bufs.benefit)
        return ProblemArrays(
            size=np.fromiter(map(attrgetter("size"), bufs), np.int64, len(bufs)),
            start=np.fromiter(map(attrgetter("start"), bufs), np.int64, len(bufs)),
            end=np.fromiter(map(attrgetter("end"), bufs), np.int64, len(bufs)),
            alignment=np.fromiter(map(attrgetter("alignment"), bufs), np.int64, len(bufs)),
            benefit=np.array(list(map(attrgetter("benefit"), bufs)), np.float64).reshape(len(bufs)),  # None: NaN
        )

    @cached_property
    def ids(self) -> list[str]:
        """The buffer ids, in buffer order."""
        bufs = self.buffers
        return bufs.ids if isinstance(bufs, BufferTable) else [b.id for b in bufs]

    @cached_property
    def op_arrays(self) -> OpArrays:
        """The ops' and operands' columns ([`OpArrays`][mallocgame.problem.model.OpArrays])."""
        ops = self.ops
        if isinstance(ops, OpTable):
            n_ops = len(ops)
            op_of = np.repeat(np.arange(n_ops, dtype=np.int64), np.diff(ops.ptr))
            if ops.names is self.ids:
                buf_of = ops.operand_buffer
            else:  # the op table names the buffers of another table (a copy of the problem): by id
                idx, names = self.index, ops.names
                buf_of = np.fromiter((idx[names[k]] for k in ops.operand_buffer.tolist()), np.int64,
                                     len(ops.operand_buffer))
            return OpArrays(op_of, buf_of, ops.operand_bytes, ops.operand_write, ops.flops, ops.transcendentals,
                            ops.fixed_bytes)
        idx = self.index
        operands = [o for op in ops for o in op.operands]
        n = len(operands)
        return OpArrays(
            op_of=np.repeat(np.arange(len(ops), dtype=np.int64), [len(op.operands) for op in ops]),
            buf_of=np.fromiter(map(idx.__getitem__, map(attrgetter("buffer"), operands)), np.int64, n),
            nbytes=np.fromiter(map(attrgetter("bytes"), operands), np.int64, n),
            write=np.fromiter((o.access != "read" for o in operands), bool, n),
            flops=np.fromiter((op.flops for op in ops), np.float64, len(ops)),
            transcendentals=np.fromiter((op.transcendentals for op in ops), np.float64, len(ops)),
            fixed_bytes=np.fromiter((op.fixed_bytes for op in ops), np.int64, len(ops)),
        )

    @cached_property
    def index(self) -> dict[str, int]:
        return dict(zip(self.ids, range(self.n)))

    @cached_property
    def fingerprint(self) -> tuple:
        """Identity of the buffer set, used to check that a hint belongs to this problem."""
        a = self.arrays
        return tuple(zip(self.ids, a.size.tolist(), a.start.tolist(), a.end.tolist()))

    @cached_property
    def touches(self) -> Touches:
        """Per-buffer touches by the ops (empty for problems without ops)."""
        oa = self.op_arrays
        # one touch per (buffer, op) pair, sorted by buffer then op, read/write flags of its operands OR-ed
        key = oa.buf_of * max(len(self.ops), 1) + oa.op_of
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1]))) if len(key) else np.zeros(0, np.int64)
        write = oa.write[order]
        writes = np.logical_or.reduceat(write, first) if len(key) else np.zeros(0, bool)
        reads = np.logical_or.reduceat(~write, first) if len(key) else np.zeros(0, bool)
        buf = oa.buf_of[order][first]
        ops = oa.op_of[order][first]
        ptr = np.concatenate(([0], np.cumsum(np.bincount(buf, minlength=self.n)))).astype(np.int64)
        defining = np.full(self.n, -1, np.int64)
        first_write = np.flatnonzero(writes)
        # touches are sorted by (buffer, op): the first write seen for a buffer is its defining op
        written, at = np.unique(buf[first_write], return_index=True)
        defining[written] = ops[first_write[at]]
        bufs = self.buffers
        output = (bufs.kind == BUFFER_KINDS.index("output") if isinstance(bufs, BufferTable) else
                  np.fromiter((b.kind == "output" for b in bufs), bool, self.n))
        return Touches(ptr, ops, reads, writes, defining, output)

    def replace(self, **changes: Any) -> "Problem":
        """A copy with ``changes``; it keeps these buffers' [`arrays`][mallocgame.problem.model.Problem.arrays] when
        the buffers are the same tuple (the arrays depend on nothing else)."""
        new = dataclasses.replace(self, **changes)
        if "arrays" in self.__dict__ and new.buffers is self.buffers:
            new.__dict__["arrays"] = self.__dict__["arrays"]
        return new

    def with_arrays(self, **columns: np.ndarray) -> "Problem":
        """This problem with its [`arrays`][mallocgame.problem.model.Problem.arrays] given (a reader that parsed the
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
    """Inverse of [`offsets_array`][mallocgame.problem.model.offsets_array]."""
    if arr.dtype.kind not in "iu":
        return tuple(None if o < 0 else int(o) for o in arr.tolist())
    values = arr.tolist()  # Python ints already; only the slow ones change (no generator over every buffer)
    for i in np.flatnonzero(arr < 0).tolist():
        values[i] = None
    return tuple(values)


# ---------------------------------------------------------------------------- derived facts

_FACTS: dict[int, dict[Any, Any]] = {}  # id(problem) -> what is derived from it; the entry goes with the problem


def derived_facts(problem: Problem) -> dict[Any, Any]:
    """The one store of what is derived from ``problem`` and shared by every user in this process.

    Keys are declared by their owners: ``"overlap_index"`` and ``"max_live"`` (`mallocgame.problem.intervals`),
    ``("evaluator", hardware)`` and ``("prefetch_evaluator", hardware)`` (the hardware evaluators'
    ``of``), ``("session", hardware)`` (`mallocgame.engine.session.session_for`: the facts a request hands its solver,
    which hold the rest: the bound, the baselines), ``("prefetch_game", hardware)`` (search's prefetch game data),
    ``"interference_graph"`` and ``"graph_conflicts"`` (`mallocgame.problem.graph`), ``("bound_key", hardware)``
    (`mallocgame.bounds.bound_cache`), ``"work_units"`` (`mallocgame.engine.session`).

    It lives outside the frozen problem, in a table keyed by the problem object's identity (two equal problems
    have a store each; ``problem.replace(...)`` starts an empty one), below every layer because hardware/ may import
    only the model and the intervals. A problem's entry goes when the problem is collected (`weakref.finalize`);
    a fact that refers back to its problem holds it weakly (`ProblemRef`), so the table keeps no problem alive.
    Per process: a forked child inherits what its parent built (copy-on-write) and builds the rest itself.
    A Problem is frozen, so its facts never go stale.
    """
    key = id(problem)
    facts = _FACTS.get(key)
    if facts is None:
        facts = _FACTS[key] = {}
        weakref.finalize(problem, _FACTS.pop, key, None)
    return facts


class ProblemRef:
    """A derived fact's attribute naming the problem it was derived from, held weakly, so that the store of
    derived facts (`derived_facts`) keeps no problem alive; reading it once the problem is gone raises
    `ReferenceError`.

    Examples:
        >>> class Fact:
        ...     problem = ProblemRef()
        ...     def __init__(self, problem):
        ...         self.problem = problem
        >>> p = Problem("p", (Buffer("a", 4, 0, 2),), capacity=8)
        >>> Fact(p).problem is p
        True
        >>> Fact(p.replace(name="gone")).problem
        Traceback (most recent call last):
        ...
        ReferenceError: the problem this Fact was derived from is gone
    """

    def __set_name__(self, owner, name: str) -> None:
        self.slot = f"_{name}_ref"

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        problem = obj.__dict__[self.slot]()
        if problem is None:
            raise ReferenceError(f"the problem this {type(obj).__name__} was derived from is gone")
        return problem

    def __set__(self, obj, problem: Problem) -> None:
        obj.__dict__[self.slot] = weakref.ref(problem)
