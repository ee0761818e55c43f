"""The fixed-order mallocGame variant: buffers in a fixed order, the action chooses the offset.

For the current buffer, the placed buffers that interfere with it (live ranges overlap,
found with :class:`mallocgame.problem.intervals.OverlapIndex`) split the address space ``[0, capacity)``
into free holes. A canonical offset (0 or the aligned top of an interfering placed
buffer) is feasible exactly when it is the aligned bottom of a free hole that holds the
buffer, so the feasible canonical offsets are the holes' aligned bottoms; actions
``0..k-1`` are the ``k`` lowest of them in address order, action ``k`` is slow memory
(in pack mode legal only when no offset fits, so the game never gives up voluntarily).

State: offsets ``[n]``, the position in the order, the per-op saved seconds of the
reward model. A step costs one index query plus a scan of the interfering buffers.

Two engines (:func:`mallocgame.runtime.native_engine.engine`): ``Game(...)`` builds a :class:`NativeOrderGame` (state, step,
clone, undo, legal and greedy actions in compiled code, ``search/_order_game.pxi``; the observation and the network's
input vectors, ``search/_order_leaf.pxi``) unless
``MALLOCGAME_ENGINE=python``, which builds this module's :class:`OrderGame`, the reference it must match.
"""

from __future__ import annotations

import numpy as np

from mallocgame._native import OrderLeafTables, OrderState, OrderTables, order_leaf_inputs
from mallocgame.problem.intervals import count_overlapping_pairs
from mallocgame.search.game import ACTION_FEATURES, BUFFER_FEATURES, Game, GameConfig, NativeState, Observation
from mallocgame.search.game_data import GameData, buffer_order

_SMALL = 48  # below this many interfering buffers a Python scan beats numpy
_INF = float("inf")


def free_holes(offs: np.ndarray, tops: np.ndarray, size: int, align: int, capacity: int | None,
               k: int) -> list[tuple[int, int, float]]:
    """The ``k`` lowest free holes that hold ``size`` bytes: ``[(aligned offset, hole bottom, hole top)]``.

    ``offs``/``tops`` (shape ``[m]``) are the address ranges ``[off, top)`` of the placed
    interfering buffers. The hole above everything ends at ``capacity`` (infinity when
    ``None``).
    """
    cap = _INF if capacity is None else capacity
    holes: list[tuple[int, int, float]] = []
    if len(offs) < _SMALL:
        cur = 0
        for o, t in sorted(zip(offs.tolist(), tops.tolist())):
            if o > cur:
                a = -(-cur // align) * align
                if a + size <= o:
                    holes.append((a, cur, o))
                    if len(holes) == k:
                        return holes
            if t > cur:
                cur = t
        a = -(-cur // align) * align
        if a + size <= cap:
            holes.append((a, cur, cap))
        return holes
    order = np.argsort(offs, kind="stable")
    o, t = offs[order], tops[order]
    lo = np.concatenate(([0], np.maximum.accumulate(t)))
    hi = np.concatenate((o, [np.iinfo(np.int64).max if capacity is None else capacity]))
    start = -(-lo // align) * align
    fit = np.flatnonzero(start + size <= hi)[:k]
    for j in fit.tolist():
        top = _INF if (j == len(o) and capacity is None) else int(hi[j])
        holes.append((int(start[j]), int(lo[j]), top))
    return holes


class OrderGame(Game, variant="order", engine_name="python"):
    """Fixed buffer order; choose one of the ``k`` lowest feasible canonical offsets, or slow."""

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(), *, data=None, mode=None):
        super().__init__(problem, hardware, config, data=data, mode=mode)
        d = self.data
        if config.order not in d.orders:
            d.orders[config.order] = _DecisionOrder(d, config.order)
        self._dec = d.orders[config.order]
        self._order, self._order_l = self._dec.order, self._dec.order_l
        self._set_decisions(self._order_l)
        self._off = np.full(d.n, -1, np.int64)
        self._saved = [0.0] * d.n_ops if d.mode == "map" else None
        self._peak = 0
        self._holes: list | None = None
        self._journal = None  # (total, peak, saved values before the step), previous journal

    def _copy_state_from(self, other: "OrderGame") -> None:
        self._off = other._off.copy()
        if other._saved is not None:
            self._saved = other._saved.copy()

    # --- decisions ----------------------------------------------------------------------------
    def holes(self) -> list[tuple[int, int, float]]:
        """Feasible canonical placements of the current buffer: ``[(offset, hole bottom, hole top)]``."""
        if self._holes is None:
            d = self.data
            i = self._order_l[self._pos]
            near = self._dec.earlier_neighbours(self._pos)
            offs = self._off[near]
            placed = offs >= 0
            offs = offs[placed]
            self._holes = free_holes(offs, offs + d.size[near[placed]], d.size_l[i], d.align_l[i],
                                     d.capacity, self.config.k)
        return self._holes

    def _slow_legal(self) -> bool:
        return self.data.mode == "map" or not self.holes()

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_actions, bool)
        if self.done:
            return mask
        mask[:len(self.holes())] = True
        mask[self.slow_action] = self._slow_legal()
        return mask

    def legal_actions(self) -> np.ndarray:
        """Indices of the legal actions, int64 ascending (``legal_mask`` without building the mask)."""
        if self.done:
            return np.zeros(0, np.int64)
        legal = list(range(len(self.holes())))
        if self._slow_legal():
            legal.append(self.slow_action)
        return np.array(legal, np.int64)

    def greedy_action(self) -> int:
        """Best fit: the smallest offered hole that holds the buffer (lowest on ties), else slow."""
        holes = self.holes()
        if not holes:
            return self.slow_action
        best, best_len = 0, _INF
        for j, (_, lo, hi) in enumerate(holes):
            if hi - lo < best_len:
                best, best_len = j, hi - lo
        return best

    def step(self, action: int) -> float:
        if self.done:
            raise ValueError("step on a finished game")
        holes = self.holes()
        i = self._order_l[self._pos]
        reward = 0.0
        saved_before = None
        if self._saved is not None and self.data.buf_ops is not None:
            saved = self._saved
            saved_before = [(t, saved[t]) for t in self.data.buf_ops[i]]
        journal = ((self._total, self._peak, saved_before), self._journal)
        if action == self.slow_action:
            if not self._slow_legal():
                raise ValueError("illegal action: slow memory is not allowed while an offset fits (pack mode)")
        elif 0 <= action < len(holes):
            off = holes[action][0]
            self._off[i] = off
            reward = self._place_reward(i, off + self.data.size_l[i])
        else:
            raise ValueError(f"illegal action {action}: {len(holes)} offsets are offered")
        # A persistent (shared, immutable) chain, so clone() copies nothing for undo; pushed once the action is legal.
        self._journal = journal
        self._total += reward
        self._pos += 1
        self._steps += 1
        self._holes = None
        return reward

    def undo(self) -> None:
        """Take back the last step (exactly: the saved per-op times are restored, not recomputed)."""
        if self._journal is None:
            raise ValueError("undo: no step to take back")
        (total, peak, saved_before), self._journal = self._journal
        self._pos -= 1
        self._steps -= 1
        self._off[self._order_l[self._pos]] = -1
        self._total, self._peak = total, peak
        if saved_before is not None:
            for t, v in saved_before:
                self._saved[t] = v
        self._holes = None

    # --- observation --------------------------------------------------------------------------
    def observation(self) -> Observation:
        d, cfg = self.data, self.config
        buffer = np.zeros(BUFFER_FEATURES, np.float32)
        actions = np.zeros((self.num_actions, ACTION_FEATURES), np.float32)
        profile = np.zeros(cfg.profile_bins, np.float32)
        upcoming = np.zeros((cfg.upcoming, BUFFER_FEATURES), np.float32)
        mask = self.legal_mask()
        if not self.done:
            i = self.current
            buffer[:] = d.buffer_features(i)
            s, e = d.start_l[i], d.end_l[i]
            near = d.index.query(s, e)
            near = near[self._off[near] >= 0]
            profile = self._profile(s, e, d.start[near], d.end[near], d.size[near] / d.scale, reduce_max=False)
            value = self.placement_value(i) * d.reward_norm / d.max_benefit if d.mode == "map" else \
                d.size_l[i] / d.scale
            size = d.size_l[i]
            for j, (off, lo, hi) in enumerate(self.holes()):
                hole = min(hi, d.scale) - lo
                actions[j] = (off / d.scale, (off + size) / d.scale, hole / d.scale, (hole - size) / d.scale,
                              value, j / cfg.k, 0.0, 1.0)
            actions[self.slow_action, 6] = 1.0
            actions[self.slow_action, 7] = float(mask[self.slow_action])
            nxt = self._order_l[self._pos + 1:self._pos + 1 + cfg.upcoming]
            for r, b in enumerate(nxt):
                upcoming[r] = d.buffer_features(b)
            progress = np.array([self._pos / max(d.n, 1), (s - d.t0) / d.horizon], np.float32)
        else:
            progress = np.array([1.0, 1.0], np.float32)
        return Observation(buffer, profile, actions, upcoming, progress, mask)

    # --- text view ----------------------------------------------------------------------------
    def describe_state(self) -> str:
        d = self.data
        if self.done:
            return f"done: {int((self._off >= 0).sum())}/{d.n} buffers in fast memory"
        i = self.current
        b = d.problem.buffers[i]
        return (f"step {self._pos + 1}/{d.n}: buffer {b.id!r} size={b.size} live=[{b.start}, {b.end}) "
                f"align={d.align_l[i]} benefit={float(d.benefit[i]):.4g} value-if-placed={self.placement_value(i):.4g}")

    def describe_actions(self) -> list[str]:
        if self.done:
            return []
        d = self.data
        size = d.size_l[self.current]
        lines = []
        greedy = self.greedy_action()
        for j, (off, lo, hi) in enumerate(self.holes()):
            hole = "inf" if hi == _INF else str(int(hi - lo))
            waste = "-" if hi == _INF else str(int(hi - lo - size))
            lines.append(f"[{j}] offset={off} hole=[{lo}, {hi if hi != _INF else 'inf'}) size={hole} "
                         f"waste={waste}{'  <- greedy' if j == greedy else ''}")
        if self._slow_legal():
            lines.append(f"[{self.slow_action}] slow memory{'  <- greedy' if greedy == self.slow_action else ''}")
        return lines


class NativeOrderGame(NativeState, OrderGame, variant="order", engine_name="native"):
    """:class:`OrderGame` with its state in compiled code (an ``OrderState`` of ``search/_order_game.pxi``).

    Same interface and the same answers (rewards to the last bit); the tables the compiled state reads are
    built once per problem and decision order and shared like the decision order. ``_off`` etc. are
    read-only copies of the compiled state, for the text view.
    """

    def __init__(self, problem, hardware, config: GameConfig = GameConfig(), *, data=None, mode=None):
        # Game.__init__'s plain fields, without its state: the state lives in self._core.
        self.config = config
        self.data = d = data if data is not None else GameData(problem, hardware, mode=mode)
        self.num_actions = config.k + 1
        self.slow_action = config.k
        if config.order not in d.orders:
            d.orders[config.order] = _DecisionOrder(d, config.order)
        self._dec = d.orders[config.order]
        if self._dec.tables is None:
            self._dec.tables = OrderTables(d, self._dec)
        self._order, self._order_l = self._dec.order, self._dec.order_l
        self._set_decisions(self._order_l)
        self._core = OrderState(self._dec.tables, config.k)

    # --- the state, read from the compiled core (NativeState: the rest) -----------------------
    @property
    def _peak(self) -> int:
        return self._core.peak

    @property
    def _off(self) -> np.ndarray:
        return self._core.offsets()

    @property
    def _saved(self) -> list[float] | None:
        return self._core.saved_seconds() if self.data.mode == "map" else None

    @property
    def current(self) -> int:
        pos = self._core.pos
        return self._order_l[pos] if pos < self._n_decisions else -1

    def total_reward(self) -> float:
        return self._core.total_reward()

    def offsets(self) -> np.ndarray:
        return self._core.offsets()

    def placement_value(self, i: int) -> float:
        return self._core.placement_value(i)

    # --- decisions ----------------------------------------------------------------------------
    def holes(self) -> list[tuple[int, int, float]]:
        return self._core.holes()

    def _slow_legal(self) -> bool:
        return self._core.slow_legal()

    # --- observation: compiled (search/_order_leaf.pxi), the same floats as OrderGame.observation ---------------
    def observation(self) -> Observation:
        vectors, actions, masks = self.leaf_inputs([self])
        v, bins, upcoming = vectors[0], self.config.profile_bins, self.config.upcoming
        return Observation(v[:BUFFER_FEATURES], v[BUFFER_FEATURES:BUFFER_FEATURES + bins], actions[0],
                           v[BUFFER_FEATURES + bins:-2].reshape(upcoming, BUFFER_FEATURES), v[-2:], masks[0])

    @staticmethod
    def leaf_inputs(games: list, enc: np.ndarray | None = None,
                    chosen: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The network's inputs at every game of ``games`` (native order games of one problem, decision order and
        game shape), in one compiled call: float32 ``[B, D]`` vectors (the observation vector; with ``enc``, the
        per-buffer encodings float32 ``[n, E]``, :func:`mallocgame.search.muzero.encoder.network_vector`'s numbers
        after it; with ``chosen`` too, bool ``[n]``, the relaxation's numbers last), float32 ``[B, k + 1,
        ACTION_FEATURES]`` action features and bool ``[B, k + 1]`` legal masks."""
        first = games[0]
        cfg = first.config
        if any(g._dec is not first._dec or g.config != cfg for g in games):
            raise ValueError("leaf_inputs: games of one problem, decision order and game shape only")
        shape = (cfg.k, cfg.upcoming, cfg.profile_bins)
        tables = first._dec.leaf_tables.get(shape)
        if tables is None:
            tables = first._dec.leaf_tables[shape] = OrderLeafTables(first._dec.tables, first.data, first._dec,
                                                                     *shape)
        width = tables.obs_dim
        if enc is not None:
            width += 2 * enc.shape[1] + 6 + (4 if chosen is not None else 0)
        B = len(games)
        vectors = np.zeros((B, width), np.float32)
        actions = np.zeros((B, first.num_actions, ACTION_FEATURES), np.float32)
        masks = np.zeros((B, first.num_actions), bool)
        order_leaf_inputs(tables, [g._core for g in games], vectors, actions, masks.view(np.uint8), enc,
                          None if chosen is None else np.ascontiguousarray(chosen, bool).view(np.uint8))
        return vectors, actions, masks



#: The name of the decision order :func:`use_answer_order` sets on a problem's data (the best answer's order).
ANSWER_ORDER = "answer"


def answer_order(data: GameData, offsets: np.ndarray) -> np.ndarray:
    """A decision order that follows a placement (offsets int64 ``[n]``, -1 slow): its fast buffers by offset
    ascending (then index), then its slow ones in greedy-xla's order, int64 ``[n]``.

    Where each fast buffer rests on the floor or on an interfering buffer (the greedy answers do), its offset is, when
    it is decided in that order, 0 or the top of an interfering buffer decided before it: a canonical offset of the
    fixed-order game, so the placement is a path of the game when that offset is among the ``k`` lowest holes; the
    game's greedy episode (best fit) then tends to replay it.
    """
    offsets = np.asarray(offsets, np.int64)
    fast = np.flatnonzero(offsets >= 0)
    slow = np.flatnonzero(offsets < 0)
    if "xla" not in data.orders:
        data.orders["xla"] = _DecisionOrder(data, "xla")
    xla_position = data.orders["xla"].position
    return np.concatenate((fast[np.lexsort((fast, offsets[fast]))],
                           slow[np.argsort(xla_position[slow], kind="stable")])).astype(np.int64)


def use_answer_order(data: GameData, offsets: np.ndarray) -> None:
    """Make ``GameConfig(order=ANSWER_ORDER)`` on ``data`` play the buffers in :func:`answer_order` of ``offsets``
    (replacing an answer order set before)."""
    data.orders[ANSWER_ORDER] = _DecisionOrder(data, ANSWER_ORDER, answer_order(data, offsets))


class _DecisionOrder:
    """One decision order of a problem, shared by every game on it.

    ``order`` [n] buffer indices; ``earlier_neighbours(pos)`` the buffers that interfere
    with ``order[pos]`` and come before it (the only ones that can be placed when it is
    decided), cached per position unless the problem has too many interfering pairs (``PAIR_BUDGET``; past it
    the native engine's ``OrderTables`` query the problem's overlap index in compiled code).
    """

    PAIR_BUDGET = 4_000_000

    def __init__(self, d, kind: str, order: np.ndarray | None = None):
        """``kind``: a named order of :func:`buffer_order`, or any name when ``order`` (a permutation of the buffers,
        int64 ``[n]``) is given."""
        self.data = d
        self.order = buffer_order(d.problem, d.benefit, kind) if order is None else np.asarray(order, np.int64)
        self.order_l = self.order.tolist()
        self.position = np.empty(d.n, np.int64)
        self.position[self.order] = np.arange(d.n)
        self.cache: list[np.ndarray | None] | None = None
        self.tables: OrderTables | None = None  # the native engine's tables, built on first use
        self.leaf_tables: dict = {}  # the native leaf inputs' tables per (k, upcoming, profile_bins), on first use
        if count_overlapping_pairs(d.start, d.end) <= self.PAIR_BUDGET:
            self.cache = [None] * d.n

    def earlier_neighbours(self, pos: int) -> np.ndarray:
        if self.cache is not None:
            near = self.cache[pos]
            if near is not None:
                return near
        d = self.data
        i = self.order_l[pos]
        near = d.index.query(d.start_l[i], d.end_l[i])
        near = near[self.position[near] < pos]
        if self.cache is not None:
            self.cache[pos] = near
        return near
