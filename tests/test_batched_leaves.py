"""Batched value leaves (issue 40 item 2): one network pass for a group of leaves, the same numbers as one by one."""

from __future__ import annotations

import math

import numpy as np

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import NetworkValue, reference_value
from mallocgame.search.uct import Episode, MCTSConfig, Node, UCTSearch
from mallocgame.solvers.muzero import VALUE_CHECKPOINT

HW = PRESETS["tpuv4i"]


def _problem(n=60, seed=4, capacity=0.3):
    return layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="map")


def _states(count=24):
    """Game states of the value network's game along a walk that leaves the greedy path now and then."""
    net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    game = Game(_problem(), HW, GameConfig(**fields))
    rng = np.random.default_rng(0)
    states = []
    while not game.done and len(states) < count:
        legal = game.legal_actions()
        if len(legal) > 1:
            states.append(game.clone())
        game.step(int(legal[rng.integers(len(legal))]) if rng.random() < 0.3 else game.greedy_action())
    return net, states


def test_a_batched_pass_gives_every_example_what_its_own_pass_gives():
    net, states = _states()
    value = NetworkValue(net)
    one_by_one = [value(g) for g in states]
    batched = value.batch(states)
    assert len(batched) == len(states) and value.calls == 2 * len(states) and value.passes == len(states) + 1
    for (y1, p1), (y2, p2) in zip(one_by_one, batched):
        assert abs(y1 - y2) <= 1e-4 * max(1.0, abs(y1))
        np.testing.assert_allclose(p1, p2, rtol=1e-4, atol=1e-6)
    (alone,) = value.batch(states[:1])  # a group of one: the unbatched pass, the same numbers
    assert alone[0] == one_by_one[0][0] and value.passes == len(states) + 2


def test_evaluate_batch_matches_evaluate_on_every_action_slot():
    """Logits of the illegal (empty) slots too: the batch computes one empty slot per example for all of them."""
    net, states = _states(8)
    obs = [g.observation() for g in states]
    from mallocgame.search.muzero.guide import input_vector

    vectors = np.asarray([input_vector(g, o, net.features) for g, o in zip(states, obs)], np.float32)
    actions = np.asarray([o.actions for o in obs], np.float32)
    masks = np.asarray([o.mask for o in obs], bool)
    assert (~masks).any()  # the states have empty slots, the case the batch shortcuts
    logits, values = net.evaluate_batch(vectors, actions, masks)
    for i in range(len(states)):
        lg, v = net.evaluate(vectors[i], actions[i], masks[i])
        np.testing.assert_allclose(logits[i], lg, rtol=1e-4, atol=1e-4)
        assert abs(values[i] - v) <= 1e-4 * max(1.0, abs(v))


class _Recording:
    """A leaf evaluator with a batch method that records its groups (y = 0, no prior: the reference)."""

    def __init__(self):
        self.groups = []

    def __call__(self, game):
        return reference_value(game)

    def batch(self, games):
        self.groups.append([(g.steps, tuple(g.offsets().tolist())) for g in games])
        return [reference_value(g) for g in games]


def test_a_group_of_descents_reaches_distinct_leaves_and_leaves_no_virtual_visit_behind():
    game = Game(_problem(), HW, GameConfig(variant="order", k=16, order="xla"))
    while len(game.legal_actions()) < 2:
        game.step(game.greedy_action())
    recorder = _Recording()
    search = UCTSearch(MCTSConfig(leaf="value", leaf_batch=6, simulations=12), np.random.default_rng(1),
                       leaf_value=recorder)
    search.set_reference(game)
    root = Node()
    best = search.simulate_batch(root, game, math.inf, Episode(-math.inf, np.zeros(0, np.int64), ""), 6)
    assert len(recorder.groups) == 1 and len(recorder.groups[0]) == 6
    leaves = set(recorder.groups[0])  # a state: its step and its placement so far
    assert len(leaves) == 6  # virtual visits sent each descent of the group to a new leaf
    assert root.visits == 6 and sum(c.visits for c in root.children.values()) == 6  # real visits only
    assert search.leaf_calls == 6 and best.value == -math.inf  # no descent ended the episode


def test_the_batched_search_is_the_same_for_the_same_seed_and_values_leaves_in_groups():
    problem = _problem(120, seed=7)
    opts = {"leaf": "value", "simulations": 16, "leaf_batch": 8}
    a = run_solver("muzero", problem, HW, time_limit=120, seed=3, options=opts)
    b = run_solver("muzero", problem, HW, time_limit=120, seed=3, options=opts)
    assert a.valid and b.valid
    assert a.offsets == b.offsets and a.objective == b.objective
    assert a.stats["leaf_calls"] > 0 and a.stats["simulations"] == b.stats["simulations"]
    assert a.stats["leaf_passes"] < a.stats["leaf_calls"] / 2  # groups of up to 8 leaves per pass
    one = run_solver("muzero", problem, HW, time_limit=120, seed=3, options={**opts, "leaf_batch": 1})
    assert one.valid and one.stats["leaf_passes"] == one.stats["leaf_calls"]


def test_auto_plays_rollouts_where_a_value_leaf_costs_as_much_as_the_rollout_it_replaces():
    from mallocgame.search.uct import auto_leaf

    cfg = MCTSConfig(leaf="auto", simulations=10**9, leaf_steps=0)
    # 10,000 steps at 0.2 us: a rollout ~1 ms; 1 s over 5,000 moves affords none, a 0.2 ms leaf five
    assert auto_leaf(cfg, 2e-7, 10_000, 5_000, 1.0, leaf_cost=2e-4) == "mixed"
    # the same time per move, but a leaf costs 2 ms: more than the rollout it would replace
    assert auto_leaf(cfg, 2e-7, 10_000, 5_000, 1.0, leaf_cost=2e-3) == "rollout"


def test_a_group_is_no_larger_than_the_time_left_affords():
    search = UCTSearch(MCTSConfig(leaf="value", leaf_batch=16), np.random.default_rng(0), leaf_value=_Recording())
    assert search._affordable_group(0.01) == 16  # nothing measured yet: a full group
    search._batch_seconds, search._batch_simulations = 1.0, 10  # 0.1 s a simulation
    assert search._affordable_group(0.35) == 3 and search._affordable_group(0.0) == 1


def test_auto_in_map_mode_measures_both_costs_and_says_what_it_played():
    rep = run_solver("muzero", _problem(150, seed=2), HW, time_limit=60, seed=1,
                     options={"leaf": "auto", "simulations": 4})
    assert rep.valid and rep.stats["leaf_played"] == "rollout"  # 150 buffers: rollouts are cheap
    assert rep.stats["leaf_cost_us"] > 0 and rep.stats["rollout_cost_us"] > 0


def test_auto_in_map_mode_values_its_leaves_at_once_so_one_pass_gives_the_prior_too():
    rep = run_solver("muzero", _problem(150, seed=2), HW, time_limit=60, seed=1, options={"leaf": "auto"})
    assert rep.valid and rep.stats["leaf_steps"] == 0
    prefetch = run_solver("muzero", _problem(40, seed=2).replace(mode="prefetch"), HW, time_limit=60, seed=1,
                          options={"simulations": 2})
    assert prefetch.valid and prefetch.stats["leaf_steps"] == 64  # prefetch mode's auto keeps its steps


def test_the_input_vectors_of_a_group_are_each_states_own():
    from mallocgame.search.muzero import encoder

    net, states = _states(12)
    done = states[0].clone()
    while not done.done:
        done.step(done.greedy_action())
    games = states + [done]  # a finished game's vector too (zeros past the observation)
    obs = [g.observation() for g in games]
    graph_net = _graph_network()  # encoder/3's vectors read its learned encodings
    for features in encoder.NAMES:
        with_net = graph_net if features == encoder.NAME_GRAPH else None
        one_by_one = np.asarray([encoder.network_vector(g, o, features, with_net) for g, o in zip(games, obs)])
        np.testing.assert_allclose(encoder.network_vectors(games, obs, features, with_net), one_by_one,
                                   rtol=1e-5, atol=1e-6)


def _graph_network():
    """A seeded encoder/3 network's numpy copy (fresh weights, graph encoder included)."""
    import torch

    from mallocgame.search.game import GameConfig, observation_dims
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import GAME_FIELDS, _graph_fields
    from mallocgame.search.muzero.inference import NumpyNet
    from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig

    dims = observation_dims(GameConfig(**GAME_FIELDS["map"]))
    config = NetworkConfig(dims["obs_dim"] + encoder.extra_inputs(encoder.NAME_GRAPH), dims["action_features"],
                           dims["num_actions"], **_graph_fields(encoder.NAME_GRAPH))
    return NumpyNet.from_torch(MuZeroNet(config, torch.Generator().manual_seed(0)).eval(), encoder.NAME_GRAPH)
