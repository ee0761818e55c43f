"""XLA HLO importer: scheduled after-optimizations HLO text -> workload.

Input: the text of a *scheduled* HLO module, as ``jax.jit(f).lower(...).compile().as_text()``
or ``--xla_dump_to=DIR --xla_dump_hlo_as_text`` (``*after_optimizations.txt``) produce. The
header must say ``HloModule NAME, is_scheduled=true``; anything else is rejected with
:class:`~mallocgame.problem.model.InputError` (one line: file, line, reason), as are truncated or
malformed files.

The importer follows XLA: the ENTRY order is the schedule, array leaves are buffers with the
lifetimes XLA's buffer assignment gives them (donated parameters and in-place pairs included),
FLOPs and transcendentals as XLA's ``HloCostAnalysis`` counts them, ``while`` loops expanded by
their known trip count, unknown instructions kept as zero-FLOP ops with a warning. What becomes
what, rule by rule: docs/guide/importing.md, "The HLO importer in detail".

Example:
    >>> text = '''HloModule m, is_scheduled=true
    ... ENTRY %main (a: f32[4,8], b: f32[8,16]) -> f32[4,16] {
    ...   %a = f32[4,8]{1,0} parameter(0)
    ...   %b = f32[8,16]{1,0} parameter(1)
    ...   %d = f32[4,16]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    ...   ROOT %t = f32[4,16]{1,0} tanh(%d)
    ... }'''
    >>> r = parse_hlo_text(text, "m.hlo.txt")
    >>> [(op.id, op.flops, op.transcendentals) for op in r.problem.ops], r.flops, r.transcendentals
    ([('d', 1024.0, 0.0), ('t', 0.0, 64.0)], 1024.0, 64.0)
    >>> [(b.id, b.start, b.end) for b in r.problem.buffers]  # parameters whole program, the output to the end
    [('a', 0, 2), ('b', 0, 2), ('d', 0, 2), ('t', 1, 2)]
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Union

from mallocgame.formats.io import read_text
from mallocgame.importers._common import WorkloadBuilder, buffer_leaves, summarize  # noqa: F401  (summarize re-exported)
from mallocgame.problem.model import InputError, Problem


class HloImportWarning(UserWarning):
    """An instruction the importer does not know (kept as a zero-FLOP op), or an approximation."""


# --------------------------------------------------------------------------- shapes

_DTYPE_BITS = {
    "pred": 8, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8,
    "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8, "f8e4m3fnuz": 8,
    "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4, "f6e2m3fn": 8, "f6e3m2fn": 8,
    "token": 0, "opaque": 0,
}


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array ``dtype[dims]`` or a tuple of shapes (``dtype == "tuple"``)."""

    dtype: str
    dims: tuple[int, ...] = ()
    parts: tuple["Shape", ...] = ()
    # the layout's memory space (``{1,0:S(1)}``: XLA's alternate memory); not part of the shape's identity
    memory_space: int = field(default=0, compare=False)

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def elements(self) -> int:
        """Element count of an array shape (of the first leaf for a tuple, as XLA's reduce does)."""
        if self.is_tuple:
            return self.parts[0].elements if self.parts else 0
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        if self.is_tuple:
            return sum(p.nbytes for p in self.parts)
        return (math.prod(self.dims) * _DTYPE_BITS[self.dtype] + 7) // 8

    def leaves(self, prefix: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], "Shape"]]:
        if not self.is_tuple:
            return [(prefix, self)]
        out = []
        for i, p in enumerate(self.parts):
            out.extend(p.leaves(prefix + (i,)))
        return out

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(map(str, self.parts)) + ")"
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


_CLOSE = {"(": ")", "{": "}", "[": "]"}
# the characters that matter when scanning brackets: quoted strings (skipped whole), brackets, commas
_SPECIAL = re.compile(r'"(?:[^"\\]|\\.)*"?|[(){}\[\],]')


def _skip_balanced(s: str, i: int) -> int:
    """``s[i]`` opens a bracket; return the index just after its match (quote aware)."""
    stack: list[str] = []
    for m in _SPECIAL.finditer(s, i):
        c = m.group()
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")}]":
            if not stack or c != stack[-1]:
                raise ValueError(f"unbalanced {c!r}")
            stack.pop()
            if not stack:
                return m.end()
    raise ValueError("unbalanced brackets (line cut short?)")


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at commas outside brackets and quotes."""
    assert sep == ","
    parts, depth, start = [], 0, 0
    for m in _SPECIAL.finditer(s):
        c = m.group()
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[start:m.start()].strip())
            start = m.end()
    tail = s[start:].strip()
    if tail or parts:
        parts.append(tail)
    return parts


_DTYPE_RE = re.compile(r"([a-z][a-z0-9]*)\[")
MAX_SHAPE_BITS = 8 * 2**62  # an array is at most 2**62 bytes (sizes are int64 downstream, mallocgame.formats.io.MAX_INT)


MAX_TUPLE_DEPTH = 64  # tuples nest a few levels in real programs; deeper is refused, not a RecursionError


def parse_shape(s: str, i: int = 0, depth: int = 0) -> tuple[Shape, int]:
    """Parse a shape at ``s[i:]`` (layouts and ``/*...*/`` comments skipped); returns (shape, end).

    Tuples nested more than :data:`MAX_TUPLE_DEPTH` deep are refused (``ValueError``).
    """
    while i < len(s) and s[i] == " ":
        i += 1
    if s.startswith("(", i):
        if depth >= MAX_TUPLE_DEPTH:
            raise ValueError(f"tuple shape nested more than {MAX_TUPLE_DEPTH} deep")
        parts = []
        i += 1
        while True:
            while i < len(s) and s[i] in " ,":
                i += 1
            if i >= len(s):
                raise ValueError("tuple shape cut short")
            if s[i] == ")":
                return Shape("tuple", (), tuple(parts)), i + 1
            p, i = parse_shape(s, i, depth + 1)
            parts.append(p)
    m = _DTYPE_RE.match(s, i)
    if not m:
        raise ValueError(f"expected a shape at {s[i:i + 20]!r}")
    dtype = m.group(1)
    if dtype not in _DTYPE_BITS:
        raise ValueError(f"unknown element type {dtype!r}")
    j = s.index("]", m.end()) if "]" in s[m.end():] else -1
    if j < 0:
        raise ValueError("shape cut short")
    dims = []
    for d in s[m.end():j].split(","):
        d = d.strip()
        if not d:
            continue
        d = d.lstrip("<=")
        if not d.isdigit():
            raise ValueError(f"unsupported dimension {d!r}")
        dims.append(int(d))
    if math.prod(dims) * _DTYPE_BITS[dtype] > MAX_SHAPE_BITS:
        raise ValueError(f"shape {dtype}[{','.join(map(str, dims))}] is too large (more than 2**62 bytes)")
    i = j + 1
    space = 0
    if s.startswith("{", i):  # layout
        end = _skip_balanced(s, i)
        m = _MEMORY_SPACE.search(s, i, end)
        space = int(m.group(1)) if m else 0
        i = end
    return Shape(dtype, tuple(dims), memory_space=space), i


_MEMORY_SPACE = re.compile(r"S\((\d+)\)")


# --------------------------------------------------------------------------- module

@dataclass
class Instr:
    name: str
    shape: Shape
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    arg: str  # the text inside the parentheses (parameter number, constant literal)
    line: int
    root: bool = False


@dataclass
class Computation:
    name: str
    is_entry: bool
    line: int
    instrs: list[Instr] = field(default_factory=list)
    by_name: dict[str, Instr] = field(default_factory=dict)

    @property
    def root(self) -> Instr:
        for ins in self.instrs:
            if ins.root:
                return ins
        return self.instrs[-1]

    @cached_property
    def users(self) -> dict[str, list[Instr]]:
        u: dict[str, list[Instr]] = {ins.name: [] for ins in self.instrs}
        for ins in self.instrs:
            for o in ins.operands:
                u.setdefault(o, []).append(ins)
        return u

    @cached_property
    def params(self) -> dict[int, Instr]:
        return {int(ins.arg): ins for ins in self.instrs if ins.opcode == "parameter"}


@dataclass
class HloModule:
    name: str
    computations: dict[str, Computation]
    entry: Computation
    path: str
    # input_output_alias of the header: (output shape index, parameter number, parameter shape index)
    aliases: list[tuple[tuple[int, ...], int, tuple[int, ...]]] = field(default_factory=list)


_INSTR_RE = re.compile(r"\s*(ROOT\s+)?%?([A-Za-z_][\w.\-]*)\s*=\s*")
_OPCODE_RE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\(")
_COMP_RE = re.compile(r"(ENTRY\s+)?%?([A-Za-z_][\w.\-]*)\s*[({]")
_COMMENT_RE = re.compile(r"/\*.*?\*/")
_SECTION_RE = re.compile(r"[A-Z][A-Za-z]*$|\d+\s")


def _parse_instruction(line: str, lineno: int, path: str) -> Instr:
    m = _INSTR_RE.match(line)
    if not m:
        raise InputError(f"{path}: line {lineno}: not an HLO instruction: {line.strip()[:80]!r}")
    try:
        shape, i = parse_shape(line, m.end())
        mo = _OPCODE_RE.match(line, i)
        if not mo:
            raise ValueError(f"expected an opcode at {line[i:i + 30].strip()!r}")
        open_at = mo.end() - 1
        close = _skip_balanced(line, open_at)
        inner = line[open_at + 1:close - 1]
        rest = line[close:].strip()
        attrs: dict[str, str] = {}
        if rest:
            if not rest.startswith(","):
                raise ValueError(f"unexpected text after the operands: {rest[:30]!r}")
            for item in _split_top(rest[1:]):
                if "=" in item:
                    k, v = item.split("=", 1)
                    attrs[k.strip()] = v.strip()
    except ValueError as exc:
        raise InputError(f"{path}: line {lineno}: {exc}") from None
    opcode = mo.group(1)
    operands = []
    if opcode not in ("parameter", "constant") and inner.strip():
        for tok in _split_top(inner):
            if tok:
                operands.append(tok.split()[-1].lstrip("%"))
    return Instr(m.group(2), shape, opcode, operands, attrs, inner.strip(), lineno, bool(m.group(1)))


# Line breaks as str.splitlines() knows them, besides "\n": rewritten to "\n" so that _Lines numbers lines as it does.
_OTHER_BREAKS_RE = re.compile("\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_TEXT_CHAR_RE = re.compile(r"[^ \t\n]")  # the first character of a line with text on it


class _Lines:
    """The lines of a text, numbered from 1 as ``text.splitlines()`` numbers them, without splitting it: runs of
    blank lines (spaces and tabs) are skipped by a search in C, so a text of millions of empty lines costs no list
    of them and no Python step per line. Indexing (``lines[i]``, 0-based) and ``len`` as a list's."""

    def __init__(self, text: str):
        other = any(c in text for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # each a search in C
        self.text = _OTHER_BREAKS_RE.sub("\n", text) if other else text
        self.count = self.text.count("\n") + (not self.text.endswith("\n"))
        self.last = (0, 0, 0)  # the line yielded last: its number, where it starts, where the next line starts

    def __len__(self) -> int:
        return self.count

    def numbered(self, first: int = 1):
        """``(lineno, line)`` of every line numbered ``first`` or later that has more than spaces and tabs."""
        text, pos, lineno = self.text, 0, 1
        last, begin, after = self.last
        if first in (last, last + 1):  # the line yielded last, or the one after it (the parser's steps)
            pos, lineno = (begin if first == last else after), first
        elif first > 1:  # the start of line ``first``
            for _ in range(first - 1):
                pos = text.find("\n", pos) + 1
                if pos == 0:
                    return
            lineno = first
        while True:
            m = _TEXT_CHAR_RE.search(text, pos)
            if m is None:
                return
            begin = text.rfind("\n", pos, m.start()) + 1 or pos
            lineno += text.count("\n", pos, begin)
            end = text.find("\n", m.start())
            end = len(text) if end < 0 else end
            self.last = (lineno, begin, end + 1)
            yield lineno, text[begin:end]
            pos, lineno = end + 1, lineno + 1

    def __getitem__(self, index: int) -> str:
        for lineno, line in self.numbered(index + 1):
            return line if lineno == index + 1 else ""
        return ""


def parse_hlo_module(text: str, path: str = "<hlo>") -> HloModule:
    """Parse scheduled HLO text into computations; raises :class:`InputError` on bad input."""
    lines = _Lines(text)
    k = _header_index(lines, path)
    header = lines[k].strip()
    mname = header.split()[1].rstrip(",") if len(header.split()) > 1 else os.path.basename(path)
    comps, entry = _parse_computations(lines, k + 2, path)
    _check_computations(comps, path)
    aliases = _input_output_alias(header, path, k + 1)
    for _, param, _ in aliases:
        if param not in entry.params:
            raise InputError(f"{path}: line {k + 1}: input_output_alias: parameter {param} does not exist "
                             f"(ENTRY {entry.name!r} has {len(entry.params)})")
    return HloModule(mname, comps, entry, path, aliases)


def _header_index(lines: _Lines, path: str) -> int:
    """The index of the ``HloModule NAME, ..., is_scheduled=true`` line (the first that is not blank)."""
    k = next((lineno - 1 for lineno, line in lines.numbered() if line.strip()), None)
    if k is None:
        raise InputError(f"{path}: empty file")
    header = lines[k].strip()
    if not header.startswith("HloModule"):
        first_20 = "".join(line for lineno, line in itertools.takewhile(lambda item: item[0] <= k + 20,
                                                                         lines.numbered(k + 1)))
        if header.startswith("module") or "stablehlo." in first_20:
            raise InputError(f"{path}: line {k + 1}: StableHLO (MLIR) text, not HLO: give the compiled module's "
                             "scheduled HLO (jax.jit(f).lower(...).compile().as_text(), an XLA dump's "
                             "*after_optimizations.txt) or use `mallocgame import jax`")
        raise InputError(f"{path}: line {k + 1}: not HLO text (expected an 'HloModule NAME, ...' header)")
    if not re.search(r"\bis_scheduled=true\b", header):
        raise InputError(
            f"{path}: line {k + 1}: HLO module is not scheduled (no is_scheduled=true in its header); "
            "give the after-optimizations HLO of a compiled module"
        )
    return k


def _parse_computations(lines: _Lines, first: int, path: str) -> tuple[dict[str, Computation], Computation]:
    """The computations from line number ``first`` (1-based) on, by name, and the ENTRY one."""
    comps: dict[str, Computation] = {}
    entry = None
    cur: Computation | None = None
    for lineno, line in lines.numbered(first):
        raw = _COMMENT_RE.sub("", line)
        s = raw.strip()
        if cur is None:
            cur = _computation_opened(s, lineno, comps, path)
            continue
        if s == "}":
            if not cur.instrs:
                raise InputError(f"{path}: line {lineno}: computation {cur.name!r} is empty")
            comps[cur.name] = cur
            if cur.is_entry:
                if entry is not None:
                    raise InputError(f"{path}: line {lineno}: second ENTRY computation {cur.name!r}")
                entry = cur
            cur = None
            continue
        if s:
            _add_instruction(cur, raw, lineno, lines, path)
    if cur is not None:
        raise InputError(f"{path}: line {len(lines)}: truncated file: computation {cur.name!r} (line {cur.line}) is not closed")
    if entry is None:
        raise InputError(f"{path}: no ENTRY computation (truncated file?)")
    return comps, entry


def _computation_opened(s: str, lineno: int, comps: dict[str, Computation], path: str) -> Computation | None:
    """Outside a computation: the one line ``s`` opens, or ``None`` for a blank or section line."""
    if not s or _SECTION_RE.match(s):
        return None
    m = _COMP_RE.match(s)
    if m and s.endswith("{") and not _INSTR_RE.match(s):
        comp = Computation(m.group(2), bool(m.group(1)), lineno)
        if comp.name in comps:
            raise InputError(f"{path}: line {lineno}: duplicate computation {comp.name!r}")
        return comp
    raise InputError(f"{path}: line {lineno}: unexpected text outside a computation: {s[:80]!r}")


def _add_instruction(cur: Computation, raw: str, lineno: int, lines: _Lines, path: str) -> None:
    """Line ``raw`` as the next instruction of ``cur``: its operands defined before it, its name new."""
    try:
        ins = _parse_instruction(raw, lineno, path)
    except InputError as exc:
        if not any(x.strip() for _, x in lines.numbered(lineno + 1)):
            raise InputError(f"{path}: line {lineno}: truncated file: the last instruction is cut short "
                             f"and computation {cur.name!r} is not closed") from None
        raise exc
    for o in ins.operands:
        if o not in cur.by_name:
            raise InputError(
                f"{path}: line {lineno}: instruction {ins.name!r} uses {o!r} before it is defined "
                f"in computation {cur.name!r}"
            )
    if ins.name in cur.by_name:
        raise InputError(f"{path}: line {lineno}: duplicate instruction name {ins.name!r}")
    cur.instrs.append(ins)
    cur.by_name[ins.name] = ins


def _check_computations(comps: dict[str, Computation], path: str) -> None:
    """Every called computation exists, every attribute the importer follows is there, and no
    computation calls itself (directly or through others): HLO's call graph is acyclic."""
    for comp in comps.values():
        _check_parameters(comp, path)
        for ins in comp.instrs:
            for key in _REQUIRED_CALLS.get(ins.opcode, ()):
                if not ins.attrs.get(key, "").strip().lstrip("%"):
                    raise InputError(f"{path}: line {ins.line}: {ins.opcode} {ins.name!r} has no {key}= computation")
            for callee in _callees(ins):
                if callee not in comps:
                    raise InputError(f"{path}: line {ins.line}: {ins.name!r} calls unknown computation {callee!r}")
            if ins.opcode == "while":
                _trip_count(ins, path)  # a bad trip count is refused here, once
    _check_call_graph(comps, path)


# the computations an instruction must name for the importer to follow it
_REQUIRED_CALLS = {"while": ("condition", "body"), "call": ("to_apply",), "fusion": ("calls",),
                   "reduce": ("to_apply",), "reduce-window": ("to_apply",), "map": ("to_apply",),
                   "scatter": ("to_apply",), "select-and-scatter": ("select", "scatter")}


def _check_parameters(comp: Computation, path: str) -> None:
    """A computation's parameters are numbered 0, 1, ... once each."""
    seen: dict[int, Instr] = {}
    for ins in comp.instrs:
        if ins.opcode != "parameter":
            continue
        if not ins.arg.isdigit():
            raise InputError(f"{path}: line {ins.line}: parameter {ins.name!r}: expected parameter(N) "
                             f"with N a non-negative integer, got parameter({ins.arg[:30]})")
        n = int(ins.arg)
        if n in seen:
            raise InputError(f"{path}: line {ins.line}: parameter({n}) twice in computation {comp.name!r}")
        seen[n] = ins
    for n in range(len(seen)):
        if n not in seen:
            last = max(seen)
            raise InputError(f"{path}: line {seen[last].line}: parameter({last}) but no parameter({n}) "
                             f"in computation {comp.name!r}")


def _check_call_graph(comps: dict[str, Computation], path: str) -> None:
    """Refuse a computation that calls itself, directly or through others (iterative DFS: no recursion)."""
    calls = {name: [(callee, ins) for ins in c.instrs for callee in _callees(ins)] for name, c in comps.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in comps:
        if root in state:
            continue
        path_names, stack = [root], [iter(calls[root])]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[path_names.pop()] = 2
                continue
            callee, ins = step
            if state.get(callee) == 1:
                cycle = path_names[path_names.index(callee):] + [callee]
                raise InputError(f"{path}: line {ins.line}: {ins.name!r} calls computation {callee!r} in a cycle "
                                 f"({' -> '.join(cycle)}): a computation may not call itself")
            if callee not in state:
                state[callee] = 1
                path_names.append(callee)
                stack.append(iter(calls[callee]))


_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _input_output_alias(header: str, path: str, lineno: int) -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """The header's ``input_output_alias={ {OUT}: (PARAM, {PARAM_INDEX}, may-alias), ... }`` (donations)."""
    at = header.find("input_output_alias=")
    if at < 0:
        return []
    start = at + len("input_output_alias=")
    try:
        body = header[start + 1:_skip_balanced(header, start) - 1]
    except ValueError as exc:
        raise InputError(f"{path}: line {lineno}: input_output_alias: {exc}") from None
    out = []
    for m in _ALIAS_ENTRY.finditer(body):
        out.append((tuple(_ints(m.group(1))), int(m.group(2)), tuple(_ints(m.group(3)))))
    return out


_CALL_ATTRS = ("calls", "to_apply", "condition", "body", "select", "scatter",
               "true_computation", "false_computation")


def _callees(ins: Instr) -> list[str]:
    out = []
    for key in _CALL_ATTRS:
        v = ins.attrs.get(key)
        if v:
            out.extend(x.strip().lstrip("%") for x in v.strip("{}").split(",") if x.strip())
    v = ins.attrs.get("branch_computations")
    if v:
        out.extend(x.strip().lstrip("%") for x in v.strip("{}").split(",") if x.strip())
    return out


# --------------------------------------------------------------------------- costs

_TRANSCENDENTAL = {
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "sqrt", "cbrt",
    "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf", "acosh",
}
_ELEMENTWISE = {
    "abs", "add", "and", "bitcast-convert", "ceil", "clamp", "compare", "complex", "convert",
    "count-leading-zeros", "divide", "floor", "imag", "is-finite", "maximum", "minimum", "multiply",
    "negate", "not", "or", "popcnt", "real", "reduce-precision", "remainder", "round-nearest-afz",
    "round-nearest-even", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "sign", "stochastic-convert", "subtract", "xor",
}
_ZERO_COST = {
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "broadcast", "reshape",
    "dynamic-reshape", "transpose", "copy", "slice", "dynamic-slice", "dynamic-update-slice",
    "concatenate", "pad", "reverse", "iota", "gather", "copy-start", "copy-done", "after-all",
    "add-dependency", "optimization-barrier", "domain", "get-dimension-size", "set-dimension-size",
    "partition-id", "replica-id", "send", "send-done", "recv", "recv-done", "infeed", "outfeed",
    "all-gather", "all-gather-start", "all-gather-done", "all-to-all", "ragged-all-to-all",
    "collective-permute", "collective-permute-start", "collective-permute-done", "collective-broadcast",
    "reduce-scatter", "all-reduce-done", "async-update", "async-done",
    "rng-get-and-update-state", "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
    "top-k",
}
_ALIASING = {"bitcast", "get-tuple-element", "tuple", "optimization-barrier", "add-dependency", "domain"}

_INT_LIST = re.compile(r"-?\d+")


def _ints(v: str | None) -> list[int]:
    return [int(x) for x in _INT_LIST.findall(v or "")]


@dataclass(frozen=True)
class _WinDim:
    size: int = 1
    stride: int = 1
    pad_lo: int = 0
    pad_hi: int = 0
    base_dil: int = 1  # lhs_dilate
    win_dil: int = 1   # rhs_dilate


def _parse_window(v: str | None) -> list[_WinDim]:
    if not v:
        return []
    fields: dict[str, list[str]] = {}
    for item in v.strip("{} ").split():
        if "=" in item:
            k, val = item.split("=", 1)
            fields[k] = val.split("x")
    n = len(fields.get("size", []))
    dims = []
    for d in range(n):
        def get(key, default=1):
            vals = fields.get(key)
            return int(vals[d]) if vals else default
        lo = hi = 0
        if "pad" in fields:
            lo, hi = (int(x) for x in fields["pad"][d].split("_"))
        dims.append(_WinDim(get("size"), get("stride"), lo, hi, get("lhs_dilate"), get("rhs_dilate")))
    return dims


def _valid_positions(inp: int, out: int, ker: int, w: _WinDim) -> int:
    """Pairs (output index, kernel index) that hit a real (non-padding, non-hole) input element."""
    if inp == out and ker == out and inp == w.base_dil and w.win_dil == 1 \
            and max(1, inp - 1) == w.stride and w.pad_lo == 0 and w.pad_hi == 0:
        return inp
    if inp == 1 and ker == out and w.win_dil == 1 and w.base_dil == 1 and w.stride == 1 \
            and w.pad_lo == out - 1 and w.pad_hi == out - 1:
        return out
    count = 0
    for k in range(ker):
        if w.stride == 1 and w.base_dil == 1:
            base = w.pad_lo - k * w.win_dil
            count += max(min(inp + base, out) - max(base, 0), 0)
            continue
        for o in range(out):
            undilated = o * w.stride - w.pad_lo + k * w.win_dil
            if undilated % w.base_dil:
                continue
            idx = undilated // w.base_dil
            if 0 <= idx < inp:
                count += 1
    return count


def _conv_flops(ins: Instr, lhs: Shape, rhs: Shape, *, result: Shape | None = None) -> float:
    """A convolution's FLOPs as XLA counts them: input ``lhs``, kernel ``rhs``, output ``result`` (by default the
    instruction's shape, its first leaf if a tuple)."""
    labels = ins.attrs.get("dim_labels", "")
    m = re.match(r"(\w+)_(\w+)->(\w+)", labels)
    if not m:
        raise ValueError(f"convolution {ins.name!r}: cannot read dim_labels={labels!r}")
    lhs_l, rhs_l, out_l = m.groups()
    out = result if result is not None else (ins.shape.parts[0] if ins.shape.is_tuple else ins.shape)
    in_feat = lhs.dims[lhs_l.index("f")]
    out_feat = out.dims[out_l.index("f")]
    batch = lhs.dims[lhs_l.index("b")]
    window = _parse_window(ins.attrs.get("window"))
    spatial = [c for c in lhs_l if c.isdigit()]
    positions = 1
    for d, label in enumerate(sorted(spatial, key=int)):
        w = window[d] if d < len(window) else _WinDim()
        positions *= _valid_positions(lhs.dims[lhs_l.index(label)], out.dims[out_l.index(label)],
                                      rhs.dims[rhs_l.index(label)], w)
    fgc = int(ins.attrs.get("feature_group_count", 1))
    bgc = int(ins.attrs.get("batch_group_count", 1))
    return 2.0 * (in_feat // fgc) * out_feat * (batch // bgc) * positions


def _reduce_window_count(ins: Instr, operand: Shape) -> int:
    window = _parse_window(ins.attrs.get("window"))
    out = ins.shape.parts[0] if ins.shape.is_tuple else ins.shape
    wcount = math.prod(w.size for w in window) if window else 1
    count = (wcount - 1) * out.elements
    # XLA's special case: a reduce followed by a broadcast along one dimension (cumsum-like)
    reduced = [d for d, w in enumerate(window) if w.size != 1]
    padded = [d for d, w in enumerate(window) if w.pad_lo or w.pad_hi]
    if len(reduced) == 1 and len(padded) == 1 and not ins.shape.is_tuple:
        d = reduced[0]
        w = window[d]
        if w.pad_lo and w.pad_hi and w.pad_lo == w.pad_hi and w.size == 2 * w.pad_lo + 1 \
                and w.pad_lo == out.dims[d] - 1:
            span = out.dims[d]
            count = out.elements // span + (span - 1)
    return count


def _backend_config(ins: Instr) -> dict | None:
    """The instruction's ``backend_config`` as JSON (a quoted, escaped string too), or ``None``."""
    cfg = ins.attrs.get("backend_config", "")
    if not cfg:
        return None
    try:
        data = json.loads(cfg[1:-1].encode().decode("unicode_escape")) if cfg.startswith('"') else json.loads(cfg)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _trip_count(ins: Instr, path: str = "<hlo>") -> int | None:
    """The ``known_trip_count`` (or ``trip_count``) of a while; a value that is not a non-negative
    integer (``"-5"``, ``"2.5"``) is refused with :class:`InputError`."""
    cfg = ins.attrs.get("backend_config", "")
    if cfg:
        try:
            data = _backend_config(ins)
            if data is None:
                raise ValueError(cfg)
            n = data.get("known_trip_count", {}).get("n")
        except (ValueError, AttributeError, TypeError):
            m = re.search(r'known_trip_count\\?"?\s*:\s*\{\s*\\?"?n\\?"?\s*:\s*\\?"?([^"\\}\s]+)', cfg)
            n = m.group(1) if m else None
        if n is not None:
            text = str(n)
            if isinstance(n, bool) or not text.isdigit():
                raise InputError(f"{path}: line {ins.line}: while {ins.name!r}: known_trip_count must be a "
                                 f"non-negative integer, got {text[:30]!r}")
            return int(text)
    fa = ins.attrs.get("frontend_attributes", "")
    m = re.search(r'trip_count\\?"?\s*=\s*\\?"?(\d+)', fa)
    if m:
        return int(m.group(1))
    return None


# Custom calls to libraries whose work is known (XLA:GPU's cost analysis counts cuBLAS and cuDNN calls so):
# matrix products, convolutions, and the dense factorizations and solves jax.numpy.linalg lowers to.
_GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__onednn$matmul"})
_CONV_TARGET = re.compile(r"^__cudnn\$conv(Forward|BiasActivationForward|ForwardGraph|BackwardInput|BackwardFilter)$")
_SOLVER_TARGET = re.compile(r"^(?:lapack|cusolver|hipsolver|cublas|hipblas|blas)_[sdcz]?(getrf|potrf|geqrf|trsm)"
                            r"(?:_batched)?(?:_ffi)?$")


def _dot_dimension_numbers(config: dict | None) -> dict | None:
    """A gemm call's ``dot_dimension_numbers`` (at the top of its backend config or in ``gemm_backend_config``)."""
    for part in (config or {}, (config or {}).get("gemm_backend_config") or {}):
        if isinstance(part, dict) and isinstance(part.get("dot_dimension_numbers"), dict):
            return part["dot_dimension_numbers"]
    return None


def _gemm_flops(ins: Instr, lhs: Shape, out: Shape) -> float:
    """2 x output elements x contracted width, as XLA:GPU's cost analysis counts a cuBLAS gemm; the contracted
    dimensions from the call's ``dot_dimension_numbers``, else the lhs's last (the second to last with oneDNN's
    ``transpose_a``)."""
    config = _backend_config(ins)
    dnums = _dot_dimension_numbers(config)
    if dnums is not None and dnums.get("lhs_contracting_dimensions") is not None:
        dims = [int(d) for d in dnums["lhs_contracting_dimensions"]]
    elif not lhs.dims:
        dims = []
    else:
        onednn = (config or {}).get("onednn_matmul_config") or {}
        dims = [len(lhs.dims) - 2 if onednn.get("transpose_a") and len(lhs.dims) > 1 else len(lhs.dims) - 1]
    return 2.0 * out.elements * math.prod(lhs.dims[d] for d in dims)


def _library_conv_flops(ins: Instr, kind: str, operands: list[Shape], result: Shape) -> float:
    """A cuDNN convolution call's FLOPs: its ``window`` and ``dim_labels`` describe the forward convolution, whose
    input, kernel and output are (operand 0, operand 1, result) for a forward call, (result, operand 1, operand 0)
    for ``BackwardInput`` and (operand 0, result, operand 1) for ``BackwardFilter``; a backward pass costs what
    the forward one does. (XLA:GPU's cost analysis reads every call as a forward one.)"""
    if kind == "BackwardInput":
        return _conv_flops(ins, result, operands[1], result=operands[0])
    if kind == "BackwardFilter":
        return _conv_flops(ins, operands[0], result, result=operands[1])
    return _conv_flops(ins, operands[0], operands[1], result=result)


def _attention_flops(ins: Instr, operands: list[Shape], result: Shape) -> float | None:
    """A cuDNN fused attention's two matrix products (``softmax(Q K^T) V``; the softmax not counted), from its
    ``bmm1_dot_dimension_numbers``: ``2 x scores x width`` for the scores ``Q K^T`` (batch x queries x keys) and
    ``2 x output elements x keys`` for the product with ``V``. ``None`` without the dimension numbers."""
    config = (_backend_config(ins) or {}).get("cudnn_fmha_backend_config") or {}
    dnums = config.get("bmm1_dot_dimension_numbers")
    if not isinstance(dnums, dict) or len(operands) < 3:
        return None
    q, k = operands[0], operands[1]
    width = math.prod(q.dims[int(d)] for d in dnums.get("lhs_contracting_dimensions", []))
    batch = math.prod(q.dims[int(d)] for d in dnums.get("lhs_batch_dimensions", []))
    if width <= 0 or batch <= 0:
        return None
    queries, keys = q.elements // (batch * width), k.elements // (batch * width)
    return 2.0 * batch * queries * keys * width + 2.0 * result.elements * keys


def _solver_flops(routine: str, operands: list[Shape]) -> float:
    """LAPACK's operation counts (LAWN 41) for a factorization of the trailing ``m x n`` matrices of operand 0
    (a batch of them), times 4 for complex numbers; ``trsm`` and ``potrf`` as the importer counts HLO's
    ``triangular-solve`` and ``cholesky``."""
    a = operands[0]
    if routine == "trsm":
        return 2.0 * a.dims[-1] * operands[1].elements
    m, n = a.dims[-2], a.dims[-1]
    batch = a.elements // max(m * n, 1)
    big, small = max(m, n), min(m, n)
    per = {"getrf": big * small**2 - small**3 / 3,
           "geqrf": 2 * big * small**2 - 2 * small**3 / 3,
           "potrf": n**3 / 3}[routine]
    return per * batch * (4 if a.dtype.startswith("c") else 1)


def _library_call_flops(ins: Instr, opnd: list[Shape]) -> float | None:
    """The FLOPs of a custom call to a library whose work is known, else ``None`` (also when the call does not
    read as expected: a shape or a backend config it cannot be costed from is an unknown call, not bad input)."""
    target = ins.attrs.get("custom_call_target", "").strip('"')
    shape = ins.shape
    result = shape.parts[0] if shape.is_tuple and shape.parts else shape
    try:
        if target in _GEMM_TARGETS and opnd:
            return _gemm_flops(ins, opnd[0], result)
        conv = _CONV_TARGET.match(target)
        if conv and len(opnd) >= 2:
            return _library_conv_flops(ins, conv.group(1), opnd, result)
        if target.startswith("__cudnn$fmha") and "Backward" not in target:
            return _attention_flops(ins, opnd, result)
        if target in ("TopK", "__gpu$TopK") and opnd and opnd[0].dims and result.dims:
            # a selection of the k largest per row: a comparison per element per level of a k-heap, as the
            # importer counts sort's n * ceil(log2 n)
            return float(opnd[0].elements * max(1, math.ceil(math.log2(max(result.dims[-1], 2)))))
        solver = _SOLVER_TARGET.match(target)
        if solver and opnd and len(opnd[0].dims) >= 2 and (solver.group(1) != "trsm" or len(opnd) >= 2):
            return _solver_flops(solver.group(1), opnd)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, ZeroDivisionError):
        return None
    return None


class _Costs:
    """FLOPs/transcendentals per instruction and per computation (memoised)."""

    def __init__(self, module: HloModule, warn):
        self.m = module
        self.warn = warn
        self._comp: dict[str, tuple[float, float]] = {}

    def comp(self, name: str) -> tuple[float, float]:
        if name not in self._comp:
            self._comp[name] = (0.0, 0.0)  # recursion guard
            c = self.m.computations[name]
            f = t = 0.0
            for ins in c.instrs:
                a, b = self.instr(c, ins)
                f += a
                t += b
            self._comp[name] = (f, t)
        return self._comp[name]

    def _called(self, ins: Instr, key: str) -> str:
        name = ins.attrs.get(key, "").strip().lstrip("%")
        if name not in self.m.computations:
            raise InputError(f"{self.m.path}: line {ins.line}: {ins.opcode} {ins.name!r} has no {key}= computation")
        return name

    def instr(self, comp: Computation, ins: Instr) -> tuple[float, float]:
        """(FLOPs, transcendentals) of one instruction; an op with no formula costs nothing and is warned about."""
        op = ins.opcode
        opnd = [comp.by_name[o].shape for o in ins.operands]
        try:
            cost = _leaf_cost(ins, opnd)
            if cost is None:
                cost = self._calling_cost(ins, opnd)
            if cost is not None:
                return cost
        except InputError:
            raise
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(f"{self.m.path}: line {ins.line}: cannot cost {op} {ins.name!r}: {exc}") from None
        if op == "custom-call":
            target = ins.attrs.get("custom_call_target", "?")
            self.warn(f"{self.m.path}: line {ins.line}: custom-call {ins.name!r} (target {target}): "
                      "FLOPs unknown, imported as a zero-FLOP op")
        else:
            self.warn(f"{self.m.path}: line {ins.line}: unknown instruction {op!r} ({ins.name!r}): "
                      "imported as a zero-FLOP op")
        return 0.0, 0.0

    def _calling_cost(self, ins: Instr, opnd: list) -> tuple[float, float] | None:
        """The cost of an instruction that runs other computations (fusion, call, reduce, while, ...), or None."""
        op, shape = ins.opcode, ins.shape
        if op == "fusion" or (op == "async-start" and "calls" in ins.attrs):
            return self.comp(self._called(ins, "calls"))
        if op == "call":
            return self.comp(self._called(ins, "to_apply"))
        if op == "reduce":
            f, t = self.comp(self._called(ins, "to_apply"))
            count = opnd[0].elements - shape.elements
            return f * count, t * count
        if op == "reduce-window":
            f, t = self.comp(self._called(ins, "to_apply"))
            count = _reduce_window_count(ins, opnd[0])
            return f * count, t * count
        if op == "map":
            f, t = self.comp(self._called(ins, "to_apply"))
            return f * shape.elements, t * shape.elements
        if op == "scatter":
            f, t = self.comp(self._called(ins, "to_apply"))
            n_upd = opnd[-1].elements
            return f * n_upd, t * n_upd
        if op == "select-and-scatter":
            fs, ts = self.comp(self._called(ins, "select"))
            fc, tc = self.comp(self._called(ins, "scatter"))
            wcount = math.prod(w.size for w in _parse_window(ins.attrs.get("window"))) or 1
            src = opnd[1].elements
            return fs * src * (wcount - 1) + fc * src, ts * src * (wcount - 1) + tc * src
        if op == "while":
            n = _trip_count(ins) or 1
            fb, tb = self.comp(self._called(ins, "body"))
            fc, tc = self.comp(self._called(ins, "condition"))
            return n * fb + (n + 1) * fc, n * tb + (n + 1) * tc
        if op == "conditional":
            costs = [self.comp(n) for n in _callees(ins)] or [(0.0, 0.0)]
            return max(c[0] for c in costs), max(c[1] for c in costs)
        return None


def _leaf_cost(ins: Instr, opnd: list) -> tuple[float, float] | None:
    """(FLOPs, transcendentals) of an instruction that calls no computation, or None if it has no formula here."""
    op, shape = ins.opcode, ins.shape
    if op in _TRANSCENDENTAL:
        return 0.0, float(shape.elements)
    if op in _ELEMENTWISE:
        return float(shape.elements), 0.0
    if op in _ZERO_COST:
        return 0.0, 0.0
    if op in ("dot", "scaled-dot"):
        width = math.prod(opnd[0].dims[d] for d in _ints(ins.attrs.get("lhs_contracting_dims")))
        return 2.0 * shape.elements * width, 0.0
    if op == "convolution":
        return _conv_flops(ins, opnd[0], opnd[1]), 0.0
    if op in ("all-reduce", "all-reduce-start"):
        return float(sum(s.elements for _, s in shape.leaves())), 0.0
    if op == "sort":
        n = opnd[0].elements
        return float(n * math.ceil(math.log2(n))) if n > 1 else 0.0, 0.0
    if op in ("rng", "rng-bit-generator"):
        return 0.0, float(sum(s.elements for _, s in shape.leaves()))
    if op == "fft":
        lengths = _ints(ins.attrs.get("fft_length"))
        logs = math.prod(int(math.log2(x)) for x in lengths) if lengths else 1
        return 2.0 * 4 * logs * opnd[0].elements, 0.0
    if op == "triangular-solve":
        return 2.0 * opnd[0].dims[-1] * opnd[1].elements, 0.0
    if op == "cholesky":
        return float(opnd[0].dims[-1] * opnd[0].elements // 3), 0.0
    if op == "custom-call":
        known = _library_call_flops(ins, opnd)
        return (known, 0.0) if known is not None else None
    return None


# --------------------------------------------------------------------------- workload

Value = Union[str, None, tuple]  # a buffer id, no buffer (token / empty), or a tuple of values


def _fusion_kind(module: HloModule, comp_name: str) -> str:
    ops = {i.opcode for i in module.computations[comp_name].instrs}
    for heavy in ("convolution", "dot", "scatter", "reduce-window", "reduce", "sort"):
        if heavy in ops:
            return f"fusion:{heavy}"
    return "fusion"


_ALIAS_PAIR = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _operand_aliases(ins: Instr, vals: list, out) -> list[tuple[str, str]]:
    """``(operand buffer, output buffer)`` pairs of the instruction's ``output_to_operand_aliasing``
    (``{{0}: (0, {})}``: output leaf {0} is operand 0's storage)."""
    outputs = dict(_flatten_with_index(out))
    pairs = []
    for m in _ALIAS_PAIR.finditer(ins.attrs.get("output_to_operand_aliasing", "")):
        k = int(m.group(2))
        if k < len(vals):
            src = dict(_flatten_with_index(vals[k])).get(tuple(_ints(m.group(3))))
            dst = outputs.get(tuple(_ints(m.group(1))))
            if src is not None and dst is not None and src != dst:
                pairs.append((src, dst))
    return pairs


# XLA's AreTransitiveUsesElementwiseOrTuple: a bitcast (a reshape) is not element-wise on its operand
_ELEMENTWISE_ACCESS = _ELEMENTWISE | _TRANSCENDENTAL | {"tuple"}


@dataclass
class HloImport:
    """Result of :func:`load_hlo`: the workload plus XLA-comparable totals and warnings."""

    problem: Problem
    flops: float            # XLA "flops" (transcendentals excluded)
    transcendentals: float  # XLA "transcendentals"
    warnings: list[str]
    module: str


LOOP_STATES = ("fresh", "alias")  # how a while loop's carried values are imported (parse_hlo_text's loop_state)


class _Importer:
    def __init__(self, module: HloModule, *, name: str | None, max_expanded_ops: int, alignment: int,
                 loop_state: str = "fresh"):
        self.m = module
        self.loop_state = loop_state
        self.warnings: list[str] = []
        self.costs = _Costs(module, self._warn)
        self.b = WorkloadBuilder(name or module.name, source=module.path, alignment=alignment)
        self.max_expanded_ops = max_expanded_ops
        self.scale = 1.0
        self.flops = 0.0
        self.trans = 0.0
        self._consts: dict[tuple[str, str], Value] = {}
        self.entry_params: dict[int, Value] = {}
        self._op_counts: dict[str, int] = {}
        self.memory_space_copies = 0  # XLA's memory-space assignment's copies, read as the values they copy
        # Control order: instruction (prefixed name) -> the op indices it stands for, kept for
        # instructions that emitted ops and for token-like values (no buffer) that carry order.
        self._done: dict[str, range | set[int]] = {}

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    @staticmethod
    def _between_memory_spaces(comp: Computation, ins: Instr) -> bool:
        """Is this ``copy`` (``copy-start``) a move of one array between memory spaces, as XLA's memory-space
        assignment inserts them (same element type and dimensions, another ``S(n)`` in the layout)?"""
        source = comp.by_name[ins.operands[0]].shape
        dest = ins.shape.parts[0] if ins.opcode == "copy-start" and ins.shape.is_tuple else ins.shape
        return _same_array(source, dest) and source.memory_space != dest.memory_space

    # -- buffers
    def _new(self, base: str, shape: Shape, kind: str) -> Value:
        if shape.is_tuple:
            return tuple(self._new(f"{base}#{i}" if "#" not in base else f"{base}.{i}", p, kind)
                         for i, p in enumerate(shape.parts))
        size = shape.nbytes
        if size <= 0:
            return None
        return self.b.add_buffer(base, size, kind)

    # -- expansion size of a computation (ops it would add)
    def _ops_in(self, comp_name: str) -> int:
        if comp_name not in self._op_counts:
            self._op_counts[comp_name] = 0
            n = 0
            for ins in self.m.computations[comp_name].instrs:
                if ins.opcode in _ALIASING or ins.opcode in ("parameter", "constant", "after-all"):
                    continue
                if ins.opcode == "while":
                    t = _trip_count(ins) or 1
                    n += t * self._ops_in(self.costs._called(ins, "body")) \
                        + (t + 1) * self._ops_in(self.costs._called(ins, "condition"))
                elif ins.opcode == "call":
                    n += self._ops_in(self.costs._called(ins, "to_apply"))
                else:
                    n += 1
            self._op_counts[comp_name] = n
        return self._op_counts[comp_name]

    # -- evaluation
    def run(self, comp: Computation, args: list[Value] | None, prefix: str) -> Value:
        env: dict[str, Value] = {}
        for ins in comp.instrs:
            before = len(self.b.ops)
            env[ins.name] = self._eval(comp, ins, env, args, prefix)
            if len(self.b.ops) > before:
                self._done[prefix + ins.name] = range(before, len(self.b.ops))
            elif env[ins.name] is None and ins.operands:  # after-all, a token through a tuple: order flows on
                self._done[prefix + ins.name] = {t for o in ins.operands for t in self._done.get(prefix + o, ())}
        return env[comp.root.name]

    def _control(self, ins: Instr, vals: list[Value], prefix: str) -> set[int]:
        """Ops this instruction must follow beyond its buffers: its control-predecessors and the
        ops behind the token-like (buffer-less) values it takes."""
        after: set[int] = set()
        for o, v in zip(ins.operands, vals):
            if v is None:
                after.update(self._done.get(prefix + o, ()))
        raw = ins.attrs.get("control-predecessors", "").strip().strip("{}")
        for name in filter(None, (x.strip().lstrip("%") for x in raw.split(","))):
            after.update(self._done.get(prefix + name, ()))
        return after

    def _eval(self, comp: Computation, ins: Instr, env: dict, args, prefix: str) -> Value:
        op = ins.opcode
        if op == "parameter":
            if args is None:
                self.entry_params[int(ins.arg)] = self._new(ins.name, ins.shape, "input")
                return self.entry_params[int(ins.arg)]
            idx = int(ins.arg)
            if idx >= len(args):
                raise InputError(f"{self.m.path}: line {ins.line}: parameter({idx}) but only {len(args)} argument(s)")
            return args[idx]
        if op == "constant":
            key = (comp.name, ins.name)
            if key not in self._consts:
                self._consts[key] = self._new(ins.name if args is None else f"{comp.name}/{ins.name}", ins.shape, "weight")
            return self._consts[key]
        vals = [env[o] for o in ins.operands]
        if op == "get-tuple-element":
            v = vals[0]
            idx = int(ins.attrs.get("index", "0"))
            if isinstance(v, tuple):
                if idx >= len(v):
                    raise InputError(f"{self.m.path}: line {ins.line}: get-tuple-element index {idx} out of range")
                return v[idx]
            return v
        if op == "tuple":
            return tuple(vals)
        if op in ("bitcast", "optimization-barrier", "add-dependency", "domain"):
            return vals[0] if vals else None
        if op == "after-all":
            return None
        if op in ("copy-start", "copy") and vals and self._between_memory_spaces(comp, ins):
            # XLA's memory-space assignment moved the value (a prefetch, an eviction): the copy is its decision,
            # not the program's, so the destination is the value itself (what this project decides anew)
            self.memory_space_copies += 1
            return (vals[0], vals[0], None) if op == "copy-start" else vals[0]
        if op == "copy-done":
            v = vals[0]
            return v[0] if isinstance(v, tuple) else v
        if op.endswith("-done") and op != "copy-done":
            v = vals[0]
            if isinstance(v, tuple) and len(v) >= 2 and not ins.shape.is_tuple:
                return v[1]
            if isinstance(v, str) or v is None:
                return v
        if op == "while":
            return self._while(comp, ins, vals[0] if vals else None, prefix)
        if op == "call":
            called = self.m.computations[self.costs._called(ins, "to_apply")]
            return self.run(called, vals, f"{prefix}{ins.name}/")
        return self._op(comp, ins, vals, prefix)

    def _while(self, comp: Computation, ins: Instr, init: Value, prefix: str) -> Value:
        body = self.m.computations[self.costs._called(ins, "body")]
        cond = self.m.computations[self.costs._called(ins, "condition")]
        n = _trip_count(ins)
        where = f"{self.m.path}: line {ins.line}: while {ins.name!r}"
        if n is None:
            self._warn(f"{where}: unknown trip count; imported one iteration")
            n = 1
        per_iter = self._ops_in(body.name) + self._ops_in(cond.name)
        state = init
        if n * per_iter > self.max_expanded_ops:
            self._warn(f"{where}: {n} iterations x {per_iter} ops exceeds max_expanded_ops={self.max_expanded_ops}; "
                       f"body imported once with FLOPs and bytes scaled by {n}")
            saved = self.scale
            self.scale = saved * n
            self.run(cond, [state], f"{prefix}{ins.name}/cond/")
            state = self._carry(state, self.run(body, [state], f"{prefix}{ins.name}/body/"))
            self.scale = saved
            self.run(cond, [state], f"{prefix}{ins.name}/exit/")
            return state
        for k in range(n):
            self.run(cond, [state], f"{prefix}{ins.name}/{k}/cond/")
            state = self._carry(state, self.run(body, [state], f"{prefix}{ins.name}/{k}/"))
        self.run(cond, [state], f"{prefix}{ins.name}/{n}/cond/")
        return state

    def _carry(self, old: Value, new: Value) -> Value:
        """``new``, the loop state after a body run; with ``loop_state="alias"`` each of its leaves that differs
        from ``old``'s at the same tuple index, with the same size, shares its storage (WorkloadBuilder.carry)."""
        if self.loop_state == "alias":
            before = dict(_flatten_with_index(old))
            for index, buf in _flatten_with_index(new):
                src = before.get(index)
                if src is not None and src != buf and self.b.sizes[src] == self.b.sizes[buf]:
                    self.b.carry(src, buf)
        return new

    def _read_bytes(self, comp: Computation, ins: Instr, k: int, leaf_index: tuple, leaf_shape: Shape) -> int:
        full = leaf_shape.nbytes
        op = ins.opcode
        if op in ("slice", "dynamic-slice", "gather") and k == 0:
            return min(full, ins.shape.nbytes)
        if op in ("dynamic-update-slice", "scatter") and k == 0:
            return 0
        if op == "fusion" and not leaf_index:
            fcomp = self.m.computations[self.costs._called(ins, "calls")]
            p = fcomp.params.get(k)
            if p is not None and not p.shape.is_tuple:
                return min(full, _fused_param_read_bytes(fcomp, p.name, full))
        return full

    def _write_bytes(self, ins: Instr, leaf_index: tuple, leaf_shape: Shape, comp: Computation) -> int:
        if ins.opcode == "dynamic-update-slice":
            return comp.by_name[ins.operands[1]].shape.nbytes
        if ins.opcode == "fusion":
            fcomp = self.m.computations[self.costs._called(ins, "calls")]
            root = fcomp.root
            if root.opcode == "tuple" and len(leaf_index) == 1 and leaf_index[0] < len(root.operands):
                root = fcomp.by_name[root.operands[leaf_index[0]]]
            while root.opcode == "bitcast":
                root = fcomp.by_name[root.operands[0]]
            if root.opcode == "dynamic-update-slice":
                return fcomp.by_name[root.operands[1]].shape.nbytes
        return leaf_shape.nbytes

    def _inplace_sources(self, comp: Computation, ins: Instr, vals: list[Value]) -> list[tuple[Shape, str]]:
        """(operand shape, buffer) pairs whose storage the output may take (when the shapes are equal)."""
        op = ins.opcode
        shapes = [comp.by_name[o].shape for o in ins.operands]
        if op in ("dynamic-update-slice", "scatter"):
            return [(shapes[0], b) for b in buffer_leaves(vals[0])] if vals else []
        # XLA's heap simulator lets an output take a dying operand's storage only when the op uses the instruction
        # that defines the operand's value (HloInstruction::IsUserOf): not through a get-tuple-element of an op's
        # tuple result (a library call's, a multi-output fusion's) or a bitcast, which define no value of their own.
        # A loop body's or a call's state read from its parameter is left as it was: in XLA the loop state is one
        # buffer (while aliasing), which the expanded loop approximates by letting the new value take the old one's
        # place. (In-place ops above alias whatever the path.)
        direct = [_defines_its_value(comp, o) for o in ins.operands]
        if op in _ELEMENTWISE or op in _TRANSCENDENTAL:
            return [(shapes[k], v) for k, v in enumerate(vals) if isinstance(v, str) and direct[k]]
        if op == "fusion":
            fcomp = self.m.computations[self.costs._called(ins, "calls")]
            out = []
            for k, v in enumerate(vals):
                p = fcomp.params.get(k)
                if p is not None and isinstance(v, str) and not p.shape.is_tuple and _elementwise_access(fcomp, p.name) \
                        and (direct[k] or _updated_in_place(fcomp, p.name)):
                    out.append((shapes[k], v))
            return out
        return []

    def _op(self, comp: Computation, ins: Instr, vals: list[Value], prefix: str) -> Value:
        flops, trans = self.costs.instr(comp, ins)
        flops *= self.scale
        trans *= self.scale
        self.flops += flops
        self.trans += trans
        reads = []
        for k, (o, v) in enumerate(zip(ins.operands, vals)):
            oshape = comp.by_name[o].shape
            leaf_shapes = dict(oshape.leaves())
            flat = _flatten_with_index(v)
            for idx, buf in flat:
                ls = leaf_shapes.get(idx)
                nbytes = self._read_bytes(comp, ins, k, idx, ls) if ls is not None else self.b.sizes[buf]
                reads.append((buf, int(nbytes * self.scale)))
        if ins.opcode.endswith("-start") and ins.shape.is_tuple:
            out = self._start_outputs(comp, ins, vals, prefix)
        else:
            out = self._new(prefix + ins.name, ins.shape, "activation")
        out_shapes = dict(ins.shape.leaves())
        already = {buf for v in vals for buf in buffer_leaves(v)}
        writes = [(buf, int(self._write_bytes(ins, idx, out_shapes[idx], comp) * self.scale))
                  for idx, buf in _flatten_with_index(out) if buf not in already]
        inplace = []
        if writes:
            srcs = self._inplace_sources(comp, ins, vals)
            written = dict((buf, idx) for idx, buf in _flatten_with_index(out))
            for dst, _ in writes:
                for shape, src in srcs:  # XLA shares only equal shapes (ShapeUtil::Equal), not equal sizes
                    if _same_array(shape, out_shapes.get(written[dst])) and self.b.kinds.get(src) == "activation":
                        inplace.append((src, dst))
            # output_to_operand_aliasing (a library call's in-place output, an in-place fusion): the output takes
            # that operand's storage, as XLA's buffer assignment gives it, under the same rules as the pairs above
            for src, dst in _operand_aliases(ins, vals, out):
                if dst in written and self.b.kinds.get(src) == "activation" and self.b.sizes[src] == self.b.sizes[dst]:
                    inplace.append((src, dst))
        kind = _fusion_kind(self.m, self.costs._called(ins, "calls")) if ins.opcode == "fusion" else ins.opcode
        self.b.add_op(prefix + ins.name, kind, flops, reads, writes, inplace, transcendentals=trans,
                      after=self._control(ins, vals, prefix))
        return out


    def _start_outputs(self, comp: Computation, ins: Instr, vals: list[Value], prefix: str) -> Value:
        """Outputs of an async ``*-start``: operand slots alias the operands, scalar contexts get
        no buffer, the rest (the destination) is new. ``copy-start`` is (destination, source, context)."""
        opnd_shapes = [comp.by_name[o].shape for o in ins.operands]
        out: list[Value] = []
        for i, part in enumerate(ins.shape.parts):
            if ins.opcode == "copy-start" and i == 1 and vals:
                out.append(vals[0])
            elif ins.opcode != "copy-start" and i == 0 and vals and (
                    (len(vals) == 1 and part == opnd_shapes[0])
                    or (part.is_tuple and list(part.parts) == opnd_shapes)):
                out.append(vals[0] if len(vals) == 1 and not part.is_tuple else tuple(vals))
            elif not part.is_tuple and not part.dims and part.dtype in ("u32", "s32"):
                out.append(None)
            else:
                out.append(self._new(f"{prefix}{ins.name}#{i}", part, "activation"))
        return tuple(out)


def _flatten_with_index(v: Value, prefix: tuple = ()) -> list[tuple[tuple, str]]:
    if v is None:
        return []
    if isinstance(v, str):
        return [(prefix, v)]
    out = []
    for i, x in enumerate(v):
        out.extend(_flatten_with_index(x, prefix + (i,)))
    return out


def _same_array(a: Shape, b: Shape | None) -> bool:
    """Same element type and dimensions (layouts are not kept)."""
    return b is not None and not a.is_tuple and not b.is_tuple and a.dtype == b.dtype and a.dims == b.dims


def _leaf(v: Value, index: tuple[int, ...]) -> Value:
    """The part of a value at a shape index (``None`` when the index does not exist)."""
    for i in index:
        if not isinstance(v, tuple) or i >= len(v):
            return None
        v = v[i]
    return v


def _through_bitcasts(fcomp: Computation, name: str) -> list[tuple[str, Instr]]:
    """Users of ``name`` (looking through bitcasts), each with the operand name it uses."""
    out = []
    for u in fcomp.users.get(name, []):
        if u.opcode == "bitcast":
            out.extend(_through_bitcasts(fcomp, u.name))
        else:
            out.append((name, u))
    return out


def _fused_param_read_bytes(fcomp: Computation, pname: str, full: int) -> int:
    users = _through_bitcasts(fcomp, pname)
    if not users:
        return 0
    total = 0
    for used_as, u in users:
        first = u.operands[0] == used_as if u.operands else False
        if u.opcode in ("slice", "dynamic-slice", "gather") and first:
            total += u.shape.nbytes
        elif u.opcode == "dynamic-update-slice" and first:
            continue
        else:
            return full
    return total


def _defines_its_value(comp: Computation, name: str) -> bool:
    """Is the instruction ``name`` the one that defines its value, for the in-place rule of ``_inplace_sources``?
    A bitcast is not (it passes its operand's value on); a get-tuple-element is not unless its tuple is a
    computation's parameter (a loop body's state, a call's arguments)."""
    ins = comp.by_name[name]
    if ins.opcode == "bitcast":
        return False
    while ins.opcode == "get-tuple-element":
        ins = comp.by_name[ins.operands[0]]
        if ins.opcode == "parameter":
            return True
        if ins.opcode != "get-tuple-element":
            return False
    return True


def _updated_in_place(fcomp: Computation, pname: str) -> bool:
    """True if the fused parameter is the operand a dynamic-update-slice writes into (an in-place op)."""
    return any(u.opcode == "dynamic-update-slice" and u.operands[0] == pname for u in fcomp.users.get(pname, []))


def _elementwise_access(fcomp: Computation, pname: str) -> bool:
    """True if the fused parameter reaches the root only through element-wise ops."""
    seen, todo = set(), [pname]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for u in fcomp.users.get(name, []):
            if u.opcode == "dynamic-update-slice":
                if u.operands[0] != name:
                    return False
            elif u.opcode not in _ELEMENTWISE_ACCESS:
                return False
            todo.append(u.name)
    return True


# --------------------------------------------------------------------------- API

def parse_hlo_text(text: str, path: str = "<hlo>", *, name: str | None = None,
                   max_expanded_ops: int = 200_000, alignment: int = 1, loop_state: str = "fresh") -> HloImport:
    """Import HLO text (see the module docstring); warnings are also issued as :class:`HloImportWarning`.

    ``loop_state``: ``"fresh"`` (the default) gives a while loop's carried values a new buffer per iteration;
    ``"alias"`` keeps each carried value in one buffer across the loop where XLA does (its while aliasing:
    the loop's operand, body parameter, body root and result share one allocation; a parameter carried in,
    or an old value still read after the new one is written, is copied instead). With ``max_expanded_ops``
    below the loop's ops as well (the body imported once, its costs scaled by the trip count), that is the
    loop as XLA's memory-space assignment sees it: the body once, the carried values live across it.
    """
    if loop_state not in LOOP_STATES:
        raise InputError(f"{path}: loop_state must be one of {', '.join(LOOP_STATES)}, got {loop_state!r}")
    module = parse_hlo_module(text, path)
    imp = _Importer(module, name=name, max_expanded_ops=max_expanded_ops, alignment=alignment,
                    loop_state=loop_state)
    root = imp.run(module.entry, None, "")
    for buf in buffer_leaves(root):
        if imp.b.kinds.get(buf) == "activation":
            imp.b.set_kind(buf, "output")
    for out_index, param, param_index in module.aliases:  # donated parameters hold their outputs
        src, dst = _leaf(imp.entry_params.get(param), param_index), _leaf(root, out_index)
        if isinstance(src, str) and isinstance(dst, str) and src != dst:
            imp.b.donate(src, dst)
    problem = imp.b.build()
    if imp.memory_space_copies:
        n = imp.memory_space_copies
        imp._warn(f"{path}: {n} cop{'y' if n == 1 else 'ies'} between memory spaces (XLA's memory-space assignment: "
                  "prefetches, evictions) read as the values they copy: the program before that assignment")
    for msg in imp.warnings:
        warnings.warn(msg, HloImportWarning, stacklevel=3)
    return HloImport(problem, imp.flops, imp.trans, imp.warnings, module.name)


def load_hlo(path: str | os.PathLike, **options) -> HloImport:
    """Read and import an HLO text file (``InputError`` on unreadable or bad input)."""
    path = str(path)
    text = read_text(path)
    if not options.get("name"):
        base = os.path.basename(path)
        base = base[:-3] if base.endswith(".gz") else base
        for suffix in (".hlo.txt", ".txt", ".hlo"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        options["name"] = base
    return parse_hlo_text(text, path, **options)


def import_hlo(path: str | os.PathLike, **options) -> Problem:
    """The workload of an HLO text file (see :func:`load_hlo` for the details kept aside)."""
    return load_hlo(path, **options).problem


__all__ = ["LOOP_STATES", "HloImport", "HloImportWarning", "Shape", "import_hlo", "load_hlo", "parse_hlo_module",
           "parse_hlo_text", "parse_shape", "summarize"]
