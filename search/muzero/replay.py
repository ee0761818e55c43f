"""Trajectories, the replay buffer and MuZero's n-step targets (numpy only).

A :class:`Trajectory` holds, for each of its ``T`` moves: the observation arrays, the action
played, the reward received, the search's policy target and root value. For checkpoints it
is stored compactly (recipe + actions + targets) and its observations are rebuilt by
replaying the actions in a fresh game, which is deterministic.

Targets for an unroll of ``K`` steps from position ``t`` (MuZero appendix G):
value ``z_{t+k} = sum_{i<n} gamma^i r_{t+k+i} + gamma^n v_{t+k+n}`` (n = ``td_steps``; terms past
the end are 0), reward ``u_{t+k}`` = reward of the action at ``t+k-1``, policy = the
search's target at ``t+k``. Past the end of the game the position is absorbing: value and
reward 0, the action "slow", and no policy or legality loss (``valid`` = 0).

The batch also carries the real observations of steps ``t+1..t+K`` (``next_*``): the consistency
loss (EfficientZero) pulls the dynamics' latent after ``k`` steps towards the representation of
the observation at ``t+k``. Past the end they are zeros with only "slow" legal (``valid`` = 0 there).

Reanalyse (MuZero Reanalyse) overwrites a stored position's policy target and root value with a
fresh search's (:meth:`ReplayBuffer.set_targets`); the n-step value targets of that game are
recomputed, so positions bootstrapping from it see the fresh value too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mallocgame.search.muzero.features import obs_arrays
from mallocgame.search.muzero.problems import Recipe


@dataclass
class Trajectory:
    """One self-play game; arrays of shape ``[T, ...]`` (A actions, D observation features)."""

    recipe: Recipe
    actions: np.ndarray  # int64 [T]
    rewards: np.ndarray  # float32 [T]
    policies: np.ndarray  # float32 [T, A]
    root_values: np.ndarray  # float32 [T]
    vectors: np.ndarray  # float32 [T, D]
    action_feats: np.ndarray  # float32 [T, A, F]
    masks: np.ndarray  # bool [T, A]

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def compact(self) -> dict[str, Any]:
        """What a checkpoint stores: the recipe and per-move numbers, not the observations."""
        return {"recipe": self.recipe.as_dict(), "actions": self.actions.tolist(), "rewards": self.rewards.tolist(),
                "policies": self.policies.tolist(), "root_values": self.root_values.tolist()}


def rebuild(data: dict[str, Any], make_game: Callable[[Recipe], Any]) -> Trajectory:
    """Inverse of :meth:`Trajectory.compact`: replays the actions to recover the observations."""
    recipe = Recipe(**data["recipe"])
    game = make_game(recipe)
    obs = []
    for a in data["actions"]:
        obs.append(obs_arrays(game.observation()))
        game.step(int(a))
    return Trajectory(recipe=recipe, actions=np.asarray(data["actions"], np.int64),
                      rewards=np.asarray(data["rewards"], np.float32),
                      policies=np.asarray(data["policies"], np.float32).reshape(len(obs), -1),
                      root_values=np.asarray(data["root_values"], np.float32),
                      vectors=np.stack([o.vector for o in obs]), action_feats=np.stack([o.actions for o in obs]),
                      masks=np.stack([o.mask for o in obs]))


def n_step_values(rewards: np.ndarray, root_values: np.ndarray, td_steps: int, discount: float) -> np.ndarray:
    """Value targets ``[T]``: n-step discounted rewards plus the bootstrapped root value ``n`` moves on."""
    T = rewards.shape[0]
    out = np.zeros(T, np.float64)
    for t in range(T):
        end = min(t + td_steps, T)
        powers = discount ** np.arange(end - t)
        out[t] = float((powers * rewards[t:end]).sum())
        if t + td_steps < T:
            out[t] += discount**td_steps * float(root_values[t + td_steps])
    return out.astype(np.float32)


@dataclass(frozen=True)
class Batch:
    """Training batch for an unroll of ``K`` steps; ``B`` positions."""

    vector: np.ndarray  # [B, D]
    actions: np.ndarray  # [B, A, F]
    mask: np.ndarray  # [B, A] true legal mask at the first position
    played: np.ndarray  # int64 [B, K] actions to unroll
    target_value: np.ndarray  # [B, K+1]
    target_reward: np.ndarray  # [B, K+1]; column 0 unused (0)
    target_policy: np.ndarray  # [B, K+1, A]
    target_mask: np.ndarray  # [B, K+1, A] true legality (policy masking and the legality head)
    valid: np.ndarray  # [B, K+1] 1 where the position exists (not past the end)
    next_vector: np.ndarray  # [B, K, D] observation at t+k, k = 1..K (consistency targets)
    next_actions: np.ndarray  # [B, K, A, F]
    next_mask: np.ndarray  # [B, K, A]


class ReplayBuffer:
    """FIFO buffer of whole trajectories, at most ``capacity`` positions; uniform position sampling."""

    def __init__(self, capacity: int, td_steps: int, discount: float = 1.0):
        self.capacity, self.td_steps, self.discount = capacity, td_steps, discount
        self.trajectories: list[Trajectory] = []
        self.values: list[np.ndarray] = []
        self.total_games = 0

    @property
    def positions(self) -> int:
        return sum(len(t) for t in self.trajectories)

    def add(self, trajectory: Trajectory) -> None:
        if len(trajectory) == 0:
            return
        self.trajectories.append(trajectory)
        self.values.append(n_step_values(trajectory.rewards, trajectory.root_values, self.td_steps, self.discount))
        self.total_games += 1
        while self.positions > self.capacity and len(self.trajectories) > 1:
            self.trajectories.pop(0)
            self.values.pop(0)

    def sample(self, rng: np.random.Generator, batch_size: int, unroll: int) -> Batch:
        return self.batch(self.sample_positions(rng, batch_size), unroll)

    def sample_positions(self, rng: np.random.Generator, batch_size: int) -> list[tuple[int, int]]:
        """``batch_size`` positions ``(trajectory index, move)``, uniform over all stored positions."""
        lengths = np.array([len(t) for t in self.trajectories])
        flat = rng.integers(0, lengths.sum(), batch_size)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        which = np.searchsorted(starts, flat, side="right") - 1
        return [(int(i), int(f - starts[i])) for i, f in zip(which, flat)]

    def batch(self, positions: list[tuple[int, int]], unroll: int) -> Batch:
        rows = [self._row(i, t, unroll) for i, t in positions]
        return Batch(*(np.stack(col) for col in zip(*rows)))

    def set_targets(self, i: int, t: int, policy: np.ndarray, root_value: float) -> None:
        """Reanalyse: replace the policy target and root value of move ``t`` of trajectory ``i``."""
        traj = self.trajectories[i]
        for name in ("policies", "root_values"):  # arrays from Ray's object store are read-only
            if not getattr(traj, name).flags.writeable:
                setattr(traj, name, getattr(traj, name).copy())
        traj.policies[t] = policy
        traj.root_values[t] = root_value
        self.values[i] = n_step_values(traj.rewards, traj.root_values, self.td_steps, self.discount)

    def _row(self, i: int, t: int, K: int):
        traj, values = self.trajectories[i], self.values[i]
        T, A = len(traj), traj.policies.shape[1]
        played = np.full(K, A - 1, np.int64)
        tv = np.zeros(K + 1, np.float32)
        tr = np.zeros(K + 1, np.float32)
        tp = np.zeros((K + 1, A), np.float32)
        tm = np.zeros((K + 1, A), bool)
        valid = np.zeros(K + 1, np.float32)
        nv = np.zeros((K,) + traj.vectors.shape[1:], np.float32)
        na = np.zeros((K,) + traj.action_feats.shape[1:], np.float32)
        nm = np.zeros((K, A), bool)
        nm[:, -1] = True  # past the end: only "slow" (the rows are not used, valid = 0)
        for k in range(K + 1):
            s = t + k
            if k > 0 and s - 1 < T:
                tr[k] = traj.rewards[s - 1]
            if s < T:
                tv[k], tp[k], tm[k], valid[k] = values[s], traj.policies[s], traj.masks[s], 1.0
                if k < K:
                    played[k] = traj.actions[s]
                if k > 0:
                    nv[k - 1], na[k - 1], nm[k - 1] = traj.vectors[s], traj.action_feats[s], traj.masks[s]
        return traj.vectors[t], traj.action_feats[t], traj.masks[t], played, tv, tr, tp, tm, valid, nv, na, nm

    def compact(self) -> list[dict[str, Any]]:
        return [t.compact() for t in self.trajectories]
