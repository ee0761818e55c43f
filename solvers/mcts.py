"""Plain UCT Monte Carlo tree search with greedy rollouts on the mallocGame (the traditional baseline).

Runs :class:`search.mcts.UCTSearch` on one variant of the game (:mod:`search.game`; by
default the fixed-order game in greedy-xla's order in map mode, the fixed-address game in
pack mode), committing one move at a time with ``simulations`` new simulations per move
(option ``simulations``, default 16) within ``time_limit``. The answer is the best
complete episode seen: the committed path, a rollout that reached the end, the greedy
episodes of the other game shapes (fixed order by start and by greedy-xla's order, which
replays ``greedy-xla`` exactly; fixed address), or the ``hint``. Pack mode: the game
places every buffer it can within the capacity (no capacity: it minimises the peak); an
episode that leaves a buffer out is not a packing, so the status is then UNKNOWN and the
runner reports it invalid.

Extra keyword options (Python callers): ``variant`` ("order" | "address"), ``k``,
``order``, ``rollout`` ("greedy" | "random"), ``epsilon``, ``rollout_depth``,
``exploration``, ``commit`` ("visits" | "max").
"""

from __future__ import annotations

import time

import numpy as np

from mallocgame.model import Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.protocol import Solver
from search.game import Game, GameConfig
from search.game_data import GameData
from search.mcts import Episode, MCTSConfig, UCTSearch, episode_of, play_greedy

# Measured in experiments/results/mcts_vs_greedy.md: in map mode searching the fixed-order
# game in greedy-xla's order ends closest to the bound; in pack mode the fixed-address game
# places the most bytes (MiniMalloc A-F).
DEFAULT_GAME = {"map": ("order", "xla"), "pack": ("address", "start")}


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
              simulations: int | None = None, variant: str | None = None, k: int = 16, order: str | None = None,
              rollout: str = "greedy", epsilon: float = 0.0, rollout_depth: int | None = None,
              exploration: float = 1.0, commit: str = "visits") -> Solution:
        t0 = time.monotonic()
        deadline = t0 + 0.95 * time_limit - 0.05
        cfg = MCTSConfig(simulations=simulations or MCTSConfig.simulations, exploration=exploration,
                         rollout=rollout, epsilon=epsilon, rollout_depth=rollout_depth, commit=commit)
        default_variant, default_order = DEFAULT_GAME[problem.mode]
        game_cfg = GameConfig(variant=variant or default_variant, k=k,
                              order=order or (default_order if variant in (None, default_variant) else "start"))
        data = GameData(problem, hardware)
        incumbents = []
        # The greedy episodes of the other game shapes (one of them replays greedy-xla exactly),
        # so the answer is never worse than any of them.
        for other in (GameConfig(variant="order", k=k, order="xla"), GameConfig(variant="order", k=k, order="start"),
                      GameConfig(variant="address", k=k)):
            if other != game_cfg:
                g = Game(problem, hardware, other, data=data)
                play_greedy(g, t0 + 0.25 * time_limit)
                incumbents.append(episode_of(g, f"greedy-{other.variant}-{other.order}"))
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
