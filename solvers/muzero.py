"""MuZero-guided tree search (mallocMuZero) with the shipped trained network; map mode.

Plays the mallocGame (:mod:`search.game`, the variant and ``GameConfig`` the checkpoint
was trained on) move by move: each move runs ``simulations`` simulations (default 16) of
Gumbel MuZero search (:mod:`search.muzero.search`) and commits the chosen action.

Options (keyword arguments of ``solve``; the CLI passes ``--simulations``):

* ``simulations``  per move (default 16);
* ``checkpoint``   path of a ``.pt`` from ``mallocgame train`` (default: the environment
  variable ``MALLOCGAME_MUZERO_CHECKPOINT``, else the shipped ``search/muzero/checkpoints/default.pt``);
* ``search_model`` ``"simulator"`` (AlphaZero style: plan with the true game, the network
  gives priors and values; the default, because it played better on the tuning problems,
  see ``experiments/results/muzero_training.md``) or ``"learned"`` (MuZero proper: plan
  inside the learned dynamics); default from ``MALLOCGAME_MUZERO_MODEL``;
* ``method``       ``"gumbel"`` (default) or ``"puct"``;
* ``rollout_depth`` simulator only: a leaf's value is the return of this many greedy moves
  plus the network's value after them (default 48, as plain MCTS's rollouts; 0 = the
  network's value alone, pure AlphaZero); complete rollouts are answers too;
* ``c_scale``      weight of the searched Q values against the prior in Gumbel selection
  (default 0.1 with the simulator, 0.02 with the learned model, whose Q values are noisier).

Time: the remaining budget is spread evenly over the remaining moves, using the measured
cost of a simulation; a move that cannot afford two simulations is played by the game's
greedy policy (which banks time for later moves), and when the clock runs out the
undecided buffers stay in slow memory, so there is always a valid answer. Incumbents:
the game's greedy episode, complete rollouts and the ``hint``; the best complete answer is returned
(``stats["answer_from"]`` says which). All randomness comes from ``seed``; the answer is
the same for the same seed unless the time limit binds (then the switch to greedy
depends on the clock).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.model import Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.protocol import Solver
from search.muzero import checkpoints as shipped_checkpoints

DEFAULT_SIMULATIONS = 16
DEFAULT_ROLLOUT_DEPTH = 48
DEFAULT_C_SCALE = {"simulator": 0.1, "learned": 0.02}  # tuned on layered/intervals seeds 201-206 (held out)
CHECKPOINT_ENV = "MALLOCGAME_MUZERO_CHECKPOINT"
MODEL_ENV = "MALLOCGAME_MUZERO_MODEL"
DEFAULT_CHECKPOINT = Path(shipped_checkpoints.__file__).resolve().parent / "default.pt"

_LOADED: dict[str, tuple[Any, dict]] = {}  # checkpoint path -> (numpy network, game config fields)


def load_agent_network(path: str):
    """The network (numpy inference copy) and game config of a checkpoint, cached per path.

    Read without torch when possible (:mod:`search.muzero.torchless`): importing torch
    would cost seconds of the time limit.
    """
    if path not in _LOADED:
        from search.muzero.torchless import load_inference

        net, payload = load_inference(path)
        _LOADED[path] = (net, dict(payload["game"]))
    return _LOADED[path]


class MuZeroSolver(Solver):
    name = "muzero"
    modes = frozenset({"map"})

    def solve(self, problem: Problem, hardware, *, time_limit: float, seed: int, hint: Solution | None = None,
              simulations: int | None = None, checkpoint: str | None = None, search_model: str | None = None,
              method: str = "gumbel", c_scale: float | None = None, rollout_depth: int | None = None) -> Solution:
        t0 = time.monotonic()
        deadline = t0 + 0.9 * time_limit - 0.05
        from search.game import Game, GameConfig
        from search.game_data import GameData
        from search.muzero.search import SearchConfig
        from search.muzero.selfplay import Agent

        path = checkpoint or os.environ.get(CHECKPOINT_ENV) or str(DEFAULT_CHECKPOINT)
        model = search_model or os.environ.get(MODEL_ENV) or "simulator"
        if model not in DEFAULT_C_SCALE:
            raise ValueError(f"search_model: unknown {model!r} (known: {', '.join(DEFAULT_C_SCALE)})")
        c_scale = DEFAULT_C_SCALE[model] if c_scale is None else c_scale
        sims = DEFAULT_SIMULATIONS if simulations is None else simulations
        if sims < 0:
            raise ValueError(f"simulations: must be >= 0, got {sims}")
        net, game_fields = load_agent_network(path)
        search = SearchConfig(simulations=sims, method=method, gumbel_scale=0.0, c_scale=c_scale)
        depth = (DEFAULT_ROLLOUT_DEPTH if model == "simulator" else 0) if rollout_depth is None else rollout_depth
        agent = Agent(net, search, model, depth)
        rng = np.random.default_rng(seed)

        data = GameData(problem, hardware)
        config = GameConfig(**game_fields)
        greedy = Game(problem, hardware, config, data=data)
        _finish_greedily(greedy, deadline)  # the incumbent first: cheap, and an answer whatever happens next
        game = Game(problem, hardware, config, data=data)
        play = _Play(game, agent, rng, sims, deadline)
        play.run()

        candidates = [(game.total_reward(), game.offsets(), "search" if play.greedy_moves == 0 else
                       "search+greedy" if game.done else "search (cut short)")]
        if agent.best_rollout is not None:
            candidates.append((agent.best_rollout[0], agent.best_rollout[1], "rollout"))
        if greedy.done:
            candidates.append((greedy.total_reward(), greedy.offsets(), "greedy"))
        if hint is not None and len(hint.offsets) == problem.n:
            off = offsets_array(hint.offsets)
            candidates.append((data.evaluator.value(off) / data.reward_norm, off, "hint"))
        value, offsets, source = max(candidates, key=lambda c: c[0])  # first wins ties: the search's own
        stats = {"checkpoint": path, "search_model": model, "method": method, "c_scale": c_scale, "rollout_depth": depth,
                 "simulations_per_move": sims,
                 "simulations": play.simulations, "searched_moves": play.searched_moves,
                 "greedy_moves": play.greedy_moves, "network_evaluations": agent.evaluator.calls,
                 "search_value_normalised": game.total_reward(), "answer_from": source,
                 "game": dict(game_fields)}
        return Solution(offsets=offsets_tuple(offsets), status=Status.FEASIBLE, mode=problem.mode,
                        objective=value * data.reward_norm, wall_time=time.monotonic() - t0,
                        history=((time.monotonic() - t0, value * data.reward_norm),), stats=stats, solver=self.name)


class _Play:
    """Commit moves by search while the budget allows, then greedily (module docstring)."""

    def __init__(self, game, agent, rng: np.random.Generator, sims: int, deadline: float):
        self.game, self.agent, self.rng, self.sims, self.deadline = game, agent, rng, sims, deadline
        self.simulations = self.searched_moves = self.greedy_moves = 0
        self.sim_seconds = 0.0  # measured cost of one simulation (running mean)

    def _moves_left(self) -> int:
        left = getattr(self.game, "decisions_left", None)
        return max(1, int(left) if left is not None else self.game.data.n - self.game.steps)

    def _affordable(self) -> int:
        """Simulations this move can pay for if the rest of the budget is spread evenly."""
        if self.simulations == 0:
            return self.sims
        left = self.deadline - time.monotonic()
        per_move = left / self._moves_left()
        return min(self.sims, int(per_move / max(self.sim_seconds, 1e-6)))

    def run(self) -> None:
        game = self.game
        while not game.done:
            now = time.monotonic()
            if now >= self.deadline:
                return
            sims = self._affordable() if self.sims > 0 else 0
            if self.sims > 0 and sims < 2:  # cannot afford a search: a greedy move banks the time for later ones
                game.step(game.greedy_action())
                self.greedy_moves += 1
                continue
            result = self.agent.search(game, self.rng, simulations=sims)
            if result.simulations:
                spent = (time.monotonic() - now) / result.simulations
                n = self.simulations
                self.sim_seconds = (self.sim_seconds * n + spent * result.simulations) / (n + result.simulations)
                self.simulations += result.simulations
            self.searched_moves += 1
            game.step(result.action)


def _finish_greedily(game, deadline: float) -> int:
    """Greedy moves until done or ``deadline``; undecided buffers stay slow. Returns the moves made."""
    moves = 0
    while not game.done and time.monotonic() < deadline:
        game.step(game.greedy_action())
        moves += 1
    return moves
