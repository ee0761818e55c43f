"""In-place pairs share storage: one merged buffer per chain (docs/architecture.md, "The model").

A workload's ``inplace`` pairs ``(src, dst)`` say that ``dst`` takes ``src``'s storage: an op
that writes ``dst`` in the place of a ``src`` that dies there (XLA's buffer sharing), or a
donated parameter whose storage holds an output (HLO ``input_output_alias``). Two buffers of
a pair are one allocation, so every consumer -- info, bounds, solvers, the validator -- must
see one buffer, not two that overlap in time. :func:`merge_inplace` is the one place that
turns the pairs into storage; :func:`mallocgame.formats.io.parse_workload` calls it on every workload
it reads, so all of them see merged storage.

Each connected group of pairs (a pair, a chain, any shape) becomes one buffer: the chain's head's
id, the members' largest size and alignment, the hull of their live ranges; operands are renamed
to it and the result has no pairs, so merging is idempotent. The rules, and what a round trip
through the workload JSON keeps: docs/guide/formats.md, "In-place pairs and merged storage".

Example:
    >>> from mallocgame.problem.model import Buffer, Op, Operand, Problem
    >>> p = Problem("chain", buffers=(Buffer("x", 8, 0, 2, kind="input"), Buffer("a", 8, 0, 2), Buffer("b", 16, 1, 3),
    ...             Buffer("c", 16, 2, 3, kind="output")),
    ...             ops=(Op("f", operands=(Operand("x", "read", 8), Operand("a", "write", 8))),
    ...                  Op("g", operands=(Operand("a", "read", 8), Operand("b", "write", 16))),
    ...                  Op("h", operands=(Operand("b", "read", 16), Operand("c", "write", 16)))),
    ...             inplace=(("a", "b"), ("b", "c")))
    >>> m = merge_inplace(p)
    >>> [(b.id, b.size, b.start, b.end, b.kind) for b in m.buffers], m.inplace
    ([('x', 8, 0, 2, 'input'), ('a', 16, 0, 3, 'output')], ())
    >>> [(o.buffer, o.access) for o in m.ops[1].operands]
    [('a', 'read'), ('a', 'write')]
"""

from __future__ import annotations

import dataclasses

from mallocgame.problem.model import Buffer, InputError, Operand, Problem


def inplace_groups(problem: Problem) -> list[list[int]]:
    """Buffer indices of each group joined by in-place pairs (groups of two or more), in buffer order."""
    index = problem.index
    parent = list(range(problem.n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for src, dst in problem.inplace:
        if src not in index or dst not in index:
            missing = src if src not in index else dst
            raise InputError(f"{problem.source or problem.name}: in-place pair ({src!r}, {dst!r}): "
                             f"unknown buffer {missing!r}")
        a, b = find(index[src]), find(index[dst])
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(problem.n):
        groups.setdefault(find(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def merge_inplace(problem: Problem) -> Problem:
    """``problem`` with every in-place group merged into one buffer (see the module docstring)."""
    if not problem.inplace:
        return problem
    buffers = problem.buffers
    sources = {s for s, _ in problem.inplace}
    targets = {d for _, d in problem.inplace}
    rename: dict[str, str] = {}
    merged: dict[int, Buffer] = {}  # position of the group's first member -> merged buffer
    dropped: set[int] = set()
    for group in inplace_groups(problem):
        members = [buffers[i] for i in group]
        heads = [b for b in members if b.id in sources and b.id not in targets] or members
        head = heads[0]
        benefits = [b.benefit for b in members if b.benefit is not None]
        merged[group[0]] = Buffer(
            id=head.id,
            size=max(b.size for b in members),
            start=min(b.start for b in members),
            end=max(b.end for b in members),
            benefit=sum(benefits) if benefits else None,
            alignment=max(b.alignment for b in members),
            kind="output" if any(b.kind == "output" for b in members) else head.kind,
        )
        dropped.update(group[1:])
        for b in members:
            rename[b.id] = head.id
    new_buffers = tuple(merged.get(i, b) for i, b in enumerate(buffers) if i not in dropped)
    ops = tuple(
        dataclasses.replace(op, operands=tuple(Operand(rename.get(o.buffer, o.buffer), o.access, o.bytes)
                                               for o in op.operands))
        if any(o.buffer in rename for o in op.operands) else op
        for op in problem.ops
    )
    return problem.replace(buffers=new_buffers, ops=ops, inplace=())


__all__ = ["inplace_groups", "merge_inplace"]
