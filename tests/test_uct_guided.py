"""Guided selection that cannot starve the greedy's move (search/uct.py GUIDED_RULES; issue 21 item 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import InputError
from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.guide import uniform_prior
from mallocgame.search.uct import GUIDED_RULES, MCTSConfig, Node, UCTSearch

HW = PRESETS["tpuv4i"]


def _problem(n=60, seed=4):
    return layered_network(n, seed=seed, capacity_fraction=0.3).replace(mode="map")


def _root_with_choices(problem):
    """A game advanced to its first state with several legal actions."""
    game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
    while len(game.legal_actions()) < 3:
        game.step(game.greedy_action())
    return game


def starving_prior(game, legal):
    """Almost all weight on one non-greedy action, ~0 on the greedy's."""
    p = np.full(len(legal), 1e-12)
    others = np.flatnonzero(legal != game.greedy_action())
    p[others[-1]] = 1.0
    return p / p.sum()


@pytest.mark.parametrize("rule", ["untried-puct", "untried-uct"])
def test_a_prior_of_zero_on_the_greedy_move_still_visits_it_first(rule):
    game = _root_with_choices(_problem())
    greedy, legal = game.greedy_action(), game.legal_actions()
    search = UCTSearch(MCTSConfig(simulations=len(legal), exploration=10.0, guided=rule), np.random.default_rng(0),
                       prior=starving_prior)
    root = Node()
    best = search.simulate(root, game, float("inf"), _dummy_best())
    assert list(root.children) == [greedy]  # the first simulation goes to the greedy's move
    for _ in range(len(legal) - 1):
        best = search.simulate(root, game, float("inf"), best)
    assert sorted(root.children) == sorted(int(a) for a in legal)  # every move tried once before any is revisited
    assert all(c.visits == 1 for c in root.children.values())
    # the prior reorders the rest: its favourite comes right after the greedy's move
    assert list(root.children)[1] == int(legal[np.argmax(starving_prior(game, legal))])


def test_plain_puct_can_starve_the_greedy_move():
    """The old rule (kept as ``guided="puct"``): the same prior keeps the greedy's move unvisited."""
    game = _root_with_choices(_problem())
    search = UCTSearch(MCTSConfig(simulations=8, exploration=10.0, guided="puct"), np.random.default_rng(0),
                       prior=starving_prior)
    root, best = Node(), _dummy_best()
    for _ in range(8):
        best = search.simulate(root, game, float("inf"), best)
    assert game.greedy_action() not in root.children


def _dummy_best():
    from mallocgame.search.uct import Episode

    return Episode(-np.inf, np.zeros(0, np.int64), "none")


@pytest.mark.parametrize("seed", [0, 3])
def test_uniform_prior_with_untried_uct_is_plain_uct_move_for_move(seed):
    problem = _problem(70, seed=seed + 10)
    runs = []
    for prior in (None, uniform_prior):
        game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
        res = UCTSearch(MCTSConfig(simulations=12, guided="untried-uct", prior_power=2.0), np.random.default_rng(seed),
                        prior=prior).run(game, budget=Budget.start(math.inf))
        runs.append((res.best.value, res.best.offsets.tolist(), res.simulations, game.offsets().tolist()))
    assert runs[0] == runs[1]


def test_solver_uniform_control_equals_mcts_and_network_answer_is_valid():
    problem = _problem(60, seed=21)
    mcts = run_solver("mcts", problem, HW, time_limit=60, seed=2, options={"simulations": 8})
    uni = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 8, "prior": "uniform"})
    assert uni.valid and mcts.valid
    assert uni.stats["selection"] == "untried-uct"  # the default: its uniform control is mcts
    assert uni.objective == mcts.objective and uni.stats["simulations"] == mcts.stats["simulations"]
    net = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 8})
    assert net.valid


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError):
        MCTSConfig(guided="nope")
    assert "untried-uct" in GUIDED_RULES
    from mallocgame.solvers.muzero import MuZeroSolver

    with pytest.raises(InputError, match="selection"):
        MuZeroSolver().solve(MuZeroSolver.request(_problem(20), HW, time_limit=5, seed=0, selection="nope"))


@pytest.mark.parametrize("seed", [0, 3])
def test_uniform_prior_with_a_fading_power_is_still_plain_uct(seed):
    problem = _problem(70, seed=seed + 10)
    runs = []
    for prior, decay in ((None, 0.0), (uniform_prior, 5.0)):
        game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
        res = UCTSearch(MCTSConfig(simulations=12, guided="untried-uct", prior_power=2.0, prior_decay=decay),
                        np.random.default_rng(seed), prior=prior).run(game, budget=Budget.start(math.inf))
        runs.append((res.best.value, res.best.offsets.tolist(), res.simulations, game.offsets().tolist()))
    assert runs[0] == runs[1]


def _tried_node(visits: int, prior: np.ndarray) -> Node:
    """A node whose three moves were tried: move 0 has the best mean and most visits, move 2 the fewest."""
    node = Node()
    node.legal, node.prior, node.untried, node.visits = [0, 1, 2], prior, [], visits
    for a, (n, total) in enumerate(((visits - 30, 1.0 * (visits - 30)), (25, 0.7 * 25), (5, 0.2 * 5))):
        child = Node()
        child.visits, child.value_sum = n, total
        node.children[a] = child
    return node


def test_the_prior_power_fades_with_the_visits_of_a_node():
    prior = np.array([0.0005, 0.999, 0.0005])  # all but certain of move 1
    plain = UCTSearch(MCTSConfig(guided="untried-uct", prior_power=2.0), np.random.default_rng(0), prior=uniform_prior)
    fading = UCTSearch(MCTSConfig(guided="untried-uct", prior_power=2.0, prior_decay=10.0),
                       np.random.default_rng(0), prior=uniform_prior)
    uct_choice = plain._ucb_best(_tried_node(10_000, prior), None)[0]
    assert plain._select_weighted(_tried_node(10_000, prior)) == 1  # the full power: the prior's move
    assert fading._select_weighted(_tried_node(60, prior)) == 1  # few visits: the prior still steers
    assert fading._select_weighted(_tried_node(10_000, prior)) == uct_choice != 1  # many: UCT's own choice
    with pytest.raises(ValueError, match="prior_decay"):
        MCTSConfig(prior_decay=-1.0)
    from mallocgame.solvers.muzero import MuZeroSolver

    with pytest.raises(InputError, match="prior_decay"):
        MuZeroSolver().solve(MuZeroSolver.request(_problem(20), HW, time_limit=5, seed=0, prior_decay=-2))


def sure_of_greedy(game, legal):
    """All weight on the greedy's move."""
    return (legal == game.greedy_action()).astype(np.float64)


def _time_binding(monkeypatch):
    """Every move's time binds (focus applies), whatever the machine's speed."""
    monkeypatch.setattr(UCTSearch, "_time_binds", lambda self, *args: bool(self.cfg.focus and self.prior is not None))


def test_focus_commits_the_moves_the_prior_is_sure_of_unsearched(monkeypatch):
    _time_binding(monkeypatch)
    problem = _problem(70, seed=12)
    game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
    greedy = game.clone()
    greedy.greedy_rollout()
    res = UCTSearch(MCTSConfig(simulations=8, guided="untried-uct", focus=0.5), np.random.default_rng(0),
                    prior=sure_of_greedy).run(game, budget=Budget.start(math.inf))
    assert res.simulations == 0 and res.searched_moves == 0 and res.focused_moves > 0
    assert game.offsets().tolist() == greedy.offsets().tolist()  # every move with a choice: the greedy's


def _search_run(problem, prior, focus: float, seed: int, **cfg) -> tuple:
    """One search of ``problem``'s order game to its end: its best value, simulations, searched and focused moves,
    and the game's offsets."""
    game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
    res = UCTSearch(MCTSConfig(simulations=8, focus=focus, **cfg), np.random.default_rng(seed), prior=prior).run(
        game, budget=Budget.start(math.inf))
    return res.best.value, res.simulations, res.searched_moves, res.focused_moves, game.offsets().tolist()


def test_focus_searches_the_moves_the_prior_doubts(monkeypatch):
    _time_binding(monkeypatch)
    problem = _problem(70, seed=12)
    plain, focused = (_search_run(problem, starving_prior, focus, 0, guided="untried-uct") for focus in (0.0, 0.5))
    assert focused == plain  # a prior that never backs the greedy's move: every move searched, as without focus
    assert focused[2] > 0 and focused[3] == 0


@pytest.mark.parametrize("prior", [None, uniform_prior])
def test_focus_without_a_prior_or_with_the_uniform_one_is_plain_uct(monkeypatch, prior):
    _time_binding(monkeypatch)
    problem = _problem(70, seed=12)
    plain = _search_run(problem, None, 0.0, 3, guided="untried-uct", prior_power=2.0)
    assert _search_run(problem, prior, 0.3, 3, guided="untried-uct", prior_power=2.0) == plain


def test_solver_focus_is_checked_counted_and_valid(monkeypatch):
    _time_binding(monkeypatch)
    problem = _problem(60, seed=21)
    with pytest.raises(InputError, match="focus"):
        run_solver("muzero", problem, HW, time_limit=20, seed=0, options={"focus": 1.5})
    with pytest.raises(ValueError):
        MCTSConfig(focus=-0.1)
    rep = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 8, "focus": 0.6})
    again = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 8, "focus": 0.6})
    assert rep.valid and rep.stats["prior"] == "network"
    assert rep.stats["focused_moves"] + rep.stats["searched_moves"] > 0
    assert (rep.objective, rep.stats["simulations"]) == (again.objective, again.stats["simulations"])


def test_focus_s_first_cost_is_a_measured_rollout_not_the_probe_s_steps(monkeypatch):
    """Before any simulation focus costed a simulation at the probe's step time (its greedy episode, step by step)
    times the moves left, far more than a native rollout where those steps are slow: the time "bound" from the first
    move, the prior was asked and every move it was sure of went unsearched, so no simulation ever corrected the
    estimate. Now the first cost is one rollout, measured: where the time does not bind the focused search asks the
    prior and plays exactly as the search without focus."""
    reference = UCTSearch._reference_episode
    # a probe whose steps are slow (50 ms: a recorded or Python episode on a loaded machine), the time still ample
    monkeypatch.setattr(UCTSearch, "_reference_episode", lambda self, game, budget: (reference(self, game, budget)[0],
                                                                                    0.05))
    problem = _problem(70, seed=12)
    runs = {}
    for focus in (0.0, 0.5):
        calls = []

        def counted(game, legal):
            calls.append(game.steps)
            return sure_of_greedy(game, legal)

        game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
        search = UCTSearch(MCTSConfig(simulations=8, guided="untried-uct", focus=focus), np.random.default_rng(0),
                           prior=counted)
        res = search.run(game, budget=Budget.start(30.0))
        runs[focus] = (res.best.value, res.simulations, res.searched_moves, res.focused_moves, calls,
                       game.offsets().tolist())
    assert runs[0.5][3] == 0 and runs[0.5][2] > 0  # nothing committed unsearched: the time does not bind
    assert runs[0.5] == runs[0.0]  # the same prior calls, the same search


def test_focus_applies_only_where_the_time_binds():
    search = UCTSearch(MCTSConfig(simulations=16, focus=0.5), np.random.default_rng(0), prior=sure_of_greedy)
    unlimited = Budget.start(math.inf)
    assert not search._time_binds(unlimited, 1000, 0.0, 1e-3)  # no deadline: the simulation cap binds
    tight = Budget.start(10.0)  # 10 ms a move against 16 rollouts of 1,000 steps at 1 ms
    assert search._time_binds(tight, 1000, 0.0, 1e-3)
    search._move_seconds, search._move_simulations = 1e-4, 100  # measured: 1 us a simulation, 16 fit in 10 ms
    assert not search._time_binds(tight, 1000, 0.0, 1e-3)
    off = UCTSearch(MCTSConfig(simulations=16), np.random.default_rng(0), prior=sure_of_greedy)
    assert not off._time_binds(tight, 1000, 0.0, 1e-3)  # focus 0: never
    plain = UCTSearch(MCTSConfig(simulations=16, focus=0.5), np.random.default_rng(0))
    assert not plain._time_binds(tight, 1000, 0.0, 1e-3)  # no prior: never
