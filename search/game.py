"""The mallocGame: memory mapping as a one-player game with exact, telescoping rewards (docs/architecture.md, "The game").

Three variants share one interface (:class:`Game`; pick with ``GameConfig.variant``):

* ``"order"`` (:mod:`mallocgame.search.game_order`): buffers are decided one at a time in a fixed
  order (default: start time ascending, then size descending). Actions ``0..k-1`` put
  the current buffer at one of its ``k`` lowest feasible **canonical offsets** — the
  aligned bottom of each free hole left by the placed buffers that interfere with it,
  which is exactly the set of aligned tops (and 0) where it fits; action ``k`` sends it
  to slow memory (in pack mode only when no offset fits).
* ``"address"`` (:mod:`mallocgame.search.game_address`): MiniMalloc's view. The address is fixed
  instead: the lowest segment of the occupancy skyline. Actions ``0..k-1`` put one of
  the ``k`` best-ranked candidate buffers (those whose whole live range fits the
  segment) on that segment; action ``k`` ("slow"/close) leaves the segment idle, which
  raises it to its lower neighbour; buffers that no longer fit below the capacity go to
  slow memory. See that module for the exact rules and why every episode ends.
* ``"prefetch"`` (:mod:`mallocgame.search.game_prefetch`): prefetch mode (docs/prefetch.md), one
  decision per use segment of each buffer in a fixed order: a new fast interval at one of
  the ``k`` lowest feasible canonical offsets for each of ``windows`` candidate copy windows,
  keeping the previous interval resident across the gap, or slow. Its rewards are the
  exact changes of the prefetch evaluator's time (copy stalls and evictions included), and
  ``intervals()`` is the answer.

Reward per step = exact reduction of the evaluator's program time (undecided buffers
count as slow) divided by ``time(all slow)``, so an episode's rewards sum to
``Evaluator.value(offsets) / time(all slow)`` in ``[0, 1]``. Pack mode: bytes placed /
total bytes (see :mod:`mallocgame.search.game_data`). State updates are incremental: a step touches
only the buffers that interfere with the decision and the ops of the buffer placed.

Example:
    >>> from mallocgame.inputs.generate import layered_network
    >>> from mallocgame.hardware.spec import PRESETS
    >>> g = Game(layered_network(60, seed=1), PRESETS["tpuv4i"])
    >>> while not g.done:
    ...     _ = g.step(g.greedy_action())
    >>> 0 < g.total_reward() < 1
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mallocgame.problem.model import Problem

# The package, not the variants' modules: they subclass Game, and mallocgame/search/__init__.py imports
# them once this module is done; Game() reads them off the package at call time.
from mallocgame.runtime.native_engine import engine
from mallocgame.search.game_data import GameData

#: Features of one buffer: valid, size/scale, start, end, length (horizon-normalised),
#: benefit / max benefit, benefit density / max density, is a weight.
BUFFER_FEATURES = 8
#: Features of one action slot. Order variant: offset, top, hole size, waste (all /scale),
#: value of placing, rank / k, is slow, exists. Address variant: size, top, start within
#: the segment, coverage of the segment, benefit, value of placing, is slow/close, exists.
ACTION_FEATURES = 8
VARIANTS = ("order", "address", "prefetch")


@dataclass(frozen=True)
class GameConfig:
    variant: str = "order"  # "order" (fixed buffer order, choose offset) | "address" (fixed address, choose buffer)
    k: int = 16  # candidate actions besides "slow"
    order: str = "start"  # buffer order of the "order" variant: "start" | "xla" | "size"
    upcoming: int = 4  # next buffers in the observation
    profile_bins: int = 16  # occupancy profile resolution
    windows: int = 2  # "prefetch" variant: candidate copy windows per segment, k offsets each (1..3)

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown game variant {self.variant!r} (known: {', '.join(VARIANTS)})")
        if self.k < 1 or self.upcoming < 0 or self.profile_bins < 1:
            raise ValueError("GameConfig: k and profile_bins must be >= 1 and upcoming >= 0")
        if not 1 <= self.windows <= 3:
            raise ValueError("GameConfig: windows must be 1, 2 or 3")

    @property
    def num_actions(self) -> int:
        """Actions of the variant: ``k`` + slow; prefetch: ``k`` per window + extend + slow."""
        return self.k * self.windows + 2 if self.variant == "prefetch" else self.k + 1


@dataclass(frozen=True)
class Observation:
    """What a policy sees; fixed shapes for a given :class:`GameConfig`.

    ``buffer`` [BUFFER_FEATURES]: the current buffer (address variant: the lowest skyline
    segment as a pseudo-buffer: valid, floor height, start, end, length, candidates / k,
    room left above the floor, 0); ``profile`` [profile_bins]: fast-memory occupancy
    over the current buffer's live range (address variant: skyline height around the
    segment), as fractions of the capacity; ``actions`` [num_actions, ACTION_FEATURES];
    ``upcoming`` [upcoming, BUFFER_FEATURES] (zero rows past the end); ``progress`` [2]:
    fraction decided and current time (address variant: floor height); ``mask``
    [num_actions] bool.
    """

    buffer: np.ndarray
    profile: np.ndarray
    actions: np.ndarray
    upcoming: np.ndarray
    progress: np.ndarray
    mask: np.ndarray

    def as_vector(self) -> np.ndarray:
        """float32 ``[OBS_DIM]``: buffer, profile, upcoming (flattened), progress."""
        return np.concatenate([self.buffer, self.profile, self.upcoming.reshape(-1), self.progress]).astype(np.float32)


def observation_dims(config: GameConfig = GameConfig()) -> dict[str, int]:
    """Sizes a network needs, without building a game."""
    return {
        "obs_dim": BUFFER_FEATURES + config.profile_bins + config.upcoming * BUFFER_FEATURES + 2,
        "num_actions": config.num_actions,
        "action_features": ACTION_FEATURES,
        "buffer_features": BUFFER_FEATURES,
        "profile_bins": config.profile_bins,
        "upcoming": config.upcoming,
    }


# The class of each variant, by (variant, engine; None: any engine). Each variant's module registers its class as
# it defines it (``class OrderGame(Game, variant="order", engine_name="python")``); the package imports them all,
# so they exist whichever module is imported first, and this module imports none of them.
_VARIANT_CLASSES: dict[tuple[str, str | None], type] = {}


class NativeState:
    """What a game whose state lives in a compiled core (``self._core``, ``mallocgame._native``) reads from it,
    the same for every variant: put first among the bases of a variant's native class, so that these win over
    the Python reference's attributes."""

    __slots__ = ()

    def clone(self):
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._core = self._core.clone()
        return other

    @property
    def _pos(self) -> int:
        return self._core.pos

    @property
    def _steps(self) -> int:
        return self._core.steps

    @property
    def _total(self) -> float:
        return self._core.total

    @property
    def done(self) -> bool:
        return self._core.done

    @property
    def steps(self) -> int:
        return self._core.steps

    @property
    def decisions_left(self) -> int:
        return self._n_decisions - self._core.pos

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_actions, bool)
        mask[self._core.legal_actions()] = True
        return mask

    def legal_actions(self) -> np.ndarray:
        return self._core.legal_actions()

    def greedy_action(self) -> int:
        return self._core.greedy_action()

    def step(self, action: int) -> float:
        return self._core.step(action)

    def greedy_rollout(self, stop_step: float = math.inf) -> float:
        return self._core.greedy_rollout(stop_step)

    def undo(self) -> None:
        self._core.undo()


class Game:
    """One episode of the mallocGame; ``Game(problem, hardware, config)`` builds the config's variant.

    ``data`` may pass a :class:`GameData` built earlier for the same problem and hardware,
    so many games on one problem share it. ``mode`` overrides ``problem.mode``.
    """

    config: GameConfig
    data: GameData

    def __init_subclass__(cls, variant: str | None = None, engine_name: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if variant is not None:
            _VARIANT_CLASSES[(variant, engine_name)] = cls

    def __new__(cls, problem: Problem | None = None, hardware=None, config: GameConfig = GameConfig(), **_):
        if cls is Game:
            cls = _VARIANT_CLASSES.get((config.variant, engine())) or _VARIANT_CLASSES[(config.variant, None)]
        return object.__new__(cls)

    def __init__(self, problem: Problem, hardware, config: GameConfig = GameConfig(), *,
                 data: GameData | None = None, mode: str | None = None):
        self.config = config
        self.data = data if data is not None else GameData(problem, hardware, mode=mode)
        self.num_actions = config.k + 1
        self.slow_action = config.k
        self._total = 0.0
        self._steps = 0
        self._peak = 0
        # The decisions: ``_pos`` of ``_n_decisions`` taken; ``_decisions[pos]`` the buffer decided at
        # position ``pos`` (the order and prefetch variants set it with ``_set_decisions``; the address
        # variant, which has no fixed order, sets ``_n_decisions = n`` and counts the buffers decided).
        self._pos = 0
        self._n_decisions = 0
        self._decisions: list[int] | None = None

    def _set_decisions(self, buffers: list[int]) -> None:
        """Fix the decision order: one decision per entry, about buffer ``buffers[pos]`` (shared, never written)."""
        self._decisions = buffers
        self._n_decisions = len(buffers)

    # --- rewards, the same in both variants ----------------------------------------------------
    def _place_reward(self, i: int, top: int) -> float:
        """Reward of placing buffer ``i`` with its top at ``top`` (and commit it to the state).

        Map mode: the exact reduction of the program time. Pack mode: bytes placed / all bytes,
        less, when minimising the peak, the rise of the peak it causes.
        """
        d = self.data
        if d.mode == "map":
            return d.place_reward(i, self._saved, True)
        size = d.size_l[i]
        if d.capacity is not None:
            return size / d.total_bytes
        rise = max(0, top - self._peak)
        self._peak = max(self._peak, top)
        return (size - rise) / d.total_bytes

    def placement_value(self, i: int) -> float:
        """Reward of placing buffer ``i`` now, without committing it."""
        d = self.data
        if d.mode == "map":
            return d.place_reward(i, self._saved, False)
        return d.size_l[i] / d.total_bytes

    # --- shared API -------------------------------------------------------------------------
    def legal_actions(self) -> np.ndarray:
        """Indices of the legal actions, int64 ascending."""
        return np.flatnonzero(self.legal_mask())

    def total_reward(self) -> float:
        """Sum of the rewards so far (normalised; the episode's value when done)."""
        return self._total

    def greedy_rollout(self, stop_step: float = math.inf) -> float:
        """Play the greedy action (in place) until done or ``steps`` reaches ``stop_step``; returns the sum of
        the rewards, added from 0.0 in step order (the compiled order game runs the whole loop natively)."""
        total = 0.0
        while not self.done and self.steps < stop_step:
            total += self.step(self.greedy_action())
        return total

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def done(self) -> bool:
        """No decision left: the episode is over."""
        return self._pos >= self._n_decisions

    @property
    def decisions_left(self) -> int:
        """Decisions still to take: the number of moves left (the address variant may add closes)."""
        return self._n_decisions - self._pos

    @property
    def current(self) -> int:
        """Index of the buffer being decided (prefetch: whose use segment is decided; -1 when done)."""
        return self._decisions[self._pos] if self._pos < self._n_decisions else -1

    def offsets(self) -> np.ndarray:
        """int64 ``[n]``: offset of every buffer, -1 = slow or undecided."""
        return self._off.copy()

    def clone(self) -> "Game":
        """An independent copy of the state; the immutable problem data is shared."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._copy_state_from(self)
        return other

    def _profile(self, lo: float, hi: float, starts: np.ndarray, ends: np.ndarray, values: np.ndarray,
                 reduce_max: bool) -> np.ndarray:
        """``profile_bins`` values over time ``[lo, hi)``: per bin, the sum (or max) of ``values``
        of the intervals ``[starts, ends)`` that touch it."""
        bins = self.config.profile_bins
        out = np.zeros(bins, np.float64)
        if len(starts) == 0 or hi <= lo:
            return out.astype(np.float32)
        width = (hi - lo) / bins
        first = np.clip(np.floor((np.maximum(starts, lo) - lo) / width), 0, bins - 1).astype(np.int64)
        last = np.clip(np.ceil((np.minimum(ends, hi) - lo) / width), 1, bins).astype(np.int64)
        if reduce_max:
            for f, t, v in zip(first.tolist(), last.tolist(), values.tolist()):
                np.maximum(out[f:t], v, out=out[f:t])
        else:
            diff = np.zeros(bins + 1, np.float64)
            np.add.at(diff, first, values)
            np.add.at(diff, last, -values)
            out = np.cumsum(diff[:-1])
        return out.astype(np.float32)

    # --- variant API (implemented by subclasses) ------------------------------------------
    def _copy_state_from(self, other: "Game") -> None:
        raise NotImplementedError

    def legal_mask(self) -> np.ndarray:
        raise NotImplementedError

    def step(self, action: int) -> float:
        raise NotImplementedError

    def observation(self) -> Observation:
        raise NotImplementedError

    def greedy_action(self) -> int:
        raise NotImplementedError

    def undo(self) -> None:
        """Take back the last step. Only the fixed-order variant has it (cheap there); use clone() otherwise."""
        raise NotImplementedError(f"undo is not available in the {self.config.variant} variant; use clone()")

    def describe_actions(self) -> list[str]:
        """One human-readable line per legal action (for ``mallocgame play``)."""
        raise NotImplementedError

    def describe_state(self) -> str:
        raise NotImplementedError
