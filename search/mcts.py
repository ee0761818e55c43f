"""Plain Monte Carlo tree search (UCT with rollouts) on the mallocGame: the traditional baseline.

UCT (Kocsis & Szepesvari, "Bandit based Monte-Carlo Planning", ECML 2006) with
move-by-move commitment, as the "traditional MCTS" of mallocMuZero (arXiv 2305.07440):

1. from the current root state, ``simulations`` new times: descend the tree by UCT (untried
   actions first: the greedy's choice, then the others in a seeded random order), expand
   one node, play a rollout (the greedy's choice per step, with probability ``epsilon``
   a uniformly random legal action; or uniformly random throughout) until the episode
   ends or ``rollout_depth`` steps past the root, and back the return up the path;
2. commit the most visited root action (ties: higher mean value), keep its subtree
   (``commit="max"``: the root action whose subtree holds the best return seen, which
   suits a deterministic one-player game).

Rewards are the game's normalised rewards, so every return lies in ``[0, 1]``. The UCT
score compares siblings on their values min-max normalised among themselves (the
per-move differences are tiny in absolute terms), plus ``exploration * sqrt(ln N / n)``.
Truncated rollouts end at a fixed step count from the root, so all simulations of one
move are scored over the same decisions.

Budgets: at most ``simulations`` new simulations per move, and a wall-clock deadline
shared out over the remaining moves. A reserve for finishing greedily is kept (measured
on a first greedy episode); when the time is gone the episode is finished greedily, and
if even that cannot end in time (huge inputs) it stops, which in map mode is still a
valid placement (undecided buffers are slow). The answer is the best episode seen: the
committed path, any rollout that reached the end, or the incumbents given by the caller.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from search.game import Game

ROLLOUTS = ("greedy", "random")


@dataclass(frozen=True)
class MCTSConfig:
    simulations: int = 16  # new simulations per move (the reused subtree's visits do not count)
    exploration: float = 1.0  # UCT constant on sibling-normalised values
    rollout: str = "greedy"  # "greedy" | "random"
    epsilon: float = 0.0  # with "greedy": probability of a random legal action per rollout step
    rollout_depth: int | None = None  # steps past the root per simulation; None = to the end of the episode
    reuse_tree: bool = True
    commit: str = "visits"  # "visits": the most visited root action (UCT); "max": the one with the best return seen

    def __post_init__(self):
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"unknown rollout policy {self.rollout!r} (known: {', '.join(ROLLOUTS)})")
        if self.commit not in ("visits", "max"):
            raise ValueError(f"unknown commit rule {self.commit!r} (known: visits, max)")
        if self.simulations < 1 or not 0.0 <= self.epsilon <= 1.0 or self.exploration < 0:
            raise ValueError("MCTSConfig: simulations >= 1, 0 <= epsilon <= 1, exploration >= 0")


@dataclass
class Episode:
    """A complete episode: offsets int64 ``[n]`` (-1 slow) and its normalised return."""

    value: float
    offsets: np.ndarray
    source: str


@dataclass
class SearchResult:
    best: Episode
    moves: int = 0
    searched_moves: int = 0
    simulations: int = 0
    finished_greedily_at: int | None = None  # move index where time ran out, if it did
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, best value)


class Node:
    """A tree node: the state after ``reward`` was received on the edge into it."""

    __slots__ = ("children", "untried", "visits", "value_sum", "best", "reward")

    def __init__(self, reward: float = 0.0):
        self.children: dict[int, Node] = {}
        self.untried: list[int] | None = None  # actions not expanded yet, next one last
        self.visits = 0
        self.value_sum = 0.0  # sum of returns from this state on
        self.best = -math.inf  # best return from this state on seen in any simulation
        self.reward = reward

    def q(self) -> float:
        return self.reward + self.value_sum / self.visits


def play_greedy(game: Game, deadline: float = math.inf) -> bool:
    """Finish ``game`` with the greedy's choice at every step (in place); False if ``deadline`` came first.

    A game stopped early is still a valid map-mode placement: undecided buffers are slow.
    """
    steps = 0
    while not game.done:
        if steps % 32 == 0 and deadline < math.inf and time.monotonic() > deadline:
            return False
        game.step(game.greedy_action())
        steps += 1
    return True


def episode_of(game: Game, source: str) -> Episode:
    """The game's placement as an episode. An unfinished one counts only in map mode,
    where undecided buffers are slow and the return so far is its exact value."""
    value = game.total_reward() if game.done or game.data.mode == "map" else -math.inf
    return Episode(value, game.offsets(), source if game.done else f"{source} (stopped at the deadline)")


def rollout(game: Game, cfg: MCTSConfig, rng: np.random.Generator, stop_step: float) -> float:
    """Play ``game`` (in place) by the rollout policy until done or ``stop_step``; returns the rewards."""
    total = 0.0
    greedy = cfg.rollout == "greedy"
    eps = cfg.epsilon
    while not game.done and game.steps < stop_step:
        if greedy and (eps == 0.0 or rng.random() >= eps):
            action = game.greedy_action()
        else:
            legal = game.legal_actions()
            action = int(legal[rng.integers(len(legal))])
        total += game.step(action)
    return total


class UCTSearch:
    """Move-by-move UCT on one game; :meth:`run` plays the game to its end and returns the best episode."""

    def __init__(self, cfg: MCTSConfig, rng: np.random.Generator):
        self.cfg = cfg
        self.rng = rng

    def _ordered_actions(self, game: Game) -> list[int]:
        legal = game.legal_actions()
        greedy = game.greedy_action()
        rest = [int(a) for a in self.rng.permutation(legal) if a != greedy]
        return rest[::-1] + [greedy]  # popped from the end: the greedy's choice first

    def _select(self, node: Node) -> tuple[int, Node]:
        qs = [(a, c, c.q()) for a, c in node.children.items()]
        lo = min(q for _, _, q in qs)
        hi = max(q for _, _, q in qs)
        span = hi - lo if hi > lo else 1.0
        log_n = math.log(node.visits)
        c = self.cfg.exploration
        best, best_score = None, -math.inf
        for a, child, q in qs:
            score = (q - lo) / span + c * math.sqrt(log_n / child.visits)
            if score > best_score:
                best, best_score = (a, child), score
        return best

    def simulate(self, root: Node, root_game: Game, stop_step: float, best: Episode) -> Episode:
        """One simulation from ``root``; returns the (possibly improved) best episode."""
        game = root_game.clone()
        node, path = root, [root]
        while not game.done:
            if node.untried is None:
                node.untried = self._ordered_actions(game)
            if node.untried:
                action = node.untried.pop()
                child = Node(game.step(action))
                node.children[action] = child
                path.append(child)
                break
            action, node = self._select(node)
            game.step(action)
            path.append(node)
        ret = rollout(game, self.cfg, self.rng, stop_step)
        if game.done and game.total_reward() > best.value:
            best = Episode(game.total_reward(), game.offsets(), "rollout")
        for n in reversed(path):
            n.visits += 1
            n.value_sum += ret
            if ret > n.best:
                n.best = ret
            ret += n.reward
        return best

    def run(self, game: Game, *, deadline: float, incumbents: list[Episode] = (),
            start: float | None = None) -> SearchResult:
        """Play ``game`` (in place) to the end by move-by-move search; the best episode seen wins."""
        t0 = time.monotonic() if start is None else start
        cfg = self.cfg
        probe = game.clone()
        tp = time.monotonic()
        play_greedy(probe, deadline)
        step_time = (time.monotonic() - tp) / max(probe.steps - game.steps, 1)
        best = episode_of(probe, "greedy")
        for inc in incumbents:
            if inc.value > best.value:
                best = inc
        result = SearchResult(best=best, history=[(time.monotonic() - t0, best.value)])
        root = Node()
        while not game.done:
            legal = game.legal_actions()
            now = time.monotonic()
            left = max(game.decisions_left, 1)
            reserve = 2.0 * left * step_time + 0.01
            if now + reserve >= deadline:
                result.finished_greedily_at = result.moves
                play_greedy(game, deadline + 0.1 * (deadline - t0) + 0.5)
                break
            if len(legal) > 1:
                move_deadline = now + (deadline - now - reserve) / left
                stop_step = game.steps + cfg.rollout_depth if cfg.rollout_depth is not None else math.inf
                sims = 0
                while sims < cfg.simulations and (sims == 0 or time.monotonic() < move_deadline):
                    best_before = best.value
                    best = self.simulate(root, game, stop_step, best)
                    if best.value > best_before:
                        result.history.append((time.monotonic() - t0, best.value))
                    sims += 1
                result.simulations += sims
                result.searched_moves += 1
                if cfg.commit == "max":
                    action = max(root.children.items(), key=lambda kv: (kv[1].reward + kv[1].best, kv[1].visits))[0]
                else:
                    action = max(root.children.items(), key=lambda kv: (kv[1].visits, kv[1].q()))[0]
            else:
                action = int(legal[0])
            game.step(action)
            result.moves += 1
            child = root.children.get(action)
            root = child if (cfg.reuse_tree and child is not None) else Node()
        final = episode_of(game, "committed")
        if final.value > best.value:
            best = final
            result.history.append((time.monotonic() - t0, best.value))
        result.best = best
        return result
