"""The CP-SAT model of fixed-time rectangle packing: the one builder every packing model uses.

Each item is a rectangle with a fixed time side ``[start, end)`` and an address side
``[offset, offset + size)`` whose offset is a multiple of its alignment; two items that are
live at the same time never share an address, and the rectangles lie below ``top``. This is
dynamic storage allocation (Garey & Johnson's problem SR2; MiniMalloc's model, Moffitt,
ASPLOS'23) and, with optional items, the packing half of map mode. Its users:

- ``cpsat`` (``mallocgame.solvers.cpsat``): map and pack parts, and the prefetch windows, whose
  items are the candidate stays;
- ``pack-search``'s CP-SAT thread (``mallocgame.solvers.pack_search``);
- the strip-packing bound (:func:`mallocgame.bounds.bounds.pack_lower_bound`'s window bound).

The builder adds the variables (one offset step per item, a presence literal per optional item)
and the no-overlap constraints in one of three formulations: ``"2d"`` (``AddNoOverlap2D`` over
time x address), ``"cliques"`` (one ``AddNoOverlap`` on the address side per maximal live set:
pairwise disjointness of the items live together, a stronger propagation on interval graphs),
or ``"both"``; optionally the knapsack row of each maximal live set (the LP relaxation's row,
:func:`add_no_overlap`) and a redundant cumulative over time (:func:`add_cumulative`). Objectives and hints stay with the caller.

Example:
    >>> import numpy as np
    >>> from ortools.sat.python import cp_model
    >>> model = cp_model.CpModel()
    >>> start, end, size = np.array([0, 1, 2]), np.array([2, 3, 4]), np.array([4, 4, 4])
    >>> rect = add_rectangles(model, start, end, size, top=8)
    >>> add_no_overlap(model, rect, formulation="cliques")
    True
    >>> add_cumulative(model, rect, 8)
    >>> solver = cp_model.CpSolver()
    >>> solver.solve(model) == cp_model.OPTIMAL
    True
    >>> offsets = rect.offsets(solver)
    >>> bool(offsets[0] != offsets[1] and offsets[1] != offsets[2])
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.problem.intervals import maximal_live_sets

FORMULATIONS = ("2d", "cliques", "both")


@dataclass(frozen=True)
class Rectangles:
    """The CP-SAT variables of ``m`` packed items (a list entry is ``None`` where an item has no room).

    ``steps[i]``: the offset of item ``i`` in units of its alignment (offset = ``steps[i] * align[i]``);
    ``present[i]``: its presence literal, ``None`` for a mandatory item; ``time[i]``, ``address[i]``:
    its interval variables. ``start``, ``end``, ``size``, ``align`` ``[m]`` are the data it was built
    from; ``pinned`` ``[m]`` marks the items given a fixed offset, ``pinned_offset`` ``[m]`` holds
    those offsets (``-1`` elsewhere).
    """

    steps: list[Any]
    present: list[Any]
    time: list[Any]
    address: list[Any]
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    align: np.ndarray
    pinned: np.ndarray
    pinned_offset: np.ndarray

    @property
    def placed(self) -> list[int]:
        """The items that have variables (every item with room below ``top``)."""
        return [i for i, k in enumerate(self.steps) if k is not None]

    def offset_expr(self, i: int) -> Any:
        """Item ``i``'s offset as a linear expression."""
        al = int(self.align[i])
        return self.steps[i] * al if al > 1 else self.steps[i]

    def offsets(self, solver: Any) -> np.ndarray:
        """The offsets ``[m]`` of a solved model, ``-1`` for an absent item or one without room."""
        out = np.full(len(self.steps), -1, np.int64)
        for i in self.placed:
            p = self.present[i]
            if p is None or solver.boolean_value(p):
                out[i] = int(solver.value(self.steps[i])) * int(self.align[i])
        return out


def add_rectangles(model: Any, start: np.ndarray, end: np.ndarray, size: np.ndarray, *, top: int,
                   align: np.ndarray | None = None, optional: bool | np.ndarray = False, floor: int = 0,
                   fixed_offsets: Sequence[int | None] | None = None, skip: np.ndarray | None = None,
                   name: str = "r") -> Rectangles:
    """Add one rectangle per item to ``model``: offsets in ``[floor, top - size]``, multiples of ``align``.

    ``start``, ``end``, ``size``, ``align`` ``[m]`` are integers in the caller's units; ``optional``
    (one flag, or ``[m]`` flags) gives an item a presence literal. ``fixed_offsets[i]``, when not
    ``None``, pins item ``i`` at that offset, present (its domain is not checked: a caller pins what
    is already placed). An item without room (``size > top - floor``) gets no variables:
    ``steps[i] is None``; for a mandatory item that makes the caller's problem infeasible, which the
    caller checks. ``skip`` ``[m]`` marks items the caller leaves out (no variables either).
    """
    m = len(size)
    align = np.ones(m, np.int64) if align is None else np.maximum(np.asarray(align, np.int64), 1)
    opt = np.broadcast_to(np.asarray(optional, bool), (m,))
    pinned = np.array([fixed_offsets is not None and fixed_offsets[i] is not None for i in range(m)], bool)
    steps, present, time_iv, addr_iv = [], [], [], []
    for i in range(m):
        z, al, s, e = int(size[i]), int(align[i]), int(start[i]), int(end[i])
        if pinned[i]:
            k = model.new_constant(int(fixed_offsets[i]) // al)
        else:
            lo = -(-int(floor) // al)
            hi = (int(top) - z) // al if top >= z else lo - 1
            if hi < lo or (skip is not None and skip[i]):
                steps.append(None)
                present.append(None)
                time_iv.append(None)
                addr_iv.append(None)
                continue
            k = model.new_int_var(lo, hi, f"{name}k{i}")
        offset = k * al if al > 1 else k
        if opt[i]:
            p = model.new_bool_var(f"{name}p{i}")
            if pinned[i]:
                model.add(p == 1)
            x = model.new_optional_fixed_size_interval_var(s, e - s, p, f"{name}x{i}")
            y = model.new_optional_fixed_size_interval_var(offset, z, p, f"{name}y{i}")
        else:
            p = None
            x = model.new_fixed_size_interval_var(s, e - s, f"{name}x{i}")
            y = model.new_fixed_size_interval_var(offset, z, f"{name}y{i}")
        steps.append(k)
        present.append(p)
        time_iv.append(x)
        addr_iv.append(y)
    return Rectangles(steps, present, time_iv, addr_iv, np.asarray(start, np.int64), np.asarray(end, np.int64),
                      np.asarray(size, np.int64), align, pinned,
                      np.array([int(fixed_offsets[i]) if pinned[i] else -1 for i in range(m)], np.int64))


def add_no_overlap(model: Any, rect: Rectangles, *, formulation: str = "2d", knapsack_top: int | None = None,
                   knapsack_always: bool = False, cancelled: Any = None, pinned_as_holes: bool = False,
                   cliques_of: Callable[[np.ndarray], list[np.ndarray]] | None = None) -> bool:
    """Forbid two items live at the same time from sharing an address.

    ``formulation`` is one of :data:`FORMULATIONS`. ``knapsack_top``: also add, for every maximal
    live set with optional items, ``sum(size * present) <= knapsack_top`` minus the mandatory
    items' sizes (pinned optional items count through their literal, which is true); only where
    the sizes could exceed it, unless ``knapsack_always``. Live sets of pinned items alone get no
    row (they are placed already). ``cancelled``: an object with ``is_set()`` polled between rows;
    returns ``False`` when it was set (the model is then incomplete), else ``True``.

    ``pinned_as_holes``: the same constraint, written differently: each unpinned item's offset
    domain loses the offsets where it would meet a pinned item live with it (:func:`cut_pinned_holes`),
    and the no-overlap constraints hold the unpinned items only. Why: CP-SAT 9.15 spends seconds
    before its search on a ``no_overlap_2d`` of many fixed rectangles around a few optional ones,
    whatever its time limit (docs/results.md, "cpsat's defaults").

    ``cliques_of``: where the items are buffers of a problem, a function from the items with variables
    (``[p]`` item indices) to their maximal live sets in time order, as sorted positions into that array,
    read from the problem's interference graph (:meth:`mallocgame.problem.graph.Conflicts.cliques_among`); by default
    the sweep :func:`~mallocgame.problem.intervals.maximal_live_sets` over their live ranges, which gives the same sets.
    """
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {', '.join(FORMULATIONS)}, not {formulation!r}")
    idx = rect.placed
    ys = [rect.address[i] for i in idx]
    sizes = [int(rect.size[i]) for i in idx]
    lits = [rect.present[i] for i in idx]
    pinned = rect.pinned[idx] if len(idx) else np.zeros(0, bool)
    in_overlap = list(range(len(idx)))
    if pinned_as_holes:
        cut_pinned_holes(model, rect)
        in_overlap = [j for j in in_overlap if not pinned[j]]
    if formulation in ("2d", "both"):
        model.add_no_overlap_2d([rect.time[idx[j]] for j in in_overlap], [ys[j] for j in in_overlap])
    if formulation == "2d" and knapsack_top is None:
        return True
    rows = maximal_live_sets(rect.start[idx], rect.end[idx]) if cliques_of is None else cliques_of(np.asarray(idx, np.int64))
    for row in rows:
        if cancelled is not None and cancelled.is_set():
            return False
        members = row.tolist()
        if len(members) < 2 or pinned[row].all():
            continue
        if formulation in ("cliques", "both"):
            among = [j for j in members if not (pinned_as_holes and pinned[j])]
            if len(among) > 1:
                model.add_no_overlap([ys[j] for j in among])
        if knapsack_top is not None:
            optional = [j for j in members if lits[j] is not None]
            fixed = sum(sizes[j] for j in members if lits[j] is None)
            if optional and (knapsack_always or sum(sizes[j] for j in optional) > knapsack_top - fixed):
                model.add(sum(sizes[j] * lits[j] for j in optional) <= knapsack_top - fixed)
    return True


def pinned_holes(rect: Rectangles, i: int, pinned_items: np.ndarray | None = None) -> list[tuple[int, int]]:
    """The offset steps ``[lo, hi]`` (inclusive, in units of item ``i``'s alignment) at which item ``i``
    would share an address with a pinned item live at the same time; overlapping runs may repeat.
    ``pinned_items``: the indices of the pinned items, when the caller has them."""
    p = np.flatnonzero(rect.pinned) if pinned_items is None else pinned_items
    if not len(p):
        return []
    live = p[(rect.start[p] < rect.end[i]) & (rect.end[p] > rect.start[i])]
    if not len(live):
        return []
    al, z = int(rect.align[i]), int(rect.size[i])
    lo_addr = rect.pinned_offset[live]
    hi_addr = lo_addr + rect.size[live]
    # Item i at offset o meets [a, b) when o < b and o + z > a: steps ceil((a - z + 1) / al) .. floor((b - 1) / al).
    lo = -((z - 1 - lo_addr) // al)
    hi = (hi_addr - 1) // al
    keep = lo <= hi
    return list(zip(lo[keep].tolist(), hi[keep].tolist()))


def cut_pinned_holes(model: Any, rect: Rectangles) -> None:
    """Remove from each unpinned item's offset domain the steps of :func:`pinned_holes` (an exact
    rewrite of its no-overlap with the pinned items; an item left without an offset is then absent,
    or the model infeasible for a mandatory one)."""
    from ortools.util.python.sorted_interval_list import Domain

    pinned_items = np.flatnonzero(rect.pinned)
    for i in rect.placed:
        if rect.pinned[i]:
            continue
        holes = pinned_holes(rect, i, pinned_items)
        if not holes:
            continue
        k = rect.steps[i]
        allowed = Domain.from_flat_intervals(list(model.proto.variables[k.index].domain)).intersection_with(
            Domain.from_intervals([list(h) for h in holes]).complement())
        if allowed.is_empty() and rect.present[i] is not None:
            model.add(rect.present[i] == 0)
        else:  # an absent item's offset is free anyway, so its domain may shrink unconditionally
            model.add_linear_expression_in_domain(k, allowed)


def add_cumulative(model: Any, rect: Rectangles, capacity: Any) -> None:
    """The redundant cumulative over time: the items live at one time need at most ``capacity``
    (an int, or an integer variable such as a peak to minimise)."""
    idx = rect.placed
    model.add_cumulative([rect.time[i] for i in idx], [int(rect.size[i]) for i in idx], capacity)
