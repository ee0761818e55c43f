"""Shared machinery of the importers: a workload builder and the import summary.

Every importer records ops in schedule order (op index = time step) with the buffers each
op reads and writes; :meth:`WorkloadBuilder.build` then derives the live ranges (half-open
``[start, end)``, ``T`` = number of ops), as a compiled program holds its buffers:

* **parameters** -- buffers of kind ``input`` or ``weight`` that no op writes (the program's
  arguments, its constants and weights) -- are live for the whole program, ``[0, T)``: the
  caller owns them before the first op and after the last (XLA keeps entry parameters live
  to the end the same way); a **donated** parameter (:meth:`WorkloadBuilder.donate`) is handed
  to the program, which may reuse its storage after its last use: it lives from 0 to its last
  use + 1;
* **outputs** (kind ``output``) live from the op that first touches them to the end, ``T``;
* every other buffer from the first op touching it to the last one + 1.

So every op touches its buffers only inside their live ranges, which is what
:func:`mallocgame.formats.io.parse_workload` checks. In-place pairs (an op's output taking the storage
of a dying operand, or a donated parameter holding an output) are recorded as ``inplace``
pairs; the reader merges each chain into one storage buffer (:mod:`mallocgame.problem.aliasing`), and
:func:`summarize` reports the merged problem, as ``mallocgame info`` will see it.

Example:
    >>> b = WorkloadBuilder("tiny")
    >>> a = b.add_buffer("a", 64, "input"); x = b.add_buffer("x", 64); y = b.add_buffer("y", 64, "output")
    >>> _ = b.add_op("neg", "elementwise", 16, reads=[(a, 64)], writes=[(x, 64)], inplace=[(a, x)])
    >>> _ = b.add_op("exp", "elementwise", 0, reads=[(x, 64)], writes=[(y, 64)], inplace=[(x, y)], transcendentals=16)
    >>> p = b.build(); [(q.id, q.start, q.end) for q in p.buffers], p.inplace  # inputs are never reused in place
    ([('a', 0, 2), ('x', 0, 2), ('y', 1, 2)], (('x', 'y'),))
    >>> s = summarize(p); (s.ops, s.buffers, s.flops, s.transcendentals, s.max_live_bytes)  # x and y: one buffer
    (2, 2, 16.0, 16.0, 128)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from mallocgame.formats.io import MAX_INT
from mallocgame.problem.aliasing import merge_inplace
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import BUFFER_KINDS, Buffer, InputError, Op, Operand, Problem


@dataclass
class _PendingOp:
    id: str
    kind: str
    flops: float
    transcendentals: float
    operands: dict[tuple[str, str], int] = field(default_factory=dict)  # (buffer, access) -> bytes


class WorkloadBuilder:
    """Collects buffers and scheduled ops, then builds a ``map``-mode :class:`Problem`.

    ``inplace`` candidates given to :meth:`add_op` are kept only when they hold in the
    final schedule: the input buffer dies at that op (its last touch), the output is born
    there (its first touch), the input is an activation (inputs, weights and outputs belong
    to the caller and are never reused), neither is already in another pair, and the output
    does not hold a donated parameter. A donation (:meth:`donate`) becomes the pair
    ``(parameter, output)`` when the parameter's last use is the op that first writes the
    output (the new value written over the old, XLA's in-place update); when the output is
    written later, the two live ranges do not meet and there is nothing to share (XLA reuses
    the storage in between for other buffers).
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
        self._donations: list[tuple[str, str]] = []
        self._carried: list[tuple[str, str]] = []  # (a loop-carried value, its next value)
        self._control: list[tuple[int, int]] = []  # (op index before, op index after)

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
        transcendentals: float = 0.0,
        after: Iterable[int] = (),
    ) -> int:
        """Append an op (its index is its time step); returns that index.

        A buffer read (or written) twice by the op appears once, with the larger byte count.
        ``after`` lists indices of earlier ops this one must follow beyond what the buffers say
        (control dependencies: HLO control-predecessors, token chains); they become the
        problem's ``control_deps``.
        """
        oid = self.unique_id(wanted_id, self._op_ids)
        self._op_ids.add(oid)
        op = _PendingOp(oid, kind, float(flops), float(transcendentals))
        for access, items in (("read", reads), ("write", writes)):
            for buf, nbytes in items:
                if buf not in self.sizes:
                    raise KeyError(f"op {oid}: unknown buffer {buf!r}")
                key = (buf, access)
                op.operands[key] = max(op.operands.get(key, 0), int(nbytes))
        t = len(self.ops)
        self.ops.append(op)
        for u in sorted(set(after)):
            if not 0 <= u < t:
                raise ValueError(f"op {oid}: control predecessor {u} is not an earlier op")
            self._control.append((u, t))
        for src, dst in inplace:
            self._inplace.append((t, src, dst))
        return t

    def donate(self, param: str, output: str) -> None:
        """Parameter ``param`` is donated: its storage may hold ``output`` (HLO ``input_output_alias``)."""
        for buf in (param, output):
            if buf not in self.sizes:
                raise KeyError(f"donation: unknown buffer {buf!r}")
        self._donations.append((param, output))

    def carry(self, old: str, new: str) -> None:
        """``new`` is the next value of the loop-carried ``old`` (XLA's while aliasing: the loop's operand, its
        body's parameter and root and its result are one buffer): they share storage when ``old`` is an
        activation whose last touch is no later than ``new``'s first (else XLA inserts a copy, and so do we:
        two buffers). See :meth:`build`."""
        for buf in (old, new):
            if buf not in self.sizes:
                raise KeyError(f"loop-carried value: unknown buffer {buf!r}")
        self._carried.append((old, new))

    # ----------------------------------------------------------------- building
    def build(self, *, tight: Iterable[str] = ()) -> Problem:
        """The problem with the live ranges of the module docstring.

        Parameters named in ``tight`` keep first-to-last-use ranges instead of ``[0, T)``
        (torch's ``weights="use"``). Buffers no op touches are left out (they cannot have a
        live range), and so are the pairs naming them.
        """
        where = self.source or self.name
        if not self.ops:
            raise InputError(f"{where}: nothing to import: the program has no ops")
        self._check_sizes(where)
        touches = self._touches()
        buffers = self._buffers(touches, set(tight))
        kept = {b.id for b in buffers}
        ops = tuple(
            Op(op.id, op.kind, op.flops, 0,
               tuple(Operand(buf, access, nbytes) for (buf, access), nbytes in op.operands.items() if buf in kept),
               transcendentals=op.transcendentals)
            for op in self.ops
        )
        used_src: set[str] = set()
        used_dst: set[str] = set()
        donations, freed_at = self._kept_donations(kept, touches, used_src, used_dst)
        inplace = self._kept_inplace(kept, touches, freed_at, used_src, used_dst)
        carried = self._kept_carried(kept, touches, set(inplace + donations))
        control = tuple((ops[u].id, ops[t].id) for u, t in self._control)
        return Problem(name=self.name, buffers=tuple(buffers), ops=ops, inplace=tuple(inplace + donations + carried),
                       capacity=None, mode="map", source=self.source, control_deps=control)

    def _kept_carried(self, kept: set[str], touches: "_Touches", pairs: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """The loop-carried pairs (:meth:`carry`) that share storage: both kept, the old value an activation (a
        parameter carried into a loop is copied, as XLA does for a value it may not overwrite), the new one no
        parameter, and the old value's last touch no later than the new one's first (the body reads the old
        value before it writes the new one in its place). A chain of them is one buffer over the whole loop
        (:func:`mallocgame.problem.aliasing.merge_inplace`)."""
        first, last = touches.first, touches.last
        return [(old, new) for old, new in dict.fromkeys(self._carried)
                if old in kept and new in kept and old != new and (old, new) not in pairs
                and self.kinds[old] == "activation" and self.kinds[new] not in ("input", "weight")
                and last[old] <= first[new]]

    def _check_sizes(self, where: str) -> None:
        """Every size and byte count fits what :mod:`mallocgame.formats.io` reads back: int64, their sum included."""
        total = 0
        for bid, size in self.sizes.items():
            total += max(size, 0)
            if size > MAX_INT or total > MAX_INT:
                what = f"buffer {bid!r} of {size} bytes is" if size > MAX_INT else "the buffers together are"
                raise InputError(f"{where}: {what} too large (more than 2**62 bytes)")
        for op in self.ops:
            for (bid, _access), nbytes in op.operands.items():
                if nbytes > MAX_INT:
                    raise InputError(f"{where}: op {op.id!r} moves {nbytes} bytes of {bid!r}: "
                                     "too large (more than 2**62 bytes)")

    def _touches(self) -> "_Touches":
        """Each buffer's first and last touching op, and which buffers some op writes."""
        touches = _Touches({}, {}, set())
        for t, op in enumerate(self.ops):
            for buf, access in op.operands:
                touches.first.setdefault(buf, t)
                touches.last[buf] = t
                if access == "write":
                    touches.written.add(buf)
        return touches

    def _buffers(self, touches: "_Touches", tight: set[str]) -> list[Buffer]:
        """The buffers some op touches, with the live ranges of the module docstring."""
        horizon = len(self.ops)
        donated = {p for p, _ in self._donations}
        buffers = []
        for bid, size in self.sizes.items():
            if bid not in touches.first or size <= 0:
                continue
            kind = self.kinds[bid]
            start, end = touches.first[bid], touches.last[bid] + 1
            if kind in ("input", "weight") and bid not in touches.written and bid not in tight:
                start, end = 0, end if bid in donated else horizon
            elif kind == "output":
                end = horizon
            buffers.append(Buffer(bid, size, start, end, alignment=self.alignment, kind=kind))
        return buffers

    def _kept_donations(self, kept: set[str], touches: "_Touches", used_src: set[str],
                        used_dst: set[str]) -> tuple[list[tuple[str, str]], dict[str, int]]:
        """The donations that are in-place pairs, and each later-written donated output's parameter's last read.

        A donated parameter's output lives in the parameter's allocation (XLA's input_output_alias).
        Written by the op that reads the parameter last, the two are one buffer (an in-place pair).
        Written later, the parameter ends at its last read and the allocation may hold, meanwhile,
        the values XLA chains into the output (an in-place chain ending at it), but only a chain
        that starts after that last read: one live while the parameter is cannot be in its
        allocation, so the output then takes no other buffer's storage (sharing it anyway puts
        max live below XLA's own buffer assignment: docs/results.md, "Importers"). ``used_src`` and ``used_dst`` collect
        the buffers paired.
        """
        first, last = touches.first, touches.last
        donations = []
        freed_at: dict[str, int] = {}  # donated output -> its parameter's last read
        for src, dst in self._donations:
            if src in kept and dst in kept and src != dst and src not in used_src and dst not in used_dst:
                if last[src] == first[dst]:
                    donations.append((src, dst))
                    used_src.add(src)
                    used_dst.add(dst)
                elif last[src] < first[dst]:
                    freed_at[dst] = last[src]
        return donations, freed_at

    def _kept_inplace(self, kept: set[str], touches: "_Touches", freed_at: dict[str, int], used_src: set[str],
                      used_dst: set[str]) -> list[tuple[str, str]]:
        """The in-place candidates that hold in the final schedule (the class docstring's rules)."""
        first, last = touches.first, touches.last
        inplace = []
        chain_start: dict[str, int] = {}  # buffer -> the first op of the in-place chain it ends
        for t, src, dst in self._inplace:
            if src in kept and dst in kept and src not in used_src and dst not in used_dst \
                    and self.kinds[src] not in ("input", "weight", "output") \
                    and last[src] == t and first[dst] == t and src != dst:
                begins = chain_start.get(src, first[src])
                if dst in freed_at and begins <= freed_at[dst]:
                    continue
                inplace.append((src, dst))
                used_src.add(src)
                used_dst.add(dst)
                chain_start[dst] = begins
        return inplace


@dataclass(frozen=True)
class _Touches:
    """Per buffer, the first and the last op touching it; the buffers some op writes."""

    first: dict[str, int]
    last: dict[str, int]
    written: set[str]


# --------------------------------------------------------------------- summaries

@dataclass(frozen=True)
class ImportSummary:
    """What every ``mallocgame import`` command prints."""

    ops: int
    buffers: int
    flops: float
    max_live_bytes: int
    transcendentals: float = 0.0

    def line(self) -> str:
        trans = f" transcendentals={self.transcendentals:.6g}" if self.transcendentals else ""
        return (f"ops={self.ops} buffers={self.buffers} flops={self.flops:.6g}{trans} "
                f"max_live_bytes={self.max_live_bytes}")


def summarize(problem: Problem) -> ImportSummary:
    """Ops, buffers, total FLOPs (and transcendentals) and max live bytes of an imported workload.

    Counted on the workload as every reader sees it: in-place pairs merged into one buffer
    (:func:`mallocgame.problem.aliasing.merge_inplace`), so ``buffers`` and ``max_live_bytes`` are what
    ``mallocgame info`` reports for the written file.
    """
    merged = merge_inplace(problem)
    return ImportSummary(
        ops=len(merged.ops),
        buffers=merged.n,
        flops=float(sum(op.flops for op in merged.ops)),
        max_live_bytes=max_live(merged),
        transcendentals=float(sum(op.transcendentals for op in merged.ops)),
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


def resolve_callable(spec: str, *, what: str = "callable", prefix: str = "_mallocgame_spec_") -> Any:
    """The callable named by ``module.path:name`` or ``path/to/file.py:name`` (dotted names allowed), not called.

    A file is loaded as a module named ``prefix`` + its stem. Every failure of the user's code --
    a missing file, an import error, a missing or non-callable attribute -- is one
    :class:`~mallocgame.problem.model.InputError` line naming ``spec``; ``what`` names the thing in messages.
    """
    expected = f"{spec}: expected 'module.path:{what}' or 'path/to/file.py:{what}'"
    if ":" not in spec:
        raise InputError(expected)
    target, attr = spec.rsplit(":", 1)
    if not target:
        raise InputError(expected)
    if not attr:
        raise InputError(f"{spec}: missing the {what} after ':'")
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            if not os.path.isfile(target):
                raise InputError(f"{spec}: file {target!r} not found")
            name = prefix + os.path.splitext(os.path.basename(target))[0]
            loader = importlib.util.spec_from_file_location(name, target)
            if loader is None or loader.loader is None:
                raise InputError(f"{spec}: cannot load {target!r} as Python")
            mod = importlib.util.module_from_spec(loader)
            sys.modules[name] = mod
            loader.loader.exec_module(mod)
        else:
            mod = importlib.import_module(target)
    except InputError:
        raise
    except Exception as exc:  # user code: any failure is one line
        raise InputError(f"{spec}: cannot import {target!r} ({type(exc).__name__}: {exc})") from None
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{spec}: {target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{spec}: {attr!r} is not callable")
    return obj
