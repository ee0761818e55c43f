"""Plain UCT Monte Carlo tree search with greedy rollouts on the mallocGame (the traditional baseline).

Runs :class:`search.mcts.UCTSearch` on one variant of the game (:mod:`search.game`),
committing one move at a time with ``simulations`` simulations per move (option
``simulations``, default 32) within ``time_limit``. The answer is the best complete
episode seen: the committed path, a rollout that reached the end, the greedy episodes of
both game variants, or the ``hint``. Pack mode: the game places every buffer it can
within the capacity (no capacity: it minimises the peak); an episode that leaves a
buffer out is not a packing, so the status is then UNKNOWN and the runner reports it
invalid.

Extra keyword options (Python callers): ``variant`` ("order" | "address"), ``k``,
``order``, ``rollout`` ("greedy" | "random"), ``epsilon``, ``rollout_depth``,
``exploration``.
"""

from __future__ import annotations

import time

import numpy as np

from hybrid.model import Problem, Solution, Status, offsets_array, offsets_tuple
from hybrid.protocol import Solver
from search.game import Game, GameConfig
from search.game_data import GameData
from search.mcts import Episode, MCTSConfig, UCTSearch, play_greedy

DEFAULT_VARIANT = "address"


def episode_value(data: GameData, offsets: np.ndarray) -> float:
    """The game's normalised return of a complete placement (offsets int64 ``[n]``, -1 slow)."""
    placed = offsets >= 0
    if data.mode == "map":
        return float(data.evaluator.value(offsets)) / data.reward_norm
    if data.capacity is not None:
        return float(data.size[placed].sum()) / data.total_bytes
    peak = int((offsets + data.size)[placed].max()) if placed.any() else 0
    return (float(data.size[placed].sum()) - peak) / data.total_bytes


class MCTSSolver(Solver):
    name = "mcts"
    modes = frozenset({"map", "pack"})

    def solve(self, problem: Problem, hardware, *, time_limit: float, seed: int, hint: Solution | None = None,
              simulations: int | None = None, variant: str | None = None, k: int = 16, order: str = "start",
              rollout: str = "greedy", epsilon: float = 0.0, rollout_depth: int | None = 48,
              exploration: float = 1.0) -> Solution:
        t0 = time.monotonic()
        deadline = t0 + 0.95 * time_limit - 0.05
        cfg = MCTSConfig(simulations=simulations or MCTSConfig.simulations, exploration=exploration,
                         rollout=rollout, epsilon=epsilon, rollout_depth=rollout_depth)
        game_cfg = GameConfig(variant=variant or DEFAULT_VARIANT, k=k, order=order)
        data = GameData(problem, hardware)
        incumbents = []
        for other in ("order", "address"):
            if other != game_cfg.variant:
                g = Game(problem, hardware, GameConfig(variant=other, k=k, order=order), data=data)
                play_greedy(g)
                incumbents.append(Episode(g.total_reward(), g.offsets(), f"greedy-{other}"))
        if hint is not None and len(hint.offsets) == problem.n:
            off = offsets_array(hint.offsets)
            incumbents.append(Episode(episode_value(data, off), off, "hint"))
        search = UCTSearch(cfg, np.random.default_rng(seed))
        result = search.run(Game(problem, hardware, game_cfg, data=data), deadline=deadline,
                            incumbents=incumbents, start=t0)
        best = result.best
        placed_all = bool((best.offsets >= 0).all())
        status = Status.FEASIBLE if problem.mode == "map" or placed_all else Status.UNKNOWN
        if problem.mode == "map":
            objective = best.value * data.reward_norm
            history = tuple((t, v * data.reward_norm) for t, v in result.history)
        else:
            objective = float((best.offsets + data.size)[best.offsets >= 0].max()) if problem.n else 0.0
            history = ()
        stats = {"variant": game_cfg.variant, "k": k, "simulations_per_move": cfg.simulations,
                 "simulations": result.simulations, "moves": result.moves, "searched_moves": result.searched_moves,
                 "finished_greedily_at": result.finished_greedily_at, "answer_from": best.source,
                 "value_normalised": best.value}
        return Solution(offsets=offsets_tuple(best.offsets), status=status, mode=problem.mode, objective=objective,
                        wall_time=time.monotonic() - t0, history=history, stats=stats, solver=self.name)
