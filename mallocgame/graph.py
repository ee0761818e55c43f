"""The interference graph of buffer lifetimes as a NetworkX graph (docs/architecture.md, "The core").

Nodes are buffer indices with ``id, size, start, end, benefit`` attributes; an edge joins
two buffers whose half-open live ranges overlap. Built by a sweep over sorted starts, not
by testing all pairs. For large traces (10^8 pairs) use the sweeps of
:mod:`mallocgame.intervals` instead.

Example:
    >>> from mallocgame.model import Buffer, Problem
    >>> p = Problem("t", (Buffer("a", 4, 0, 3), Buffer("b", 4, 2, 5), Buffer("c", 2, 5, 6)))
    >>> sorted(interference_graph(p).edges())
    [(0, 1)]
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from mallocgame.intervals import count_overlapping_pairs
from mallocgame.model import Problem


def overlapping_pairs(start: np.ndarray, end: np.ndarray):
    """Yield ``(i, j)`` for every pair with overlapping ``[start, end)``, by a sweep over sorted starts.

    Cost O(n log n + pairs): each buffer is compared only with those still live at its start.
    """
    order = np.lexsort((end, start))
    live: list[int] = []
    for i in order.tolist():
        s = start[i]
        live = [j for j in live if end[j] > s]
        for j in live:
            yield (j, i) if j < i else (i, j)
        live.append(i)


def interference_graph(problem: Problem, *, max_edges: int = 5_000_000):
    """NetworkX graph: nodes = buffer indices with ``id, size, start, end, benefit`` attributes.

    Raises ``ValueError`` when the graph would have more than ``max_edges`` edges (real
    traces reach 10^8); use :class:`OverlapIndex` or :func:`components` there.
    """
    a = problem.arrays
    if count_overlapping_pairs(a.start, a.end) > max_edges:
        raise ValueError(f"{problem.name}: interference graph has more than {max_edges} edges; "
                         "use OverlapIndex / components instead")
    g = nx.Graph(name=problem.name)
    for i, b in enumerate(problem.buffers):
        g.add_node(i, id=b.id, size=b.size, start=b.start, end=b.end, benefit=b.benefit)
    g.add_edges_from(overlapping_pairs(a.start, a.end))
    return g
