"""Value leaves in the guided search (issue 21 item 2): targets, backed-up values, speed, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import InputError
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.value import reference_value, value_target
from mallocgame.search.uct import Episode, MCTSConfig, Node, UCTSearch, greedy_profile

HW = PRESETS["tpuv4i"]
GAME = GameConfig(variant="order", k=16, order="xla")


def _problem(n=40, seed=3, capacity=0.3):
    return layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="map")


def _empty_best():
    return Episode(-math.inf, np.zeros(0, np.int64), "")


def _branching_state(game):
    """``game`` advanced greedily to its first state with a legal move other than the greedy's."""
    while len(game.legal_actions()) < 2:
        game.step(game.greedy_action())
    return game


def test_greedy_profile_is_the_greedy_episodes_return_to_go():
    game = Game(_problem(), HW, GAME)
    to_go, scale = greedy_profile(game)
    assert game.steps == 0  # not changed
    rewards, g = [], game.clone()
    while not g.done:
        rewards.append(g.step(g.greedy_action()))
    assert scale == pytest.approx(g.total_reward()) and scale > 0
    assert to_go[0] == pytest.approx(scale)
    for t in range(len(rewards) + 1):
        assert to_go[t] == pytest.approx(sum(rewards[t:]), abs=1e-12)


def test_value_target_is_zero_on_the_greedy_path_and_the_rollout_difference_off_it():
    start = Game(_problem(), HW, GAME)
    to_go, scale = greedy_profile(start)
    state = _branching_state(start.clone())
    assert value_target(state, to_go, scale) == pytest.approx(0.0, abs=1e-9)  # the reference's own states
    other = next(int(a) for a in state.legal_actions() if a != state.greedy_action())
    child = state.clone()
    child.step(other)
    end = child.clone()
    while not end.done:
        end.step(end.greedy_action())
    y = value_target(child, to_go, scale)
    # y is the greedy continuation's return beyond the reference's, in percent of the greedy episode
    assert child.total_reward() + to_go[child.steps] + scale * y / 100 == pytest.approx(end.total_reward(), abs=1e-12)
    assert child.steps == state.steps + 1


def test_a_reference_value_leaf_backs_up_what_a_greedy_rollout_would_on_the_greedy_path():
    """The leaf's value estimates the whole episode's return, as a rollout does: on the reference path they agree."""
    game = _branching_state(Game(_problem(), HW, GAME))
    backed = {}
    for leaf in ("rollout", "value"):
        search = UCTSearch(MCTSConfig(simulations=1, leaf=leaf), np.random.default_rng(0),
                           leaf_value=reference_value if leaf == "value" else None)
        search.set_reference(Game(_problem(), HW, GAME))
        root = Node()
        search.simulate(root, game, math.inf, _empty_best())
        (action, child), = root.children.items()
        assert action == game.greedy_action()
        backed[leaf] = game.total_reward() + child.q()
        assert search.leaf_calls == (1 if leaf == "value" else 0)
    assert backed["value"] == pytest.approx(backed["rollout"], abs=1e-12)


def test_siblings_are_compared_on_the_episode_return():
    """With the reference value (y = 0) a slow move's leaf is worth the rewards so far plus the reference's rest:
    the greedy's placement, which earns a reward now, is ahead of slow by exactly that reward."""
    start = Game(_problem(), HW, GAME)
    game = _branching_state(start.clone())
    search = UCTSearch(MCTSConfig(simulations=8, leaf="value"), np.random.default_rng(0), leaf_value=reference_value)
    search.set_reference(start)
    root = Node()
    for _ in range(len(game.legal_actions())):
        search.simulate(root, game, math.inf, _empty_best())
    q = {a: c.q() for a, c in root.children.items()}
    greedy, slow = game.greedy_action(), game.slow_action
    assert slow in q and greedy != slow  # this state offers both
    reward = game.clone().step(greedy)
    assert reward > 0 and q[greedy] - q[slow] == pytest.approx(reward, abs=1e-12)


def test_leaf_modes_need_a_value_function_and_known_names():
    with pytest.raises(ValueError):
        MCTSConfig(leaf="nonsense")
    with pytest.raises(ValueError):
        UCTSearch(MCTSConfig(leaf="value"), np.random.default_rng(0))
    problem = _problem()
    with pytest.raises(InputError):
        run_solver("muzero", problem, HW, time_limit=5, seed=0, options={"leaf": "nonsense"})
    with pytest.raises(InputError):
        run_solver("muzero", problem, HW, time_limit=5, seed=0, options={"leaf": "value", "model": "simulator"})
    with pytest.raises(InputError):
        run_solver("muzero", problem, HW, time_limit=5, seed=0, options={"leaf": "mixed", "leaf_steps": -1})


@pytest.mark.parametrize("leaf_value", ["network", "reference"])
def test_value_leaves_same_seed_same_answer(leaf_value):
    problem = _problem(80, seed=5)
    opts = {"leaf": "value", "leaf_value": leaf_value, "simulations": 6}
    a = run_solver("muzero", problem, HW, time_limit=120, seed=3, options=opts)
    b = run_solver("muzero", problem, HW, time_limit=120, seed=3, options=opts)
    assert a.valid and b.valid
    assert a.offsets == b.offsets and a.objective == b.objective
    assert a.stats["leaf"] == "value" and a.stats["leaf_value"] == leaf_value
    assert a.stats["leaf_calls"] > 0 and a.stats["simulations"] == b.stats["simulations"]
    if leaf_value == "network":  # one pass per leaf gives the prior too: fewer prior asks than leaves
        assert a.stats["network_evaluations"] == a.stats["leaf_calls"] + a.stats["prior_calls"]
        assert a.stats["prior_calls"] < a.stats["leaf_calls"]


def test_network_value_pass_gives_the_policy_prior():
    from mallocgame.search.muzero.guide import NetworkPrior
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.search.muzero.value import NetworkValue
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    game = _branching_state(Game(_problem(), HW, GameConfig(**fields)))
    y, prior = NetworkValue(net)(game)
    assert np.isfinite(y)
    np.testing.assert_allclose(prior, NetworkPrior(net)(game, game.legal_actions()), rtol=1e-5, atol=1e-6)


def test_a_value_leaf_steps_the_game_once_where_a_rollout_plays_to_the_end(monkeypatch):
    """Why value leaves run far more simulations: a simulation with a value leaf steps the game once (its new
    child), one with a rollout leaf plays on to the end of the episode (O(n) steps). The simulations per second
    themselves are measured by the equal-time experiment (docs/results.md, "muzero's defaults"), not here."""
    steps = {}
    for leaf in ("rollout", "value"):
        game = _branching_state(Game(_problem(), HW, GAME))
        search = UCTSearch(MCTSConfig(simulations=1, leaf=leaf), np.random.default_rng(0),
                           leaf_value=reference_value if leaf == "value" else None)
        search.set_reference(Game(_problem(), HW, GAME))
        count = [0]
        step, rollout = type(game).step, type(game).greedy_rollout

        def counting(self, action, _step=step, _count=count):
            _count[0] += 1
            return _step(self, action)

        def counting_rollout(self, stop_step=math.inf, _rollout=rollout, _count=count):  # one call, many steps
            before = self.steps
            total = _rollout(self, stop_step)
            _count[0] += self.steps - before
            return total
        monkeypatch.setattr(type(game), "step", counting)
        monkeypatch.setattr(type(game), "greedy_rollout", counting_rollout)
        search.simulate(Node(), game, math.inf, _empty_best())
        monkeypatch.setattr(type(game), "step", step)
        monkeypatch.setattr(type(game), "greedy_rollout", rollout)
        steps[leaf] = count[0]
    left = len(_problem().buffers)  # an upper bound on the episode's steps from here
    assert steps["value"] == 1 and 10 < steps["rollout"] <= 2 * left, steps


def test_auto_leaf_plays_rollouts_where_the_time_affords_them_and_mixed_leaves_where_not():
    from mallocgame.search.uct import auto_leaf

    cfg = MCTSConfig(leaf="auto", simulations=10**9)  # equal wall time: the time decides
    # 1,000-step episode at 0.1 ms a step: a rollout ~50 ms; 10 s over 500 moves is 20 ms a move
    assert auto_leaf(cfg, 1e-4, 1_000, 500, 10.0) == "mixed"
    # the same game with 100x the time: 2 s a move, 40 rollouts
    assert auto_leaf(cfg, 1e-4, 1_000, 500, 1_000.0) == "rollout"
    # a simulation budget below auto_simulations is what must fit: 4 rollouts of 50 ms in 0.2 s a move
    assert auto_leaf(MCTSConfig(leaf="auto", simulations=4), 1e-4, 1_000, 500, 100.0) == "rollout"
    assert auto_leaf(cfg, 1e-4, 1_000, 500, math.inf) == "rollout"  # no deadline


@pytest.mark.parametrize("n, limit, played", [(150, math.inf, "rollout"), (400, 3.0, "mixed")])
def test_auto_leaf_in_the_prefetch_search(monkeypatch, n, limit, played):
    """A prefetch game: with a simulation budget and time to spare rollouts; at 3 s for a 400-buffer program on
    the Python engine (a rollout ~15 ms, ~4 ms a move; the compiled game's rollouts are cheap enough to play)
    mixed leaves; a valid answer either way, and the same seed gives the same answer when the budget is
    simulations."""
    monkeypatch.setenv("MALLOCGAME_ENGINE", "python")
    problem = layered_network(n, seed=7, capacity_fraction=0.3).replace(mode="prefetch")
    if math.isinf(limit):
        opts = {"prior": "uniform", "leaf": "auto", "simulations": 2}
        a = run_solver("muzero", problem, HW, time_limit=600, seed=1, options=opts)
        b = run_solver("muzero", problem, HW, time_limit=600, seed=1, options=opts)
        assert a.valid and b.valid and a.objective == b.objective
        # the time limit of 600 s affords 2 rollouts a move here, so the search played them
        assert a.stats["leaf_played"] == played and a.stats["leaf_calls"] == 0
    else:
        rep = run_solver("muzero", problem, HW, time_limit=limit, seed=1, options={"simulations": 10**9})
        assert rep.valid
        assert rep.stats["leaf_played"] == played and rep.stats["leaf_calls"] > 0
        assert rep.stats["leaf"] == "auto" and rep.stats["leaf_steps"] == 64  # prefetch mode's defaults


def test_prefetch_default_at_a_simulation_budget_with_time_to_spare_is_mcts():
    """Where the time affords the rollouts (a simulation budget, a generous limit) prefetch mode's default leaf,
    auto, plays them: the default muzero (uniform prior there) is then mcts, answer for answer."""
    problem = layered_network(60, seed=11, capacity_fraction=0.3).replace(mode="prefetch")
    mcts = run_solver("mcts", problem, HW, time_limit=600, seed=4, options={"simulations": 3})
    default = run_solver("muzero", problem, HW, time_limit=600, seed=4, options={"simulations": 3})
    assert mcts.valid and default.valid
    assert default.stats["leaf"] == "auto" and default.stats["leaf_played"] == "rollout"
    assert default.objective == mcts.objective and default.stats["simulations"] == mcts.stats["simulations"]


def test_label_states_labels_a_given_problem_with_the_true_relative_returns():
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.search.muzero.value import label_states
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    problem = _problem(60, seed=9)
    x, y = label_states(problem, HW, net, fields, np.random.default_rng(0), states=4)
    assert x.shape == (len(y), net.value_head.w1.shape[0]) and len(y) >= 4
    again = label_states(problem, HW, net, fields, np.random.default_rng(0), states=4)
    np.testing.assert_array_equal(again[1], y)  # the same seed labels the same states
    assert np.isfinite(y).all() and (y != 0).any()  # children off the greedy path differ from the reference
