"""MuZero n-step value targets from the guided search's own moves (search/muzero/nstep.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero import nstep
from mallocgame.search.muzero.guide import NetworkPrior
from mallocgame.search.muzero.problems import Curriculum
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import label_states
from mallocgame.search.uct import MCTSConfig, UCTSearch, greedy_profile
from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, VALUE_CHECKPOINT

HW = PRESETS["tpuv4i"]
CFG = MCTSConfig(simulations=4, exploration=1.0, commit="max", guided="untried-uct", prior_power=2.0)


@pytest.fixture(scope="module")
def nets():
    value_net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    prior_net, _ = load_agent_network(str(DEFAULT_CHECKPOINT))
    return prior_net, value_net, fields


def _problem(n=60, seed=9, capacity=0.3):
    return layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="map")


def test_nstep_target_is_the_rewards_then_the_root_value_of_the_first_searched_move_n_steps_on():
    # searched moves at steps 0, 1, 3 and 6 (2, 4 and 5 forced); the episode ends at step 8 with return 1.0
    record = nstep.SearchRecord(step=np.array([0, 1, 3, 6]), returns=np.array([0.0, 0.1, 0.4, 0.7]),
                                values=np.array([0.9, 0.8, 0.5, 0.25]), best=np.array([1.0, 0.95, 0.7, 0.3]),
                                end_step=8, end_return=1.0)
    start = np.array([0.0, 0.1, 0.4, 0.7])
    at = np.array([0, 1, 3, 6])
    # n = 2: t=0 -> rewards 0.4 (steps 0..2) + v(3) 0.5; t=1 -> 0.3 + v(3); t=3 -> 0.3 + v(6); t=6 -> to the end 0.3
    np.testing.assert_allclose(nstep.nstep_targets(record, at, start, 2), [0.9, 0.8, 0.55, 0.3])
    np.testing.assert_allclose(nstep.nstep_targets(record, at, start, 2, bootstrap="best"), [1.1, 1.0, 0.6, 0.3])
    np.testing.assert_allclose(nstep.nstep_targets(record, at, start, 1), [0.9, 0.8, 0.55, 0.3])  # 1 -> 3: forced 2
    np.testing.assert_allclose(nstep.nstep_targets(record, at, start, 100), [1.0, 0.9, 0.6, 0.3])  # Monte Carlo
    with pytest.raises(ValueError):
        nstep.nstep_targets(record, at, start, 0)


def _trace(problem, prior_net, fields, cfg, seed):
    """The search's moves as search_from plays them, independently summed per state: for every searched step its
    return so far and root mean; and the episode's end."""
    game = Game(problem, HW, GameConfig(**fields))
    to_go, scale = greedy_profile(game)
    rng = np.random.default_rng(seed)
    rng.choice(len(to_go) - 1, size=min(6, len(to_go) - 1), replace=False)  # label_game's picks come first
    trace = []
    nstep.search_from(game, NetworkPrior(prior_net), cfg, rng.spawn(1)[0],
                      on_search=lambda s, root: trace.append((s.steps, s.total_reward(), root.value_sum / root.visits)))
    return trace, game.steps, game.total_reward(), to_go, scale


def test_a_game_states_target_is_the_hand_summed_nstep_return_of_the_searchs_own_moves(nets):
    prior_net, value_net, fields = nets
    problem = _problem()
    rows: dict = {}
    x, y = nstep.label_game(problem, HW, prior_net, value_net, fields, CFG, np.random.default_rng(5), n=3, states=6,
                            rows=rows)
    trace, end_step, end_return, to_go, scale = _trace(problem, prior_net, fields, CFG, 5)
    assert len(y) >= 3 and x.shape == (len(y), value_net.value_head.w1.shape[0])
    assert (rows["source"] == 0).all()
    for step, target, target_1 in zip(rows["step"], y, rows["y_n1"]):
        for n, got in ((3, target), (1, target_1)):
            here = next(r for s, r, _ in trace if s == step)
            later = [(r, v) for s, r, v in trace if s >= step + n]
            z = (later[0][0] + later[0][1] if later else end_return) - here
            assert got == pytest.approx(100.0 * (z - to_go[step]) / scale, abs=1e-4)
    again = nstep.label_game(problem, HW, prior_net, value_net, fields, CFG, np.random.default_rng(5), n=3, states=6)
    np.testing.assert_array_equal(again[1], y)  # the same seed, the same targets
    np.testing.assert_array_equal(again[0], x)


def test_reanalysed_states_are_the_leaves_label_states_labels_and_their_targets_are_deterministic(nets):
    prior_net, value_net, fields = nets
    problem = _problem(50, seed=4)
    rows: dict = {}
    x, y = nstep.label_reanalysed(problem, HW, prior_net, value_net, fields, CFG, np.random.default_rng(2), n=2,
                                  states=3, rows=rows)
    xg, yg = label_states(problem, HW, value_net, fields, np.random.default_rng(2), states=3)
    np.testing.assert_array_equal(x, xg)  # the same walk, the same children
    np.testing.assert_allclose(rows["y_greedy"], yg, atol=1e-5)
    assert (rows["source"] == 2).all() and np.isfinite(y).all()
    again = nstep.label_reanalysed(problem, HW, prior_net, value_net, fields, CFG, np.random.default_rng(2), n=2,
                                   states=3)
    np.testing.assert_array_equal(again[1], y)


def test_generation_resumes_where_it_stopped_without_duplicating(nets, tmp_path):
    prior_net, value_net, fields = nets
    curriculum = Curriculum(min_size=30, max_size=40)
    whole, parts = tmp_path / "whole.npz", tmp_path / "parts.npz"

    def run(path, problems):
        return nstep.generate(str(path), prior_net, value_net, fields, curriculum, CFG, seed=1, seconds=60,
                              n=2, states=2, problems=problems)

    assert run(whole, 3) == 3
    assert run(parts, 1) == 1
    assert run(parts, 3) == 3  # continued: problems 1 and 2 only
    a, b = np.load(whole), np.load(parts)
    assert set(a.files) == set(b.files) >= set(nstep.COLUMNS)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])
    assert sorted(set(b["problem"].tolist())) == [0, 1, 2]


def test_after_search_sees_every_searched_move_once_before_its_commitment(nets):
    prior_net, _, fields = nets
    game = Game(_problem(40, seed=2), HW, GameConfig(**fields))
    seen = []

    def after_search(state, root):
        seen.append((state.steps, root.visits))

    result = UCTSearch(CFG, np.random.default_rng(0), prior=NetworkPrior(prior_net)).run(
        game, budget=Budget.start(float("inf")), after_search=after_search)
    assert len(seen) == result.searched_moves > 0
    steps = [s for s, _ in seen]
    assert steps == sorted(set(steps))  # once per move, in order
    assert all(visits >= CFG.simulations for _, visits in seen)  # after the move's simulations
