"""MuZero's n-step value targets from the guided search's own games, in the value leaves' units.

MuZero (Schrittwieser et al. 2020, "Training") trains the value of the state at step ``t`` towards

    z_t = r_t + r_{t+1} + ... + r_{t+n-1} + v_{t+n}

the rewards of the ``n`` moves the search played from there and the search's own root value ``n`` moves later
(``v_T = 0`` at the end of the episode). Here the search is the guided UCT of the muzero solver
(:class:`mallocgame.search.uct.UCTSearch` with a prior, the config handed in) played move by move to the end on
the native engine; its root value at a searched move is the mean of the returns backed up through its root (the
return still to come from that state, :attr:`~mallocgame.search.uct.Node.value_sum` over its visits). Forced moves
(one legal action) are not searched and have no root value: the bootstrap is the first searched move at or after
``t + n`` (or the end), and the rewards run up to it (:func:`nstep_targets`).

The target is given in the units the value leaves read (:mod:`mallocgame.search.muzero.value`): relative to the
reference episode (the greedy episode from the game's start: ``to_go``, ``scale``), in percent of its return,

    y_n(s_t) = 100 x (z_t - to_go[t]) / scale

so a leaf reading it backs up ``to_go[t] + scale / 100 x y_n``, the search's return still to come. It differs from
the greedy rollout's ``y`` by what the search's moves gain over the greedy's, and, through the root's mean, by the
rollouts of the moves the search tried and rejected (which pull it below; ``y_best`` does not count them).

:func:`label_game` plays one whole game and labels ``states`` of its searched moves, sampled before the game from a
seeded generator. A whole game costs a search per move over thousands of moves at real size, so
:func:`label_reanalysed` (reanalyse-style) labels instead the leaves a search values -- every child of
``states`` states of a greedy walk, as :func:`mallocgame.search.muzero.value.label_states` draws them -- each by the
search played from it for ``n`` steps only. Every row has the features value leaves read (the value head's input
under the frozen network, the :func:`~mallocgame.search.muzero.value.context_features`), ``y_n`` (column ``y``),
``y_n<k>`` for the other horizons of :data:`EXTRA_N`, ``y_best`` (the same sum bootstrapped from the best return seen
through the root, :attr:`~mallocgame.search.uct.Node.best`, instead of the mean) and ``y_greedy`` (the greedy
rollout's ``y`` of the same state, :func:`~mallocgame.search.muzero.value.value_target`, the control). With
``children`` a whole game also labels the root's visited children at its labelled moves by the search's own mean
value of them (the tree's estimate, no move played: ``source`` 1; game states are ``source`` 0, reanalysed leaves
``source`` 2). :func:`generate` runs either over training problems (:func:`mallocgame.search.muzero.value.generate`:
resumable, one ``.npz``); ``experiments/nstep_value_targets.py`` is its command, and marks a head trained on these
targets :data:`NSTEP_TARGET`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.muzero import value as value_data
from mallocgame.search.muzero.guide import NetworkPrior, input_vector, uniform_prior
from mallocgame.search.muzero.problems import Curriculum
from mallocgame.search.uct import MCTSConfig, UCTSearch, greedy_profile


@dataclass(frozen=True)
class SearchRecord:
    """What the search's moves leave for the targets: per searched move (``step`` ascending) the return so far
    (``returns``), the root's mean value (``values``) and the best return seen through it (``best``); where the play
    ended (its step ``end_step`` and return so far ``end_return``: the episode's end, or the first searched move it
    was stopped at, which is then the record's last)."""

    step: np.ndarray
    returns: np.ndarray
    values: np.ndarray
    best: np.ndarray
    end_step: int
    end_return: float


def nstep_targets(record: SearchRecord, at: np.ndarray, start_returns: np.ndarray, n: int, *,
                  bootstrap: str = "mean") -> np.ndarray:
    """``z_t`` (module docstring) of the states at steps ``at`` whose returns so far are ``start_returns``: the
    rewards from ``t`` to the first searched move ``b >= t + n`` plus the search's root value there (``bootstrap``
    ``"mean"``: the mean return backed up; ``"best"``: the best seen), or the rewards to the end where there is none.

    >>> r = SearchRecord(np.array([0, 1, 3]), np.array([0.0, 0.1, 0.4]), np.array([0.9, 0.8, 0.5]),
    ...                  np.array([1.0, 0.9, 0.6]), 5, 1.0)
    >>> nstep_targets(r, np.array([0, 1, 3]), np.array([0.0, 0.1, 0.4]), 2).round(3).tolist()
    [0.9, 0.8, 0.6]

    (0.4 + 0.5: steps 0, 1 and the forced step 2, then the root value at 3; 0.3 + 0.5; 0.6, the rewards to the end.)
    """
    if n < 1:
        raise ValueError("nstep_targets: n >= 1")
    root_value = record.values if bootstrap == "mean" else record.best
    b = np.searchsorted(record.step, np.asarray(at, np.int64) + n)  # the first searched move at or after t + n
    inside = b < len(record.step)
    bi = np.minimum(b, max(len(record.step) - 1, 0))
    if len(record.step):
        end = np.where(inside, record.returns[bi] + root_value[bi], record.end_return)
    else:
        end = np.full(len(bi), record.end_return)
    return end - np.asarray(start_returns, np.float64)


class _Stop(Exception):
    """Raised by :func:`search_from`'s hook to end the search's play at the move it was asked to reach."""


def search_from(game, prior, cfg: MCTSConfig, rng: np.random.Generator, *, until_step: float = math.inf,
                leaf_value=None, on_search=None) -> SearchRecord:
    """Play the guided search (``cfg``, ``prior``; ``leaf_value`` for value leaves) from ``game`` (changed: played
    on) move by move until the first searched move at or after ``until_step`` (searched, recorded, not committed) or
    the end; ``on_search(game, root)`` is called after each searched move's simulations. Its record."""
    step, returns, values, best = [], [], [], []

    def after_search(state, root) -> None:  # the state before the move is committed, its search done
        step.append(state.steps)
        returns.append(state.total_reward())
        values.append(root.value_sum / max(root.visits, 1))
        best.append(root.best if root.visits else 0.0)
        if on_search is not None:
            on_search(state, root)
        if state.steps >= until_step:
            raise _Stop

    search = UCTSearch(cfg, rng, prior=prior, leaf_value=leaf_value)
    try:
        search.run(game, budget=Budget.start(math.inf), after_search=after_search)
    except _Stop:
        pass
    return SearchRecord(np.asarray(step, np.int64), np.asarray(returns, np.float64), np.asarray(values, np.float64),
                        np.asarray(best, np.float64), int(game.steps), float(game.total_reward()))


class _Rows:
    """The labelled rows of one problem: features under ``value_net`` and the leaf's context (relative to the
    reference episode ``to_go``, ``scale``), then the targets."""

    def __init__(self, value_net, to_go: np.ndarray, scale: float):
        self.net, self.to_go, self.scale = value_net, to_go, scale
        self.unit = 100.0 / (scale if scale > 0 else 1.0)
        self.x, self.context, self.step, self.greedy, self.y_greedy, self.source = [], [], [], [], [], []
        self.z: dict[str, list[float]] = {"y": [], "y_best": [], **{f"y_n{k}": [] for k in EXTRA_N}}

    def state(self, state, source: int, was_greedy: bool) -> None:
        """Features of ``state`` and its greedy rollout's ``y``."""
        net = self.net
        obs = state.observation()
        self.x.append(net.value_input(input_vector(state, obs, net.features, net),
                                      np.asarray(obs.actions, np.float32), np.asarray(obs.mask, bool)))
        self.context.append(value_data.context_features(state, self.to_go, self.scale))
        self.step.append(state.steps)
        self.greedy.append(was_greedy)
        self.y_greedy.append(value_data.value_target(state, self.to_go, self.scale))
        self.source.append(source)

    def targets(self, values: dict[str, float], step: int) -> None:
        """The returns to go ``values`` (absolute, per column) of the last state, in ``y``'s units."""
        ref = float(self.to_go[step]) if step < len(self.to_go) else 0.0
        for k, v in values.items():
            self.z[k].append(self.unit * (v - ref))

    def arrays(self, rows: dict | None) -> tuple[np.ndarray, np.ndarray]:
        width = self.net.value_head.w1.shape[0]
        if rows is not None:
            rows.update(context=np.asarray(self.context, np.float32).reshape(-1, 4),
                        step=np.asarray(self.step, np.int64), greedy=np.asarray(self.greedy, bool),
                        y_greedy=np.asarray(self.y_greedy, np.float32), source=np.asarray(self.source, np.int8),
                        **{k: np.asarray(v, np.float32) for k, v in self.z.items() if k != "y"})
        return np.asarray(self.x, np.float32).reshape(-1, width), np.asarray(self.z["y"], np.float32)


#: The mark of a head trained on these targets (:data:`mallocgame.search.muzero.value.VALUE_TARGET` is the greedy
#: rollout's ``y``, the one target value leaves read): the search's return in ``y``'s units, another quantity, so
#: value leaves never read such a head.
NSTEP_TARGET = "relative-search-nstep/1"

#: The other horizons :func:`label_game` and :func:`label_reanalysed` label (columns ``y_n<k>``), for choosing ``n``.
EXTRA_N = (1, 4, 16)
#: The columns :func:`generate` adds to :func:`mallocgame.search.muzero.value.generate`'s (module docstring).
COLUMNS = ("y_best", "y_greedy", "source", *(f"y_n{k}" for k in EXTRA_N))


def _prior(prior_net):
    return NetworkPrior(prior_net) if prior_net is not None else uniform_prior


def label_game(problem, hw, prior_net, value_net, game_fields: dict, cfg: MCTSConfig, rng: np.random.Generator, *,
               n: int = 8, states: int = 32, children: bool = False, rows: dict | None = None,
               leaf_value=None) -> tuple[np.ndarray, np.ndarray]:
    """Play one whole game of the guided search (``cfg``, the prior of ``prior_net``, uniform if ``None``) on
    ``problem`` and label ``states`` of its searched moves, sampled before the game (module docstring): returns the
    value-head inputs under ``value_net`` ``[m, L + d]`` and ``y_n`` ``[m]``. ``rows``, if given, gets per row
    ``context``, ``step``, ``greedy`` (a child's move was the greedy's; a game state: False), ``y_best``,
    ``y_greedy``, ``source`` and ``y_n<k>`` (:data:`EXTRA_N`). All randomness is ``rng``'s."""
    game = Game(problem, hw, GameConfig(**game_fields), data=GameData(problem, hw))
    to_go, scale = greedy_profile(game)
    out = _Rows(value_net, to_go, scale)
    length = len(to_go) - 1
    picks = set(rng.choice(length, size=min(states, length), replace=False).tolist()) if length > 0 else set()
    game_states: list[tuple[int, float]] = []  # (step, return so far) of the labelled game states, in order
    tree: list[tuple[int, float]] = []  # (step, the search's mean value) of the labelled children

    def on_search(state, root) -> None:
        if state.steps not in picks:
            return
        out.state(state, 0, False)
        game_states.append((len(out.source) - 1, state.total_reward()))
        if children:
            best = state.greedy_action()
            for action, child in sorted(root.children.items()):
                if child.visits == 0:
                    continue
                successor = state.clone()
                successor.step(int(action))
                if not successor.done:
                    out.state(successor, 1, int(action) == best)
                    tree.append((len(out.source) - 1, child.value_sum / child.visits))

    record = search_from(game, _prior(prior_net), cfg, rng.spawn(1)[0],
                         leaf_value=leaf_value, on_search=on_search)
    values: dict[int, dict[str, float]] = {}
    if game_states:
        at = np.asarray([out.step[i] for i, _ in game_states])
        start = np.asarray([r for _, r in game_states])
        columns = {"y": nstep_targets(record, at, start, n),
                   "y_best": nstep_targets(record, at, start, n, bootstrap="best"),
                   **{f"y_n{k}": nstep_targets(record, at, start, k) for k in EXTRA_N}}
        for j, (i, _) in enumerate(game_states):
            values[i] = {k: float(v[j]) for k, v in columns.items()}
    for i, v in tree:  # the tree's own value of a child: no moves played, every column the same
        values[i] = {k: v for k in out.z}
    for i in range(len(out.source)):
        out.targets(values[i], out.step[i])
    return out.arrays(rows)


def label_reanalysed(problem, hw, prior_net, value_net, game_fields: dict, cfg: MCTSConfig,
                     rng: np.random.Generator, *, n: int = 8, states: int = 8, eps: float = 0.05,
                     rows: dict | None = None, leaf_value=None) -> tuple[np.ndarray, np.ndarray]:
    """Reanalyse-style: the states of :func:`mallocgame.search.muzero.value.label_states` (every child of ``states``
    states of a walk that follows the greedy, a random move with probability ``eps``; the kind of state a leaf of
    the search is), each labelled by the guided search played from it for ``max(n, EXTRA_N)`` steps (to the first
    searched move at or after that; :func:`search_from`): ``y_n`` of the child from its own search's moves and root
    values. Returns and ``rows`` as :func:`label_game` (``source`` 2). The searches draw from a child of ``rng``
    (:meth:`numpy.random.Generator.spawn`), so the walk and its states are those of ``label_states`` under the same
    ``rng``."""
    game = Game(problem, hw, GameConfig(**game_fields), data=GameData(problem, hw))
    to_go, scale = greedy_profile(game)
    out = _Rows(value_net, to_go, scale)
    horizon = max(n, *EXTRA_N)
    prior = _prior(prior_net)
    search_rng = rng.spawn(1)[0]
    for child, is_greedy in value_data.walk_children(game, to_go, rng, states=states, eps=eps):
        out.state(child, 2, is_greedy)
        t, start = child.steps, child.total_reward()
        record = search_from(child.clone(), prior, cfg, search_rng, until_step=t + horizon, leaf_value=leaf_value)
        one = lambda k, how="mean": float(nstep_targets(record, [t], [start], k, bootstrap=how)[0])  # noqa: E731
        out.targets({"y": one(n), "y_best": one(n, "best"), **{f"y_n{k}": one(k) for k in EXTRA_N}}, t)
    return out.arrays(rows)


#: How :func:`generate` samples its states: whole games of the search (:func:`label_game`) or the leaves of a
#: greedy walk, each searched from for ``n`` steps (:func:`label_reanalysed`).
SAMPLINGS = ("game", "reanalyse")


def generate(out: str, prior_net, value_net, game_fields: dict, curriculum: Curriculum, cfg: MCTSConfig, *,
             seed: int, seconds: float, sampling: str = "reanalyse", n: int = 8, states: int = 8,
             children: bool = False, log: str | None = None, save_every: float = 60.0,
             problems: int | None = None) -> int:
    """Label training problems ``0, 1, ...`` of ``curriculum`` (``sampling``: :data:`SAMPLINGS`) into the ``.npz``
    ``out`` (:func:`mallocgame.search.muzero.value.generate`: saved by a temporary file and a rename, an existing
    file continued from the problem after its last; plus the :data:`COLUMNS`). Returns the problems labelled."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown sampling {sampling!r} (known: {', '.join(SAMPLINGS)})")

    def label(problem, hw, rng, rows):
        if sampling == "game":
            return label_game(problem, hw, prior_net, value_net, game_fields, cfg, rng, n=n, states=states,
                              children=children, rows=rows)
        return label_reanalysed(problem, hw, prior_net, value_net, game_fields, cfg, rng, n=n, states=states,
                                rows=rows)

    return value_data.generate(out, value_net, game_fields, curriculum, seed=seed, seconds=seconds, log=log,
                               save_every=save_every, problems=problems, label=label, columns=COLUMNS)
