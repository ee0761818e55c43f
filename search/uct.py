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

Guided selection (mallocMuZero at parity): given a ``prior`` (a function of the game
state and its legal actions returning one probability per legal action), the same search
selects by pUCT instead (AlphaZero; Silver et al. 2017): ``q_norm + exploration * p(a) *
sqrt(N) / (1 + n(a))``, over all legal actions, an untried one scored at its parent's mean
return (first-play urgency); ties go to the greedy's choice. The prior is asked once per node,
when the search first leaves it, and never at a node with one legal move. Everything else
(rollouts, tree reuse, commitment, budgets, incumbents) is the same code as plain UCT, so
``prior`` is the only difference between the two in a comparison.

That rule (``MCTSConfig.guided="puct"``) lets a prior near 0 starve a move, the greedy's included.
``guided="untried-puct"`` and ``"untried-uct"`` keep UCT's untried-first rule (Kocsis & Szepesvari
2006; as in :meth:`UCTSearch._descend`): at every node each legal action is tried once before any is
tried again, the greedy's choice first, then the others by descending prior (a stable sort of plain
UCT's seeded random order, drawn the same way). After that, ``untried-puct`` selects by pUCT and
``untried-uct`` by UCT with the exploration bonus of ``a`` scaled by ``(k * p(a)) ** prior_power``
(``k`` legal actions; progressive bias in the sense of Chaslot et al. 2008, "Progressive strategies for
Monte-Carlo tree search", multiplicative). A constant prior scales by exactly 1 whatever the power, so
with a uniform prior ``untried-uct`` is plain UCT move for move (same random draws, same answer).
With ``prior_decay = m > 0`` the power fades with the node's visits ``N``, to ``prior_power x m / (m + N)``: the
prior steers a node while its own returns are few and UCT takes over as they grow (the decaying progressive bias
of Chaslot et al., there additive ``p / (N + 1)``), so at the many simulations of a long wall-time budget the
search tends to plain UCT's choices rather than keep a prior that leads it away.

Value leaves (``MCTSConfig.leaf``): a rollout to the end costs O(n) game steps, which on a
10,000-buffer program leaves a 10-second search a handful of simulations in all. With ``leaf="value"`` the new
leaf is not rolled out but valued by a ``leaf_value(game) -> (y, prior or None)`` (the network's value head,
:class:`mallocgame.search.muzero.value.NetworkValue`) as ``ref[t] + scale x y / 100``: the return still to
come after step ``t`` of the reference episode (the greedy episode from the search's start, which :meth:`UCTSearch.run`
plays first anyway; :func:`greedy_profile`), corrected by ``y``, the value target relative to the greedy
continuation in percent of that episode's return ``scale`` (:mod:`mallocgame.search.muzero.value`). Like a
rollout's return it estimates the whole episode's return, so siblings and leaves at any depth compare on one
quantity. A prior returned with ``y`` becomes the leaf node's prior (one network pass per leaf serves both).
``leaf="mixed"`` first plays ``leaf_steps`` greedy rollout steps, then values the state reached. ``leaf="auto"``
(:func:`auto_leaf`) plays rollouts where the time per move affords ``auto_simulations`` of them to the end,
measured on the first greedy episode, and "mixed" leaves where it does not: at equal wall time a rollout search
gets less than one simulation per move once a rollout costs more than the move's share of the time (prefetch
games of thousands of decisions), while truncated leaves still search there. It also plays rollouts wherever a
mixed leaf would cost as much as the rollout it replaces: a leaf valued by a network costs its share of a batched
pass and its input (:meth:`UCTSearch.measure_leaf_cost`), measured before the search, as is a rollout then.

Batched value leaves (``MCTSConfig.leaf_batch`` = B > 1, with a ``leaf_value`` that has a ``batch(games)``
method, :class:`mallocgame.search.muzero.value.NetworkValue`): a move's simulations run in groups of B descents
whose leaves are valued by one network pass. Each descent adds a virtual visit to the nodes of its path at
their own mean return (a new leaf: its parent's mean), so the next descents of the group see those nodes as more
visited and spread over other moves (virtual loss, Chaslot et al., "Parallel Monte-Carlo tree search", 2008, in
its mean-preserving form); once the group is valued the virtual visits are taken back and each leaf's value is
backed up as an unbatched leaf's is. A descent that ends the episode is backed up at once. B = 1 is the
unbatched search, simulation for simulation.

Focus (``MCTSConfig.focus`` = F > 0, with a prior): where the time binds (an equal share of the time left affords
fewer than ``simulations`` simulations a move at their cost so far; before the first, at the cost of one rollout from
the start, measured once), a move whose prior gives the greedy's choice at least F is committed to the greedy's
choice without a simulation (the prior is asked once at the move, only where the time binds, and the search reuses
it where the move is searched); a prior constant over a move's legal actions (the uniform control)
focuses nothing. The time of the moves left is then shared over those the search expects to search, at the rate it
has searched its moves with a choice so far. Where a rollout to the end costs more than a move's equal share of the
time (thousands of buffers at a limit of seconds), every move gets one simulation, which the untried-first rule
gives to the greedy's choice: the search then plays the greedy episode. Focus spends that time on the moves the
prior doubts instead. Without a prior, or at F = 0, every move with a choice is searched.

Known greedy return (``MCTSConfig.known_greedy``, with deterministic greedy rollouts to the end: ``leaf="rollout"``,
or ``leaf="auto"`` where it picks rollouts; where it picks mixed leaves no known return enters): at a move whose
state lies on a greedy episode the search has recorded (the first greedy episode, which with ``leaf="auto"`` is also
the value leaves' reference episode, recorded once; or one recorded from the state after a committed move that left
it), the greedy's move enters the tree before the move's simulations as if one simulation had played it: its reward by
one step, its return the recorded one, which a rollout would only repeat.
The move's simulations then go to the other moves first (untried-first rules; under "puct" the greedy's child simply
has that visit). Where a move's share of the time buys one rollout (thousands of buffers at a limit of seconds), that
rollout tries an alternative to the greedy's move instead of replaying it, and with ``commit="max"`` the committed path
does not fall below the greedy episode it started from while the time lasts (past it the game is finished greedily;
the answer is the best episode seen in any case).

Budgets: at most ``simulations`` new simulations per move, and a wall-clock deadline
shared out over the remaining moves. A reserve for finishing greedily is kept (measured
on a first greedy episode); when the time is gone the episode is finished greedily, and
if even that cannot end in time (huge inputs) it stops, which in map mode is still a
valid placement (undecided buffers are slow). The answer is the best episode seen: the
committed path, any rollout that reached the end, or the incumbents given by the caller.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import BASELINE_SHARE, VARIANTS_SHARE, held_baselines, no_worse_than_held
from mallocgame.formats.lift import hint_intervals
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.problem.model import Solution, Status, offsets_array, offsets_tuple
from mallocgame.runtime.budget import SAFETY, Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData, GameDataCutShort
from mallocgame.search.game_order import ANSWER_ORDER, use_answer_order
from mallocgame.search.game_prefetch import PrefetchData, intervals_of, rows_of

ROLLOUTS = ("greedy", "random")
#: Leaf evaluations (module docstring, "Value leaves"): a rollout to the end (or ``rollout_depth``), the value
#: alone, ``leaf_steps`` rollout steps then the value, or "auto": rollouts where the time allows
#: ``auto_simulations`` of them per move, else "mixed" (module docstring, "Value leaves").
LEAVES = ("rollout", "value", "mixed", "auto")
#: Selection rules with a prior: "puct" (pUCT over all legal actions; a prior near 0 can starve a move),
#: "untried-puct" (UCT's untried-first rule, then pUCT), "untried-uct" (untried-first, then UCT with the
#: exploration bonus scaled by k * p(a): a uniform prior is plain UCT, move for move).
GUIDED_RULES = ("puct", "untried-puct", "untried-uct")
#: ``prior(game, legal) -> probabilities [len(legal)]`` of the legal actions (``legal`` int64 ascending).
Prior = Callable[[Game, np.ndarray], np.ndarray]
#: ``leaf_value(game) -> (y, prior or None)``: the value relative to the greedy continuation (percent of the
#: reference episode's return) and, optionally, the prior over the legal actions at that state.
LeafValue = Callable[[Game], "tuple[float, np.ndarray | None]"]


@dataclass(frozen=True)
class MCTSConfig:
    simulations: int = 16  # new simulations per move (the reused subtree's visits do not count)
    exploration: float = 1.0  # UCT constant on sibling-normalised values
    rollout: str = "greedy"  # "greedy" | "random"
    epsilon: float = 0.0  # with "greedy": probability of a random legal action per rollout step
    rollout_depth: int | None = None  # steps past the root per simulation; None = to the end of the episode
    reuse_tree: bool = True
    commit: str = "visits"  # "visits": the most visited root action (UCT); "max": the one with the best return seen
    guided: str = "puct"  # with a prior: the selection rule, one of GUIDED_RULES (module docstring, "Guided selection")
    prior_power: float = 1.0  # "untried-uct": the bonus of a is scaled by (k * p(a)) ** prior_power
    prior_decay: float = 0.0  # "untried-uct": > 0 fades that power as m / (m + N) at a node of N visits (docstring)
    leaf: str = "rollout"  # one of LEAVES (module docstring, "Value leaves")
    leaf_steps: int = 16  # leaf="mixed" (and "auto" when it picks "mixed"): greedy rollout steps before the value
    auto_simulations: int = 2  # leaf="auto": rollouts when the time per move affords this many (or `simulations`)
    leaf_batch: int = 1  # value leaves: descents valued by one batched network pass (docstring, "Batched value leaves")
    focus: float = 0.0  # with a prior: a move whose prior gives the greedy's choice >= focus is not searched (docstring)
    known_greedy: bool = False  # greedy rollouts to the end (leaf "rollout", or "auto" where it picks rollouts): the
    # greedy's move enters the tree with its known return (docstring, "Known greedy return")

    def __post_init__(self):
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"unknown rollout policy {self.rollout!r} (known: {', '.join(ROLLOUTS)})")
        if self.guided not in GUIDED_RULES:
            raise ValueError(f"unknown guided selection rule {self.guided!r} (known: {', '.join(GUIDED_RULES)})")
        if not self.prior_power >= 0:
            raise ValueError("MCTSConfig: prior_power >= 0")
        if not self.prior_decay >= 0:
            raise ValueError("MCTSConfig: prior_decay >= 0")
        if self.leaf not in LEAVES:
            raise ValueError(f"unknown leaf evaluation {self.leaf!r} (known: {', '.join(LEAVES)})")
        if self.leaf_steps < 0 or self.auto_simulations < 1 or self.leaf_batch < 1:
            raise ValueError("MCTSConfig: leaf_steps >= 0, auto_simulations >= 1, leaf_batch >= 1")
        if self.commit not in COMMITS:
            raise ValueError(f"unknown commit rule {self.commit!r} (known: visits, max)")
        if not 0.0 <= self.focus <= 1.0:
            raise ValueError("MCTSConfig: 0 <= focus <= 1")
        if self.known_greedy and (self.rollout != "greedy" or self.epsilon or self.rollout_depth is not None
                                  or self.leaf not in ("rollout", "auto")):
            raise ValueError("MCTSConfig: known_greedy needs greedy rollouts to the end (rollout='greedy', "
                             "epsilon=0, rollout_depth=None, leaf='rollout' or 'auto')")
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
    focused_moves: int = 0  # moves the prior's focus committed to the greedy's choice unsearched
    simulations: int = 0
    finished_greedily_at: int | None = None  # move index where time ran out, if it did
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, best value)


class Node:
    """A tree node: the state after ``reward`` was received on the edge into it."""

    __slots__ = ("children", "untried", "visits", "value_sum", "best", "reward", "legal", "prior", "greedy", "bonus")

    def __init__(self, reward: float = 0.0):
        self.children: dict[int, Node] = {}
        self.untried: list[int] | None = None  # actions not expanded yet, next one last
        self.visits = 0
        self.value_sum = 0.0  # sum of returns from this state on
        self.best = -math.inf  # best return from this state on seen in any simulation
        self.reward = reward
        self.legal: list[int] | None = None  # guided search: legal actions, their prior and the greedy's choice
        self.prior: np.ndarray | None = None
        self.greedy = -1
        self.bonus: dict[int, float] | None = None  # guided search: the exploration weights of the legal actions

    def q(self) -> float:
        return self.reward + self.value_sum / self.visits


def greedy_finish_until(search: Budget) -> float:
    """When a search past the deadline of its budget ``search`` stops finishing its game greedily: a grace of 2% of
    the budget and 0.2 s."""
    return search.deadline + 0.02 * search.seconds + 0.2


def play_greedy(game: Game, deadline: float = math.inf, rewards: list | None = None) -> bool:
    """Finish ``game`` with the greedy's choice at every step (in place); False if ``deadline`` came first.
    ``rewards``: a list each step's reward is appended to.

    A game stopped early is still a valid map-mode placement: undecided buffers are slow.
    """
    steps = 0
    while not game.done:
        if steps % 32 == 0 and deadline < math.inf and time.monotonic() > deadline:
            return False
        reward = game.step(game.greedy_action())
        if rewards is not None:
            rewards.append(reward)
        steps += 1
    return True


def _play_recording(game: Game, deadline: float = math.inf) -> tuple[np.ndarray, float]:
    """Finish ``game`` greedily (in place, as :func:`play_greedy`) and return its profile: ``to_go[t]``, the
    return still to come after step ``t`` (absolute steps; 0 past the end, and past a ``deadline`` stop), and
    the episode's whole return (the rewards before ``game``'s start included)."""
    start = game.steps
    rewards: list = []
    play_greedy(game, deadline, rewards)
    to_go = np.zeros(start + len(rewards) + 1, np.float64)
    to_go[start:start + len(rewards)] = np.cumsum(np.asarray(rewards[::-1], np.float64))[::-1]
    return to_go, float(game.total_reward())


def greedy_profile(game: Game) -> tuple[np.ndarray, float]:
    """The reference episode of value leaves (module docstring): the greedy episode from ``game`` (not
    changed): ``(to_go, scale)``, the return to come after each step and the episode's return."""
    return _play_recording(game.clone())


def reference_value(game: Game) -> tuple[float, None]:
    """The leaf value without a network: ``y = 0`` (the future as in the reference episode), no prior."""
    return 0.0, None


def episode_of(game: Game, source: str) -> Episode:
    """The game's placement as an episode. An unfinished one counts only in map mode,
    where undecided buffers are slow and the return so far is its exact value."""
    value = game.total_reward() if game.done or game.data.mode == "map" else -math.inf
    return Episode(value, game.offsets(), source if game.done else f"{source} (stopped at the deadline)")


def rollout(game: Game, cfg: MCTSConfig, rng: np.random.Generator, stop_step: float) -> float:
    """Play ``game`` (in place) by the rollout policy until done or ``stop_step``; returns the rewards."""
    greedy = cfg.rollout == "greedy"
    eps = cfg.epsilon
    if greedy and eps == 0.0:  # one call: the compiled order game plays the whole rollout natively (same sum)
        return game.greedy_rollout(stop_step)
    total = 0.0
    while not game.done and game.steps < stop_step:
        if greedy and (eps == 0.0 or rng.random() >= eps):
            action = game.greedy_action()
        else:
            legal = game.legal_actions()
            action = int(legal[rng.integers(len(legal))])
        total += game.step(action)
    return total


def auto_leaf(cfg: MCTSConfig, step_time: float, episode_steps: int, decisions: int, seconds_left: float,
              leaf_cost: float = 0.0) -> str:
    """``leaf="auto"``: ``"rollout"`` if the time per move affords ``min(simulations, auto_simulations)`` rollouts to
    the end, or if a rollout costs no more than the value leaf that would replace it, else ``"mixed"``. A rollout
    from a move costs the steps still to play, on average half the episode's ``episode_steps`` at ``step_time``
    seconds each; the time per move is ``seconds_left`` shared over ``decisions``; a mixed leaf costs its
    ``leaf_steps`` rollout steps and ``leaf_cost`` seconds, the measured cost of valuing one leaf (one leaf's share of
    a batched network pass and its input, :meth:`UCTSearch.measure_leaf_cost`; 0 for a leaf valued without a
    network).

    >>> auto_leaf(MCTSConfig(leaf="auto"), 1e-4, 1_000, 500, 10.0)   # 20 ms a move, 50 ms a rollout
    'mixed'
    >>> auto_leaf(MCTSConfig(leaf="auto"), 1e-5, 200, 100, 10.0)     # 100 ms a move, 1 ms a rollout
    'rollout'
    >>> auto_leaf(MCTSConfig(leaf="auto"), 2e-7, 10_000, 5_000, 1.0, leaf_cost=2e-4)  # 1 ms a rollout, 0.2 ms a leaf
    'mixed'
    >>> auto_leaf(MCTSConfig(leaf="auto"), 2e-7, 2_000, 1_000, 0.01, leaf_cost=2e-4)  # 0.2 ms a rollout: no saving
    'rollout'
    """
    per_move = seconds_left / max(decisions, 1)
    rollout_cost = step_time * episode_steps / 2
    if rollout_cost <= 0 or math.isinf(per_move):
        return "rollout"
    if rollout_cost <= leaf_cost + cfg.leaf_steps * step_time:  # a value leaf would buy no more simulations
        return "rollout"
    return "rollout" if per_move / rollout_cost >= min(cfg.simulations, cfg.auto_simulations) else "mixed"


class UCTSearch:
    """Move-by-move UCT on one game; :meth:`run` plays the game to its end and returns the best episode."""

    def __init__(self, cfg: MCTSConfig, rng: np.random.Generator, prior: Prior | None = None,
                 leaf_value: LeafValue | None = None):
        if cfg.leaf != "rollout" and leaf_value is None:
            raise ValueError(f"leaf={cfg.leaf!r} needs a leaf_value function")
        self.cfg = cfg
        self.rng = rng
        self.prior = prior
        self.leaf_value = leaf_value
        self.prior_calls = 0  # times ``prior`` was asked (never at a forced move)
        self.leaf_calls = 0  # times ``leaf_value`` was asked
        self.to_go, self.scale = np.zeros(1), 0.0  # the reference episode (set by run, or by set_reference)
        self.leaf = cfg.leaf if cfg.leaf != "auto" else "rollout"  # what a leaf plays ("auto": chosen by run)
        self.leaf_cost = self.rollout_cost = 0.0  # "auto": the measured seconds of a value leaf and of a rollout
        self._batch_seconds, self._batch_simulations = 0.0, 0  # the grouped simulations' cost so far
        self._move_seconds, self._move_simulations = 0.0, 0  # the searched moves' simulations and their cost so far
        self._rollout_step: float | None = None  # seconds a step of one rollout to the end costs, when measured
        self.known_to_go: np.ndarray | None = None  # known_greedy: the recorded greedy episode's return to come per step
        self.known_moves = 0  # known_greedy: moves whose greedy child entered the tree with its recorded return

    @property
    def known_greedy(self) -> bool:
        """Whether this run enters known greedy returns: ``cfg.known_greedy`` where its leaves are rollouts (not where
        ``leaf="auto"`` picked mixed leaves)."""
        return self.cfg.known_greedy and self.leaf == "rollout"

    def set_reference(self, game: Game) -> None:
        """The reference episode of value leaves: the greedy episode from ``game`` (:func:`greedy_profile`)."""
        self.to_go, self.scale = greedy_profile(game)
        self._share_reference()

    def _share_reference(self) -> None:
        """Hand the reference episode to a leaf evaluator that reads it (``leaf_value.set_reference``)."""
        share = getattr(self.leaf_value, "set_reference", None)
        if share is not None:
            share(self.to_go, self.scale)

    def _ordered_actions(self, game: Game) -> list[int]:
        legal = game.legal_actions()
        greedy = game.greedy_action()
        rest = [int(a) for a in self.rng.permutation(legal) if a != greedy]
        return rest[::-1] + [greedy]  # popped from the end: the greedy's choice first

    def _select(self, node: Node) -> tuple[int, Node]:
        return self._ucb_best(node, None)

    def _ucb_best(self, node: Node, bonus: dict[int, float] | None) -> tuple[int, Node]:
        """UCT's choice among the tried children of ``node``: normalised mean + ``c`` x ``bonus[a]`` x
        sqrt(log N / n_a) (``bonus`` ``None``: 1 for every action); the first best in children order."""
        qs = [(a, c, c.q()) for a, c in node.children.items()]
        lo = min(q for _, _, q in qs)
        hi = max(q for _, _, q in qs)
        span = hi - lo if hi > lo else 1.0
        log_n = math.log(node.visits)
        c = self.cfg.exploration
        best, best_score = None, -math.inf
        for a, child, q in qs:
            scale = c if bonus is None else c * bonus[a]
            score = (q - lo) / span + scale * math.sqrt(log_n / child.visits)
            if score > best_score:
                best, best_score = (a, child), score
        return best

    def _select_guided(self, node: Node, game: Game) -> int:
        """pUCT over the legal actions of ``node`` (module docstring, "Guided selection")."""
        if node.legal is None:
            self._init_guided(node, game)
        legal, prior = node.legal, node.prior
        if len(legal) == 1:
            return legal[0]
        if self.cfg.guided != "puct":
            if node.untried:  # UCT's rule: every action once, the greedy's first, then by the prior
                return node.untried.pop()
            if self.cfg.guided == "untried-uct":
                return self._select_weighted(node)
        fpu = node.value_sum / node.visits if node.visits else 0.0
        qs, ns = [], []
        for a in legal:
            child = node.children.get(a)
            qs.append(child.q() if child is not None else fpu)
            ns.append(child.visits if child is not None else 0)
        lo, hi = min(qs), max(qs)
        span = hi - lo if hi > lo else 1.0
        sqrt_n = math.sqrt(max(node.visits, 1))
        c = self.cfg.exploration
        best, best_score = legal[0], -math.inf
        for a, q, n, p in zip(legal, qs, ns, prior.tolist()):
            score = (q - lo) / span + c * p * sqrt_n / (1 + n)
            if score > best_score or (score == best_score and a == node.greedy):
                best, best_score = a, score
        return best

    def _init_guided(self, node: Node, game: Game, prior: np.ndarray | None = None) -> None:
        """A node's legal actions, greedy's choice and prior (``prior`` given: a value leaf's, else asked) and,
        under the untried-first rules, its untried actions."""
        legal = game.legal_actions()
        node.legal = [int(a) for a in legal]
        node.greedy = int(game.greedy_action())
        if len(legal) == 1:
            node.prior = np.ones(1)
        elif prior is not None:
            node.prior = np.asarray(prior, np.float64)
        else:
            self.prior_calls += 1
            node.prior = np.asarray(self.prior(game, legal), np.float64)
        if self.cfg.guided != "puct":
            node.untried = self._untried_by_prior(node, game)

    def _time_binds(self, budget: Budget, moves_left: int, reserve: float, rollout_step: float) -> bool:
        """Whether the time, not ``cfg.simulations``, limits a move's search (where focus applies, with a prior): an
        equal share of the time left over ``moves_left`` moves affords fewer than ``cfg.simulations`` simulations at
        their mean cost so far (before any, a rollout's cost: ``rollout_step`` seconds per step to the end, as
        :meth:`run` measured one rollout from the start)."""
        if not self.cfg.focus or self.prior is None:
            return False
        share = max(budget.left() - reserve, 0.0) / moves_left
        cost = (self._move_seconds / self._move_simulations if self._move_simulations
                else rollout_step * moves_left)
        return share < self.cfg.simulations * cost

    def _focused_out(self, root: Node, game: Game) -> bool:
        """Whether the move at ``root`` is committed to the greedy's choice unsearched: with ``cfg.focus`` and a
        prior that is not constant over the legal moves, when the prior (asked once here; the search reuses it)
        gives the greedy's choice at least ``focus``."""
        if not self.cfg.focus or self.prior is None:
            return False
        if root.legal is None:
            self._init_guided(root, game)
        prior = root.prior
        if np.all(prior == prior[0]):  # a constant prior knows nothing of the move: it is searched
            return False
        return bool(prior[root.legal.index(root.greedy)] >= self.cfg.focus)

    def _untried_by_prior(self, node: Node, game: Game) -> list[int]:
        """The untried actions of plain UCT (:meth:`_ordered_actions`, the same random draw), the greedy's choice
        still first, the others by descending prior (a stable sort: equal priors keep UCT's seeded order)."""
        order = self._ordered_actions(game)  # popped from the end
        p = dict(zip(node.legal, node.prior.tolist()))
        rest = sorted(order[-2::-1], key=lambda a: -p[a])
        return rest[::-1] + order[-1:]

    def _select_weighted(self, node: Node) -> int:
        """UCT (:meth:`_select`) with the exploration bonus of action ``a`` scaled by ``(k * p(a)) ** prior_power``
        (``k`` legal actions); a constant prior scales by exactly 1, so a uniform prior selects as plain UCT."""
        prior = node.prior
        power = self.cfg.prior_power
        if self.cfg.prior_decay > 0:  # the prior's pull fades as the node's own statistics grow (docstring)
            power *= self.cfg.prior_decay / (self.cfg.prior_decay + node.visits)
        elif node.bonus is not None:  # a constant power: the node's weights, computed once
            return self._ucb_best(node, node.bonus)[0]
        weight = np.ones(len(prior)) if np.all(prior == prior[0]) else (len(prior) * prior) ** power
        bonus = dict(zip(node.legal, weight.tolist()))
        if self.cfg.prior_decay == 0:
            node.bonus = bonus
        return self._ucb_best(node, bonus)[0]

    def _simulate_guided(self, root: Node, game: Game) -> list[Node]:
        """Descend by pUCT from ``root`` (``game`` is a clone at the root), expanding one node; the path."""
        node, path = root, [root]
        while not game.done:
            action = self._select_guided(node, game)
            child = node.children.get(action)
            if child is None:
                child = Node(game.step(action))
                node.children[action] = child
                path.append(child)
                break
            game.step(action)
            node = child
            path.append(node)
        return path

    def simulate(self, root: Node, root_game: Game, stop_step: float, best: Episode) -> Episode:
        """One simulation from ``root``; returns the (possibly improved) best episode."""
        game = root_game.clone()
        if self.prior is not None:
            path = self._simulate_guided(root, game)
        else:
            path = self._descend(root, game)
        return self._finish(path, game, stop_step, best)

    def _descend(self, root: Node, game: Game) -> list[Node]:
        """Descend by UCT from ``root`` (untried actions first), expanding one node; the path."""
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
        return path

    def _finish(self, path: list[Node], game: Game, stop_step: float, best: Episode) -> Episode:
        """Roll out from the end of ``path`` (or value its leaf) and back the return up it."""
        if self.leaf == "rollout":
            ret = rollout(game, self.cfg, self.rng, stop_step)
        else:
            ret = self._leaf(path[-1], game, stop_step)
        return self._backup(path, game, ret, best)

    def measure_leaf_cost(self, game: Game) -> float:
        """Seconds to value one leaf at ``game``'s state (not changed) as the search would: one leaf's share of a
        batched pass over ``leaf_batch`` copies (:meth:`_batched`), else one call; after one call that fills the
        problem's caches (the network's input encodes the problem once), which is not timed."""
        if self.cfg.leaf == "rollout" or game.done:
            return 0.0
        self.leaf_value(game.clone())
        group = [game.clone() for _ in range(self.cfg.leaf_batch if self._batches() else 1)]
        t = time.monotonic()
        if self._batches():
            self.leaf_value.batch(group)
        else:
            self.leaf_value(group[0])
        return (time.monotonic() - t) / len(group)

    def _measure_rollout_step(self, game: Game) -> float:
        """Seconds per step of one rollout from ``game``'s state (not changed) to the end, as :func:`rollout` plays it."""
        copy = game.clone()
        start = copy.steps
        t = time.monotonic()
        rollout(copy, self.cfg, np.random.default_rng(0), math.inf)
        return (time.monotonic() - t) / max(copy.steps - start, 1)

    def _batches(self) -> bool:
        """Whether value leaves, where played, are valued in groups (module docstring, "Batched value leaves")."""
        return self.cfg.leaf_batch > 1 and hasattr(self.leaf_value, "batch")

    def _batched(self) -> bool:
        """Whether this search's leaves are valued in groups."""
        return self.leaf != "rollout" and self._batches()

    def _affordable_group(self, seconds: float) -> int:
        """Simulations of a group that fit in ``seconds`` at the mean cost of the grouped simulations so far (at
        least 1; before any, ``leaf_batch``)."""
        if self._batch_simulations == 0:
            return self.cfg.leaf_batch
        return max(1, int(seconds * self._batch_simulations / max(self._batch_seconds, 1e-9)))

    def simulate_batch(self, root: Node, root_game: Game, stop_step: float, best: Episode,
                       count: int) -> Episode:
        """``count`` simulations from ``root`` whose value leaves are valued by one batched call of
        ``leaf_value.batch`` (module docstring, "Batched value leaves"); returns the (possibly improved) best episode."""
        depth = self.cfg.leaf_steps if self.leaf == "mixed" else 0
        pending: list[tuple[list[Node], Game, float, list[float]]] = []
        for _ in range(count):
            game = root_game.clone()
            path = self._simulate_guided(root, game) if self.prior is not None else self._descend(root, game)
            ret = rollout(game, self.cfg, self.rng, min(stop_step, game.steps + depth)) if depth else 0.0
            if game.done:
                best = self._backup(path, game, ret, best)
                continue
            pending.append((path, game, ret, _add_virtual_visits(path)))
        if not pending:
            return best
        evaluated = self.leaf_value.batch([game for _, game, _, _ in pending])
        self.leaf_calls += len(pending)
        for path, _, _, virtual in pending:
            _remove_virtual_visits(path, virtual)
        for (path, game, ret, _), (y, prior) in zip(pending, evaluated):
            node = path[-1]
            if prior is not None and depth == 0 and self.prior is not None and node.legal is None:
                self._init_guided(node, game, prior)
            best = self._backup(path, game, ret + self._leaf_value_at(game, y), best)
        return best

    def _backup(self, path: list[Node], game: Game, ret: float, best: Episode) -> Episode:
        """Back ``ret`` (the return from the end of ``path`` on) up ``path``; a finished ``game`` may be the best."""
        if game.done and game.total_reward() > best.value:
            best = Episode(game.total_reward(), game.offsets(), "rollout")
        for n in reversed(path):
            n.visits += 1
            n.value_sum += ret
            if ret > n.best:
                n.best = ret
            ret += n.reward
        return best

    def _leaf_value_at(self, game: Game, y: float) -> float:
        """A value leaf's estimate of the return from ``game``'s state on: ``to_go[t] + scale x y / 100``."""
        t = game.steps
        return (float(self.to_go[t]) if t < len(self.to_go) else 0.0) + self.scale * y / 100.0

    def _leaf(self, node: Node, game: Game, stop_step: float) -> float:
        """A value leaf (module docstring): rewards of ``leaf_steps`` rollout steps ("mixed") plus the value of the
        state reached, ``to_go[t] + scale x y / 100``; a prior that comes with ``y`` at ``node``'s own state
        becomes ``node``'s (guided search)."""
        depth = self.cfg.leaf_steps if self.leaf == "mixed" else 0
        ret = rollout(game, self.cfg, self.rng, min(stop_step, game.steps + depth)) if depth else 0.0
        if game.done:
            return ret
        y, prior = self.leaf_value(game)
        self.leaf_calls += 1
        if prior is not None and depth == 0 and self.prior is not None and node.legal is None:
            self._init_guided(node, game, prior)
        return ret + self._leaf_value_at(game, y)

    def _record_known(self, game: Game, deadline: float) -> None:
        """``known_greedy``: record the greedy episode from ``game``'s state (not changed); none if ``deadline``
        stops it first."""
        copy = game.clone()
        to_go, _ = _play_recording(copy, deadline)
        self.known_to_go = to_go if copy.done else None

    def _add_known_greedy(self, root: Node, game: Game) -> None:
        """``known_greedy`` (module docstring): give ``root`` its greedy child as one simulation that played it would,
        its return the recorded greedy episode's, unless the child is in the tree already."""
        if game.done or self.known_to_go is None:
            return
        if self.prior is not None:
            if root.legal is None:
                self._init_guided(root, game)
            greedy = root.greedy
        else:
            if root.untried is None:
                root.untried = self._ordered_actions(game)
            greedy = int(game.greedy_action())
        if greedy in root.children:
            return
        if root.untried and greedy in root.untried:
            root.untried.remove(greedy)
        t = game.steps
        child_game = game.clone()
        child = Node(child_game.step(greedy))
        root.children[greedy] = child
        ret = float(self.known_to_go[t + 1]) if t + 1 < len(self.known_to_go) else 0.0
        self._backup([root, child], child_game, ret, Episode(math.inf, np.zeros(0, np.int64), "known"))
        self.known_moves += 1

    def _reference_episode(self, game: Game, budget: Budget) -> tuple[Game, float]:
        """The greedy episode from ``game`` (played on a clone, the search's first incumbent and the value
        leaves' reference) and the seconds a rollout step costs; with ``leaf="auto"`` also the leaf kind; with focus
        and a prior, the seconds a step of one rollout to the end costs, measured."""
        cfg = self.cfg
        probe = game.clone()
        tp = time.monotonic()
        if cfg.known_greedy or cfg.leaf != "rollout":  # the same greedy episode, its rewards recorded once
            to_go, scale = _play_recording(probe, budget.deadline)
            if cfg.leaf != "rollout":  # the reference of the value leaves
                self.to_go, self.scale = to_go, scale
                self._share_reference()
            if cfg.known_greedy:  # the greedy's known returns
                self.known_to_go = to_go if probe.done else None
        else:
            play_greedy(probe, budget.deadline)
        step_time = (time.monotonic() - tp) / max(probe.steps - game.steps, 1)
        if cfg.leaf == "auto":
            self.leaf_cost = self.measure_leaf_cost(game)
            if self._batches():  # leaves the network values: a rollout's cost as the search pays it (one native
                step_time = self._rollout_step = self._measure_rollout_step(game)  # call, not the probe's steps)
            self.leaf = auto_leaf(cfg, step_time, probe.steps - game.steps, game.decisions_left,
                                  budget.left(), self.leaf_cost)
            self.rollout_cost = step_time * (probe.steps - game.steps) / 2
        if cfg.focus and self.prior is not None and self._rollout_step is None:
            # focus's first cost (before any simulation): a rollout as the search plays it, measured once (it costs
            # less than the probe's episode, played step by step; a probe the deadline cut leaves no time to measure)
            self._rollout_step = self._measure_rollout_step(game) if probe.done else step_time
        return probe, step_time

    def run(self, game: Game, *, budget: Budget, incumbents: list[Episode] = (),
            before_move: Callable[[Game], None] | None = None,
            after_search: Callable[[Game, Node], None] | None = None) -> SearchResult:
        """Play ``game`` (in place) to the end by move-by-move search within ``budget`` (its deadline is the
        search's; each searched move gets a share of the time left, :meth:`_move_budget`); the best episode seen
        wins. The history's times count from ``budget.started``.

        ``before_move(game)``, if given, is called before each searched move (training records
        the states the search reaches; it must not change ``game``); ``after_search(game, root)`` after its
        simulations, before the commitment (training reads the root's value; it must change neither)."""
        t0 = budget.started
        cfg = self.cfg
        probe, step_time = self._reference_episode(game, budget)
        best = episode_of(probe, "greedy")
        for inc in incumbents:
            if inc.value > best.value:
                best = inc
        result = SearchResult(best=best, history=[(time.monotonic() - t0, best.value)])
        root = Node()
        off_known = False  # known_greedy: the state left the recorded greedy episode (record one from it)
        while not game.done:
            legal = game.legal_actions()
            left = max(game.decisions_left, 1)
            reserve = 2.0 * left * step_time + 0.01
            if budget.left() <= reserve:
                result.finished_greedily_at = result.moves
                # a little grace past the deadline, so the answer is still back within the limit + 1 s at 10k+
                # buffers (an unfinished game loses to the incumbents, which the baselines are among)
                play_greedy(game, greedy_finish_until(budget))
                break
            if len(legal) > 1 and self._time_binds(budget, left, reserve, self._rollout_step or step_time) \
                    and self._focused_out(root, game):  # the prior is asked only where the time binds
                action = root.greedy
                result.focused_moves += 1
            elif len(legal) > 1:
                if before_move is not None:
                    before_move(game)
                if self.known_greedy:
                    if self.known_to_go is None and off_known:  # left the recorded episode: record the greedy one
                        self._record_known(game, budget.deadline)  # from here (one rollout's cost)
                    off_known = False
                    self._add_known_greedy(root, game)
                to_search = left if not cfg.focus or self.prior is None else _searched_share(result, left)
                best = self._search_move(root, game, best, result, _move_budget(budget, to_search, reserve).deadline,
                                         t0)
                if after_search is not None:
                    after_search(game, root)
                if cfg.commit == "max":
                    action = max(root.children.items(), key=lambda kv: (kv[1].reward + kv[1].best, kv[1].visits))[0]
                else:
                    action = max(root.children.items(), key=lambda kv: (kv[1].visits, kv[1].q()))[0]
            else:
                action = int(legal[0])
            if self.known_greedy and self.known_to_go is not None and len(legal) > 1 and action != game.greedy_action():
                self.known_to_go, off_known = None, True  # the state leaves the recorded greedy episode
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


    def _search_move(self, root: Node, game: Game, best: Episode, result: SearchResult, move_deadline: float,
                     t0: float) -> Episode:
        """The simulations of one move from ``root`` (``game`` at the root, not changed) until ``cfg.simulations`` or
        ``move_deadline`` (at least one); counted in ``result``, improvements in its history (times from ``t0``);
        returns the best episode seen."""
        cfg = self.cfg
        stop_step = game.steps + cfg.rollout_depth if cfg.rollout_depth is not None else math.inf
        sims = 0
        batched = self._batched()
        move_started = time.monotonic()
        while sims < cfg.simulations and (sims == 0 or time.monotonic() < move_deadline):
            best_before = best.value
            if batched:  # a group no larger than the move's time left affords at the measured cost
                group = min(cfg.leaf_batch, cfg.simulations - sims,
                            self._affordable_group(move_deadline - time.monotonic()))
                started = time.monotonic()
                best = self.simulate_batch(root, game, stop_step, best, group)
                self._batch_seconds += time.monotonic() - started
                self._batch_simulations += group
            else:
                group = 1
                best = self.simulate(root, game, stop_step, best)
            if best.value > best_before:
                result.history.append((time.monotonic() - t0, best.value))
            sims += group
        result.simulations += sims
        self._move_seconds += time.monotonic() - move_started
        self._move_simulations += sims
        result.searched_moves += 1
        return best


def _searched_share(result: SearchResult, moves_left: int) -> int:
    """The moves of ``moves_left`` a focused search (``MCTSConfig.focus``) expects to search, at the rate it has
    searched its moves with a choice so far (one more searched and one more seen: the first moves count as
    searched), at least 1."""
    seen = result.searched_moves + result.focused_moves
    return max(1, round(moves_left * (result.searched_moves + 1) / (seen + 1)))


def _move_budget(search: Budget, moves_left: int, reserve: float) -> Budget:
    """One searched move's budget: an equal share, over the ``moves_left`` moves, of the time left in ``search``
    less the ``reserve`` kept for finishing the game greedily."""
    return search.share(1.0 / moves_left, keep=reserve / moves_left)


def _add_virtual_visits(path: list[Node]) -> list[float]:
    """One virtual visit to every node of ``path`` at its own mean return (a node not visited yet: its parent's
    mean less its own reward; the root, unvisited: 0), so a descent of the same group sees them as visited more
    without their means changing; returns the values added, for :func:`_remove_virtual_visits`."""
    added = []
    parent_mean = 0.0
    for n in path:
        mean = n.value_sum / n.visits if n.visits else parent_mean - n.reward
        n.visits += 1
        n.value_sum += mean
        added.append(mean)
        parent_mean = mean
    return added


def _remove_virtual_visits(path: list[Node], added: list[float]) -> None:
    """Take back the virtual visits :func:`_add_virtual_visits` gave ``path``."""
    for n, mean in zip(path, added):
        n.visits -= 1
        n.value_sum -= mean


# --- the common frame of the UCT solvers (mcts and muzero play exactly this) ----------------------
#: The game per mode: in map mode searching the fixed-order game in greedy-xla's order ends closest to the bound;
#: in pack mode the fixed-address game places the most bytes (docs/results.md, "mcts's defaults").
DEFAULT_GAME = {"map": ("order", "xla"), "pack": ("address", "start")}
SEARCH_SHARE = 0.95  # of the limit the search plays in (less SAFETY): the rest builds and checks its answer
PREFETCH_K = 4  # offsets per copy window in prefetch mode (fewer actions per segment: deeper search)
#: The commitment rule per mode (option ``commit`` of mcts and muzero): the most visited root move ("visits") or the
#: one whose subtree holds the best return seen ("max"). Prefetch mode: the mean of the greedy rollouts below a move
#: misled the search away from the best episode it had seen. Map mode: on programs like the held-out real ones
#: "max" ends closer to the bound for both searches, and the guided search's prior can draw visits to a move whose
#: rollouts then end badly (docs/results.md, "mcts's defaults"). Pack mode keeps "visits".
COMMITS = ("visits", "max")
DEFAULT_COMMIT = {"map": "max", "pack": "visits", "prefetch": "max"}
#: Where the search of map mode's fixed-order game starts (option ``start`` of mcts and muzero): "game" plays the
#: buffers in the game's own order (``GameConfig.order``) from its greedy episode; "answer" starts from the best
#: fallback answer (:func:`answer_game`): the game's own order where that answer is its greedy episode, else the order
#: of that answer (:func:`mallocgame.search.game_order.answer_order`: its fast buffers by offset), whose greedy episode
#: replays it or betters it; its simulations then try the alternatives of that episode's moves
#: (``MCTSConfig.known_greedy``).
STARTS = ("game", "answer")
#: Map mode plays "answer", ahead of "game" for mcts and muzero at 10 s on the real-size tuning recipes (docs/results.md,
#: "Where map mode's search starts"). Pack and prefetch modes do not play the fixed-order game.
DEFAULT_START = {"map": "answer", "pack": "game", "prefetch": "game"}


def episode_value(data, offsets: np.ndarray) -> float:
    """The game's normalised return of a complete placement (offsets int64 ``[n]``, -1 slow)."""
    placed = offsets >= 0
    if data.mode == "map":
        return float(data.evaluator.value(offsets)) / data.reward_norm
    if data.capacity is not None:
        return float(data.size[placed].sum()) / data.total_bytes
    peak = int((offsets + data.size)[placed].max()) if placed.any() else 0
    return (float(data.size[placed].sum()) - peak) / data.total_bytes


def greedy_incumbents(problem, hardware, data, game_cfg, until: float) -> list[Episode]:
    """The greedy episodes of the game shapes other than ``game_cfg`` (one replays greedy-xla exactly),
    each stopped at ``until``: the fallback answers of map and pack mode."""
    k = game_cfg.k
    out = []
    for other in (GameConfig(variant="order", k=k, order="xla"), GameConfig(variant="order", k=k, order="start"),
                  GameConfig(variant="address", k=k)):
        if other != game_cfg and time.monotonic() < until:  # building a game takes no deadline: none once it passed
            g = Game(problem, hardware, other, data=data)
            play_greedy(g, until)
            out.append(episode_of(g, f"greedy-{other.variant}-{other.order}"))
    return out


def greedy_prefetch_intervals(problem, hardware, game_cfg, until: float = math.inf,
                              data: PrefetchData | None = None) -> list | None:
    """The prefetch game (``game_cfg``) played greedily to its end: its fast intervals, or ``None`` when ``until``
    (monotonic) came first (a cut game leaves its undecided buffers slow)."""
    game = Game(problem, hardware, game_cfg, data=data or PrefetchData.of(problem, hardware))
    return game.intervals() if play_greedy(game, until) else None


def prefetch_incumbents(problem, hardware, game_cfg, hint, until: float, *, session,
                        msa_deadline: float | None = None, variants_until: float | None = None,
                        held: list | None = None) -> list[Episode]:
    """Prefetch mode's fallback answers (``session``: the request's facts): all-slow, the baselines ``held`` (built already:
    :func:`mallocgame.engine.session.held_baselines`), the mode's other baselines from the solve session
    (:meth:`mallocgame.engine.session.Session.baselines`: greedy-xla's map answer lifted, then ``msa``'s answers
    built until ``msa_deadline``, default ``until``, its XLA variants until ``variants_until``), the greedy
    episode of the game in the other buffer order and the ``hint`` (a prefetch answer; a map answer is lifted).
    Values by the prefetch evaluator."""
    ev = session.prefetch_evaluator
    data = PrefetchData.of(problem, hardware)

    def episode(intervals, source: str) -> Episode:
        return Episode(ev.value(intervals) / data.reward_norm, rows_of(intervals), source)

    out = [episode((), "all-slow")]
    held = list(held or ())
    more = session.baselines(until if msa_deadline is None else msa_deadline, variants_until=variants_until)
    for b in held + [b for b in more if all(b.name != h.name for h in held)]:
        out.append(Episode(b.objective / data.reward_norm, rows_of(b.intervals),
                           "lifted greedy-xla" if b.name == "greedy-xla" else b.name))
    other = GameConfig(variant="prefetch", k=game_cfg.k, order="start" if game_cfg.order != "start" else "xla",
                       windows=game_cfg.windows)
    played = greedy_prefetch_intervals(problem, hardware, other, until, data=data) if time.monotonic() < until else None
    if played is not None:
        out.append(episode(played, f"greedy-prefetch-{other.order}"))
    hinted = hint_intervals(problem, hint)
    if hinted:
        out.append(episode(hinted, "hint"))
    return out


def prefetch_answer(problem, hardware, result: SearchResult, incumbents: list[Episode]):
    """Prefetch mode's answer: the best of the search's episode and the incumbents by the prefetch
    evaluator itself (the search compared the game's running sums). Returns ``(episode, value,
    intervals sorted by buffer and start)``."""
    ev = PrefetchEvaluator.of(problem, hardware)
    norm = PrefetchData.of(problem, hardware).reward_norm
    best, best_value, best_intervals = None, -math.inf, ()
    searched = not any(result.best is e for e in incumbents)
    for cand in [result.best] + [e for e in incumbents if e is not result.best]:
        intervals = intervals_of(cand.offsets)
        # an incumbent's value is the evaluator's already (prefetch_incumbents): one evaluation at 10k
        # buffers is a fifth of a second, so only the search's own episode is scored again
        value = ev.value(intervals) if cand is result.best and searched else cand.value * norm
        if value > best_value:
            best, best_value, best_intervals = cand, value, intervals
    return best, best_value, tuple(sorted(best_intervals, key=lambda iv: (iv.buffer, iv.start)))


def placement_answer(problem, data, result: SearchResult):
    """Map and pack mode's answer from the search's best episode: ``(status, objective, history)``.

    Map: the time saved (``value * reward_norm``) and its anytime history; pack: the peak (a
    pack answer with a buffer left out is not a packing: status UNKNOWN, no history)."""
    offsets = result.best.offsets
    placed = offsets >= 0
    status = Status.FEASIBLE if problem.mode == "map" or bool(placed.all()) else Status.UNKNOWN
    if problem.mode == "map":
        return status, result.best.value * data.reward_norm, tuple((t, v * data.reward_norm) for t, v in result.history)
    peak = float((offsets + data.size)[placed].max()) if placed.any() else 0.0
    return status, peak, ()


def solve_with_uct(name: str, request: SolveRequest, cfg: MCTSConfig, game_cfg, *,
                   prior: Prior | None = None, data=None, stats: dict | None = None,
                   leaf_value: LeafValue | None = None, prepare: Callable[[Prior | None, dict], Prior | None] | None = None,
                   start: str = "game", prior_reads_any_order: bool = True):
    """The frame both UCT solvers (``mcts``, ``muzero``) run: fallback answers, the search, the answer.

    Map and pack mode: the greedy episodes of the other game shapes and the ``hint``; prefetch mode:
    :func:`prefetch_incumbents` (:func:`_fallback_answers`). Then :class:`UCTSearch` (``prior`` selects by pUCT) plays
    the game ``game_cfg`` within ``request.budget.part(0.95, keep=SAFETY)``, and the best episode seen is the
    answer (a :class:`mallocgame.problem.model.Solution` named ``name``) to ``request``. ``data``: the game's data if the
    caller built it already; ``stats``: the caller's statistics, the search's are added. ``leaf_value``: the leaf
    evaluator of ``cfg.leaf="value"|"mixed"``. ``prepare(prior, stats) -> prior``: the caller's set-up (the muzero
    solver's relaxation MIP), run after the fallback answers are built so that its time does not cut them short; it
    returns the prior to search with and may note in ``stats`` (the answer's) why it changed. ``start`` (one of
    :data:`STARTS`): "answer" plays map mode's fixed-order game in the order of the best fallback answer
    (:func:`answer_game`; ``stats["start"]`` says which answer) and, with greedy rollouts to the end (``leaf``
    "rollout", or "auto" where it picks rollouts), enters the greedy's moves with their known returns
    (``MCTSConfig.known_greedy``), so that the search's simulations go to the alternatives of that answer; "game" plays
    ``game_cfg``'s own order. ``prior_reads_any_order=False``: ``prior`` (and ``prepare``) belong to ``game_cfg``'s
    order only, so where the answer's order is played the search runs without them (plain UCT) and ``stats["prior"]``
    says so.
    """
    problem, budget = request.problem, request.budget
    stats = dict(stats or {})
    # The baselines this search is held to, each to its end, before it spends any of its own time (even when
    # that is gone already: they are bounded by a share of the limit); the answer is never below them.
    held = held_baselines(request.facts, budget.seconds)
    if problem.mode == "prefetch" and (problem.n == 0 or not problem.has_ops):  # nothing to serve: the empty answer
        return Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, objective=0.0,
                        wall_time=time.monotonic() - budget.started, solver=name, stats=stats)
    searching = budget.part(SEARCH_SHARE, keep=SAFETY)
    try:
        data, incumbents = _fallback_answers(request, game_cfg, data, held, until=searching.deadline)
    except GameDataCutShort:  # no game fits in the time left: the best baseline held (else all-slow) answers
        stats.update({"game": "not built: its data's build reached the deadline", "variant": game_cfg.variant,
                      "k": game_cfg.k, "simulations_per_move": cfg.simulations, "simulations": 0, "moves": 0,
                      "searched_moves": 0, "finished_greedily_at": 0})
        slow = Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, objective=0.0,
                        wall_time=time.monotonic() - budget.started, solver=name, stats=stats)
        return no_worse_than_held(problem, request.hardware, slow, held, answer_from="all-slow", value=0.0)
    if start == "answer":
        own_order = game_cfg.order
        game_cfg, started = answer_game(problem, data, game_cfg, incumbents, stats)
        if started and _greedy_to_the_end(cfg):  # the greedy episode is the start: known, not replayed
            cfg = dataclasses.replace(cfg, known_greedy=True)
        if game_cfg.order != own_order and prior is not None and not prior_reads_any_order:
            prior, prepare = None, None
            stats["prior"] = f"uniform (the prior reads the game in {own_order} order, not in the answer's)"
    if prepare is not None:
        prior = prepare(prior, stats)
    search = UCTSearch(cfg, np.random.default_rng(request.seed), prior=prior, leaf_value=leaf_value)
    if incumbents and time.monotonic() >= greedy_finish_until(searching):  # too late to play a game
        result = SearchResult(best=max(incumbents, key=lambda e: e.value), finished_greedily_at=0)
    else:
        result = search.run(Game(problem, request.hardware, game_cfg, data=data), budget=searching,
                            incumbents=incumbents)
    stats.update(_search_stats(cfg, game_cfg, search, result, prior))
    return _uct_answer(name, request, game_cfg, data, result, incumbents, held, stats)


def _greedy_to_the_end(cfg: MCTSConfig) -> bool:
    """Whether ``cfg``'s rollouts are deterministic greedy rollouts to the end and its leaves play them (``leaf``
    "rollout", or "auto" where it picks rollouts): ``known_greedy`` applies."""
    return cfg.rollout == "greedy" and not cfg.epsilon and cfg.rollout_depth is None and cfg.leaf in ("rollout", "auto")


def answer_game(problem, data, game_cfg, incumbents: list[Episode], stats: dict):
    """``(game, started)``, the game of ``start="answer"`` and whether its greedy episode is the best of ``incumbents``.

    In map mode's fixed-order game: ``game_cfg`` itself where the best incumbent is its own greedy episode (greedy-xla's
    answer in greedy-xla's order), else ``game_cfg`` with its buffers in the order of the best incumbent
    (:func:`mallocgame.search.game_order.answer_order`, set on ``data``), whose greedy episode replays it or betters
    it. Elsewhere, or without an incumbent, ``(game_cfg, False)``. ``stats["start"]`` says which. A ``game_cfg`` of
    order :data:`~mallocgame.search.game_order.ANSWER_ORDER` (a network trained in the answer's order) always plays the
    best incumbent's order (without an incumbent: all-slow's, greedy-xla's order)."""
    if problem.mode != "map" or game_cfg.variant != "order" or not incumbents:
        stats["start"] = f"game (the answer's order plays map mode's fixed-order game, not {problem.mode} mode's " \
                         f"{game_cfg.variant} game)" if incumbents else "game (no fallback answer)"
        if game_cfg.order == ANSWER_ORDER and problem.mode == "map" and game_cfg.variant == "order":
            use_answer_order(data, np.full(problem.n, -1, np.int64))  # all-slow's order: greedy-xla's
        return game_cfg, False
    best = max(incumbents, key=lambda e: e.value)  # the first best: the greedy episodes come first
    if best.source in (f"greedy-order-{game_cfg.order}", f"greedy-{game_cfg.order}"):
        stats["start"] = f"game ({best.source}: the game's own greedy episode)"
        return game_cfg, True
    use_answer_order(data, best.offsets)
    stats["start"] = f"answer ({best.source})"
    return dataclasses.replace(game_cfg, order=ANSWER_ORDER), True


def answer_start(problem, hardware, game_cfg, data=None, *, time_limit: float = 10.0,
                 stats: dict | None = None) -> tuple[Any, Any, list[Episode]]:
    """``(game_cfg, data, incumbents)``: the game ``start="answer"`` plays on ``problem`` (:func:`answer_game`) and the
    fallback answers it starts from, built as :func:`solve_with_uct` builds them for a request of ``time_limit``
    seconds (expert iteration plays the solver's game with it). ``data``: the game's data if the caller built it."""
    request = SolveRequest.of(problem, hardware, time_limit=time_limit)
    held = held_baselines(request.facts, time_limit)
    searching = request.budget.part(SEARCH_SHARE, keep=SAFETY)
    data, incumbents = _fallback_answers(request, game_cfg, data, held, until=searching.deadline)
    game_cfg, _ = answer_game(problem, data, game_cfg, incumbents, {} if stats is None else stats)
    return game_cfg, data, incumbents


def _fallback_answers(request: SolveRequest, game_cfg, data, held: list, *,
                      until: float = math.inf) -> tuple[Any, list[Episode]]:
    """``(data, incumbents)``: the game's data and the answers the search starts from and never ends below.

    Prefetch mode: the baselines (the lifted greedy, then msa within its share of the time), then the greedy
    fallbacks (:func:`prefetch_incumbents`). Map and pack mode: the greedy episodes of the other game shapes (one of
    them replays greedy-xla exactly), the mode's baselines from the facts (greedy-xla; best fit), and the hint."""
    problem, hardware, hint, budget = request.problem, request.hardware, request.hint, request.budget
    if problem.mode == "prefetch":
        data = data or PrefetchData.of(problem, hardware, until=until)  # GameDataCutShort past ``until``
        return data, prefetch_incumbents(problem, hardware, game_cfg, hint, budget.part(0.25).deadline, session=request.facts,
                                         msa_deadline=budget.part(BASELINE_SHARE).deadline,
                                         variants_until=budget.part(VARIANTS_SHARE).deadline, held=held)
    # the mode's baselines first (before the game's data: seconds at 200k buffers), until the search's deadline if
    # they need it: the answer is never below a baseline the time allowed to finish (the greedy episodes, cut at a
    # quarter of the time, may be cut short)
    more = request.facts.baselines(min(until, budget.deadline))  # built once, complete when the time allows
    data = data or GameData(problem, hardware)
    incumbents = greedy_incumbents(problem, hardware, data, game_cfg, budget.part(0.25).deadline)
    for b in held + [b for b in more if all(b.name != h.name for h in held)]:
        off = np.array(b.offsets)
        if problem.mode == "map" or (off >= 0).all():
            incumbents.append(Episode(episode_value(data, off), off, b.name))
    if hint is not None and len(hint.offsets) == problem.n:
        off = offsets_array(hint.offsets)
        incumbents.append(Episode(episode_value(data, off), off, "hint"))
    return data, incumbents


def _search_stats(cfg: MCTSConfig, game_cfg, search: UCTSearch, result: SearchResult, prior) -> dict[str, Any]:
    """The search's statistics in the answer: the game, the simulations and moves, the prior's and leaves' calls."""
    stats = {"variant": game_cfg.variant, "k": game_cfg.k, "simulations_per_move": cfg.simulations,
             "simulations": result.simulations, "moves": result.moves, "searched_moves": result.searched_moves,
             **({"focused_moves": result.focused_moves} if cfg.focus and prior is not None else {}),
             "finished_greedily_at": result.finished_greedily_at}
    if cfg.known_greedy:
        stats["known_greedy_moves"] = search.known_moves
    if prior is not None:
        stats["prior_calls"] = search.prior_calls
    if cfg.leaf != "rollout":
        stats.update({"leaf": cfg.leaf, "leaf_calls": search.leaf_calls})
        if cfg.leaf == "auto":
            stats["leaf_played"] = search.leaf
            stats["leaf_cost_us"] = round(1e6 * search.leaf_cost, 1)
            stats["rollout_cost_us"] = round(1e6 * search.rollout_cost, 1)
    return stats


def _uct_answer(name: str, request: SolveRequest, game_cfg, data, result: SearchResult, incumbents: list[Episode],
                held: list, stats: dict) -> Solution:
    """The best episode seen as the answer to ``request``, never below a baseline it held."""
    problem, hardware, t0 = request.problem, request.hardware, request.budget.started
    if problem.mode == "prefetch":
        norm = data.reward_norm
        best, best_value, intervals = prefetch_answer(problem, hardware, result, incumbents)
        stats.update({"windows": game_cfg.windows, "order": game_cfg.order, "answer_from": best.source,
                      "value_normalised": best_value / norm, "incumbents": {e.source: e.value for e in incumbents}})
        answer = Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, objective=best_value,
                          wall_time=time.monotonic() - t0, history=tuple((t, v * norm) for t, v in result.history),
                          stats=stats, solver=name, intervals=intervals)
        return no_worse_than_held(problem, hardware, answer, held, answer_from=_held_label(best.source),
                                  value=best_value)
    best = result.best
    stats.update({"answer_from": best.source, "value_normalised": best.value})
    status, objective, history = placement_answer(problem, data, result)
    answer = Solution(offsets=offsets_tuple(best.offsets), status=status, mode=problem.mode, objective=objective,
                      wall_time=time.monotonic() - t0, history=history, stats=stats, solver=name)
    return no_worse_than_held(problem, hardware, answer, held, answer_from=best.source)


def _held_label(source: str) -> str:
    """An episode's source as ``stats["baselines"]["answer_from"]`` names it (a baseline by its own name)."""
    return "greedy-xla" if source == "lifted greedy-xla" else source
