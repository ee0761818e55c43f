"""Self-play on Ray actors (``mallocgame train --ray-actors N``): the games of an iteration in parallel.

:class:`RaySelfPlay` is called like :func:`mallocgame.search.muzero.train.self_play` (``train(..., play=...)``).
Per iteration the driver draws every game's recipe and a seed from the run's one generator
(``state.rng``), in game order, sends the current weights once (``ray.put``), and each actor plays
its games with a fresh generator from its seed; the trajectories come back in game order and go
into the replay buffer exactly as local self-play adds them. So a run is a function of the seed
(and of nothing about the actors: their number only changes the speed), and ``--resume``
continues it exactly. The stream of games differs from local self-play's, which draws its
search's randomness from ``state.rng`` itself.

Ray is imported only here, and only when this class is made.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from mallocgame.search.muzero.env import game_factory
from mallocgame.search.muzero.selfplay import Agent, play_game


class _Player:
    """One Ray actor: builds games from recipes and plays them with the weights it is sent."""

    def __init__(self, game_config: dict):
        import torch

        torch.set_num_threads(1)
        self.make_game = game_factory(game_config)

    def play(self, weights: dict, net_config: dict, train_config: dict, jobs: list[tuple[Any, int]]) -> list:
        from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig
        from mallocgame.search.muzero.train import TrainConfig, greedy_return

        net = MuZeroNet(NetworkConfig(**net_config))
        net.load_state_dict(weights)
        net.eval()
        cfg = TrainConfig.from_dict(train_config)
        agent = Agent(net, cfg.search_config(), cfg.model, cfg.rollout_depth)
        out = []
        for recipe, seed in jobs:
            game = self.make_game(recipe)
            greedy = greedy_return(game.clone())
            out.append((play_game(game, agent, np.random.default_rng(seed), recipe), greedy))
        return out


class RaySelfPlay:
    """``play(state, make_game)`` for :func:`mallocgame.search.muzero.train.train`, with ``actors`` Ray actors.

    ``address`` None starts a local Ray runtime unless one runs in this process (and
    :meth:`close` stops only a runtime it started).
    """

    def __init__(self, actors: int, game_config: dict, *, address: str | None = None):
        import ray

        self._ray = ray
        self._owned = False
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._owned = True
        player = ray.remote(num_cpus=1, max_restarts=0)(_Player)
        self.actors = [player.remote(dict(game_config)) for _ in range(max(int(actors), 1))]

    def __call__(self, state, make_game: Callable | None = None) -> dict[str, float]:
        cfg = state.config
        jobs = [(cfg.curriculum.sample(state.rng), int(state.rng.integers(2**63))) for _ in range(cfg.games_per_iter)]
        weights = self._ray.put({k: v.detach().cpu() for k, v in state.net.state_dict().items()})
        n = len(self.actors)
        shares = [jobs[a::n] for a in range(n)]  # game g goes to actor g % n
        refs = [actor.play.remote(weights, state.net.config.as_dict(), cfg.as_dict(), share)
                for actor, share in zip(self.actors, shares) if share]
        results = self._ray.get(refs)
        played = [None] * len(jobs)
        for a, res in enumerate(results):
            for k, item in enumerate(res):
                played[a + k * n] = item
        from mallocgame.search.muzero.train import record_games

        return record_games(state, played)  # in game order: the replay buffer is the same whatever the actors

    def close(self) -> None:
        for actor in self.actors:
            try:
                self._ray.kill(actor)
            except Exception:  # already gone
                pass
        self.actors = []
        if self._owned:
            self._ray.shutdown()
            self._owned = False
