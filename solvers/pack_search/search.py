"""Exact pack-mode search: dynamic storage allocation by canonical depth-first search.

Pack mode (docs/architecture.md, "The problem"): buffer ``i`` is live on the half-open range
``[start[i], end[i])`` and needs ``size[i]`` bytes; find integer offsets ``>= 0`` with
``offset + size <= capacity`` such that buffers whose live ranges overlap get disjoint
address ranges, or (``capacity=None``) minimise the peak ``max(offset + size)``.

An independent Python implementation of the ideas published with MiniMalloc (M. D. Moffitt,
ASPLOS 2023: canonical solutions, dominance, section inference, hat-less pruning, dynamic
decomposition, restarts), with additions of our own: binary branching with conflict weights,
portfolio restarts learning per lane, divided units, a CP-SAT thread, peak minimisation by
bisection and a first-fit sweep for large components. docs/pack_search.md describes each, with
the proof that nothing is pruned (so "INFEASIBLE" is a proof); the measurements behind the
choices are in experiments/results/pack_search_history.md.

Entry point: :func:`pack`.
"""

from __future__ import annotations

import bisect
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame._native import CanonicalSearch, ComponentTables, FailedStates, first_fit_loop
from mallocgame.algorithms.packing_model import add_no_overlap, add_rectangles
from mallocgame.algorithms.placement import stacked_offsets
from mallocgame.problem.intervals import component_runs, max_live_of
from mallocgame.runtime.budget import Budget
from mallocgame.runtime.native_engine import engine

__all__ = ["PackResult", "pack", "check_packing"]

_INF = 1 << 40          # "no min offset" marker (placed buffers)
_EXCL = 1 << 42         # added to ``eff`` of a buffer excluded from its current min offset
_VM_INF32 = 1 << 30
_DENSE_LIMIT = 4_000_000   # max buffers x sections for the exact engine on one component (~100 MB); above: window repair
_MAX_EXACT = 20_000        # max buffers of a component for the exact engine
_DENSE_SECONDS = 1e-7      # seconds per buffer x section to set up the exact engine (measured, loaded machine)


# ----------------------------------------------------------------------------- results

@dataclass
class PackResult:
    """Answer of :func:`pack`.

    ``offsets``: int64 ``[n]``, ``-1`` where no offset was found. ``status``: ``"OPTIMAL"``
    (a packing within ``capacity`` was found, or with ``capacity=None`` the peak is proven
    minimal), ``"FEASIBLE"`` (``capacity=None`` only: a packing, peak not proven minimal),
    ``"INFEASIBLE"`` (proven: no packing fits ``capacity``), ``"UNKNOWN"`` (time ran out).
    ``peak``: ``max(offset + size)`` of the returned packing (``None`` if incomplete).
    ``lower_bound``: proven lower bound on the peak. ``history``: ``[(seconds, peak)]`` each
    time a better complete packing was found. ``stats``: counters (nodes, backtracks, ...).
    """

    offsets: np.ndarray
    status: str
    peak: int | None
    lower_bound: int
    history: list[tuple[float, int]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


class _Abort(Exception):
    """Raised inside the search when a node limit, the deadline or a stop request hits."""


# ----------------------------------------------------------------------------- helpers

def check_packing(size, start, end, offsets, capacity=None, alignment=None) -> str | None:
    """Independent check of a complete packing; ``None`` if valid, else the first problem.

    Sweeps time (releases before allocations at equal times) keeping the address ranges of the live
    buffers in offset order: they are disjoint while the packing holds, so a new buffer overlaps one of
    them exactly when it overlaps its neighbour below or above in that order (O(n log n) plus list moves,
    where comparing each buffer with every live one took minutes at 20,000 buffers).
    """
    size = np.asarray(size, np.int64)
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    off = np.asarray(offsets, np.int64)
    if (off < 0).any():
        return f"buffer {int(np.flatnonzero(off < 0)[0])} has no offset"
    if capacity is not None and (off + size > capacity).any():
        return f"buffer {int(np.flatnonzero(off + size > capacity)[0])} exceeds the capacity"
    if alignment is not None:
        al = np.asarray(alignment, np.int64)
        if (off % np.maximum(al, 1) != 0).any():
            return f"buffer {int(np.flatnonzero(off % np.maximum(al, 1) != 0)[0])} is misaligned"
    n = len(size)
    # events: releases (kind 0) before allocations (kind 1) at equal times; allocations in start order
    who = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((who, np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)]),
                        np.concatenate([end, start])))
    off_l, top_l = off.tolist(), (off + size).tolist()
    live_offs: list[int] = []  # offsets of the live buffers, sorted (unique: their ranges are disjoint)
    owner: dict[int, int] = {}  # live offset -> buffer
    empty = (size <= 0).tolist()  # an empty buffer overlaps nothing
    for e in order.tolist():
        i = e - n if e >= n else e
        if empty[i]:
            continue
        o = off_l[i]
        if e < n:  # release
            del live_offs[bisect.bisect_left(live_offs, o)]
            del owner[o]
            continue
        k = bisect.bisect_left(live_offs, o)
        if k < len(live_offs) and live_offs[k] < top_l[i]:
            return f"buffers {owner[live_offs[k]]} and {i} overlap in time and in memory"
        if k > 0 and top_l[owner[live_offs[k - 1]]] > o:
            return f"buffers {owner[live_offs[k - 1]]} and {i} overlap in time and in memory"
        live_offs.insert(k, o)
        owner[o] = i
    return None


def _gcd_all(values: np.ndarray) -> int:
    g = int(np.gcd.reduce(values)) if len(values) else 0
    return g if g > 0 else 1


# ----------------------------------------------------------------------------- the search

class _Component:
    """Precomputed data of one interval-graph component, in divided ("scaled") units.

    Local buffer ``k`` (0..m-1) is ordered by section start. ``sl``/``sh``: int ``[m]``
    first section and one past the last section. ``nbr[k]``: int64 array of overlapping
    buffers. ``member``: bool ``[m, S]``.
    """

    def __init__(self, size: np.ndarray, start: np.ndarray, end: np.ndarray,
                 align: np.ndarray | None, ident: np.ndarray | None = None):
        pts = np.unique(np.concatenate([start, end]))
        sl = np.searchsorted(pts, start)
        sh = np.searchsorted(pts, end)
        order = np.lexsort((sh, sl))
        self.order = order                       # local k -> index into the given arrays
        self.m = m = len(size)
        self.S = S = len(pts) - 1
        self.size = size[order].astype(np.int64)
        self.sl = sl[order].astype(np.int64)
        self.sh = sh[order].astype(np.int64)
        self.length = (end - start)[order].astype(np.int64)
        self.align = None if align is None else align[order].astype(np.int64)
        self.size_l = self.size.tolist()
        self.sl_l = self.sl.tolist()
        self.sh_l = self.sh.tolist()
        # neighbours: k' with sl[k'] < sh[k] and sh[k'] > sl[k]; rows sorted by sl
        self.nbr: list[np.ndarray] = []
        prefix = np.searchsorted(self.sl, self.sh, side="left")  # rows with sl < sh[k]
        for k in range(m):
            cand = np.arange(prefix[k])
            cand = cand[self.sh[:prefix[k]] > self.sl[k]]
            self.nbr.append(cand[cand != k])
        # sections whose lowest min offset a placement of k can change: k's and its
        # neighbours' (int lists for speed)
        self.nlo = [min([self.sl_l[k]] + self.sl[nb].tolist()) for k, nb in enumerate(self.nbr)]
        self.nhi = [max([self.sh_l[k]] + self.sh[nb].tolist()) for k, nb in enumerate(self.nbr)]
        self.row_end = np.searchsorted(self.sl, np.arange(S + 1), side="left")  # rows sl < B
        live = np.zeros(S + 1, np.int64)
        np.add.at(live, self.sl, self.size)
        np.add.at(live, self.sh, -self.size)
        self.live = np.cumsum(live)[:S]
        self.peak_live = int(self.live.max()) if S else 0
        self.sec_total_max = np.array(
            [self.live[a:b].max() for a, b in zip(self.sl_l, self.sh_l)], np.int64)
        # final tie-break of every preorder: the caller's buffer numbering
        ident = np.arange(m) if ident is None else np.asarray(ident)
        self.ident = np.argsort(np.argsort(ident[order], kind="stable"), kind="stable")

    def preorder(self, keys: list[np.ndarray]) -> np.ndarray:
        """Rank ``[m]`` of each buffer under lexicographic ascending ``keys`` (first primary)."""
        order = np.lexsort(tuple(keys[::-1]) + ())
        rank = np.empty(self.m, np.int64)
        rank[order] = np.arange(self.m)
        return rank

    def heuristic(self, name: str, rng: np.random.Generator | None = None,
                  hint: np.ndarray | None = None, tie_rng: np.random.Generator | None = None) -> np.ndarray:
        """Preorder by a MiniMalloc-style code: W=width (lifetime), A=area, T=max section
        total, Z=size, C=sections; all descending. ``rng`` perturbs the keys (a few
        percent of noise) and breaks ties at random; ``tie_rng`` only breaks the remaining
        ties (a seeded permutation before the caller's numbering)."""
        cols = {
            "W": -self.length, "A": -(self.size * self.length), "T": -self.sec_total_max,
            "Z": -self.size, "C": -(self.sh - self.sl),
        }
        keys = []
        if hint is not None:
            keys.append(np.where(hint >= 0, hint, np.iinfo(np.int64).max))
        for c in name:
            col = cols[c]
            if rng is not None:
                # multiplicative noise of a few percent keeps the character of the key
                col = np.floor(col * rng.uniform(0.85, 1.15, self.m)).astype(np.int64)
            keys.append(col)
        if tie_rng is not None:
            keys.append(tie_rng.permutation(self.m))
        keys.append(rng.permutation(self.m) if rng is not None else self.ident)
        return self.preorder(keys)


class _Searcher:
    """One canonical DFS over a component for a fixed capacity and preorder.

    Branching is binary, at the lowest offset ``o`` any unplaced buffer can take: pick a
    buffer ``b`` whose min offset is ``o`` and either place it there, or *exclude* it from
    ``o`` (it must later be lifted by a buffer placed under its top). MiniMalloc's
    candidate loop (place the first candidate, else the second, ...) is this branching
    with a static choice; here the choice is dynamic (``choice="wdeg"``): the candidate
    with the largest conflict weight summed over its sections goes first, then the one
    whose tightest section has the least room (fail first), then the static preorder.
    Every fully compact packing (no buffer can move down) stays reachable: see the proof
    sketch in the module docstring.

    State (all numpy, undone through a trail): ``minoff`` int64 ``[m]`` (``_INF`` once
    placed); ``eff`` int64 ``[m]`` = ``minoff`` plus ``_EXCL`` while the buffer is excluded
    from that offset (a lift clears it); ``VM`` ``[m, S]`` lower bound on the offset of each
    unplaced buffer on its sections (``INF`` elsewhere); ``total`` int64 ``[S]`` unplaced
    size per section; ``cuts`` int64 ``[S-1]`` unplaced buffers crossing each boundary;
    ``off`` int64 ``[m]``.
    """

    def __init__(self, comp: _Component, cap: int, rank: np.ndarray, *, node_limit: int,
                 deadline: float, stop: threading.Event | None, use_tt: bool = True,
                 choice: str = "tight", weights: np.ndarray | None = None):
        self.c = comp
        self.cap = int(cap)
        self.rank = rank
        self.node_limit = node_limit
        self.deadline = deadline
        self.stop = stop
        self.choice = choice
        self.nodes = 0
        self.backtracks = 0
        self.tt_hits = 0
        self.use_tt = use_tt
        self.tt: set = set()
        m, S = comp.m, comp.S
        self.weights = weights
        if self.cap + int(comp.live.max(initial=0)) < _VM_INF32 // 2:
            self.vinf = _VM_INF32
            vdt = np.int32
        else:
            self.vinf = _INF
            vdt = np.int64
        self.minoff = np.zeros(m, np.int64)
        # eff = minoff, plus _EXCL while the buffer is excluded from its min offset
        self.eff = np.zeros(m, np.int64)
        member = np.zeros((m, S), bool)
        for k in range(m):
            member[k, comp.sl_l[k]:comp.sh_l[k]] = True
        self.VM = np.where(member, 0, self.vinf).astype(vdt)
        self.total = np.append(comp.live, 0)      # one padding section for reduceat
        cuts = np.zeros(S + 1, np.int64)
        np.add.at(cuts, comp.sl + 1, 1)
        np.add.at(cuts, comp.sh, -1)
        self.cuts = np.cumsum(cuts)[1:S]          # boundary j between sections j and j+1
        self.off = np.full(m, -1, np.int64)
        self.trail: list[tuple] = []

    # -- moves ------------------------------------------------------------------------
    def _place(self, b: int, o: int, chg: np.ndarray, old_m: np.ndarray, newm) -> None:
        """Put ``b`` at ``o``; ``chg`` (old min offsets ``old_m``) rise to ``newm`` (which
        also ends any exclusion of theirs: they are lifted)."""
        c = self.c
        l, h = c.sl_l[b], c.sh_l[b]
        VM = self.VM
        if len(chg):
            old_e = self.eff[chg]
            self.minoff[chg] = newm
            self.eff[chg] = newm
            # A row holds one value on its buffer's sections and INF elsewhere, and the neighbours live
            # only on sections [nlo[b], nhi[b]): the trail keeps each neighbour's value, not its row
            # (rows would take depth x neighbours x sections of memory).
            lo, hi = c.nlo[b], c.nhi[b]
            rows = VM[chg, lo:hi]
            old_rows = VM[chg, c.sl[chg]]
            if isinstance(newm, int):
                VM[chg, lo:hi] = np.maximum(rows, newm)
            else:
                VM[chg, lo:hi] = np.maximum(rows, newm[:, None].astype(VM.dtype))
        else:
            old_rows = old_e = None
        self.minoff[b] = _INF
        self.eff[b] = _INF
        VM[b, l:h] = self.vinf
        self.total[l:h] -= c.size_l[b]
        if h - l > 1:
            self.cuts[l:h - 1] -= 1
        self.off[b] = o
        self.trail.append((b, o, chg, old_m, old_rows, old_e))

    def _exclude(self, b: int, lift: int) -> None:
        """``b`` may not take its current min offset; its rows get the bound ``lift``."""
        c = self.c
        self.trail.append((b, -1, None, None, None, None))
        self.eff[b] += _EXCL
        self.VM[b, c.sl_l[b]:c.sh_l[b]] = lift

    def _undo_to(self, mark: int) -> None:
        c = self.c
        tr = self.trail
        VM = self.VM
        while len(tr) > mark:
            b, o, chg, old_m, old_rows, old_e = tr.pop()
            l, h = c.sl_l[b], c.sh_l[b]
            if o < 0:                                   # an exclusion
                self.eff[b] -= _EXCL
                VM[b, l:h] = self.minoff[b]
                continue
            if h - l > 1:
                self.cuts[l:h - 1] += 1
            self.total[l:h] += c.size_l[b]
            VM[b, l:h] = o
            if old_rows is not None:
                lo, hi = c.nlo[b], c.nhi[b]
                rows = VM[chg, lo:hi]
                VM[chg, lo:hi] = np.where(rows >= self.vinf, rows, old_rows[:, None])
                self.minoff[chg] = old_m
                self.eff[chg] = old_e
            self.minoff[b] = o
            self.eff[b] = o
            self.off[b] = -1

    def _sections_ok(self, a: int, bnd: int) -> bool:
        """Exact section inference on sections ``[a, bnd)``: lowest offset bound + unplaced
        total must fit (sections without unplaced buffers are ignored)."""
        uf = self.VM[:self.c.row_end[bnd], a:bnd].min(axis=0)
        np.minimum(uf, self.cap, out=uf)
        uf += self.total[a:bnd]
        if int(uf.max()) <= self.cap:
            return True
        if self.weights is not None:
            self.weights[a + np.flatnonzero(uf > self.cap)] += 1
        return False

    # -- search -----------------------------------------------------------------------
    def run(self) -> bool:
        """True: packed (``self.off`` complete); False: proven impossible; raises _Abort."""
        c = self.c
        if c.m == 0:
            return True
        if c.peak_live > self.cap or int(c.size.max()) > self.cap:
            return False
        if not self._sections_ok(0, c.S):
            return False
        return self._node(np.arange(c.m), 0, c.S)

    def _tick(self) -> None:
        if self.nodes > self.node_limit:
            raise _Abort()
        if (self.nodes & 63) == 0:
            if time.monotonic() > self.deadline or (self.stop is not None and self.stop.is_set()):
                raise _Abort()

    def _node(self, P: np.ndarray, ps: int, pe: int) -> bool:
        """Solve the partition of the (unplaced) buffers ``P`` living in sections
        ``[ps, pe)``; True on success (placements kept), False when proven impossible
        (state restored).

        One loop iteration per node of the binary tree: branch at the lowest min offset ``o``
        on one buffer ``b`` that can take it, first placing ``b`` at ``o``
        (:meth:`_place_and_descend`), then excluding it from ``o`` (:meth:`_lift_bound`)."""
        c = self.c
        minoff = self.minoff
        P = P[minoff[P] < _INF]
        if len(P) == 0:
            return True
        eff = self.eff
        omax = self.cap - int(self.total[ps:pe].max())   # monotone floor: o + total <= cap
        pkey = P.tobytes() if self.use_tt else None
        mark = len(self.trail)
        tkeys = []
        # Within this loop only exclusions change the state (placements are undone) and an
        # exclusion changes no min offset, so all excluded buffers are checked on entry, then
        # only the new one (see _excluded_top).
        ex_top = _INF                    # lowest top of an excluded buffer
        todo: list[int] | None = None    # None: check every excluded buffer
        while True:
            self.nodes += 1
            self._tick()
            ef = eff[P]
            o = int(ef.min())
            if o >= _EXCL or o > omax:
                break                    # only excluded buffers left, or no room above o
            if todo is None:
                todo = P[ef >= _EXCL].tolist()
            ex_top = self._excluded_top(todo, ex_top)
            todo = []
            if o >= ex_top:
                break
            if self.use_tt:
                key = hash((pkey, ef.tobytes()))
                if key in self.tt:
                    self.tt_hits += 1
                    break
                tkeys.append(key)
            b = self._branch_buffer(P[ef == o])
            t = o + c.size_l[b]
            nb = c.nbr[b]
            mn = minoff[nb]
            if t <= self.cap and self._place_and_descend(b, o, t, nb, mn, P, ps, pe):
                return True
            lift = self._lift_bound(o, t, nb, mn)
            if lift < 0:
                break
            self._exclude(b, lift)
            todo = [b]
            if not self._sections_ok(c.sl_l[b], c.sh_l[b]):
                break
        self.backtracks += 1
        self._undo_to(mark)
        if self.use_tt:
            self.tt.update(tkeys)
        return False

    def _excluded_top(self, todo: list[int], ex_top: int) -> int:
        """The lowest top of the excluded buffers ``todo`` and ``ex_top``, or ``-1`` (the node is dead)
        when one of them has no unplaced neighbour starting below its top to lift it.

        Excluded buffers: no placement may reach the top of one (dominance), and each needs
        such a neighbour. (A buffer that is not excluded has its min offset >= o, so its top
        is above o.)"""
        c = self.c
        minoff = self.minoff
        for cb in todo:
            top = int(minoff[cb]) + c.size_l[cb]
            ex_top = min(ex_top, top)
            nbm = minoff[c.nbr[cb]]
            if not len(nbm) or int(nbm.min()) >= top:
                return -1
        return ex_top

    def _branch_buffer(self, cand: np.ndarray) -> int:
        """The buffer to branch on among ``cand`` (the unplaced buffers whose min offset is the lowest)."""
        if len(cand) == 1:
            return int(cand[0])
        if self.choice == "rank":
            return int(cand[np.argmin(self.rank[cand])])
        c = self.c
        lh = np.empty(2 * len(cand), np.int64)
        lh[0::2] = c.sl[cand]
        lh[1::2] = c.sh[cand]
        tmax = np.maximum.reduceat(self.total, lh)[0::2]
        if self.choice == "wdeg":
            # conflict weight of a candidate: summed over the sections it spans
            wsum = np.add.reduceat(self.weights, lh)[0::2]
            return int(cand[np.lexsort((self.rank[cand], -tmax, -wsum))[0]])
        # least room first (largest unplaced total), then static rank
        return int(cand[np.lexsort((self.rank[cand], -tmax))[0]])

    def _place_and_descend(self, b: int, o: int, t: int, nb: np.ndarray, mn: np.ndarray,
                           P: np.ndarray, ps: int, pe: int) -> bool:
        """First branch: ``b`` at ``o`` (top ``t``; neighbours ``nb`` with min offsets ``mn``), then
        the rest of ``P``; True on success, else the placement is undone."""
        c = self.c
        align = c.align
        if align is None:
            m_chg = mn < t
            newm = t
        else:
            a = align[nb]
            tn = -(-t // a) * a
            m_chg = mn < tn
            newm = tn[m_chg]
        mark_b = len(self.trail)
        self._place(b, o, nb[m_chg], mn[m_chg], newm)
        if self._sections_ok(c.nlo[b], c.nhi[b]) and self._descend(b, P, ps, pe):
            return True
        self._undo_to(mark_b)
        return False

    def _descend(self, b: int, P: np.ndarray, ps: int, pe: int) -> bool:
        """After placing ``b``: solve the rest of ``P``, as independent partitions where no unplaced
        buffer crosses a boundary of ``b``'s sections any more (dynamic decomposition)."""
        c = self.c
        l, h = c.sl_l[b], c.sh_l[b]
        if h - l <= 1 or int(self.cuts[l:h - 1].min()) != 0:
            return self._node(P, ps, pe)
        z = np.flatnonzero(self.cuts[l:h - 1] == 0)
        cps = [ps] + (z + (l + 1)).tolist() + [pe]
        U = P[self.minoff[P] < _INF]
        part = np.searchsorted(np.asarray(cps), c.sl[U], side="right") - 1
        for j in range(len(cps) - 1):
            Uj = U[part == j]
            if len(Uj) and not self._node(Uj, cps[j], cps[j + 1]):
                return False
        return True

    def _lift_bound(self, o: int, t: int, nb: np.ndarray, mn: np.ndarray) -> int:
        """Second branch (the buffer of top ``t`` is not at ``o``): the lowest offset it can be lifted to,
        or ``-1`` when nothing can lift it.

        It must be lifted onto an unplaced neighbour placed at >= o and starting below its top
        (else a gap under it would stay open: dominance), so it cannot sit below the lowest such top."""
        if not bool((mn < _INF).any()):
            return -1                                      # hat-less: nothing can lift it
        mnu = np.maximum(mn, o)
        ok_l = mnu < t
        if not ok_l.any():
            return -1
        return int((mnu[ok_l] + self.c.size[nb[ok_l]]).min())


class _NativeSearcher:
    """:class:`_Searcher` compiled (``mallocgame._native.CanonicalSearch``, the ``native`` engine), behind the same
    interface: ``run()`` (raises :class:`_Abort` at a limit), ``nodes``, ``backtracks``, ``tt_hits``, ``off`` and
    ``tt`` (its table of failed states: a ``mallocgame._native.FailedStates``, see :func:`_failed_states`)."""

    def __init__(self, comp: _Component, cap: int, rank: np.ndarray, *, node_limit: int,
                 deadline: float, stop: threading.Event | None, use_tt: bool = True,
                 choice: str = "tight", weights: np.ndarray | None = None):
        tables = comp.__dict__.get("native_tables")
        if tables is None:  # built once per component, shared by its runs
            tables = comp.native_tables = ComponentTables(comp)
        self.core = CanonicalSearch(tables, int(cap), rank, node_limit=int(node_limit), deadline=float(deadline),
                                    stop=stop, use_tt=use_tt, choice=choice, weights=weights)

    def run(self) -> bool:
        ok = self.core.run()
        if ok is None:
            raise _Abort()
        return ok

    nodes = property(lambda self: self.core.nodes)
    backtracks = property(lambda self: self.core.backtracks)
    tt_hits = property(lambda self: self.core.tt_hits)
    off = property(lambda self: self.core.off)

    @property
    def tt(self):
        return self.core.tt

    @tt.setter
    def tt(self, table) -> None:
        self.core.tt = table


def _searcher(comp: _Component, cap: int, rank: np.ndarray, **options) -> _Searcher | _NativeSearcher:
    """The canonical search of the engine :func:`mallocgame.runtime.native_engine.engine` names (``native``: compiled)."""
    return (_NativeSearcher if engine() == "native" else _Searcher)(comp, cap, rank, **options)


def _failed_states():
    """An empty table of failed states for :func:`_searcher`'s engine."""
    return FailedStates() if engine() == "native" else set()


# ----------------------------------------------------------------------------- CP-SAT engine

class _CpSatRun:
    """CP-SAT on one component for a fixed capacity (scaled units), in a thread.

    Model: ``x_i = align_i * y_i`` with ``x_i + size_i <= cap``; one ``AddNoOverlap`` per
    maximal clique of the interval graph (equivalent to pairwise disjointness of
    time-overlapping buffers, and a stronger propagation than ``AddNoOverlap2D`` here).
    Single worker, seeded, ends at ``deadline`` (a ``time.monotonic`` instant). The
    model is built inside the thread, so the search keeps going meanwhile. ``result``:
    local offsets array, ``False`` (proven infeasible) or ``None`` (unknown).
    """

    def __init__(self, comp: _Component, cap: int, seed: int, deadline: float,
                 hint: np.ndarray | None = None, workers: int = 1,
                 on_done: threading.Event | None = None):
        self.comp, self.cap, self.seed, self.deadline = comp, int(cap), int(seed), deadline
        self.hint, self.workers, self.on_done = hint, int(workers), on_done
        self.result: np.ndarray | bool | None = None
        self.done = threading.Event()
        self.cancel = threading.Event()
        self.solver = None
        self.thread: threading.Thread | None = None

    def _run(self) -> None:
        if _CPSAT_NICE:
            # a helper: on Linux a thread has its own nice value, so CP-SAT takes only CPU the
            # search leaves idle and never slows it down (on a loaded 2-core machine it did: I 4.4 -> 6.2 s)
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
            except (AttributeError, OSError):
                pass
        try:
            from ortools.sat.python import cp_model  # lazy: only when the engine runs
            comp, cap, hint = self.comp, self.cap, self.hint
            m = cp_model.CpModel()
            al = comp.align if comp.align is not None else np.ones(comp.m, np.int64)
            rect = add_rectangles(m, comp.sl, comp.sh, comp.size_l, top=cap, align=al)
            if len(rect.placed) < comp.m:
                self.result = False  # an item taller than the capacity: no packing
                return
            if hint is not None:
                for k in range(comp.m):
                    a = int(al[k])
                    if hint[k] >= 0 and hint[k] % a == 0 and hint[k] + comp.size_l[k] <= cap:
                        m.AddHint(rect.steps[k], int(hint[k] // a))
            if not add_no_overlap(m, rect, formulation="cliques", cancelled=self.cancel):
                return
            ys = rect.steps
            solver = cp_model.CpSolver()
            p = solver.parameters
            p.max_time_in_seconds = max(0.01, Budget.until(self.deadline).seconds)
            p.num_workers = self.workers
            p.random_seed = self.seed % (2 ** 31)
            self.solver = solver
            if self.cancel.is_set():
                return
            st = solver.Solve(m)
            if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                self.result = np.array([solver.Value(y) for y in ys], np.int64) * al
            elif st == cp_model.INFEASIBLE:
                self.result = False
        finally:
            self.done.set()
            if self.on_done is not None and self.result is not None:
                self.on_done.set()          # tell the search thread to stop

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="pack-search-cpsat", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Cancel and wait: CP-SAT stops within milliseconds once its solve has begun, so
        keep asking until the thread has ended."""
        self.cancel.set()
        while self.thread is not None and self.thread.is_alive():
            if self.solver is not None:
                self.solver.StopSearch()
            self.thread.join(timeout=0.02)


# ----------------------------------------------------------------------------- driver

# The portfolio of deterministic preorders (MiniMalloc's three plus size first), in the
# order they run within a round; see the module docstring ("Portfolio restarts") for the measurements.
_PORTFOLIO = (("wdeg", "ZTW"), ("wdeg", "TWA"), ("wdeg", "WAT"), ("wdeg", "TAW"))


class _Stats:
    def __init__(self):
        self.nodes = 0
        self.backtracks = 0
        self.tt_hits = 0
        self.restarts = 0
        self.cpsat_runs = 0
        self.cpsat_wins = 0
        self.search_wins = 0
        self.components = 0
        self.fallback_components = 0
        self.large_components = 0   # components above the exact engine's limits (window repair)
        self.windows = 0            # CP-SAT windows solved by the repair
        self.windows_stuck = 0      # buffers the repair left above its target
        self.window_solves = 0      # CP-SAT calls of the repair (restarts included)
        self.fallback = ""          # what was done instead of the exact engine, and how it ended
        self.winner = ""

    def add(self, s: _Searcher) -> None:
        self.nodes += s.nodes
        self.backtracks += s.backtracks
        self.tt_hits += s.tt_hits
        self.restarts += 1

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _greedy(comp: _Component, deadline: float = math.inf) -> np.ndarray | None:
    """First descent of the canonical search with unbounded capacity: every buffer goes
    to its lowest offset in (offset, rank) order. Returns local offsets ``[m]``, or ``None``
    when ``deadline`` (a ``time.monotonic`` instant) comes first (on 5k buffers it takes seconds)."""
    big = int(comp.size.sum()) * (int(comp.align.max()) if comp.align is not None else 1) + 1
    s = _searcher(comp, big, comp.heuristic("TWA"), node_limit=10 * comp.m + 10,
                  deadline=deadline, stop=None, use_tt=False, choice="rank")
    # The descent recurses once per placed buffer, like the search itself.
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 4 * comp.m + 1000))
    try:
        if not s.run():  # cannot happen with an unbounded capacity
            raise RuntimeError("greedy descent failed")
    except _Abort:  # the deadline (or the node limit) came first
        return None
    finally:
        sys.setrecursionlimit(old_limit)
    return s.off.copy()


def _first_fit(size: np.ndarray, start: np.ndarray, end: np.ndarray,
               align: np.ndarray, deadline: float | None = None) -> np.ndarray:
    """Fallback for components too large for the exact engine: sweep buffers by start
    time (larger first at equal starts) and put each at the lowest aligned gap among the
    live placed buffers. Returns offsets ``[n]`` (int64, input units).

    Past ``deadline`` (a ``time.monotonic`` instant) the buffers not reached yet are stacked above all
    the others (:func:`mallocgame.algorithms.placement.stacked_offsets`): still a valid packing, with a higher peak.
    """
    n = len(size)
    off = np.zeros(n, np.int64)
    order = np.lexsort((-size, start))
    if engine() == "native":  # the loop below, compiled
        done, top = first_fit_loop(order, size, start, end, align, off, deadline)
        if done < n:
            rest = order[done:]
            off[rest] = stacked_offsets(size[rest], align[rest], top)
        return off
    lo = np.zeros(0, np.int64)     # live placed buffers, sorted by offset
    hi = np.zeros(0, np.int64)
    en = np.zeros(0, np.int64)
    top = 0  # the highest address placed so far
    for step, i in enumerate(order.tolist()):
        # every step moves arrays as long as the live set (tens of µs at 20,000 buffers): a clock read per 64
        if deadline is not None and step % 64 == 0 and time.monotonic() > deadline:
            rest = order[step:]
            off[rest] = stacked_offsets(size[rest], align[rest], top)
            break
        keep = en > start[i]
        if not keep.all():
            lo, hi, en = lo[keep], hi[keep], en[keep]
        a, sz = int(align[i]), int(size[i])
        # live placed buffers are all live now, so they are disjoint and sorted by offset:
        # the gaps are [0, lo[0]), [hi[0], lo[1]), ..., [hi[-1], inf)
        bottoms = np.concatenate(([0], hi))
        cand = bottoms if a == 1 else -(-bottoms // a) * a
        okm = cand[:-1] + sz <= lo
        if okm.any():
            o = int(cand[int(np.argmax(okm))])
        else:
            o = int(cand[-1])
        off[i] = o
        top = max(top, o + sz)
        pos = int(np.searchsorted(lo, o))
        lo = np.insert(lo, pos, o)
        hi = np.insert(hi, pos, o + sz)
        en = np.insert(en, pos, end[i])
    return off


_WINDOW_START = 256        # buffers freed around a buffer above the target, at first ...
_WINDOW_MAX = 4096         # ... doubled while CP-SAT proves the window infeasible, up to this
_WINDOW_SECONDS = 3.0      # CP-SAT time per window at most


_WINDOW_ORDERS = ("start", "area", "size")   # item orders a window's CP-SAT restarts cycle through
_WINDOW_SHARE = 0.25       # of the time left, one window may take at most (and at least _WINDOW_SECONDS)


def _window_order(name: str, size, start, end) -> np.ndarray:
    """The order of a window's items in its CP-SAT model (CP-SAT's search follows it)."""
    if name == "start":
        return np.lexsort((-size, start))
    if name == "size":
        return np.lexsort((start, -size))
    return np.lexsort((start, -size * (end - start)))  # "area"


_WINDOW_CELL_SECONDS = 1e-6  # building a window's clique model, per (item, maximal live set) cell (about 0.5 µs)


class _Past:
    """``is_set()`` once ``budget`` has expired: a deadline as a cancel flag."""

    def __init__(self, budget: Budget):
        self.budget = budget

    def is_set(self) -> bool:
        return self.budget.expired()


def _window_cells(start: np.ndarray, end: np.ndarray) -> int:
    """About how many (item, maximal live set) cells a clique model of these items has: the items live at
    each distinct start, summed (O(m log m))."""
    times = np.unique(start)
    live = np.searchsorted(np.sort(start), times, side="right") - np.searchsorted(np.sort(end), times, side="right")
    return int(live.sum())


def _solve_window(size, start, end, align, cur, free, top, until: float, seed: int, stats: _Stats):
    """Place the ``free`` items of one window below ``top`` (units), the others pinned at ``cur``.

    CP-SAT on such windows is heavy-tailed in the order of its items (the same window: 0.05 s in
    one order, no answer in 3 s in another), so it restarts: the orders of :data:`_WINDOW_ORDERS`
    in turn, each with a time slice doubling per round from 0.2 s, until ``until``. Returns
    ``("FEASIBLE", offsets [m] in units)``, ``("INFEASIBLE", None)`` (proven) or ``("UNKNOWN", None)``.
    """
    from ortools.sat.python import cp_model  # lazy; the solver preloads it

    m = len(size)
    # The model has one clique row per maximal live set, built before CP-SAT's clock starts: on dense traces
    # (a window of 256 free items among 7,500 pinned ones live with them) that is millions of cells and
    # seconds, so a window whose model cannot be built in the time left is not started.
    window = Budget.until(until)
    if _window_cells(start, end) * _WINDOW_CELL_SECONDS > window.left():
        return "UNKNOWN", None
    late = _Past(window)
    slice_s, rnd = 0.2, 0
    while True:
        for order_name in _WINDOW_ORDERS:
            if window.expired():
                return "UNKNOWN", None
            perm = _window_order(order_name, size, start, end)
            model = cp_model.CpModel()
            fixed = [None if free[i] else int(cur[i]) for i in perm.tolist()]
            rect = add_rectangles(model, start[perm], end[perm], size[perm], top=top, align=align[perm],
                                  fixed_offsets=fixed)
            if len(rect.placed) < m:
                return "INFEASIBLE", None
            for j, i in enumerate(perm.tolist()):
                if free[i] and cur[i] + size[i] <= top and cur[i] % align[i] == 0:
                    model.add_hint(rect.steps[j], int(cur[i] // align[i]))
            if not add_no_overlap(model, rect, formulation="cliques", cancelled=late):
                return "UNKNOWN", None
            solver = cp_model.CpSolver()
            prm = solver.parameters
            prm.max_time_in_seconds = max(0.01, min(slice_s, window.left()))
            prm.num_workers = 1
            prm.random_seed = (int(seed) + rnd) % (2 ** 31)
            st = solver.solve(model)
            stats.window_solves += 1
            if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                out = np.empty(m, np.int64)
                out[perm] = rect.offsets(solver)
                return "FEASIBLE", out
            if st == cp_model.INFEASIBLE:
                return "INFEASIBLE", None
        slice_s *= 2
        rnd += 1


def _repair_windows(size: np.ndarray, start: np.ndarray, end: np.ndarray, align: np.ndarray,
                    off: np.ndarray, target: int, deadline: float, seed: int, stats: _Stats) -> np.ndarray:
    """Lower a complete valid packing's peak to ``target`` one time window at a time.

    The scalable path for components too large for the exact engine (its ``[buffers, sections]``
    matrices are quadratic). Take the earliest buffer whose top is above ``target``; free the
    buffers whose live range lies inside a time window around it (about ``_WINDOW_START`` of them),
    pin every other buffer live in the window at its offset, and ask CP-SAT (single worker, seeded,
    :mod:`mallocgame.algorithms.packing_model`'s clique model) to place the free ones below ``target``. A free
    buffer overlaps in time only buffers live in the window, so the repaired packing stays valid.
    A window proven infeasible is doubled (up to ``_WINDOW_MAX``); a buffer whose window fails at
    the largest size or runs out of its time is left as is ("stuck") and the sweep moves on.
    Memory and time per window depend on the window only. Returns the new offsets (a copy).
    """
    off = np.asarray(off, np.int64).copy()
    n = len(size)
    if n == 0:
        return off
    g = _gcd_all(np.concatenate([size, align, off]).astype(np.int64))
    top_u = int(target) // g
    order = np.argsort(start, kind="stable")
    st_sorted = start[order]
    stuck = np.zeros(n, bool)
    k_free = _WINDOW_START
    repair = Budget.until(deadline)
    while not repair.expired():
        tops = off + size
        bad = np.flatnonzero((tops > target) & ~stuck)
        if len(bad) == 0:
            break
        b = int(bad[np.argmin(start[bad])])
        pos = int(np.searchsorted(st_sorted, start[b]))
        ws = int(min(start[b], st_sorted[max(0, pos - k_free // 2)]))
        we = int(max(end[b], st_sorted[min(n - 1, pos + k_free // 2)]))
        free = (start >= ws) & (end <= we)
        idx = np.flatnonzero((start < we) & (end > ws))
        fr = free[idx]
        if int(fr.sum()) > 2 * _WINDOW_MAX or int(size[b]) > target:
            stuck[b] = True
            stats.windows_stuck += 1
            continue
        window = repair.share(1.0, at_most=max(_WINDOW_SECONDS, _WINDOW_SHARE * repair.left()))
        st, new = _solve_window(size[idx] // g, start[idx], end[idx], np.maximum(align[idx] // g, 1),
                                off[idx] // g, fr, top_u, window.deadline, seed, stats)
        stats.windows += 1
        if st == "FEASIBLE":
            off[idx[fr]] = new[fr] * g
            k_free = _WINDOW_START
        elif st == "INFEASIBLE" and k_free < _WINDOW_MAX:
            k_free *= 2
        else:
            stuck[b] = True
            stats.windows_stuck += 1
            k_free = _WINDOW_START
    return off


_CPSAT_NICE = True           # the CP-SAT thread runs at the lowest priority (nice 19, that thread only)
_CPSAT_SHARE = 0.35          # of the time of a capacity probe, at most ...
_CPSAT_MAX_SECONDS = 20.0    # ... seconds
_NODE_BUDGET: int | None = None       # experiments only: stop after this many nodes
_DIVERSIFY_FROM = 4          # round from which a seeded perturbed lane joins the portfolio


def _schedule(comp: _Component, hint_rank: np.ndarray | None, seed: int):
    """Endless sequence of runs ``(lane, choice, name, rank, node_limit)``.

    Round ``r`` runs every lane once with a node limit of ``2 m * 2**r``: the hint (when
    given), then the deterministic preorders of ``_PORTFOLIO``. The seed only breaks the
    ties left by a preorder's keys. From round ``_DIVERSIFY_FROM`` on, lane ``"~"`` runs
    last in each round: a fresh seeded perturbation (a few percent of noise on the keys)
    of a portfolio preorder, in turn, for instances that no fixed order settles.
    """
    m = comp.m
    tie = np.random.default_rng(seed)
    lanes: list[tuple[str, str, str, np.ndarray]] = []
    if hint_rank is not None:
        lanes.append(("hint", "rank", "hint", hint_rank))
    for ch, h in _PORTFOLIO:
        lanes.append((h, ch, h, comp.heuristic(h, tie_rng=tie)))
    noise = np.random.default_rng([seed, 1])
    limit, rnd = 2 * m, 0
    while True:
        for lane, ch, h, rank in lanes:
            yield lane, ch, h, rank, limit
        if rnd >= _DIVERSIFY_FROM:
            ch, h = _PORTFOLIO[rnd % len(_PORTFOLIO)]
            yield "~", ch, h + "~", comp.heuristic(h, noise), limit
        limit *= 2
        rnd += 1


def _solve_cap(comp: _Component, cap: int, deadline: float, seed: int, stats: _Stats,
               *, use_cpsat: bool, hint_local: np.ndarray | None,
               tt_store: dict | None = None) -> np.ndarray | bool | None:
    """Pack one component within ``cap`` (scaled). Returns local offsets ``[m]``,
    ``False`` when proven impossible, ``None`` when the deadline passed.

    Restarts (:func:`_schedule`): the lanes of the portfolio run round robin with node
    limits doubling per round; each lane keeps its own conflict weights across its runs,
    the table of failed states is shared by all runs for this capacity (a failed state
    fails whatever the branching order). A CP-SAT run starts in a second thread when the
    search has not succeeded within a short warm-up.
    """
    m = comp.m
    if m == 0:
        return np.zeros(0, np.int64)
    if comp.peak_live > cap or int(comp.size.max()) > cap:
        return False
    if m == 1:
        return np.zeros(1, np.int64)
    tt = _failed_states() if tt_store is None else tt_store.setdefault(cap, _failed_states())
    weights: dict[str, np.ndarray] = {}          # per lane
    stop = threading.Event()
    cps: _CpSatRun | None = None
    probe = Budget.until(deadline)
    warmup = min(2.0, 0.05 * probe.seconds)
    hint_rank = comp.heuristic("TWA", hint=hint_local) if hint_local is not None else None
    result: np.ndarray | bool | None = None
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 4 * m + 1000))
    try:
        for run_no, (lane, choice, hname, rank, limit) in enumerate(_schedule(comp, hint_rank, seed)):
            if probe.expired():
                break
            if cps is not None and cps.done.is_set() and cps.result is not None:
                result = _cpsat_answer(cps, stats)
                break                     # CP-SAT settled it
            if (use_cpsat and cps is None and probe.seconds - probe.left() >= warmup and m >= 8
                    and probe.left() > 1.0):
                cps = _start_cpsat(comp, cap, seed, _cpsat_part(probe).deadline, hint_local, stop, stats)
            if _NODE_BUDGET is not None and stats.nodes >= _NODE_BUDGET:
                break
            ok, off = _search_run(comp, cap, rank, lane, choice, limit, deadline, stop, weights, tt, stats)
            if ok is True:
                result = off.copy()
                stats.search_wins += 1
                stats.winner = f"{choice}:{hname} run {run_no} limit {limit}"
                break
            if ok is False:
                result = False
                break
    finally:
        sys.setrecursionlimit(old_limit)
        if cps is not None:
            cps.stop()
            if result is None and cps.result is not None:
                result = _cpsat_answer(cps, stats)
    return result


def _cpsat_part(probe: Budget) -> Budget:
    """CP-SAT's budget on one capacity probe (from now): a bounded part of the probe's, since where it helps it is
    fast, and on a two-core machine its thread slows the search down."""
    return probe.share(1.0, at_most=min(_CPSAT_MAX_SECONDS, probe.part(_CPSAT_SHARE).seconds))


def _start_cpsat(comp: _Component, cap: int, seed: int, until: float, hint_local: np.ndarray | None,
                 stop: threading.Event, stats: _Stats) -> _CpSatRun:
    """Start the CP-SAT thread on ``comp`` within ``cap`` until ``until``; it sets ``stop`` when it settles it."""
    cps = _CpSatRun(comp, cap, seed, until, hint=hint_local, on_done=stop)
    cps.start()
    stats.cpsat_runs += 1
    return cps


def _cpsat_answer(cps: _CpSatRun, stats: _Stats) -> np.ndarray | bool:
    """CP-SAT's settled answer (offsets, or ``False``: proven infeasible), counted as a win when a packing."""
    if cps.result is not False:
        stats.cpsat_wins += 1
    return cps.result


def _search_run(comp: _Component, cap: int, rank: np.ndarray, lane: str, choice: str, limit: int,
                deadline: float, stop: threading.Event, weights: dict[str, np.ndarray], tt: set,
                stats: _Stats) -> tuple[bool | None, np.ndarray]:
    """One node-limited search run of ``lane``: True (packed), False (proven impossible) or None (a limit
    hit), and the searcher's offsets. Each lane learns its own conflict weights; lane ``"~"`` learns
    from every run. ``tt``: the failed states shared by the runs for this capacity."""
    w = weights.setdefault(lane, np.zeros(comp.S + 1, np.int64))
    w_before = w.copy() if lane != "~" else None
    s = _searcher(comp, cap, rank, node_limit=limit, deadline=deadline, stop=stop,
                  use_tt=True, choice=choice, weights=w)
    s.tt = tt
    try:
        ok = s.run()
    except _Abort:
        ok = None
    stats.add(s)
    if w_before is not None:
        pooled = weights.setdefault("~", np.zeros(comp.S + 1, np.int64))
        pooled += w - w_before
    if len(tt) > 1_000_000:
        tt.clear()
    return ok, s.off


@dataclass(frozen=True)
class _Piece:
    """One interval-graph component of a :func:`pack` call: its buffers ``idx`` (into the inputs), the
    unit ``g`` its exact engine works in, the engine's data (``None``: above the exact engine's limits,
    window repair instead) and the hint in units (``-1`` = none; ``None``: no hint)."""

    idx: np.ndarray
    g: int
    comp: _Component | None
    hint: np.ndarray | None


def _pack_arrays(size, start, end, alignment) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of :func:`pack` as int64 arrays ``[n]`` (alignment 1 by default), checked."""
    size = np.asarray(size, np.int64).reshape(-1)
    start = np.asarray(start, np.int64).reshape(-1)
    end = np.asarray(end, np.int64).reshape(-1)
    n = len(size)
    if not (len(start) == n and len(end) == n):
        raise ValueError("size, start and end must have the same length")
    if n and ((size <= 0).any() or (end <= start).any()):
        raise ValueError("sizes must be positive and every end must exceed its start")
    al = np.ones(n, np.int64) if alignment is None else np.asarray(alignment, np.int64).reshape(-1)
    if len(al) != n or (al <= 0).any():
        raise ValueError("alignment must be positive, one per buffer")
    return size, start, end, al


def _pieces(size: np.ndarray, start: np.ndarray, end: np.ndarray, al: np.ndarray, capacity: int | None,
            hint: np.ndarray | None) -> list[_Piece]:
    """The components of the buffers, each in divided units (gcd of sizes and capacity; exact with
    alignments), small components first."""
    pieces = []
    for idx in component_runs(start, end):
        sz, st_, en = size[idx], start[idx], end[idx]
        a = al[idx]
        S = len(np.unique(np.concatenate([st_, en]))) - 1
        if len(idx) * max(S, 1) > _DENSE_LIMIT or len(idx) > _MAX_EXACT:
            pieces.append(_Piece(idx, 1, None, None))
            continue
        g = _gcd_all(np.concatenate([sz, [capacity] if capacity is not None else []]).astype(np.int64))
        # offsets are multiples of g; alignment a needs multiples of a/gcd(a, g) in units
        a_units = a // np.gcd(a, g)
        comp = _Component(sz // g, st_, en, None if (a_units == 1).all() else a_units, idx)
        h_local = None
        if hint is not None:
            hv = hint[idx][comp.order]
            h_local = np.where((hv >= 0) & (hv % g == 0), hv // g, -1)
        pieces.append(_Piece(idx, g, comp, h_local))
    pieces.sort(key=lambda x: (len(x.idx), int(x.idx[0])))
    return pieces


class _PackRun:
    """The state of one :func:`pack` call: its inputs, its ``budget`` (from the call to its deadline), the offsets
    ``off`` found so far (input units, ``-1`` = none), the counters and the history of complete packings."""

    def __init__(self, size: np.ndarray, start: np.ndarray, end: np.ndarray, al: np.ndarray, *,
                 budget: Budget, seed: int, use_cpsat: bool):
        self.size, self.start, self.end, self.al = size, start, end, al
        self.budget, self.deadline, self.seed, self.use_cpsat = budget, budget.deadline, seed, use_cpsat
        self.stats = _Stats()
        self.history: list[tuple[float, int]] = []
        self.lb_total = max_live_of(size, start, end)
        self.off = np.full(len(size), -1, np.int64)
        self.hint: np.ndarray | None = None
        self.hint_packs = self.hint_valid = False

    def take_hint(self, hint, capacity: int | None) -> None:
        """Keep ``hint``; a valid packing (capacity aside) is an incumbent of every component, and
        within the capacity the answer."""
        n = len(self.size)
        self.hint = None if hint is None else np.asarray(hint, np.int64).reshape(-1)
        if self.hint is not None and len(self.hint) != n:
            raise ValueError("hint must have one offset per buffer")
        self.hint_packs = (self.hint is not None and bool((self.hint >= 0).all())
                           and check_packing(self.size, self.start, self.end, self.hint, None, self.al) is None)
        self.hint_valid = self.hint_packs and (capacity is None
                                               or int((self.hint + self.size).max()) <= int(capacity))

    # -- answers -----------------------------------------------------------------------
    def result(self, status: str, offsets: np.ndarray, lower: int) -> PackResult:
        """The :class:`PackResult` of ``offsets``."""
        n = len(self.size)
        peak = int((offsets + self.size).max()) if n and (offsets >= 0).all() else (0 if n == 0 else None)
        st = self.stats.as_dict()
        st["seconds"] = round(time.monotonic() - self.budget.started, 4)
        return PackResult(offsets=offsets, status=status, peak=peak, lower_bound=int(lower),
                          history=self.history, stats=st)

    def record(self, offsets: np.ndarray | None = None) -> None:
        """A better complete packing (``off`` by default) in the history."""
        offsets = self.off if offsets is None else offsets
        self.history.append((round(time.monotonic() - self.budget.started, 4), int((offsets + self.size).max())))

    def peak_of(self, idx: np.ndarray) -> int:
        """The peak of the buffers ``idx`` at their current offsets."""
        return int((self.off[idx] + self.size[idx]).max())

    def put(self, piece: _Piece, local: np.ndarray) -> None:
        """Offsets of ``piece`` from its engine's local offsets (units, engine order)."""
        o = np.empty(len(piece.idx), np.int64)
        o[piece.comp.order] = local * piece.g
        self.off[piece.idx] = o

    # -- components above the exact engine's limits --------------------------------------
    def first_fit_until(self) -> float:
        """When a first fit must stop (half the time left): the repair that follows needs the rest."""
        return self.budget.share(0.5).deadline

    def fallback(self, idx: np.ndarray) -> None:
        """First fit for the buffers ``idx`` (until :meth:`first_fit_until`)."""
        self.off[idx] = _first_fit(self.size[idx], self.start[idx], self.end[idx], self.al[idx],
                                   self.first_fit_until())
        self.stats.fallback_components += 1

    def large_start(self, idx: np.ndarray) -> str:
        """Incumbent of a component above the exact engine's limits: first fit or the hint, the lower."""
        self.stats.large_components += 1
        self.stats.fallback_components += 1
        self.off[idx] = _first_fit(self.size[idx], self.start[idx], self.end[idx], self.al[idx],
                                   self.first_fit_until())
        if self.hint_packs and int((self.hint[idx] + self.size[idx]).max()) < self.peak_of(idx):
            self.off[idx] = self.hint[idx]
            return "the hint"
        return "first fit"

    def repair(self, idx: np.ndarray, target: int, until: float) -> None:
        """Window repair of the buffers ``idx`` towards the peak ``target`` until ``until``."""
        self.off[idx] = _repair_windows(self.size[idx], self.start[idx], self.end[idx], self.al[idx],
                                        self.off[idx], target, until, self.seed, self.stats)

    def note_large(self, idx: np.ndarray, source: str, before: int, target: int) -> None:
        """Say in ``stats.fallback`` what was done with a large component and how it ended."""
        stats = self.stats
        after = self.peak_of(idx)
        stats.fallback = ((stats.fallback + "; ") if stats.fallback else "") + (
            f"a component of {len(idx)} buffers is above the exact engine's limits: started from {source} "
            + (f"(peak {before}), already at the target {target}" if before <= target else
               f"(peak {before}), window repair (CP-SAT) to peak {after}, target {target}"
               + ("" if after <= target else f", {stats.windows_stuck} buffers left above it")))

    # -- within a capacity ---------------------------------------------------------------
    def within_capacity(self, pieces: list[_Piece], capacity: int) -> PackResult:
        """Pack every component within ``capacity``: OPTIMAL, INFEASIBLE (proven) or UNKNOWN."""
        status = "OPTIMAL"
        for piece in pieces:
            if piece.comp is None:
                if not self.large_within(piece.idx, capacity):
                    status = "UNKNOWN"
                continue
            r = _solve_cap(piece.comp, capacity // piece.g, self.deadline, self.seed, self.stats,
                           use_cpsat=self.use_cpsat, hint_local=piece.hint)
            if r is False:
                self.off[:] = -1
                return self.result("INFEASIBLE", self.off, self.lb_total)
            if r is None:
                status = "UNKNOWN"
                continue
            self.put(piece, r)
        if status == "OPTIMAL":
            self.record()
        return self.result(status, self.off, self.lb_total)

    def large_within(self, idx: np.ndarray, capacity: int) -> bool:
        """A large component within ``capacity`` (its start, repaired if above); False (offsets
        cleared) when the repair did not get there."""
        source = self.large_start(idx)
        before = self.peak_of(idx)
        if before > capacity:
            self.repair(idx, capacity, self.deadline)
        self.note_large(idx, source, before, capacity)
        if self.peak_of(idx) > capacity:
            self.off[idx] = -1
            return False
        return True

    # -- minimising the peak -------------------------------------------------------------
    def minimise_peak(self, pieces: list[_Piece]) -> PackResult:
        """Minimise the peak: incumbents first (:meth:`incumbents`); then, worst component first,
        probe capacities: the overall lower bound first (most of the time left), then bisection
        between the proven bound and the incumbent."""
        best, lbs, large_source = self.incumbents(pieces)
        self.record()
        global_lb = max(lbs)
        for k in sorted(range(len(pieces)), key=lambda k: -best[k]):
            piece = pieces[k]
            if piece.comp is None:      # above the exact engine's limits: window repair, bisecting on the target
                before = best[k]
                best[k] = self.lower_large(piece.idx, max(lbs[k], global_lb), best[k])
                self.note_large(piece.idx, large_source.pop(k, "first fit"), before, max(lbs[k], global_lb))
            elif best[k] <= global_lb:
                continue
            else:
                best[k], lbs[k] = self.lower_exact(piece, best[k], lbs[k], global_lb)
            if self.budget.expired():
                break
        for k, source in large_source.items():  # large components the time did not reach: said all the same
            idx = pieces[k].idx
            self.note_large(idx, source + " (no time left to repair it)", best[k], max(lbs[k], global_lb))
        peak = int((self.off + self.size).max())
        proven = max(max(lbs), self.lb_total)
        return self.result("OPTIMAL" if peak <= proven else "FEASIBLE", self.off, proven)

    def incumbents(self, pieces: list[_Piece]) -> tuple[list[int], list[int], dict[int, str]]:
        """Every component's first packing (greedy descent, or the hint if better; large ones: first fit
        or the hint). Returns the peaks, the lower bounds and, per large component, its start's source."""
        best, lbs = [], []
        large_source: dict[int, str] = {}
        size, hint = self.size, self.hint
        for piece in pieces:
            idx, comp = piece.idx, piece.comp
            # the descent's dense arrays alone take ~1e-7 s per buffer x section (2-3 s at 20M on a loaded machine)
            affordable = comp is not None and comp.m * comp.S * _DENSE_SECONDS < 0.5 * self.budget.left()
            descent = _greedy(comp, self.budget.part(0.5).deadline) if affordable else None
            if comp is None:
                large_source[len(best)] = self.large_start(idx)
            elif descent is not None:
                self.put(piece, descent)
            elif self.hint_valid:  # too large for the time (or the engine), or its descent did not finish: the hint
                self.off[idx] = hint[idx]
            else:
                self.fallback(idx)
            if self.hint_valid and int((hint[idx] + size[idx]).max()) < self.peak_of(idx):
                self.off[idx] = hint[idx]
            best.append(self.peak_of(idx))
            lbs.append(max_live_of(size[idx], self.start[idx], self.end[idx]))
        return best, lbs, large_source

    def lower_large(self, idx: np.ndarray, floor: int, best: int) -> int:
        """Bisect a large component's peak between ``floor`` and ``best`` by window repair; its new peak.
        A failed repair is not a proof, only where to look next."""
        lo, hi, first = floor, best - 1, True
        while lo <= hi and not self.budget.expired():
            goal = lo if first else (lo + hi) // 2
            self.repair(idx, goal, self.budget.share(0.6 if first else 0.5).deadline)
            first = False
            got = self.peak_of(idx)
            if got <= goal:
                best, hi = got, got - 1
                self.record()
            else:
                lo = goal + 1
                best = min(best, got)
        return best

    def lower_exact(self, piece: _Piece, best: int, lb: int, global_lb: int) -> tuple[int, int]:
        """Bisect a component's peak with the exact engine, from the overall bound up to ``best``;
        returns its new peak and its proven lower bound."""
        comp, g = piece.comp, piece.g
        lo_u = -(-max(lb, global_lb) // g)      # never worth going below the overall bound
        hi_u = best // g - 1                     # looking for peaks <= hi_u (units)
        tt_store: dict = {}
        first = True
        while lo_u <= hi_u and not self.budget.expired():
            if comp.m * comp.S * _DENSE_SECONDS > 0.5 * self.budget.left():
                break  # setting up one more probe would take the time left
            cap_u = lo_u if first else (lo_u + hi_u) // 2
            probe = self.budget.share(0.6 if first else 0.5)
            first = False
            r = _solve_cap(comp, cap_u, probe.deadline, self.seed, self.stats,
                           use_cpsat=self.use_cpsat, hint_local=None, tt_store=tt_store)
            if r is False:
                lo_u = cap_u + 1
                lb = max(lb, lo_u * g)
            elif r is None:
                lo_u = cap_u + 1                    # not a proof: only where we look next
            else:
                self.put(piece, r)
                best = int(((r + comp.size) * g).max())
                hi_u = best // g - 1
                self.record()
        return best, lb


def pack(size, start, end, *, capacity: int | None = None, alignment=None,
         budget: Budget, seed: int = 0, hint=None, use_cpsat: bool = True) -> PackResult:
    """Place every buffer (pack mode); see the module docstring for the method.

    Args:
        size, start, end: int arrays ``[n]``; buffer ``i`` is live on ``[start[i], end[i])``
            and needs ``size[i] > 0`` bytes.
        capacity: fast-memory size, or ``None`` to minimise the peak.
        alignment: optional int array ``[n]`` (offsets must be multiples), default 1.
        budget: the call's time: it returns by ``budget.deadline`` (every phase's deadline is a part or a
            share of it); ``stats["seconds"]`` and the history count from the call.
        seed: the only source of randomness (ties of the preorders, the perturbed restart
            lane, CP-SAT's seed).
        hint: optional int array ``[n]`` of offsets, ``-1`` = none. A complete valid hint
            is an incumbent (returned as is when it fits ``capacity``); otherwise the
            hinted offsets order the first search run and hint CP-SAT.
        use_cpsat: also run the CP-SAT engine in a second thread on components that the
            search does not settle within a short warm-up. (Components above the exact engine's
            limits, ``_DENSE_LIMIT`` buffer x section cells or ``_MAX_EXACT`` buffers, always take the
            window repair, whose windows CP-SAT solves: :func:`_repair_windows`; ``stats["fallback"]``
            then says what it did and whether it reached its target.)

    Returns:
        :class:`PackResult` with offsets ``[n]`` (``-1`` where unknown). With a capacity,
        ``status`` is OPTIMAL (all packed), INFEASIBLE (proven) or UNKNOWN (time; offsets
        of the components that were packed are kept). With ``capacity=None`` it is
        OPTIMAL (peak = proven lower bound) or FEASIBLE.

    The search itself is deterministic for a seed (its restarts are node-limited; the seed
    breaks ties and drives the perturbed lane that joins late); when the CP-SAT thread
    runs, which engine finishes first depends on timing.
    """
    call = Budget.until(budget.deadline)  # from now: the descent's half and the history count from the call
    size, start, end, al = _pack_arrays(size, start, end, alignment)
    run = _PackRun(size, start, end, al, budget=call, seed=seed, use_cpsat=use_cpsat)
    if len(size) == 0:
        return run.result("OPTIMAL", run.off, 0)
    run.take_hint(hint, capacity)
    if capacity is not None:
        capacity = int(capacity)
        if run.lb_total > capacity or int(size.max()) > capacity:
            return run.result("INFEASIBLE", run.off, run.lb_total)
        if run.hint_valid:
            run.record(run.hint)
            return run.result("OPTIMAL", run.hint.copy(), run.lb_total)
    pieces = _pieces(size, start, end, al, capacity, run.hint)
    run.stats.components = len(pieces)
    if capacity is not None:
        return run.within_capacity(pieces, capacity)
    return run.minimise_peak(pieces)
