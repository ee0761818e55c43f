"""The order game's compiled leaf inputs (search/_order_leaf.pxi): a batch of native states' observations and network
input vectors against the Python reference (OrderGame.observation and search/muzero/encoder.py), float for float."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.problem import intervals
from mallocgame.problem.intervals import OverlapIndex
from mallocgame.search import game_order
from mallocgame.search.game import GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import NativeOrderGame, OrderGame
from mallocgame.search.muzero import encoder

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]

PROGRAMS = {
    "layered-map": lambda: (layered_network(120, seed=3), HW, None),  # ops: the roofline's placement values
    "layered-pack": lambda: (layered_network(100, seed=4), HW, "pack"),
    "intervals-map": lambda: (random_intervals(150, seed=5, max_size=16, with_benefit=True).replace(capacity=60), UNIT,
                              None),  # additive benefits
    "intervals-pack": lambda: (packed_instance(120, seed=6, capacity=64, horizon=50)[0], UNIT, None),
    "intervals-pack-nocap": lambda: (packed_instance(120, seed=7, capacity=64, horizon=50)[0].replace(capacity=None),
                                     UNIT, None),  # the top hole is unbounded: min(top, scale) is the scale
}


def walk(problem, hw, mode, config: GameConfig, seed: int, *, past_budget: bool = False, csr: bool = False):
    """The Python game and the native game played with the same moves (greedy, or random with probability 0.4)
    to the end: every state of both along the way, the done state last."""
    with pytest.MonkeyPatch.context() as patch:
        if past_budget:  # no per-position table: the native decisions query the index's arrays
            patch.setattr(game_order._DecisionOrder, "PAIR_BUDGET", -1)
        data = GameData(problem, hw, mode=mode)
        if csr:  # checkpoints every few starts, their sets as CSR rows: a query reads a set and the starts after it
            patch.setattr(intervals, "_SWEEP_CHECKPOINTS", 0)
            data.index = OverlapIndex(data.start, data.end, budget=50)
        ref, nat = OrderGame(problem, hw, config, data=data), NativeOrderGame(problem, hw, config, data=data)
    rng = np.random.default_rng(seed)
    refs, nats = [ref.clone()], [nat.clone()]
    while not ref.done:
        legal = ref.legal_actions()
        action = int(rng.choice(legal)) if rng.random() < 0.4 else ref.greedy_action()
        ref.step(action)
        nat.step(action)
        refs.append(ref.clone())
        nats.append(nat.clone())
    return data, refs, nats


def reference(refs, features: str, enc=None):
    """The Python's vectors, action features and masks of ``refs``, one state at a time."""
    obs = [g.observation() for g in refs]
    if not features:
        vectors = [o.as_vector() for o in obs]
    elif enc is None:
        vectors = [encoder.network_vector(g, o, features) for g, o in zip(refs, obs)]
    else:
        vectors = [encoder._vector(g, o, features, enc) for g, o in zip(refs, obs)]
    return (np.asarray(vectors, np.float32), np.asarray([o.actions for o in obs], np.float32),
            np.asarray([o.mask for o in obs], bool))


def assert_identical(got, want):
    for name, a, b in zip(("vectors", "actions", "masks"), got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b), (name, np.argwhere(a != b)[:5])


@pytest.mark.parametrize("features", ["", encoder.NAME, encoder.NAME_RELAX])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_leaf_inputs_equal_the_python_ones(name, features):
    """Every state of a walk (the done state included), in one batch and one at a time: the same float32 vectors,
    action features and masks as the Python observation and encoder, under k = 4 (holes past k cut) and 16."""
    problem, hw, mode = PROGRAMS[name]()
    for k, order, seed in ((4, "start", 1), (16, "xla", 2)):
        data, refs, nats = walk(problem, hw, mode, GameConfig(k=k, order=order), seed)
        assert refs[-1].done and not refs[0].done
        want = reference(refs, features)
        assert_identical(encoder.leaf_inputs(nats, features), want)
        for b in (0, len(nats) // 2, len(nats) - 1):
            assert_identical(encoder.leaf_inputs([nats[b]], features), tuple(x[b:b + 1] for x in want))
        if features:  # the batched Python reference agrees too
            obs = [g.observation() for g in refs]
            assert np.array_equal(encoder.network_vectors(refs, obs, features), want[0])


@pytest.mark.parametrize("csr", [False, True])
def test_compiled_leaf_inputs_past_the_pair_budget(csr):
    """Past the decision order's pair budget, and with an overlap index of few checkpoints (stored sets read, then
    the starts after them), the neighbours come from the same index query in the same order."""
    problem, hw, mode = PROGRAMS["layered-map"]()
    data, refs, nats = walk(problem, hw, mode, GameConfig(k=16, order="xla"), 5, past_budget=True, csr=csr)
    assert nats[0]._dec.cache is None
    assert_identical(encoder.leaf_inputs(nats, encoder.NAME_RELAX), reference(refs, encoder.NAME_RELAX))


def test_compiled_leaf_inputs_with_learned_encodings():
    """encoder/3: the per-buffer encodings are the network's (any float32 table); their mean over the undecided
    overlapping buffers is summed in float32 row by row, as numpy's mean does."""
    problem, hw, mode = PROGRAMS["layered-map"]()
    data, refs, nats = walk(problem, hw, mode, GameConfig(k=16, order="xla"), 6)
    enc = (np.random.default_rng(0).standard_normal((data.n, encoder.ENCODING)) * 100).astype(np.float32)
    chosen = encoder.relaxation_set(data)
    got = NativeOrderGame.leaf_inputs(nats, enc, chosen)
    assert_identical(got, reference(refs, encoder.NAME_GRAPH, enc))


def test_native_observation_is_the_compiled_one_and_states_of_two_problems_are_refused():
    problem, hw, mode = PROGRAMS["intervals-map"]()
    data, refs, nats = walk(problem, hw, mode, GameConfig(k=4), 7)
    for ref, nat in zip(refs[::7], nats[::7]):
        a, b = ref.observation(), nat.observation()
        for field in ("buffer", "profile", "actions", "upcoming", "progress", "mask"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == y.dtype and np.array_equal(x, y), field
    other = walk(*PROGRAMS["intervals-pack"](), GameConfig(k=4), 7)[2]
    with pytest.raises(ValueError, match="one problem, decision order and game shape"):
        NativeOrderGame.leaf_inputs([nats[0], other[0]])
    # the encoder's entry takes the Python path for mixed games (each on its own data), as before
    vectors, _, _ = encoder.leaf_inputs([refs[0], nats[1]], encoder.NAME)
    assert np.array_equal(vectors, reference([refs[0], refs[1]], encoder.NAME)[0])


@pytest.mark.parametrize("leaf", ["rollout", "value"])
def test_the_search_answers_the_same_on_either_engine(monkeypatch, leaf):
    """muzero in the network's own buffer order (start=game: the shipped network's prior at every node left;
    leaf=value: batched value leaves) at a fixed number of simulations and seed gives the same answer with the
    compiled leaf inputs and with the Python reference (MALLOCGAME_ENGINE=python)."""
    from mallocgame.engine.runner import run_solver

    problem = layered_network(60, seed=11)
    compiled_calls = []
    native_leaf_inputs = NativeOrderGame.leaf_inputs
    monkeypatch.setattr(NativeOrderGame, "leaf_inputs",
                        staticmethod(lambda games, *a: compiled_calls.append(len(games)) or native_leaf_inputs(games, *a)))
    answers = []
    for name in ("native", "python"):
        monkeypatch.setenv("MALLOCGAME_ENGINE", name)
        compiled_calls.clear()
        rep = run_solver("muzero", problem, HW, time_limit=60, seed=3, options={"simulations": 24, "leaf": leaf, "start": "game"})
        assert rep.valid
        assert bool(compiled_calls) == (name == "native")
        answers.append((rep.offsets, rep.objective, rep.stats.get("simulations"),
                        rep.stats.get("network_evaluations"), rep.stats.get("leaf_passes")))
    assert answers[0] == answers[1]
    assert answers[0][3] or answers[0][4]  # the network was asked


@pytest.mark.parametrize("upcoming, bins", [(0, 1), (7, 1500)])
def test_compiled_leaf_inputs_of_other_game_shapes(upcoming, bins):
    """No upcoming buffers and one profile bin, or many of each: the same shapes and floats as the Python's."""
    problem, hw, mode = PROGRAMS["intervals-map"]()
    data, refs, nats = walk(problem, hw, mode, GameConfig(k=2, upcoming=upcoming, profile_bins=bins), 8)
    assert_identical(encoder.leaf_inputs(nats, encoder.NAME_RELAX), reference(refs, encoder.NAME_RELAX))
