"""Shared machinery of the importers: a workload builder and the import summary.

Every importer records ops in schedule order (op index = time step) with the buffers each
op reads and writes; :meth:`WorkloadBuilder.build` then derives the live ranges
(``start`` = first op touching a buffer, ``end`` = last op touching it + 1, half-open), so
by construction every op touches its buffers only inside their live ranges, which is what
:func:`mallocgame.io.parse_workload` checks.

Example:
    >>> b = WorkloadBuilder("tiny")
    >>> a = b.add_buffer("a", 64, "input"); x = b.add_buffer("x", 64); y = b.add_buffer("y", 64, "output")
    >>> _ = b.add_op("neg", "elementwise", 16, reads=[(a, 64)], writes=[(x, 64)], inplace=[(a, x)])
    >>> _ = b.add_op("relu", "elementwise", 16, reads=[(x, 64)], writes=[(y, 64)], inplace=[(x, y)])
    >>> p = b.build(); [(q.id, q.start, q.end) for q in p.buffers], p.inplace  # inputs are never reused
    ([('a', 0, 1), ('x', 0, 2), ('y', 1, 2)], (('x', 'y'),))
    >>> s = summarize(p); (s.ops, s.buffers, s.flops, s.max_live_bytes)
    (2, 3, 32.0, 128)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from mallocgame.intervals import max_live
from mallocgame.model import BUFFER_KINDS, Buffer, InputError, Op, Operand, Problem


@dataclass
class _PendingOp:
    id: str
    kind: str
    flops: float
    operands: dict[tuple[str, str], int] = field(default_factory=dict)  # (buffer, access) -> bytes


class WorkloadBuilder:
    """Collects buffers and scheduled ops, then builds a ``map``-mode :class:`Problem`.

    ``inplace`` candidates given to :meth:`add_op` are kept only when they hold in the
    final schedule: the input buffer dies at that op (its last touch), the output is born
    there (its first touch), the input is an activation (inputs, weights and outputs belong
    to the caller and are never reused), and neither is already in another pair.
    """

    def __init__(self, name: str, source: str = "", alignment: int = 1):
        self.name = name
        self.source = source
        self.alignment = alignment
        self.sizes: dict[str, int] = {}
        self.kinds: dict[str, str] = {}
        self.ops: list[_PendingOp] = []
        self._op_ids: set[str] = set()
        self._inplace: list[tuple[int, str, str]] = []

    # ----------------------------------------------------------------- recording
    def unique_id(self, wanted: str, taken: Iterable[str] | set[str] | dict) -> str:
        if wanted not in taken:
            return wanted
        k = 1
        while f"{wanted}~{k}" in taken:
            k += 1
        return f"{wanted}~{k}"

    def add_buffer(self, wanted_id: str, size: int, kind: str = "activation") -> str:
        """Register a buffer of ``size`` bytes; returns its (made unique) id."""
        if kind not in BUFFER_KINDS:
            raise ValueError(f"unknown buffer kind {kind!r}")
        bid = self.unique_id(wanted_id, self.sizes)
        self.sizes[bid] = int(size)
        self.kinds[bid] = kind
        return bid

    def set_kind(self, buffer_id: str, kind: str) -> None:
        if kind not in BUFFER_KINDS:
            raise ValueError(f"unknown buffer kind {kind!r}")
        self.kinds[buffer_id] = kind

    def add_op(
        self,
        wanted_id: str,
        kind: str,
        flops: float,
        reads: Sequence[tuple[str, int]] = (),
        writes: Sequence[tuple[str, int]] = (),
        inplace: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Append an op (its index is its time step); returns that index.

        A buffer read (or written) twice by the op appears once, with the larger byte count.
        """
        oid = self.unique_id(wanted_id, self._op_ids)
        self._op_ids.add(oid)
        op = _PendingOp(oid, kind, float(flops))
        for access, items in (("read", reads), ("write", writes)):
            for buf, nbytes in items:
                if buf not in self.sizes:
                    raise KeyError(f"op {oid}: unknown buffer {buf!r}")
                key = (buf, access)
                op.operands[key] = max(op.operands.get(key, 0), int(nbytes))
        t = len(self.ops)
        self.ops.append(op)
        for src, dst in inplace:
            self._inplace.append((t, src, dst))
        return t

    # ----------------------------------------------------------------- building
    def build(self, *, whole_program: Iterable[str] = ()) -> Problem:
        """The problem, with tight live ranges; ``whole_program`` buffers live on ``[0, T)``.

        Buffers no op touches are left out (they cannot have a live range).
        """
        if not self.ops:
            raise InputError(f"{self.source or self.name}: nothing to import: the program has no ops")
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for t, op in enumerate(self.ops):
            for buf, _access in op.operands:
                first.setdefault(buf, t)
                last[buf] = t
        horizon = len(self.ops)
        whole = set(whole_program)
        buffers = []
        for bid, size in self.sizes.items():
            if bid not in first or size <= 0:
                continue
            start, end = (0, horizon) if bid in whole else (first[bid], last[bid] + 1)
            buffers.append(Buffer(bid, size, start, end, alignment=self.alignment, kind=self.kinds[bid]))
        kept = {b.id for b in buffers}
        ops = tuple(
            Op(op.id, op.kind, op.flops, 0,
               tuple(Operand(buf, access, nbytes) for (buf, access), nbytes in op.operands.items() if buf in kept))
            for op in self.ops
        )
        inplace, used_src, used_dst = [], set(), set()
        for t, src, dst in self._inplace:
            if src in kept and dst in kept and src not in whole and src not in used_src and dst not in used_dst \
                    and self.kinds[src] not in ("input", "weight", "output") \
                    and last[src] == t and first[dst] == t and src != dst:
                inplace.append((src, dst))
                used_src.add(src)
                used_dst.add(dst)
        return Problem(name=self.name, buffers=tuple(buffers), ops=ops, inplace=tuple(inplace),
                       capacity=None, mode="map", source=self.source)


# --------------------------------------------------------------------- summaries

@dataclass(frozen=True)
class ImportSummary:
    """What every ``mallocgame import`` command prints."""

    ops: int
    buffers: int
    flops: float
    max_live_bytes: int

    def line(self) -> str:
        return (f"ops={self.ops} buffers={self.buffers} flops={self.flops:.6g} "
                f"max_live_bytes={self.max_live_bytes}")


def summarize(problem: Problem) -> ImportSummary:
    """Ops, buffers, total FLOPs and max live bytes of an imported workload."""
    return ImportSummary(
        ops=len(problem.ops),
        buffers=problem.n,
        flops=float(sum(op.flops for op in problem.ops)),
        max_live_bytes=max_live(problem),
    )


def buffer_leaves(value) -> list[str]:
    """Buffer ids in a possibly nested (tuple/list) value; ``None`` has none."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out = []
    for item in value:
        out.extend(buffer_leaves(item))
    return out
