"""Learned message passing over the interference graph, numpy side (features ``"encoder/3"``).

Each buffer starts from its own features ``x`` (:func:`base_features`, those of ``encoder/1``) and
``K`` rounds update every buffer at once::

    h' = relu(W_self h + b + W_nbr mean_{j in N(i)} h_j + W_size sum_{j in N(i)} (size_j / scale) h_j)

``N(i)``: the buffers that conflict with ``i`` in the problem's interference graph. The weights are the
network's (``graph_encoder.*`` in the checkpoint, trained with the rest by
:class:`mallocgame.search.muzero.networks.GraphEncoder`, the same function in torch); every buffer's embedding
is computed once per problem and network (:meth:`NumpyGraphEncoder.embed`). Mean and sum over neighbours
make the embeddings equivariant under any renumbering of the buffers, and the weights do not depend on the
number of buffers.

The neighbour sums (:class:`Neighbourhood`) read the problem's conflicts as the session holds them
(:func:`mallocgame.problem.graph.conflicts`): the networkx graph's edges when it was built, else the clique path,
where the sum over ``i``'s neighbours is two prefix sums over the runs of cliques (the buffers whose run starts
before ``i``'s ends, less those whose run ends before ``i``'s starts, less ``i``): O(n log n) however many
edges. numpy only.
"""

from __future__ import annotations

import weakref

import numpy as np

from mallocgame.problem.graph import CliquePath, Conflicts, GraphConflicts
from mallocgame.problem.graph import conflicts as problem_conflicts
from mallocgame.problem.intervals import overlapping_pairs

PREFIX = "graph_encoder.rounds."  # the state-dict keys of the torch module
BASE = 9  # a buffer's own features (:func:`base_values`)


class Neighbourhood:
    """Sums over each buffer's neighbours in the interference graph (``n`` buffers), from either form of the
    conflicts; ``degree`` float64 ``[n]``."""

    def __init__(self, conflicts: Conflicts):
        self.n = conflicts.n
        self._csr: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(conflicts, GraphConflicts):
            edges = np.array(list(conflicts.graph.edges()), np.int64).reshape(-1, 2)
            self._csr = _csr(self.n, edges[:, 0], edges[:, 1])
        elif isinstance(conflicts, CliquePath):
            first, last = conflicts.first.astype(np.int64), conflicts.last.astype(np.int64)
            self._by_first = np.argsort(first, kind="stable")
            self._by_last = np.argsort(last, kind="stable")
            self._starts_before = np.searchsorted(first[self._by_first], last, side="left")
            self._ends_before = np.searchsorted(last[self._by_last], first, side="right")
            self._nonempty = first < last
        else:  # any other form: its neighbour lists
            nbrs = [conflicts.neighbours(i) for i in range(self.n)]
            a = np.repeat(np.arange(self.n, dtype=np.int64), [len(v) for v in nbrs])
            b = np.concatenate(nbrs).astype(np.int64) if nbrs else np.zeros(0, np.int64)
            keep = a < b
            self._csr = _csr(self.n, a[keep], b[keep])
        self.degree = self.sum(np.ones((self.n, 1)))[:, 0]

    def sum(self, h: np.ndarray) -> np.ndarray:
        """float64 ``[n, D]``: row ``i`` is the sum of ``h``'s rows over ``i``'s neighbours."""
        h = np.asarray(h, np.float64)
        if self._csr is not None:
            indptr, indices = self._csr
            out = np.zeros_like(h)
            rows = np.flatnonzero(np.diff(indptr))
            if len(rows):
                out[rows] = np.add.reduceat(h[indices], indptr[rows], axis=0)
            return out
        zero = np.zeros((1, h.shape[1]))
        by_first = np.concatenate([zero, np.cumsum(h[self._by_first], 0)])
        by_last = np.concatenate([zero, np.cumsum(h[self._by_last], 0)])
        return by_first[self._starts_before] - by_last[self._ends_before] - h * self._nonempty[:, None]


def _csr(n: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric adjacency of the pairs ``(a, b)`` (each once) as ``(indptr [n+1], indices)``, rows sorted."""
    rows, cols = np.concatenate([a, b]), np.concatenate([b, a])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, cols[order]


def csr_adjacency(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interference graph of live ranges ``[start, end)`` as ``(indptr [n+1], indices)`` (what training's
    sparse matmul reads; :func:`mallocgame.problem.intervals.overlapping_pairs` lists the edges)."""
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    a, b = overlapping_pairs(start, end)
    return _csr(len(start), np.asarray(a, np.int64), np.asarray(b, np.int64))


def base_values(data, deg: np.ndarray, overlap: np.ndarray) -> np.ndarray:
    """float64 ``[n, BASE]``: each buffer's own features ``x`` (size, start, end, length, benefit, benefit density,
    is a weight, degree and overlapping bytes in the interference graph; normalised as in
    :mod:`mallocgame.search.muzero.encoder`) from its degree and overlapping bytes."""
    x = np.zeros((data.n, BASE), np.float64)
    if data.n:
        x[:, 0] = data.size / data.scale
        x[:, 1] = (data.start - data.t0) / data.horizon
        x[:, 2] = (data.end - data.t0) / data.horizon
        x[:, 3] = (data.end - data.start) / data.horizon
        x[:, 4] = data.benefit / data.max_benefit
        x[:, 5] = data.density
        x[:, 6] = data.is_weight
        x[:, 7] = deg / max(deg.max(), 1.0)
        x[:, 8] = overlap / data.scale
    return x


def base_features(data) -> tuple[np.ndarray, Neighbourhood]:
    """The features ``x`` float64 ``[n, BASE]`` of every buffer of a problem's
    :class:`~mallocgame.search.game_data.GameData` (:func:`base_values`) and the :class:`Neighbourhood` they were
    summed over, read from the problem's conflicts (the interference graph, or its clique path): vectorised, for any
    number of buffers."""
    neighbourhood = Neighbourhood(problem_conflicts(data.problem))
    overlap = neighbourhood.sum(data.size.astype(np.float64)[:, None])[:, 0]
    return base_values(data, neighbourhood.degree, overlap), neighbourhood


class NumpyGraphEncoder:
    """The rounds of the module docstring with a network's weights: per round ``(W_self [D, F], b [D], W_nbr [D, F],
    W_size [D, F])`` (torch's ``Linear`` layout)."""

    def __init__(self, rounds: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]):
        self.rounds = [tuple(np.asarray(w, np.float64) for w in r) for r in rounds]
        self.dim = int(self.rounds[-1][0].shape[0])
        self._cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    @classmethod
    def from_state_dict(cls, state_dict: dict) -> "NumpyGraphEncoder | None":
        """The graph encoder of a network's state dict (numpy arrays), or None when it has none."""
        rounds, k = [], 0
        while f"{PREFIX}{k}.self.weight" in state_dict:
            p = f"{PREFIX}{k}."
            rounds.append((state_dict[p + "self.weight"], state_dict[p + "self.bias"], state_dict[p + "nbr.weight"],
                           state_dict[p + "size.weight"]))
            k += 1
        return cls(rounds) if rounds else None

    def forward(self, x: np.ndarray, neighbourhood: Neighbourhood, weight: np.ndarray) -> np.ndarray:
        """float32 ``[n, D]`` from features ``x [n, F]`` and per-buffer weights ``size / scale`` ``[n]``."""
        h = np.asarray(x, np.float64)
        inverse_degree = 1.0 / np.maximum(neighbourhood.degree, 1.0)
        weight = np.asarray(weight, np.float64)[:, None]
        for w_self, bias, w_nbr, w_size in self.rounds:
            sums = neighbourhood.sum(np.concatenate([h, weight * h], 1))
            f = h.shape[1]
            h = h @ w_self.T + bias + (sums[:, :f] * inverse_degree[:, None]) @ w_nbr.T + sums[:, f:] @ w_size.T
            np.maximum(h, 0.0, out=h)
        return h.astype(np.float32)

    def embed(self, data) -> np.ndarray:
        """float32 ``[n, D]``: every buffer's embedding in the problem of :class:`~mallocgame.search.game_data.GameData`
        ``data``; computed once per problem (cached while ``data`` lives)."""
        out = self._cache.get(data)
        if out is None:
            x, neighbourhood = base_features(data)
            out = self._cache[data] = self.forward(x, neighbourhood, data.size / data.scale)
        return out
