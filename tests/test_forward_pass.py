"""The network's compiled forward pass (search/muzero/_forward.pxi, ``mallocgame._native.ForwardNet``) against the
numpy reference (``search.muzero.inference.NumpyNet``): the same logits and values to float32 rounding, on random
inputs and on real leaf inputs, for every shipped map checkpoint; and the search's evaluators run it."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame._native import ForwardNet
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import NativeOrderGame
from mallocgame.search.muzero import encoder
from mallocgame.search.muzero.guide import NetworkPrior
from mallocgame.search.muzero.inference import NumpyNet, compiled_forward
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import NetworkValue
from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, GRAPH_CHECKPOINT, VALUE_CHECKPOINT

CHECKPOINTS = {"default": DEFAULT_CHECKPOINT, "value": VALUE_CHECKPOINT, "encoder3": GRAPH_CHECKPOINT}
RTOL, ATOL = 1e-5, 1e-5  # float32 rounding: the sums run in another order than numpy's


def random_inputs(net: NumpyNet, rng: np.random.Generator, batch: int, slots: int = 17):
    """Inputs shaped as the order game's: a few legal slots with features, an illegal slot with features now and
    then, the slow slot (last) legal or not, the rest empty (zero features, illegal); one example with every
    slot legal."""
    forward = compiled_forward(net)
    vectors = rng.normal(size=(batch, forward.obs_dim)).astype(np.float32)
    vectors[:, ::3] = 0.0  # zero inputs skip their rows of a layer: some of each
    actions = np.zeros((batch, slots, forward.action_features), np.float32)
    masks = np.zeros((batch, slots), bool)
    for b in range(batch):
        legal = rng.choice(slots - 1, int(rng.integers(1, 4)), replace=False)
        masks[b, legal] = True
        masks[b, -1] = rng.random() < 0.7
        actions[b, legal] = rng.normal(size=(len(legal), actions.shape[2]))
        actions[b, int(rng.integers(slots))] = rng.normal(size=actions.shape[2])  # maybe illegal, with features
    masks[0] = True
    actions[0] = rng.normal(size=actions.shape[1:])
    return vectors, actions, masks


def real_inputs(net: NumpyNet, fields: dict, count: int = 48):
    """The leaf inputs of ``count`` states with a choice of a walk on a generated program (the network's game)."""
    problem = layered_network(160, seed=5)
    data = GameData(problem, PRESETS["tpuv4i"])
    if net.features == encoder.NAME_RELAX:
        encoder.relaxation_set(data)
    game = NativeOrderGame(problem, PRESETS["tpuv4i"], GameConfig(**fields), data=data)
    rng = np.random.default_rng(2)
    states = []
    while not game.done and len(states) < count:
        legal = game.legal_actions()
        if len(legal) > 1:
            states.append(game.clone())
        game.step(int(rng.choice(legal)) if rng.random() < 0.3 else game.greedy_action())
    assert len(states) >= 16
    return states, encoder.leaf_inputs(states, net.features, net)


def assert_same_pass(net: NumpyNet, vectors, actions, masks):
    """Every pass the search asks for, compiled and numpy, on these inputs."""
    forward = compiled_forward(net)
    logits, values = forward.evaluate_batch(vectors, actions, masks)
    want_logits, want_values = net.evaluate_batch(vectors, actions, masks)
    assert logits.shape == want_logits.shape and logits.dtype == np.float32
    np.testing.assert_allclose(logits, want_logits, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(values, want_values, rtol=RTOL, atol=ATOL)
    for b in range(len(vectors)):
        got = forward.policy_logits(vectors[b], actions[b], masks[b])
        want = net.policy_logits(vectors[b], actions[b], masks[b])
        assert np.array_equal(np.isnan(got), ~masks[b])  # NaN exactly at the illegal actions, as numpy's
        np.testing.assert_allclose(got[masks[b]], want[masks[b]], rtol=RTOL, atol=ATOL)
        one_logits, one_value = forward.evaluate(vectors[b], actions[b], masks[b])
        want_one_logits, want_one_value = net.evaluate(vectors[b], actions[b], masks[b])
        np.testing.assert_allclose(one_logits, want_one_logits, rtol=RTOL, atol=ATOL)
        assert one_value == pytest.approx(want_one_value, rel=RTOL, abs=ATOL)
        legal = np.flatnonzero(masks[b])
        prior = forward.prior(vectors[b], actions[b], masks[b], legal)
        z = np.exp(want[legal].astype(np.float64) - want[legal].max())
        np.testing.assert_allclose(prior, z / z.sum(), rtol=1e-4, atol=1e-7)
        assert prior.sum() == pytest.approx(1.0) and np.argmax(prior) == np.argmax(z)


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_compiled_pass_equals_numpy_on_random_inputs(name):
    net, _ = load_agent_network(str(CHECKPOINTS[name]))
    assert_same_pass(net, *random_inputs(net, np.random.default_rng(7), 24))


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_compiled_pass_equals_numpy_on_real_leaf_inputs(name):
    net, fields = load_agent_network(str(CHECKPOINTS[name]))
    states, inputs = real_inputs(net, fields)
    assert_same_pass(net, *inputs)
    # the search's evaluators run the compiled pass and give numpy's priors and values
    value, reference = NetworkValue(net), NetworkValue(net)
    reference.forward = net
    assert isinstance(value.forward, ForwardNet)
    for (got_value, got_prior), (want_value, want_prior) in zip(value.batch(states[:16]), reference.batch(states[:16])):
        assert got_value == pytest.approx(want_value, rel=RTOL, abs=ATOL)
        np.testing.assert_allclose(got_prior, want_prior, rtol=1e-4, atol=1e-7)
    prior = NetworkPrior(net)
    assert isinstance(prior.forward, ForwardNet)
    numpy_prior = NetworkPrior(net)
    numpy_prior.forward = None
    for game in states[:8]:
        legal = game.legal_actions()
        got, want = prior(game, legal), numpy_prior(game, legal)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7)
        assert np.argmax(got) == np.argmax(want)


def with_context_head(net: NumpyNet, rng: np.random.Generator, context_dim: int = 4) -> NumpyNet:
    """``net`` with a random ``context_value`` head over the value head's input and ``context_dim`` features."""
    state = {}
    for head in NumpyNet.HEADS:
        mlp = getattr(net, head)  # _MLP keeps the weights transposed: [in, out]
        state.update({f"{head}.0.weight": mlp.w1.T, f"{head}.0.bias": mlp.b1,
                      f"{head}.2.weight": mlp.w2.T, f"{head}.2.bias": mlp.b2})
    width = net.value_head.w1.shape[0] + context_dim
    state.update({"context_value.0.weight": rng.normal(size=(32, width)).astype(np.float32) / 8,
                  "context_value.0.bias": rng.normal(size=32).astype(np.float32),
                  "context_value.2.weight": rng.normal(size=(1, 32)).astype(np.float32),
                  "context_value.2.bias": np.zeros(1, np.float32)})
    out = NumpyNet(state, net.value_scale)
    out.features = net.features
    return out


def test_compiled_context_value_head_equals_numpy():
    rng = np.random.default_rng(3)
    base, _ = load_agent_network(str(VALUE_CHECKPOINT))
    net = with_context_head(base, rng)
    vectors, actions, masks = random_inputs(net, rng, 12)
    contexts = rng.normal(size=(12, 4)).astype(np.float32)
    forward = compiled_forward(net)
    assert forward.has_context_value and forward.context_dim == 4
    logits, values = forward.evaluate_batch(vectors, actions, masks, contexts)
    want_logits, want_values = net.evaluate_batch(vectors, actions, masks, contexts)
    np.testing.assert_allclose(logits, want_logits, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(values, want_values, rtol=RTOL, atol=ATOL)
    assert not np.allclose(values, forward.evaluate_batch(vectors, actions, masks)[1])  # the context head was read
    assert forward.evaluate(vectors[1], actions[1], masks[1], contexts[1])[1] == pytest.approx(
        net.evaluate(vectors[1], actions[1], masks[1], contexts[1])[1], rel=RTOL, abs=ATOL)
    with pytest.raises(ValueError, match="contexts"):
        forward.evaluate_batch(vectors, actions, masks, contexts[:, :3])


def test_compiled_pass_is_kept_per_network_and_rebuilt_when_a_layer_is_replaced():
    net, _ = load_agent_network(str(VALUE_CHECKPOINT))
    first = compiled_forward(net)
    assert compiled_forward(net) is first
    net.context_value = with_context_head(net, np.random.default_rng(1)).context_value
    assert compiled_forward(net) is not first and compiled_forward(net).has_context_value
    assert compiled_forward(object()) is None  # a stand-in network: the search calls its own methods


def test_compiled_pass_refuses_inputs_of_other_shapes():
    net, _ = load_agent_network(str(VALUE_CHECKPOINT))
    forward = compiled_forward(net)
    vectors, actions, masks = random_inputs(net, np.random.default_rng(0), 2)
    with pytest.raises(ValueError, match="vector"):
        forward.evaluate_batch(vectors[:, 1:], actions, masks)
    with pytest.raises(ValueError, match="batch or action"):
        forward.evaluate_batch(vectors, actions, masks[:, 1:])
    with pytest.raises(ValueError, match="mask"):
        forward.policy_logits(vectors[0], actions[0], masks[0, 1:])


def test_two_threads_calling_one_network_get_the_reference_answers():
    # the scratch buffers are the network's: safe while each example's pass holds the GIL (ForwardNet's docstring)
    import sys
    import threading

    net, _ = load_agent_network(str(VALUE_CHECKPOINT))
    forward = ForwardNet(net)  # a network of this test's own
    rng = np.random.default_rng(11)
    inputs = [random_inputs(net, rng, 6, slots) for slots in (9, 40)]  # other sizes: other scratch lengths
    want = []
    for vectors, actions, masks in inputs:
        logits, values = forward.evaluate_batch(vectors, actions, masks)
        want_logits, want_values = net.evaluate_batch(vectors, actions, masks)
        np.testing.assert_allclose(logits, want_logits, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(values, want_values, rtol=RTOL, atol=ATOL)
        want.append((logits, values, [forward.policy_logits(vectors[b], actions[b], masks[b]) for b in range(6)]))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as the interpreter lets them
    start, wrong = threading.Barrier(2), []

    def calls(k: int) -> None:
        vectors, actions, masks = inputs[k]
        logits, values, one = want[k]
        start.wait()
        for _ in range(300):
            got_logits, got_values = forward.evaluate_batch(vectors, actions, masks)
            b = int(rng.integers(6)) if k else 0
            got_one = forward.policy_logits(vectors[b], actions[b], masks[b])
            if not (np.array_equal(got_logits, logits) and np.array_equal(got_values, values)
                    and np.array_equal(got_one, one[b], equal_nan=True)):
                wrong.append(k)
                return

    try:
        threads = [threading.Thread(target=calls, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not wrong, f"threads {wrong} read another thread's pass"
