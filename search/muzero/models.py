"""The two models the tree search can plan with (both wrap a :class:`~mallocgame.search.muzero.networks.MuZeroNet`).

* :class:`LearnedModel` (MuZero): the root is ``h(observation)``; every deeper node is
  ``g(latent, action)``, so the search never touches the game. Masks: the root uses the
  game's true mask; deeper nodes use the network's learned legality head (action legal
  when its legality logit > 0), with "slow" (the last action) always legal, since the
  game always allows leaving a buffer in slow memory. The learned model does not know
  where the game ends; it was trained to predict zero reward and value past the end.
* :class:`SimulatorModel` (AlphaZero style): nodes are clones of the real game
  (``clone()`` / ``step()``), so rewards, masks and terminal states are exact; the
  network gives only the prior logits and the value of each new position. With
  ``rollout_depth`` d > 0 a leaf's value is instead the return of d moves of the game's
  greedy policy plus the network's value where the rollout stops (AlphaGo's mix of
  rollouts and a value network, with the rollout truncated and bootstrapped): the near
  future is then exact and the network only has to judge what lies beyond. A rollout that
  reaches the end of the game is a complete placement; the best one is kept in ``best``
  (plain MCTS keeps such episodes too).

Both return :class:`~mallocgame.search.muzero.search.Expansion` with normalised values in [0, 1].
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mallocgame.search.muzero.features import ObsArrays, obs_arrays
from mallocgame.search.muzero.inference import NumpyNet
from mallocgame.search.muzero.search import Expansion

if TYPE_CHECKING:
    from mallocgame.search.muzero.networks import MuZeroNet


class NetworkEvaluator:
    """Batch-of-one inference for the search (numpy copy of the weights, see :mod:`mallocgame.search.muzero.inference`).

    Built from a torch network (copied; rebuild after the weights change) or a :class:`NumpyNet`.
    """

    def __init__(self, net: "MuZeroNet | NumpyNet"):
        self.net = net if isinstance(net, NumpyNet) else NumpyNet.from_torch(net)
        self.calls = 0

    def initial(self, obs: ObsArrays):
        """-> ``((state, embeddings), logits [A], value, legality logits [A])``."""
        self.calls += 1
        latent = self.net.initial(obs.vector, obs.actions, obs.mask)
        return self._predict(*latent)

    def recurrent(self, latent, action: int):
        """-> ``((state', embeddings'), reward, logits [A], value, legality logits [A])``."""
        self.calls += 1
        state, emb, reward = self.net.recurrent(latent[0], latent[1], action)
        latent, logits, value, legal = self._predict(state, emb)
        return latent, self.net.unscale(reward), logits, value, legal

    def _predict(self, state, emb):
        logits, value, legal = self.net.predict(state, emb)
        return (state, emb), logits.astype(np.float64), self.net.unscale(value), legal


class LearnedModel:
    """MuZero: plan inside the learned dynamics from one real observation."""

    def __init__(self, evaluator: NetworkEvaluator, obs: ObsArrays):
        self.evaluator, self.obs = evaluator, obs

    def root(self) -> Expansion:
        latent, logits, value, _ = self.evaluator.initial(self.obs)
        return Expansion(latent, 0.0, logits, value, self.obs.mask)

    def expand(self, state: Any, action: int) -> Expansion:
        latent, reward, logits, value, legal = self.evaluator.recurrent(state, action)
        mask = legal > 0.0
        mask[-1] = True
        return Expansion(latent, reward, logits, value, mask)


class SimulatorModel:
    """AlphaZero: plan with the true game; the network supplies priors and values only."""

    def __init__(self, evaluator: NetworkEvaluator, game: Any, obs: ObsArrays | None = None, rollout_depth: int = 0):
        self.evaluator, self.game, self.root_obs, self.rollout_depth = evaluator, game, obs, rollout_depth
        self.best: tuple[float, np.ndarray] | None = None  # best complete episode a rollout reached

    def _evaluate(self, game: Any, reward: float, obs: ObsArrays | None = None) -> Expansion:
        if game.done:
            A = game.num_actions
            return Expansion(game, reward, np.zeros(A), 0.0, np.zeros(A, bool), terminal=True)
        obs = obs if obs is not None else obs_arrays(game.observation())
        _, logits, value, _ = self.evaluator.initial(obs)
        if self.rollout_depth > 0:
            value = self._rollout(game)
        return Expansion(game, reward, logits, value, obs.mask)

    def _rollout(self, game: Any) -> float:
        """Greedy return over ``rollout_depth`` moves from ``game`` plus the network's value after them."""
        sim = game.clone()
        total = 0.0
        for _ in range(self.rollout_depth):
            if sim.done:
                break
            total += float(sim.step(sim.greedy_action()))
        if sim.done:
            if self.best is None or sim.total_reward() > self.best[0]:
                self.best = (float(sim.total_reward()), sim.offsets())
            return total
        _, _, value, _ = self.evaluator.initial(obs_arrays(sim.observation()))
        return total + value

    def root(self) -> Expansion:
        return self._evaluate(self.game, 0.0, self.root_obs)

    def expand(self, state: Any, action: int) -> Expansion:
        child = state.clone()
        reward = float(child.step(action))
        return self._evaluate(child, reward)
