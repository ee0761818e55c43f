"""Observations as fixed-shape numpy arrays, the only input the networks see (no torch here).

A game's :class:`~mallocgame.search.game.Observation` has fixed shapes for a given ``GameConfig``;
the agent uses three parts of it:

* ``vector``  float32 ``[OBS_DIM]``          -- ``obs.as_vector()`` (buffer, profile, upcoming, progress);
* ``actions`` float32 ``[A, ACTION_FEATURES]`` -- one feature row per action (A = k + 1, last = slow);
* ``mask``    bool    ``[A]``                -- legal actions.

Batches stack these along a leading axis ``B``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class ObsArrays:
    """One observation (shapes above) or a batch of them (leading axis ``B``)."""

    vector: np.ndarray
    actions: np.ndarray
    mask: np.ndarray


@dataclass(frozen=True)
class ObsDims:
    """Shapes a network is built for; a checkpoint stores them with its weights."""

    obs_dim: int
    action_features: int
    num_actions: int


def obs_arrays(obs: Any) -> ObsArrays:
    """The arrays of one game observation (``as_vector``, ``actions``, ``mask``)."""
    return ObsArrays(vector=np.asarray(obs.as_vector(), np.float32),
                     actions=np.asarray(obs.actions, np.float32),
                     mask=np.asarray(obs.mask, bool))


def obs_dims(obs: Any) -> ObsDims:
    """The dimensions of ``obs`` (a game observation or :class:`ObsArrays`)."""
    arrays = obs if isinstance(obs, ObsArrays) else obs_arrays(obs)
    return ObsDims(obs_dim=int(arrays.vector.shape[-1]), action_features=int(arrays.actions.shape[-1]),
                   num_actions=int(arrays.actions.shape[-2]))


def stack(items: Sequence[ObsArrays]) -> ObsArrays:
    """A batch ``[B, ...]`` of single observations."""
    return ObsArrays(vector=np.stack([o.vector for o in items]), actions=np.stack([o.actions for o in items]),
                     mask=np.stack([o.mask for o in items]))
