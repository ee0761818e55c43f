"""The graph encoder of features "encoder/3" (search/muzero/graph_encoder.py, networks.GraphEncoder): learned message
passing over the interference graph, the same in numpy (search) and torch (training), invariant to buffer order,
at any size, and started from the shipped encoder/2 network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.problem.intervals import max_live

GAME = {"variant": "order", "k": 16, "order": "xla"}


def _intervals(n=40, seed=2):
    p = random_intervals(n, seed=seed, with_benefit=True)
    return p.replace(capacity=int(max_live(p) * 0.4), mode="map"), PRESETS["unit"]


def _no_relaxation(monkeypatch):
    """The relaxation's fast set as empty: its MIP (seconds at 10k buffers) is not under test here, and its numbers
    are the same on both sides of every comparison."""
    from mallocgame.search.muzero import encoder

    monkeypatch.setattr(encoder, "relaxation_set", lambda data, time_limit=0.0: np.zeros(data.n, bool))


def _random_graph_network(seed=0):
    """A fresh encoder/3 network (random weights, graph encoder included) and its numpy copy."""
    from mallocgame.search.game import GameConfig, observation_dims
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import _graph_fields
    from mallocgame.search.muzero.inference import NumpyNet
    from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig

    dims = observation_dims(GameConfig(**GAME))
    config = NetworkConfig(dims["obs_dim"] + encoder.extra_inputs(encoder.NAME_GRAPH), dims["action_features"],
                           dims["num_actions"], **_graph_fields(encoder.NAME_GRAPH))
    net = MuZeroNet(config, torch.Generator().manual_seed(seed)).eval()
    with torch.no_grad():  # the default initialisation leaves many ReLUs of the encoder at zero: make it count
        for p in net.graph_encoder.parameters():
            p.mul_(3.0)
    return net, NumpyNet.from_torch(net, encoder.NAME_GRAPH)


def test_neighbour_sums_agree_across_the_graph_forms():
    """The sums over neighbours from the networkx graph (CSR of its edges) and from the clique path (prefix sums
    over runs) are those of the neighbour lists."""
    from mallocgame.problem.graph import CliquePath, GraphConflicts, interference_graph
    from mallocgame.search.muzero.graph_encoder import Neighbourhood

    problem, _ = _intervals(60, seed=4)
    graph = interference_graph(problem)
    h = np.random.default_rng(0).normal(size=(problem.n, 3))
    expected = np.array([h[sorted(graph.adj[i])].sum(0) if graph.degree[i] else np.zeros(3) for i in range(problem.n)])
    for form in (GraphConflicts(graph), CliquePath.of(problem)):
        near = Neighbourhood(form)
        np.testing.assert_allclose(near.sum(h), expected, atol=1e-9)
        np.testing.assert_array_equal(near.degree, [graph.degree[i] for i in range(problem.n)])


def test_the_graph_is_read_from_the_requests_facts():
    """Once the request's facts hold the networkx graph, the encoder reads its edges; the embeddings equal those
    from the clique path of a copy whose facts have no graph."""
    from mallocgame.engine.request import SolveRequest
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero.graph_encoder import base_features

    problem, hw = _intervals(50, seed=6)
    request = SolveRequest.of(problem, hw, time_limit=10)
    graph = request.facts.interference_graph
    _, neighbourhood = base_features(GameData(problem, hw))
    assert neighbourhood._csr is not None and len(neighbourhood._csr[1]) == 2 * graph.number_of_edges()
    _, numpy_net = _random_graph_network()
    from_graph = numpy_net.graph.embed(GameData(problem, hw))
    copy = problem.replace(name=problem.name + "-copy")  # its own facts: the clique path serves
    _, path_form = base_features(GameData(copy, hw))
    assert path_form._csr is None
    np.testing.assert_allclose(numpy_net.graph.embed(GameData(copy, hw)), from_graph, rtol=1e-5, atol=1e-5)


def test_numpy_inference_matches_the_torch_training_pass(monkeypatch):
    """The search's numpy vectors and logits equal what training computes in torch (sparse matmuls over the CSR
    adjacency, learned slots filled from the encoder's output) to 1e-5."""
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import ExpertConfig, _graph_record, _State, learned_inputs

    _no_relaxation(monkeypatch)
    problem, hw = _intervals(30, seed=3)
    net, numpy_net = _random_graph_network(seed=1)
    state = _State(ExpertConfig(features=encoder.NAME_GRAPH), net, GAME, np.random.default_rng(0))
    game = Game(problem, hw, GameConfig(**GAME))
    state.graphs[1] = _graph_record(game.data, GAME["order"])
    vectors, statics, where, actions, masks = [], [], [], [], []
    while not game.done:
        obs = game.observation()
        vectors.append(encoder.network_vector(game, obs, encoder.NAME_GRAPH, numpy_net))
        statics.append(encoder.static_vector(game, obs))
        where.append((game.current, game.steps))
        actions.append(np.asarray(obs.actions, np.float32)), masks.append(np.asarray(obs.mask, bool))
        game.step(game.greedy_action())
    state.replay.update(graph=[1] * len(where), buffer=[w[0] for w in where], steps=[w[1] for w in where])
    idx = np.arange(len(where))
    with torch.no_grad():
        trained = learned_inputs(state, idx, torch.from_numpy(np.stack(statics)))
        s, emb = net.initial(trained, torch.from_numpy(np.stack(actions)), torch.from_numpy(np.stack(masks)))
        logits = net.predict(s, emb)[0].numpy()
    vectors = np.stack(vectors)
    slots = encoder.learned_slots(trained.shape[1] - encoder.extra_inputs(encoder.NAME_GRAPH))
    assert np.abs(vectors[:, slots[0]]).max() > 0.1 and np.abs(vectors[:, slots[1]]).max() > 0.1  # not all zeros
    np.testing.assert_allclose(trained.numpy(), vectors, rtol=1e-5, atol=1e-5)
    for row, (v, a, m) in enumerate(zip(vectors, actions, masks)):
        np.testing.assert_allclose(numpy_net.policy_logits(v, a, m)[m], logits[row][m], rtol=1e-5, atol=1e-5)
    batched = encoder.network_vectors([game], [game.observation()], encoder.NAME_GRAPH, numpy_net)
    np.testing.assert_allclose(batched[0], encoder.network_vector(game, game.observation(), encoder.NAME_GRAPH,
                                                                  numpy_net), atol=1e-6)


def test_same_policy_for_the_same_buffer_under_a_renumbering():
    """Renumber the buffers: the graph encoder's embeddings follow the buffers, and the network's action
    probabilities at each decision are the same."""
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero.guide import NetworkPrior

    problem, hw = _intervals(40, seed=2)
    perm = np.random.default_rng(0).permutation(problem.n)
    shuffled = problem.replace(buffers=tuple(problem.buffers[i] for i in perm))
    _, numpy_net = _random_graph_network(seed=2)
    np.testing.assert_allclose(numpy_net.graph.embed(GameData(shuffled, hw)), numpy_net.graph.embed(GameData(problem, hw))[perm],
                               rtol=1e-5, atol=1e-6)
    prior = NetworkPrior(numpy_net)
    games = Game(problem, hw, GameConfig(**GAME)), Game(shuffled, hw, GameConfig(**GAME))
    compared = 0
    while not games[0].done:
        assert problem.buffers[games[0].current] == shuffled.buffers[games[1].current]  # the same buffer
        legal = [g.legal_actions() for g in games]
        np.testing.assert_array_equal(legal[0], legal[1])
        if len(legal[0]) > 1:
            np.testing.assert_allclose(prior(games[0], legal[0]), prior(games[1], legal[1]), rtol=1e-5, atol=1e-6)
            compared += 1
        action = games[0].greedy_action()
        for g in games:
            g.step(action)
    assert compared > 5


@pytest.mark.parametrize("n", [10, 10_000])
def test_the_same_weights_run_on_10_and_10k_buffers(n, monkeypatch):
    """Weights independent of the program's size: the embeddings of a 10k-buffer program come from the clique path
    (no edge list) and the prior plays its first decisions."""
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero.guide import NetworkPrior

    _no_relaxation(monkeypatch)
    p = random_intervals(n, seed=1, with_benefit=True)
    problem = p.replace(capacity=int(max_live(p) * 0.4), mode="map")
    _, numpy_net = _random_graph_network(seed=3)
    game = Game(problem, PRESETS["unit"], GameConfig(**GAME))
    h = numpy_net.graph.embed(game.data)
    assert h.shape == (n, 27) and np.isfinite(h).all() and h.std(0).max() > 0
    prior = NetworkPrior(numpy_net)
    asked = 0
    while not game.done and asked < 3:
        legal = game.legal_actions()
        if len(legal) > 1:
            p_legal = prior(game, legal)
            assert p_legal.shape == (len(legal),) and np.isclose(p_legal.sum(), 1.0)
            asked += 1
        game.step(game.greedy_action())
    assert asked > 0 or n == 10


def test_warm_start_from_the_shipped_encoder2_network_gives_its_policy_and_round_trips(tmp_path):
    """An encoder/3 network built from default.pt (graph encoder set to the fixed means) gives default.pt's logits;
    saved and read back (with and without torch) it gives them again."""
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import graph_network_from
    from mallocgame.search.muzero.guide import input_vector
    from mallocgame.search.muzero.inference import NumpyNet
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    payload = ckpt.load(str(DEFAULT_CHECKPOINT))
    assert payload["features"] == encoder.NAME_RELAX
    net = graph_network_from(payload, aux=True, seed=0)
    path = tmp_path / "g.pt"
    ckpt.atomic_save(dict(ckpt.model_only(payload), network=net.config.as_dict(), model=net.state_dict(),
                          features=encoder.NAME_GRAPH), str(path))
    parent = NumpyNet.from_torch(ckpt.network_from(payload), encoder.NAME_RELAX)
    child = NumpyNet.from_torch(net, encoder.NAME_GRAPH)
    reread, _ = load_inference(str(path))
    assert reread.features == encoder.NAME_GRAPH and reread.graph is not None
    problem, hw = layered_network(40, seed=3), PRESETS["tpuv4i"]
    game = Game(problem, hw, GameConfig(**GAME))
    checked = 0
    while not game.done and checked < 6:
        obs = game.observation()
        a, m = np.asarray(obs.actions, np.float32), np.asarray(obs.mask, bool)
        expected = parent.policy_logits(input_vector(game, obs, encoder.NAME_RELAX), a, m)[m]
        for numpy_net in (child, reread):
            got = numpy_net.policy_logits(input_vector(game, obs, encoder.NAME_GRAPH, numpy_net), a, m)[m]
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        checked += 1
        game.step(game.greedy_action())
    assert checked == 6


def test_expert_iteration_trains_the_graph_encoder_resumes_and_plays(tmp_path):
    """features encoder/3: training moves the graph encoder's weights, the checkpoint resumes exactly and the solver
    plays it (checkpoint=...)."""
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import ExpertConfig, resume, train
    from mallocgame.solvers.muzero import MuZeroSolver

    config = ExpertConfig(min_size=16, max_size=24, student_simulations=3, teacher_simulations=8, states_per_game=3,
                          updates_per_game=2, batch_size=8, features=encoder.NAME_GRAPH, exploration=10.0)
    out = tmp_path / "x.pt"
    state = train(str(out), config=config, time_limit=60, max_games=2)
    assert state.games == 2 and set(state.graphs) == {1, 2}
    fresh = train(str(tmp_path / "z.pt"), config=config, time_limit=60, max_games=0)
    moved = [not torch.equal(a, b) for a, b in zip(state.net.graph_encoder.parameters(),
                                                   fresh.net.graph_encoder.parameters())]
    assert any(moved)
    again = resume(str(out), time_limit=60, max_games=3)
    straight = train(str(tmp_path / "y.pt"), config=config, time_limit=60, max_games=3)
    for key, tensor in straight.net.state_dict().items():
        assert torch.equal(tensor, again.net.state_dict()[key]), key
    problem, hw = layered_network(25, seed=2), PRESETS["tpuv4i"]
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=0, simulations=3,
                                                  checkpoint=str(out.with_suffix(".g3.pt"))))
    assert s.stats["prior"] == "network" and s.stats["network_evaluations"] > 0


def test_the_shipped_graph_network_is_an_option_of_the_solver():
    """encoder3.pt reads features encoder/3 with a graph encoder, is not the default, and the solver plays it when
    given as checkpoint."""
    from mallocgame.search.muzero import encoder
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, GRAPH_CHECKPOINT, MuZeroSolver, load_agent_network

    net, game_fields = load_agent_network(str(GRAPH_CHECKPOINT))
    assert net.features == encoder.NAME_GRAPH and net.graph is not None and game_fields == GAME
    assert load_agent_network(str(DEFAULT_CHECKPOINT))[0].features == encoder.NAME_RELAX
    problem, hw = layered_network(25, seed=2), PRESETS["tpuv4i"]
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=0, simulations=3,
                                                  checkpoint=str(GRAPH_CHECKPOINT)))
    assert s.stats["prior"] == "network" and s.stats["network_evaluations"] > 0
