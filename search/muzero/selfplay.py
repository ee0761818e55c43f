"""The agent (network + search) and one self-play game (MuZero appendix: "Training").

:class:`Agent` picks a move by running the tree search (:mod:`mallocgame.search.muzero.search`)
with either the learned model (``model="learned"``, MuZero) or the true simulator
(``model="simulator"``, AlphaZero style). :func:`play_game` plays a whole game and returns
the :class:`~mallocgame.search.muzero.replay.Trajectory` the learner trains on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mallocgame.search.muzero.features import ObsArrays, obs_arrays
from mallocgame.search.muzero.models import LearnedModel, NetworkEvaluator, SimulatorModel
from mallocgame.search.muzero.problems import Recipe
from mallocgame.search.muzero.replay import Trajectory
from mallocgame.search.muzero.search import SearchConfig, SearchResult, run_search

if TYPE_CHECKING:
    from mallocgame.search.muzero.inference import NumpyNet
    from mallocgame.search.muzero.networks import MuZeroNet

MODELS = ("learned", "simulator")


class Agent:
    """A network and a search configuration; ``model`` is ``"learned"`` or ``"simulator"``.

    ``rollout_depth`` (simulator only): greedy rollout moves before the value network judges a leaf.
    """

    def __init__(self, net: "MuZeroNet | NumpyNet", search: SearchConfig, model: str = "learned",
                 rollout_depth: int = 0):
        if model not in MODELS:
            raise ValueError(f"unknown search model {model!r} (known: {', '.join(MODELS)})")
        if rollout_depth and model != "simulator":
            raise ValueError("rollout_depth needs the simulator search model (the learned model has no game to roll out)")
        self.evaluator = NetworkEvaluator(net)
        self.search_config, self.model, self.rollout_depth = search, model, rollout_depth
        self.best_rollout: tuple[float, Any] | None = None  # (episode return, offsets) over all searches

    def search(self, game: Any, rng: np.random.Generator, *, simulations: int | None = None,
               obs: ObsArrays | None = None) -> SearchResult:
        obs = obs if obs is not None else obs_arrays(game.observation())
        model = (LearnedModel(self.evaluator, obs) if self.model == "learned"
                 else SimulatorModel(self.evaluator, game, obs, self.rollout_depth))
        result = run_search(model, self.search_config, rng, simulations=simulations)
        best = getattr(model, "best", None)
        if best is not None and (self.best_rollout is None or best[0] > self.best_rollout[0]):
            self.best_rollout = best
        return result

    def prior_action(self, game: Any, obs: ObsArrays | None = None) -> int:
        """The network's most likely legal action (no search)."""
        obs = obs if obs is not None else obs_arrays(game.observation())
        _, logits, _, _ = self.evaluator.initial(obs)
        return int(np.argmax(np.where(obs.mask, logits, -np.inf)))


def play_game(game: Any, agent: Agent, rng: np.random.Generator, recipe: Recipe) -> Trajectory:
    """Play ``game`` to the end with ``agent``; the trajectory holds the search targets."""
    obs_list: list[ObsArrays] = []
    actions, rewards, policies, values = [], [], [], []
    while not game.done:
        obs = obs_arrays(game.observation())
        result = agent.search(game, rng, obs=obs)
        obs_list.append(obs)
        actions.append(result.action)
        policies.append(result.policy)
        values.append(result.value)
        rewards.append(float(game.step(result.action)))
    A = game.num_actions
    return Trajectory(
        recipe=recipe, actions=np.asarray(actions, np.int64), rewards=np.asarray(rewards, np.float32),
        policies=np.asarray(policies, np.float32).reshape(len(actions), A),
        root_values=np.asarray(values, np.float32),
        vectors=np.stack([o.vector for o in obs_list]) if obs_list else np.zeros((0, 0), np.float32),
        action_feats=np.stack([o.actions for o in obs_list]) if obs_list else np.zeros((0, A, 0), np.float32),
        masks=np.stack([o.mask for o in obs_list]) if obs_list else np.zeros((0, A), bool))
