"""The interference graph of buffer lifetimes: the model of conflicts the solvers read (docs/architecture.md,
"The interference graph").

Two buffers *conflict* (interfere) when their half-open live ranges overlap: they may not share an address
at the same time. The graph has one node per buffer (``0 .. n-1``, with ``id, size, start, end, benefit``
attributes) and one edge per conflicting pair. It is an interval graph, so it has two exact forms, both
answering the same questions through one interface, :class:`Conflicts`:

- :class:`GraphConflicts`, the ``networkx.Graph`` itself (:func:`interference_graph`): every edge stored
  as Python objects (hundreds of bytes each);
- :class:`CliquePath`, the compressed form: the graph's maximal cliques in time order (the interval graph's
  clique path; MiniMalloc's "sections"), which are the maximal live sets of
  :func:`mallocgame.problem.intervals.maximal_live_csr`. Each buffer lives on a contiguous run of them, and two
  buffers conflict iff their runs meet, so it is stored as one run per buffer: O(n) memory however
  many edges.

:func:`conflicts` picks the form: the graph when it was built already, or when the caller allows it
and the number of edges, counted by a sweep before anything is built, is small enough
(``build_graph_up_to``; ``mallocgame info``: :data:`GRAPH_EDGES`); else the clique path (a real trace has
10^8 edges, and importing networkx alone costs more than a short solve can spare). Both give the same
conflicts, neighbours, components, cliques and largest clique; the solve session
(:class:`mallocgame.engine.session.Session`) holds each once per problem. NetworkX is imported only when the
graph is built.

Example:
    >>> from mallocgame.problem.model import Buffer, Problem
    >>> p = Problem("t", (Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5), Buffer("c", 2, 5, 6)))
    >>> g = interference_graph(p)
    >>> sorted(g.edges()), g.nodes[1]["size"]
    ([(0, 1)], 4)
    >>> path = CliquePath.of(p)
    >>> path.conflict(0, 1), path.conflict(1, 2), path.neighbours(1).tolist()
    (True, False, [0])
    >>> path.components(), path.largest_clique().tolist(), path.clique_bytes(path.largest_clique())
    ([[0, 1], [2]], [0, 1], 8)
    >>> GraphConflicts(g).components() == path.components()
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mallocgame.problem.intervals import (
    OverlapIndex,
    count_overlapping_pairs,
    maximal_live_csr,
    maximal_times,
    overlapping_pairs,
)
from mallocgame.problem.model import Problem, derived_facts

if TYPE_CHECKING:
    import networkx as nx

# Up to this many edges, ``mallocgame info`` builds the networkx graph and reads the conflicts from it; above,
# from the clique path. The graph costs microseconds per edge to build (tens of milliseconds at this size,
# seconds at 10^6 edges; experiments/results/interference_graph.md) where the clique path takes milliseconds.
GRAPH_EDGES = 20_000
# :func:`interference_graph` refuses to build a graph with more edges (about 1 GB of Python objects).
MAX_GRAPH_EDGES = 5_000_000


class Conflicts:
    """Which buffers conflict (live ranges overlap), whatever the form: the interface both forms satisfy.

    ``n`` buffers, ``edge_count`` conflicting pairs, ``size`` int64 ``[n]`` bytes. Every array answer is
    int64 and sorted; lists of buffers are ordered as the time they are live (components and cliques are
    time-disjoint, so the order is unique).
    """

    n: int
    edge_count: int
    size: np.ndarray

    def conflict(self, i: int, j: int) -> bool:
        """Do buffers ``i`` and ``j`` (distinct) conflict?"""
        raise NotImplementedError

    def neighbours(self, i: int) -> np.ndarray:
        """The buffers that conflict with ``i``, sorted ``[deg]``."""
        raise NotImplementedError

    def components(self) -> list[list[int]]:
        """Connected components as sorted lists of buffer indices, in time order (as
        :func:`mallocgame.problem.intervals.components`)."""
        raise NotImplementedError

    def cliques_among(self, items: np.ndarray) -> list[np.ndarray]:
        """The maximal cliques of the graph induced by buffers ``items`` ``[m]`` (distinct), in time order, each
        as sorted positions into ``items``: what :func:`mallocgame.problem.intervals.maximal_live_sets` gives for their
        live ranges."""
        raise NotImplementedError

    def cliques(self) -> list[np.ndarray]:
        """The maximal cliques (sorted buffer indices), in time order."""
        return self.cliques_among(np.arange(self.n, dtype=np.int64))

    def largest_clique(self, weight: str | None = "size") -> np.ndarray:
        """The clique of most bytes (``weight="size"``; its bytes are the max live bytes) or of most buffers
        (``weight=None``): sorted buffer indices; the earliest of equals; empty with no buffers."""
        best, best_w = np.zeros(0, np.int64), -1
        for c in self.cliques():
            w = int(self.size[c].sum()) if weight == "size" else len(c)
            if w > best_w:
                best, best_w = c, w
        return best

    def clique_bytes(self, clique: np.ndarray) -> int:
        """The bytes of the buffers ``clique``."""
        return int(self.size[np.asarray(clique, np.int64)].sum())


class CliquePath(Conflicts):
    """The compressed form: the maximal cliques in time order, each buffer stored as its run of them.

    Clique ``r`` holds the buffers live at ``times[r]`` (``times [m]``: the maximal moments,
    :func:`mallocgame.problem.intervals.maximal_times`); buffer ``i`` is in cliques ``first[i] .. last[i] - 1``
    (``[n]`` each), and two buffers conflict iff those runs meet. That is O(n) memory whatever the number
    of edges; the cliques' member lists (:func:`mallocgame.problem.intervals.maximal_live_csr`, the one
    implementation) are built only when :meth:`cliques` asks, and :meth:`neighbours` asks an
    :class:`~mallocgame.problem.intervals.OverlapIndex` (bounded memory) over the runs, built on its first call.
    """

    def __init__(self, start: np.ndarray, end: np.ndarray, size: np.ndarray, *, edge_count: int | None = None):
        start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
        self.n, self.size = len(start), np.asarray(size, np.int64)
        self.start, self.end = start, end
        self.edge_count = count_overlapping_pairs(start, end) if edge_count is None else edge_count
        self.times = maximal_times(start, end)
        self.first = np.searchsorted(self.times, start, side="left")
        self.last = np.searchsorted(self.times, end, side="left")
        self._runs: OverlapIndex | None = None

    @classmethod
    def of(cls, problem: Problem, *, edge_count: int | None = None) -> CliquePath:
        a = problem.arrays
        return cls(a.start, a.end, a.size, edge_count=edge_count)

    def conflict(self, i: int, j: int) -> bool:
        return bool(i != j and self.first[i] < self.last[j] and self.first[j] < self.last[i])

    def neighbours(self, i: int) -> np.ndarray:
        if self._runs is None:  # who overlaps a run of cliques: the bounded-memory index, built on first use
            self._runs = OverlapIndex(self.first, self.last)
        near = self._runs.query(int(self.first[i]), int(self.last[i]))
        return np.sort(near[near != i]).astype(np.int64)

    def components(self) -> list[list[int]]:
        m = len(self.times)
        if m == 0:
            return []
        reach = np.zeros(m, np.int64)
        np.maximum.at(reach, self.first, self.last)
        reach = np.maximum.accumulate(reach)
        # a component ends at clique r when no buffer in cliques up to r reaches past it
        ends = reach == np.arange(1, m + 1)
        component_of_row = np.concatenate(([0], np.cumsum(ends)[:-1]))
        label = component_of_row[self.first]
        order = np.lexsort((np.arange(self.n), label))
        cut = np.flatnonzero(np.diff(label[order])) + 1
        return [part.tolist() for part in np.split(order, cut)]

    def cliques(self) -> list[np.ndarray]:
        times, indptr, indices = maximal_live_csr(self.start, self.end)
        return np.split(indices, indptr[1:-1]) if len(times) else []

    def cliques_among(self, items: np.ndarray) -> list[np.ndarray]:
        items = np.asarray(items, np.int64)
        # the items' runs of cliques are intervals with the same overlaps as their live ranges
        times, indptr, indices = maximal_live_csr(self.first[items], self.last[items])
        return np.split(indices, indptr[1:-1]) if len(times) else []

    def largest_clique(self, weight: str | None = "size") -> np.ndarray:
        m = len(self.times)
        if m == 0:
            return np.zeros(0, np.int64)
        per_buffer = self.size if weight == "size" else np.ones(self.n, np.int64)
        delta = np.zeros(m + 1, np.int64)
        np.add.at(delta, self.first, per_buffer)
        np.add.at(delta, self.last, -per_buffer)
        r = int(np.argmax(np.cumsum(delta)[:m]))
        return np.flatnonzero((self.first <= r) & (self.last > r)).astype(np.int64)


class GraphConflicts(Conflicts):
    """The networkx form: answers read from an :func:`interference_graph` (``graph``, nodes ``0 .. n-1`` with
    ``size, start, end`` attributes)."""

    def __init__(self, graph: nx.Graph):
        self.graph = graph
        self.n = graph.number_of_nodes()
        self.edge_count = graph.number_of_edges()
        self.size = np.array([graph.nodes[i]["size"] for i in range(self.n)], np.int64)
        self._start = np.array([graph.nodes[i]["start"] for i in range(self.n)], np.int64)
        self._end = np.array([graph.nodes[i]["end"] for i in range(self.n)], np.int64)

    def conflict(self, i: int, j: int) -> bool:
        return self.graph.has_edge(i, j)

    def neighbours(self, i: int) -> np.ndarray:
        return np.array(sorted(self.graph.adj[i]), np.int64)

    def components(self) -> list[list[int]]:
        import networkx as nx

        parts = [sorted(c) for c in nx.connected_components(self.graph)]
        return sorted(parts, key=lambda c: int(self._start[c].min()))

    def cliques_among(self, items: np.ndarray) -> list[np.ndarray]:
        items = np.asarray(items, np.int64)
        # In the interval order (by start, then end) each item with its earlier neighbours is a clique (a
        # perfect elimination ordering, read backwards); it is maximal unless the next one holds it and one
        # more, and the maximal ones come out in time order.
        order = np.lexsort((self._end[items], self._start[items])).tolist()
        rank = dict(zip(order, range(len(order))))
        position = dict(zip(items.tolist(), range(len(items))))
        adj = self.graph.adj
        held = []
        for k in order:
            mine = rank[k]
            held.append(sorted([k] + [u for u in (position.get(b) for b in adj[int(items[k])])
                                      if u is not None and rank[u] < mine]))
        return [np.array(c, np.int64) for v, c in enumerate(held) if v + 1 == len(held) or len(held[v + 1]) <= len(c)]


def interference_graph(problem: Problem, *, max_edges: int = MAX_GRAPH_EDGES) -> nx.Graph:
    """The interference graph as a ``networkx.Graph``: nodes ``0 .. n-1`` with ``id, size, start, end, benefit``
    attributes, an edge per pair of buffers whose live ranges overlap (listed by a vectorised sweep,
    :func:`mallocgame.problem.intervals.overlapping_pairs`).

    Raises ``ValueError`` when it would have more than ``max_edges`` edges (counted first, in O(n log n));
    :class:`CliquePath` holds any size.
    """
    import networkx as nx

    a = problem.arrays
    pairs = overlapping_pairs(a.start, a.end, max_pairs=max_edges)
    if pairs is None:
        raise ValueError(f"{problem.name}: the interference graph has more than {max_edges} edges "
                         f"({count_overlapping_pairs(a.start, a.end)}): use its compressed form, "
                         "mallocgame.problem.graph.CliquePath (session.conflicts)")
    g = nx.Graph(name=problem.name)
    g.add_nodes_from((i, {"id": b.id, "size": b.size, "start": b.start, "end": b.end, "benefit": b.benefit})
                     for i, b in enumerate(problem.buffers))
    g.add_edges_from(zip(pairs[0].tolist(), pairs[1].tolist()))
    return g


def problem_graph(problem: Problem) -> nx.Graph:
    """:func:`interference_graph` of ``problem``, built once per problem (``ValueError`` above
    :data:`MAX_GRAPH_EDGES` edges)."""
    facts = derived_facts(problem)
    graph = facts.get("interference_graph")
    if graph is None:
        graph = facts["interference_graph"] = interference_graph(problem)
    return graph


def conflicts(problem: Problem, *, build_graph_up_to: int = 0) -> Conflicts:
    """The conflicts of ``problem``: from its networkx graph when that was built already (or is built here,
    when the problem has at most ``build_graph_up_to`` edges, counted first), else from its clique path;
    each form built once per problem.

    A solver asks with the default: importing networkx alone takes longer than a short solve can spare
    (experiments/results/interference_graph.md), and both forms give the same answers. ``mallocgame info``
    asks with :data:`GRAPH_EDGES`.
    """
    facts = derived_facts(problem)
    if "interference_graph" not in facts and build_graph_up_to > 0:
        a = problem.arrays
        if count_overlapping_pairs(a.start, a.end) <= build_graph_up_to:
            problem_graph(problem)
    if "interference_graph" in facts:
        found = facts.get("graph_conflicts")
        if found is None:
            found = facts["graph_conflicts"] = GraphConflicts(facts["interference_graph"])
        return found
    found = facts.get("clique_path")
    if found is None:
        found = facts["clique_path"] = CliquePath.of(problem)
    return found
