"""A representation that sees the problem: per-buffer encodings and a per-state summary.

Features name ``"encoder/1"`` (stored in a checkpoint's ``features``; absent = the game's plain
observation vector). The network's input vector is then the game's observation vector followed by

* the **per-buffer encoding** of the current buffer, ``3 * BASE`` numbers computed once per problem
  (:func:`encoding`, cached per :class:`~mallocgame.search.game_data.GameData`): its own features ``x`` (size,
  start, end, length, benefit, benefit density, is a weight, degree and overlapping bytes in the
  interference graph), the mean of its neighbours' ``x`` and the mean of their means -- two rounds of
  mean-aggregation message passing over the overlap graph with fixed weights (a simplified graph
  convolution; the learned layers are the network's), so it is equivariant under any renumbering
  of the buffers;
* the **per-state summary** (:func:`state_features`, ``STATE`` numbers, cheap: one overlap query):
  over the undecided buffers that overlap the current one, their count, bytes, the bytes of those
  denser in benefit than the current one, their highest density, and the mean of their encodings;
  the bytes already placed over the current buffer's range.

Features name ``"encoder/2"`` appends ``RELAX`` numbers from the **no-fragmentation relaxation**
(:func:`mallocgame.bounds.bounds.no_fragmentation_relaxation`, the MIP behind the map-mode bound, solved once
per problem; :func:`relaxation_set`): whether the current buffer is in the relaxation's fast set, and,
over the buffers that overlap it, the bytes of the undecided ones in the set, the bytes of the undecided
ones outside it, and the bytes placed that are outside it. The relaxation solution as an input of a
learned policy is the idea of learned branching on LP features (Gasse et al., "Exact Combinatorial
Optimization with Graph Convolutional Neural Networks", NeurIPS 2019).

Features name ``"encoder/3"``: the input vector of ``encoder/2`` with the fixed encoding replaced by a **learned**
one, ``ENCODING`` numbers per buffer from the network's graph encoder
(:mod:`mallocgame.search.muzero.graph_encoder`: two rounds of learned message passing over the interference graph,
from the features ``x`` above), both where the current buffer's encoding goes and in the state summary's mean over
the undecided overlapping buffers. Its vectors need the network (``net``, a
:class:`~mallocgame.search.muzero.inference.NumpyNet` with a graph encoder).

numpy only; shapes ``[n, 3 * BASE]``, ``[STATE]`` and ``[RELAX]``.
"""

from __future__ import annotations

import weakref

import numpy as np

from mallocgame.bounds import bounds  # the module: its relaxation is read at call time (a test replaces it)
from mallocgame.problem.graph import conflicts as problem_conflicts
from mallocgame.search.game_order import NativeOrderGame
from mallocgame.search.muzero.graph_encoder import BASE, Neighbourhood, base_features

NAME = "encoder/1"
NAME_RELAX = "encoder/2"
NAME_GRAPH = "encoder/3"
NAMES = (NAME, NAME_RELAX, NAME_GRAPH)
WITH_RELAX = (NAME_RELAX, NAME_GRAPH)  # the names whose vectors end with the relaxation's numbers
ENCODING = 3 * BASE
STATE = 6 + ENCODING
EXTRA = ENCODING + STATE  # numbers appended to the observation vector
RELAX = 4  # further numbers under encoder/2
RELAX_SECONDS = 5.0  # the relaxation MIP's time limit (its best set so far is used when it binds)
RELAX_GAP = 0.01  # the MIP stops within 1% of optimal: a guide, not a bound (deterministic, and faster)
#: Constraint nonzeros up to which the relaxation is solved as a MIP; past them as its LP, rounded down: on big
#: programs the MIP does not end within its share of a time limit (the search then plays without the network),
#: while the LP ends sooner with a set that agrees with the MIP's on most buffers (docs/results.md, "muzero's
#: defaults").
RELAX_MIP_NONZEROS = 200_000


def extra_inputs(features: str) -> int:
    """Numbers ``features`` appends to the observation vector."""
    return {"": 0, NAME: EXTRA, NAME_RELAX: EXTRA + RELAX, NAME_GRAPH: EXTRA + RELAX}[features]

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_RELAX_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def relaxation_set(data, time_limit: float = RELAX_SECONDS) -> np.ndarray:
    """bool ``[n]``: the fast set of the no-fragmentation relaxation over the buffers that fit and
    have a positive benefit (all of them when there is no capacity): the MIP's, or past :data:`RELAX_MIP_NONZEROS`
    the LP's rounded down; solved once per :class:`GameData` (``time_limit`` for HiGHS on that first call) and
    cached."""
    cached = _RELAX_CACHE.get(data)
    if cached is None:
        candidates = data.benefit > 0
        if data.capacity is not None:
            candidates &= data.size <= data.capacity
        chosen = bounds.no_fragmentation_relaxation(data.problem, data.evaluator, candidates,
                                             time_limit=time_limit, rel_gap=RELAX_GAP,
                                             mip_nonzeros=RELAX_MIP_NONZEROS).chosen
        # An empty set where there were candidates: the model was too big, or HiGHS found no
        # integral answer in its time -- not a guide (it would say "slow" of every buffer).
        cached = _RELAX_CACHE[data] = (chosen, bool(chosen.any() or not candidates.any()))
    return cached[0]


def relaxation_usable(data) -> bool:
    """Whether :func:`relaxation_set` (solved first) found a set to guide by."""
    relaxation_set(data)
    return _RELAX_CACHE[data][1]


def neighbours(data) -> list[np.ndarray]:
    """Per buffer, its neighbours in the problem's interference graph (sorted int64 arrays), read from the
    session's conflicts (:func:`mallocgame.problem.graph.conflicts`)."""
    conflicts = problem_conflicts(data.problem)
    return [conflicts.neighbours(i) for i in range(data.n)]


def encoding(data) -> np.ndarray:
    """float32 ``[n, ENCODING]`` of a problem's :class:`GameData` (module docstring); cached."""
    enc = _CACHE.get(data)
    if enc is not None:
        return enc
    x, hood = base_features(data)
    h1 = _mean_over(hood, x)
    h2 = _mean_over(hood, h1)
    enc = np.concatenate([x, h1, h2], 1).astype(np.float32)
    _CACHE[data] = enc
    return enc


def table(data, features: str = NAME, net=None) -> np.ndarray:
    """float32 ``[n, ENCODING]``: the per-buffer encodings ``features`` reads: :func:`encoding` (``encoder/1``,
    ``encoder/2``), or ``net``'s learned embeddings (``encoder/3``)."""
    if features != NAME_GRAPH:
        return encoding(data)
    graph = getattr(net, "graph", None)
    if graph is None:
        raise ValueError(f"features {NAME_GRAPH!r} need the network's graph encoder (a checkpoint trained with them)")
    return graph.embed(data)


def _mean_over(hood: Neighbourhood, x: np.ndarray) -> np.ndarray:
    """float64: row ``i`` is the mean of ``x``'s rows over ``i``'s neighbours (zeros where it has none)."""
    out = hood.sum(x)
    deg = hood.degree
    has = deg > 0
    out[has] /= deg[has, None]
    out[~has] = 0.0
    return out


def _around(game) -> tuple[int, np.ndarray, np.ndarray]:
    """The current buffer of the fixed-order ``game`` and the buffers overlapping it that are still
    undecided and that are placed (int64 index arrays)."""
    d = game.data
    i = game.current
    near = d.index.query(d.start_l[i], d.end_l[i])
    near = near[near != i]
    undecided = near[d.orders[game.config.order].position[near] > game.steps]
    placed = near[game.offsets()[near] >= 0]
    return i, undecided, placed


def state_features(game, around: tuple | None = None, enc: np.ndarray | None = None) -> np.ndarray:
    """float32 ``[STATE]`` for the fixed-order game's current position (zeros when done); ``around``:
    :func:`_around` of it, if the caller has it; ``enc``: the per-buffer encodings (:func:`table`; default
    :func:`encoding`)."""
    out = np.zeros(STATE, np.float32)
    if game.done:
        return out
    d = game.data
    enc = encoding(d) if enc is None else enc
    i, undecided, placed = around or _around(game)
    if len(undecided):
        sizes = d.size[undecided].astype(np.float64)
        denser = d.density[undecided] > d.density[i]
        out[0] = len(undecided) / 16.0
        out[1] = sizes.sum() / d.scale
        out[2] = sizes[denser].sum() / d.scale
        out[3] = d.density[undecided].max()
        out[6:] = enc[undecided].mean(0)
    out[4] = d.size[placed].sum() / d.scale
    out[5] = float(d.size_l[i]) / d.scale
    return out


def relaxation_features(game, around: tuple | None = None) -> np.ndarray:
    """float32 ``[RELAX]`` for the fixed-order game's current position (module docstring; zeros when
    done); ``around``: :func:`_around` of it, if the caller has it."""
    out = np.zeros(RELAX, np.float32)
    if game.done:
        return out
    d = game.data
    chosen = relaxation_set(d)
    i, undecided, placed = around or _around(game)
    out[0] = float(chosen[i])
    out[1] = d.size[undecided[chosen[undecided]]].sum() / d.scale
    out[2] = d.size[undecided[~chosen[undecided]]].sum() / d.scale
    out[3] = d.size[placed[~chosen[placed]]].sum() / d.scale
    return out


def network_vector(game, obs, features: str = NAME, net=None) -> np.ndarray:
    """The network's input vector under ``features``: observation, encoding of the current buffer, state
    summary[, relaxation features] (``encoder/3``: ``net``'s learned encodings); ``obs`` is ``game``'s observation
    (a native order game's vector is compiled from its state: :func:`leaf_inputs`)."""
    enc = table(game.data, features, net)
    if isinstance(game, NativeOrderGame) and enc.dtype == np.float32:
        return NativeOrderGame.leaf_inputs([game], enc, relaxation_set(game.data) if features in WITH_RELAX
                                           else None)[0][0]
    return _vector(game, obs, features, enc)


def static_vector(game, obs) -> np.ndarray:
    """The ``encoder/3`` input vector with zeros where the learned encodings go (:func:`learned_slots`): what
    training stores, filling those slots from the graph encoder's output in each step."""
    return _vector(game, obs, NAME_GRAPH, np.zeros((game.data.n, ENCODING), np.float32))


def learned_slots(obs_dim: int) -> tuple[slice, slice]:
    """Where an input vector of ``obs_dim`` observation numbers holds the current buffer's encoding and the state
    summary's mean encoding."""
    return slice(obs_dim, obs_dim + ENCODING), slice(obs_dim + ENCODING + 6, obs_dim + ENCODING + STATE)


def _vector(game, obs, features: str, enc: np.ndarray) -> np.ndarray:
    cur = enc[game.current] if not game.done else np.zeros(ENCODING, np.float32)
    around = None if game.done else _around(game)  # one neighbour query per network call
    parts = [np.asarray(obs.as_vector(), np.float32), cur, state_features(game, around, enc)]
    if features in WITH_RELAX:
        parts.append(relaxation_features(game, around))
    return np.concatenate(parts)


def leaf_inputs(games: list, features: str = "", net=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the network reads at ``games`` (of one problem): float32 ``[B, D]`` input vectors under ``features``
    (``""``: the observation vector), float32 ``[B, num_actions, ACTION_FEATURES]`` action features and bool
    ``[B, num_actions]`` legal masks. Native order games (:class:`~mallocgame.search.game_order.NativeOrderGame`)
    of one decision order get them from one compiled call (``search/_order_leaf.pxi``), the same floats; other
    games from their observations and :func:`network_vector` (:func:`network_vectors` for several)."""
    if features and features not in NAMES:
        raise ValueError(f"unknown network input features {features!r} (known: {', '.join(NAMES)})")
    first = games[0]
    if isinstance(first, NativeOrderGame) and all(type(g) is type(first) and g._dec is first._dec
                                                  and g.config == first.config for g in games):
        enc = table(first.data, features, net) if features else None
        if enc is None or enc.dtype == np.float32:  # the compiled mean sums in float32, as numpy does for these
            chosen = relaxation_set(first.data) if features in WITH_RELAX else None
            return NativeOrderGame.leaf_inputs(games, enc, chosen)
    observations = [g.observation() for g in games]
    if not features:
        vectors = np.asarray([o.as_vector() for o in observations], np.float32)
    elif len(games) > 1 and all(g.data is first.data for g in games):
        vectors = network_vectors(games, observations, features, net)
    else:
        vectors = np.asarray([network_vector(g, o, features, net) for g, o in zip(games, observations)], np.float32)
    return (vectors, np.asarray([o.actions for o in observations], np.float32),
            np.asarray([o.mask for o in observations], bool))


def network_vectors(games: list, observations: list, features: str = NAME, net=None) -> np.ndarray:
    """float32 ``[B, D]``: :func:`network_vector` of every game (of one problem: one :class:`GameData`) with its
    observation, the same floats. The per-state reductions of :func:`state_features` and
    :func:`relaxation_features` run once over all the games' overlapping buffers, so the numpy calls per state are
    the neighbour query's only (and one per row of the longest mean)."""
    B = len(games)
    if B == 0:
        return np.zeros((0, 0), np.float32)
    d = games[0].data
    enc = table(d, features, net)
    live = [b for b, g in enumerate(games) if not g.done]
    obs = np.asarray([np.asarray(o.as_vector(), np.float32) for o in observations])
    extra = np.zeros((B, extra_inputs(features)), np.float32)
    if live:
        current, und, plc = [], [], []
        for b in live:
            i, undecided, placed = _around(games[b])
            current.append(i), und.append(undecided), plc.append(placed)
        cur = np.asarray(current, np.int64)
        rows = np.asarray(live, np.int64)
        n_und = np.array([len(u) for u in und], np.int64)
        seg_u = np.repeat(np.arange(len(live)), n_und)
        seg_p = np.repeat(np.arange(len(live)), [len(p) for p in plc])
        all_u = np.concatenate(und)
        all_p = np.concatenate(plc)
        size_u = d.size[all_u].astype(np.float64)
        size_p = d.size[all_p].astype(np.float64)
        m = len(live)
        state = np.zeros((m, STATE), np.float64)
        has = n_und > 0
        dens_u = d.density[all_u]
        state[:, 0] = n_und / 16.0
        state[:, 1] = np.bincount(seg_u, size_u, m) / d.scale
        state[:, 2] = np.bincount(seg_u, size_u * (dens_u > d.density[cur][seg_u]), m) / d.scale
        peak = np.full(m, -np.inf)
        np.maximum.at(peak, seg_u, dens_u)
        state[has, 3] = peak[has]
        starts = np.concatenate(([0], np.cumsum(n_und)[:-1]))[has]
        if len(all_u):  # each state's mean summed row by row in float32, as state_features's mean(0) sums
            rows_u, lengths = enc[all_u], n_und[has]
            sums = np.zeros((len(lengths), enc.shape[1]), np.float32)
            for r in range(int(lengths.max())):
                longer = lengths > r
                sums[longer] += rows_u[starts[longer] + r]
            state[has, 6:] = sums / lengths[:, None]
        state[:, 4] = np.bincount(seg_p, size_p, m) / d.scale
        state[:, 5] = d.size[cur].astype(np.float64) / d.scale
        extra[rows, :ENCODING] = enc[cur]
        extra[rows, ENCODING:EXTRA] = state
        if features in WITH_RELAX:
            chosen = relaxation_set(d)
            extra[rows, EXTRA] = chosen[cur]
            extra[rows, EXTRA + 1] = np.bincount(seg_u, size_u * chosen[all_u], m) / d.scale
            extra[rows, EXTRA + 2] = np.bincount(seg_u, size_u * ~chosen[all_u], m) / d.scale
            extra[rows, EXTRA + 3] = np.bincount(seg_p, size_p * ~chosen[all_p], m) / d.scale
    return np.concatenate([obs, extra], 1)
