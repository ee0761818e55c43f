"""mallocMuZero: networks, search, training, checkpoints and determinism on a tiny stand-in game.

``KnapsackToy`` has the mallocGame interface (``search/game.py``) but is tiny: items in a
fixed order, one capacity; action j < k puts the current item in with j units of waste,
action k leaves it out (slow). Rewards are item values / total value, so returns lie in [0, 1].
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgame.engine.runner import run_solver  # noqa: E402
from mallocgame.search.game import Observation  # noqa: E402
from mallocgame.search.muzero import checkpoint as ckpt  # noqa: E402
from mallocgame.search.muzero.features import obs_arrays, obs_dims  # noqa: E402
from mallocgame.search.muzero.models import LearnedModel, NetworkEvaluator, SimulatorModel  # noqa: E402
from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig  # noqa: E402
from mallocgame.search.muzero.problems import Curriculum, Recipe  # noqa: E402
from mallocgame.search.muzero.search import Expansion, SearchConfig, considered_visit_schedule, run_search  # noqa: E402
from mallocgame.search.muzero.train import TrainConfig, loss, new_state, resume_state, train  # noqa: E402

K_TOY = 3


# The stand-in game emits the real game's observation type.
ToyObservation = Observation


class KnapsackToy:
    """Stand-in for ``mallocgame.search.game.Game`` (same methods and shapes; see the module docstring)."""

    def __init__(self, sizes, values, capacity):
        self.sizes, self.values, self.capacity = list(sizes), list(values), capacity
        self.num_actions = K_TOY + 1
        self.t, self.used, self._total = 0, 0, 0.0
        self._off = np.full(len(self.sizes), -1, np.int64)

    @property
    def done(self) -> bool:
        return self.t >= len(self.sizes)

    def clone(self) -> "KnapsackToy":
        other = KnapsackToy(self.sizes, self.values, self.capacity)
        other.t, other.used, other._total, other._off = self.t, self.used, self._total, self._off.copy()
        return other

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_actions, bool)
        mask[-1] = True
        if not self.done:
            for j in range(K_TOY):
                mask[j] = self.used + self.sizes[self.t] + j <= self.capacity
        return mask

    def legal_actions(self) -> np.ndarray:
        return np.flatnonzero(self.legal_mask())

    def step(self, action: int) -> float:
        assert self.legal_mask()[action], "illegal action"
        reward = 0.0
        if action < K_TOY:
            self._off[self.t] = self.used
            self.used += self.sizes[self.t] + action
            reward = self.values[self.t] / sum(self.values)
        self.t += 1
        self._total += reward
        return reward

    def _item(self, i: int) -> np.ndarray:
        if i >= len(self.sizes):
            return np.zeros(3, np.float32)
        return np.array([1.0, self.sizes[i] / self.capacity, self.values[i] / max(self.values)], np.float32)

    def observation(self) -> ToyObservation:
        mask = self.legal_mask()
        actions = np.zeros((self.num_actions, 3), np.float32)
        actions[:K_TOY, 0] = np.arange(K_TOY) / self.capacity
        actions[:, 1] = mask
        actions[-1, 2] = 1.0
        return ToyObservation(buffer=self._item(self.t), profile=np.array([self.used / self.capacity], np.float32),
                              actions=actions, upcoming=np.stack([self._item(self.t + 1), self._item(self.t + 2)]),
                              progress=np.array([self.t / len(self.sizes), 1.0], np.float32), mask=mask)

    def greedy_action(self) -> int:
        return 0 if self.legal_mask()[0] else K_TOY

    def offsets(self) -> np.ndarray:
        return self._off.copy()

    def total_reward(self) -> float:
        return self._total


def toy_game(recipe: Recipe) -> KnapsackToy:
    rng = np.random.default_rng(recipe.seed)
    sizes = rng.integers(1, 6, recipe.n).tolist()
    values = rng.integers(1, 10, recipe.n).tolist()
    return KnapsackToy(sizes, values, capacity=max(6, int(sum(sizes) * recipe.capacity_fraction)))


def trap_game() -> KnapsackToy:
    """Greedy takes the first item (value 1) and then cannot fit the second (value 5)."""
    return KnapsackToy([6, 6], [1, 5], capacity=10)


TOY_CURRICULUM = Curriculum(min_size=4, max_size=7)
TINY = TrainConfig(games_per_iter=2, updates_per_iter=4, batch_size=16, unroll=3, td_steps=3, simulations=4,
                   latent=16, action_latent=8, hidden=16, curriculum=TOY_CURRICULUM)


def toy_net(seed: int = 0) -> MuZeroNet:
    dims = obs_dims(trap_game().observation())
    return MuZeroNet(NetworkConfig(dims.obs_dim, dims.action_features, dims.num_actions, 16, 8, 16),
                     torch.Generator().manual_seed(seed))


def neutral_net() -> MuZeroNet:
    """Uniform prior and zero value: the search must find good moves from rewards alone."""
    net = toy_net()
    with torch.no_grad():
        for head in (net.policy_head, net.value_head):
            head[2].weight.zero_()
            head[2].bias.zero_()
    return net


def fresh(seed: int, config: TrainConfig = TINY):
    return new_state(config, seed, toy_game, {"variant": "toy"}, Recipe("layered", 5, 1))


def params(state) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in state.net.parameters()]


# --- networks ------------------------------------------------------------------------------
def test_network_shapes_and_learned_legality():
    net = toy_net()
    obs = obs_arrays(trap_game().observation())
    B, A = 3, obs.mask.shape[0]
    vec = torch.from_numpy(np.stack([obs.vector] * B))
    act = torch.from_numpy(np.stack([obs.actions] * B))
    mask = torch.from_numpy(np.stack([obs.mask] * B))
    state, emb = net.initial(vec, act, mask)
    assert state.shape == (B, 16) and emb.shape == (B, A, 8)
    logits, value, legal = net.predict(state, emb)
    assert logits.shape == (B, A) and value.shape == (B,) and legal.shape == (B, A)
    state2, emb2, reward = net.recurrent(state, emb, torch.tensor([0, 1, A - 1]))
    assert state2.shape == state.shape and emb2.shape == emb.shape and reward.shape == (B,)
    # The learned model keeps "slow" legal even where the legality head says otherwise.
    evaluator = NetworkEvaluator(net)
    with torch.no_grad():
        net.policy_head[2].bias[1] = -100.0  # every legality logit very negative
    child = LearnedModel(evaluator, obs).expand(LearnedModel(evaluator, obs).root().state, 0)
    assert child.mask.tolist() == [False] * (A - 1) + [True]


def test_root_mask_comes_from_the_game():
    game = KnapsackToy([9, 1], [1, 1], capacity=10)  # waste 1 and 2 do not fit the first item
    obs = obs_arrays(game.observation())
    root = LearnedModel(NetworkEvaluator(toy_net()), obs).root()
    assert root.mask.tolist() == [True, True, False, True]
    for method in ("gumbel", "puct"):
        for seed in range(5):
            result = run_search(LearnedModel(NetworkEvaluator(toy_net(seed)), obs),
                                SearchConfig(simulations=12, method=method), np.random.default_rng(seed))
            assert result.visits[2] == 0 and result.policy[2] == 0 and result.action != 2


# --- search --------------------------------------------------------------------------------
@pytest.mark.parametrize("method,simulations", [("gumbel", 16), ("puct", 150)])
def test_search_with_simulator_avoids_the_greedy_trap(method, simulations):
    # pUCT needs far more simulations: "slow" scores 0 on its first visit (zero value, no
    # reward yet) and min-max normalisation then ranks it far below the others, while
    # Gumbel's sequential halving revisits it by construction.
    game = trap_game()
    assert game.greedy_action() == 0
    result = run_search(SimulatorModel(NetworkEvaluator(neutral_net()), game),
                        SearchConfig(simulations=simulations, method=method), np.random.default_rng(0))
    assert result.action == K_TOY  # skip the first item to take the second (5/6 > 1/6)
    assert result.q[0] == pytest.approx(1 / 6)  # after taking item 1 only "slow" is legal: exact
    assert result.q[K_TOY] > 0.5  # a mean over visits, most of which take item 2 (5/6)


class BanditModel:
    """A one-step model: action a has reward ``rewards[a]`` and a terminal child."""

    def __init__(self, rewards, mask):
        self.rewards, self.mask = np.asarray(rewards, float), np.asarray(mask, bool)

    def root(self):
        return Expansion(None, 0.0, np.zeros(len(self.rewards)), 0.0, self.mask)

    def expand(self, state, action):
        A = len(self.rewards)
        return Expansion(None, float(self.rewards[action]), np.zeros(A), 0.0, np.zeros(A, bool), terminal=True)


@pytest.mark.parametrize("method", ["gumbel", "puct"])
def test_search_finds_best_legal_arm_and_never_an_illegal_one(method):
    model = BanditModel([0.1, 0.9, 0.3, 1.0, 0.2], [True, True, True, False, True])
    result = run_search(model, SearchConfig(simulations=20, method=method), np.random.default_rng(3))
    assert result.action == 1
    assert result.visits[3] == 0 and result.policy[3] == 0
    assert result.policy[1] == result.policy.max()


def test_sequential_halving_schedule():
    schedule = considered_visit_schedule(4, 16)
    assert len(schedule) == 16
    # Phase 1 visits all four actions twice, then the best two get the remaining visits.
    assert schedule[:8] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert schedule[8:12] == [2, 2, 3, 3]
    assert considered_visit_schedule(1, 3) == [0, 1, 2]


# --- training ------------------------------------------------------------------------------
def test_training_loss_decreases_on_a_fixed_problem():
    fixed = Curriculum(min_size=6, max_size=6)
    config = TrainConfig(games_per_iter=6, updates_per_iter=1000, batch_size=32, unroll=3, td_steps=3,
                         simulations=4, latent=16, action_latent=8, hidden=16, learning_rate=3e-3, curriculum=fixed)
    state = fresh(0, config)
    train(state, 1, toy_game)  # plays 6 games, one update
    batch = state.replay.sample(np.random.default_rng(99), 64, config.unroll)
    with torch.no_grad():
        before, _ = loss(state.net, batch, config)
    train(state, 40, toy_game)
    with torch.no_grad():
        after, _ = loss(state.net, batch, config)
    assert float(after) < 0.7 * float(before)


def test_same_seed_same_training_and_other_seed_differs():
    a, b, c = fresh(5), fresh(5), fresh(6)
    for s in (a, b, c):
        train(s, 8, toy_game)
    assert all(np.array_equal(x, y) for x, y in zip(params(a), params(b)))
    assert not all(np.array_equal(x, y) for x, y in zip(params(a), params(c)))
    def numbers(log):
        return [{k: v for k, v in e.items() if k != "seconds"} for e in log]

    assert numbers(a.log) == numbers(b.log) and len(a.log) == 2


def test_checkpoint_resume_continues_identically(tmp_path):
    path = str(tmp_path / "run.pt")
    straight = fresh(3)
    train(straight, 6, toy_game, checkpoint_path=path)  # mid-iteration on purpose (4 updates per iteration)
    train(straight, 14, toy_game)
    resumed = resume_state(ckpt.load(path), toy_game)
    assert resumed.step == 6
    train(resumed, 14, toy_game)
    assert all(np.array_equal(x, y) for x, y in zip(params(straight), params(resumed)))
    assert resumed.replay.total_games == straight.replay.total_games
    assert resumed.rng.bit_generator.state == straight.rng.bit_generator.state


def test_model_only_export_loads_and_cannot_resume(tmp_path):
    state = fresh(1)
    train(state, 4, toy_game)
    path = str(tmp_path / "model.pt")
    ckpt.atomic_save(ckpt.model_only(state.payload()), path)
    net = ckpt.network_from(ckpt.load(path))
    assert all(np.array_equal(x.detach().numpy(), y) for x, y in zip(net.parameters(), params(state)))
    with pytest.raises(ckpt.CheckpointError):
        resume_state(ckpt.load(path), toy_game)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load(str(tmp_path / "junk.pt"))


# --- numpy inference and the torch-free reader --------------------------------------------
def test_numpy_inference_matches_torch():
    from mallocgame.search.muzero.inference import NumpyNet

    net = toy_net(4)
    fast = NumpyNet.from_torch(net)
    game = toy_game(Recipe("layered", 6, 2))
    obs = obs_arrays(game.observation())
    with torch.no_grad():
        s, e = net.initial(*(torch.from_numpy(x[None]) for x in (obs.vector, obs.actions, obs.mask)))
        s2, e2, r = net.recurrent(s, e, torch.tensor([1]))
        logits, value, legal = net.predict(s2, e2)
    fs, fe = fast.initial(obs.vector, obs.actions, obs.mask)
    fs2, fe2, fr = fast.recurrent(fs, fe, 1)
    flogits, fvalue, flegal = fast.predict(fs2, fe2)
    np.testing.assert_allclose(fs, s[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(fe2, e2[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(flogits, logits[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(flegal, legal[0].numpy(), atol=1e-5)
    assert fr == pytest.approx(float(r[0]), abs=1e-5) and fvalue == pytest.approx(float(value[0]), abs=1e-5)


def test_torchless_reader_matches_torch_load(tmp_path):
    from mallocgame.search.muzero.torchless import read

    state = fresh(2)
    path = str(tmp_path / "m.pt")
    ckpt.atomic_save(ckpt.model_only(state.payload()), path)
    ours, theirs = read(path), ckpt.load(path)
    assert ours["network"] == theirs["network"] and ours["game"] == theirs["game"]
    assert list(ours["model"]) == list(theirs["model"])
    for key, tensor in theirs["model"].items():
        assert ours["model"][key].dtype == np.float32
        np.testing.assert_array_equal(ours["model"][key], tensor.numpy())


def test_both_readers_refuse_a_checkpoint_past_the_decompressed_size_cap(tmp_path, monkeypatch):
    from mallocgame.search.muzero.torchless import read

    path = str(tmp_path / "m.pt")
    ckpt.atomic_save(ckpt.model_only(fresh(2).payload()), path)
    monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", "1KiB")
    message = re.escape("m.pt: decompresses to more than 1,024 bytes (1 KiB), the cap on a compressed input")
    with pytest.raises(ValueError, match=message):
        read(path)
    with pytest.raises(ckpt.CheckpointError, match=message):
        ckpt.load(path)
    monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", "1GiB")
    assert read(path)["network"] == ckpt.load(path)["network"]

# --- the solver on the real game -----------------------------------------------------------
@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory):
    """A model-only checkpoint for the real game (untrained weights: the tests check mechanics)."""
    from mallocgame.search.muzero.env import game_factory

    fields = {"variant": "order", "k": 8, "order": "xla"}
    config = TrainConfig(latent=16, action_latent=8, hidden=16)
    state = new_state(config, 0, game_factory(fields), fields, Recipe("layered", 16, 0))
    path = str(tmp_path_factory.mktemp("muzero") / "real.pt")
    ckpt.atomic_save(ckpt.model_only(state.payload()), path)
    return path


@pytest.mark.parametrize("search_model", ["learned", "simulator"])
def test_solver_valid_deterministic_and_never_below_its_hint(real_checkpoint, search_model):
    from mallocgame.engine.runner import run_solver
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.hardware.validator import validate
    from mallocgame.inputs.generate import layered_network
    from mallocgame.solvers.muzero import MuZeroSolver

    problem, hw = layered_network(25, seed=4), PRESETS["tpuv4i"]
    opts = dict(time_limit=30, simulations=6, checkpoint=real_checkpoint, search_model=search_model)
    if search_model == "simulator":
        opts["rollout_depth"] = 4
    a = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, seed=3, **opts))
    b = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, seed=3, **opts))
    assert validate(problem, a.offsets) is None
    assert a.offsets == b.offsets
    assert a.stats["searched_moves"] > 0 and a.stats["simulations"] > 0
    best = run_solver("greedy-xla", problem, hw, time_limit=5, seed=0)
    from mallocgame.problem.model import Solution, Status

    hint = Solution(offsets=best.offsets, status=Status.FEASIBLE, solver="hint")
    c = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, seed=3, hint=hint, **opts))
    assert c.objective >= best.objective * (1 - 1e-9)


def test_solver_does_not_import_torch(real_checkpoint):
    import subprocess
    import sys

    code = ("import sys; from hardware.spec import PRESETS; from mallocgame.inputs.generate import layered_network; "
            "from solvers.muzero import MuZeroSolver; "
            f"s = MuZeroSolver().solve(MuZeroSolver.request(layered_network(12, seed=1), PRESETS['tpuv4i'], "
            f"time_limit=20, seed=0, simulations=2, checkpoint={real_checkpoint!r})); "
            "assert s.stats['searched_moves'] > 0; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_simulator_rollouts_value_leaves_and_keep_the_best_complete_episode():
    from mallocgame.search.muzero.selfplay import Agent

    agent = Agent(neutral_net(), SearchConfig(simulations=16), "simulator", rollout_depth=5)
    game = trap_game()
    result = agent.search(game, np.random.default_rng(0))
    assert result.action == K_TOY
    value, offsets = agent.best_rollout
    assert value == pytest.approx(5 / 6) and offsets.tolist() == [-1, 0]
    assert game.t == 0  # the search played on clones
    with pytest.raises(ValueError):
        Agent(neutral_net(), SearchConfig(), "learned", rollout_depth=5)


# --- the guided UCT search at parity with mcts (issue 10) -------------------------------------------
def _layered(n=30, seed=5):
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network

    return layered_network(n, seed=seed, capacity_fraction=0.35).replace(mode="map"), PRESETS["tpuv4i"]


def test_uniform_prior_option_plays_without_the_network_and_bad_values_are_refused(real_checkpoint):
    from mallocgame.hardware.validator import validate
    from mallocgame.problem.model import InputError
    from mallocgame.solvers.muzero import MuZeroSolver

    problem, hw = _layered()
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=1, simulations=4, prior="uniform"))
    assert validate(problem, s.offsets) is None
    assert s.stats["prior"] == "uniform" and s.stats["network_evaluations"] == 0 and s.stats["prior_calls"] > 0
    g = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=1, simulations=4, checkpoint=real_checkpoint,
                                                  start="game"))  # the network's own order
    assert g.stats["prior"] == "network" and g.stats["network_evaluations"] == g.stats["prior_calls"] > 0
    for bad in (dict(prior="Uniform"), dict(prior=1), dict(method="mcts"), dict(simulations=0),
                dict(simulations=True), dict(rollout_depth=-1), dict(exploration=-1.0), dict(commit="best")):
        with pytest.raises(InputError, match=rf"^{next(iter(bad))}: must be "):  # one line: the option, the reason
            MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=1, **bad))


def test_commit_option_chooses_the_commitment_rule_and_the_uniform_prior_matches_mcts_with_it():
    from mallocgame.solvers.muzero import DEFAULT_COMMIT, MuZeroSolver

    problem, hw = _layered()
    for commit in ("visits", "max"):
        m = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=60, seed=2, simulations=4,
                                                      prior="uniform", commit=commit))
        u = run_solver("mcts", problem, hw, time_limit=60, seed=2, options={"simulations": 4, "commit": commit})
        assert m.stats["commit"] == commit and tuple(m.offsets) == tuple(u.offsets)
        assert m.objective == pytest.approx(u.objective, rel=1e-12)
    d = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=60, seed=2, simulations=2, prior="uniform"))
    assert d.stats["commit"] == DEFAULT_COMMIT["map"]


def test_every_simulation_is_counted_and_rolls_out_once(real_checkpoint, monkeypatch):
    import mallocgame.search.uct as mcts
    from mallocgame.solvers.muzero import MuZeroSolver

    calls = []
    real = mcts.rollout
    monkeypatch.setattr(mcts, "rollout", lambda *a: calls.append(1) or real(*a))
    problem, hw = _layered()
    for prior in ("network", "uniform"):
        calls.clear()
        s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=60, seed=2, simulations=5, prior=prior,
                                 checkpoint=real_checkpoint))
        assert s.stats["finished_greedily_at"] is None  # the clock did not bind
        assert s.stats["searched_moves"] > 0
        assert s.stats["simulations"] == 5 * s.stats["searched_moves"] == len(calls)


def test_forced_moves_never_call_the_network(real_checkpoint, monkeypatch):
    from mallocgame.search.muzero.guide import NetworkPrior
    from mallocgame.solvers.muzero import MuZeroSolver

    seen = []
    real = NetworkPrior.__call__

    def spy(self, game, legal):
        seen.append(len(legal))
        assert len(game.legal_actions()) == len(legal)
        return real(self, game, legal)

    monkeypatch.setattr(NetworkPrior, "__call__", spy)
    problem, hw = _layered(40, seed=8)
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=60, seed=0, simulations=8, checkpoint=real_checkpoint,
                                                  start="game"))  # the network's own order: it plays
    assert seen and min(seen) >= 2
    assert s.stats["network_evaluations"] == len(seen)
    assert s.stats["moves"] > s.stats["searched_moves"]  # forced moves happened and were not searched


def test_guided_search_same_seed_same_answer(real_checkpoint):
    from mallocgame.solvers.muzero import MuZeroSolver

    problem, hw = _layered(35, seed=9)
    opts = dict(time_limit=60, simulations=6, checkpoint=real_checkpoint)
    a, b = (MuZeroSolver().solve(MuZeroSolver.request(problem, hw, seed=4, **opts)) for _ in range(2))
    assert a.offsets == b.offsets and a.stats["simulations"] == b.stats["simulations"]
    assert a.stats["finished_greedily_at"] is None


@pytest.mark.parametrize("mode", ["pack", "prefetch"])
def test_muzero_plays_pack_and_prefetch_modes(mode):
    from mallocgame.engine.runner import run_solver
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network

    problem = layered_network(30, seed=3, capacity_fraction=0.5 if mode == "prefetch" else 1.0)
    if mode == "pack":
        problem = problem.replace(mode="pack", capacity=None)
    else:
        problem = problem.replace(mode="prefetch")
    report = run_solver("muzero", problem, PRESETS["tpuv4i"], time_limit=20, seed=0, options={"simulations": 4})
    assert report.valid, report.violation
    assert report.stats["prior"].startswith("uniform") and report.stats["simulations"] > 0


def test_policy_logits_on_legal_rows_equal_the_full_forward_pass():
    from mallocgame.search.muzero.inference import NumpyNet

    net = NumpyNet.from_torch(MuZeroNet(NetworkConfig(obs_dim=10, action_features=8, num_actions=6),
                                        torch.Generator().manual_seed(0)))
    rng = np.random.default_rng(0)
    for mask in ([1, 0, 1, 0, 0, 1], [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1]):
        mask = np.asarray(mask, bool)
        vector, actions = rng.normal(size=10).astype(np.float32), rng.normal(size=(6, 8)).astype(np.float32)
        full, _, _ = net.predict(*net.initial(vector, actions, mask))
        fast = net.policy_logits(vector, actions, mask)
        np.testing.assert_allclose(fast[mask], full[mask], rtol=1e-5, atol=1e-5)
        assert np.isnan(fast[~mask]).all()


# --- the per-buffer encoder (search/muzero/encoder.py) ----------------------------------------------
def _intervals_problem(n=40, seed=2):
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import random_intervals
    from mallocgame.problem.intervals import max_live

    p = random_intervals(n, seed=seed, with_benefit=True)
    return p.replace(capacity=int(max_live(p) * 0.4), mode="map"), PRESETS["unit"]


def test_encoder_shapes_and_permutation_equivariance():
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero import encoder

    problem, hw = _intervals_problem()
    enc = encoder.encoding(GameData(problem, hw))
    assert enc.shape == (problem.n, encoder.ENCODING) and enc.dtype == np.float32 and np.isfinite(enc).all()
    assert enc[:, 7].max() == pytest.approx(1.0)  # normalised degree
    perm = np.random.default_rng(0).permutation(problem.n)
    shuffled = problem.replace(buffers=tuple(problem.buffers[i] for i in perm))
    enc2 = encoder.encoding(GameData(shuffled, hw))
    np.testing.assert_allclose(enc2, enc[perm], rtol=1e-5, atol=1e-6)
    # the neighbour means are means over the interference graph: a buffer overlapping nothing has zeros
    data = GameData(problem, hw)
    for i, near in enumerate(encoder.neighbours(data)):
        if len(near):
            np.testing.assert_allclose(enc[i, encoder.BASE:2 * encoder.BASE], enc[near, :encoder.BASE].mean(0),
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(enc[i, 2 * encoder.BASE:], enc[near, encoder.BASE:2 * encoder.BASE].mean(0),
                                       rtol=1e-5, atol=1e-6)  # and the means of their means
        else:
            assert not enc[i, encoder.BASE:].any()


def test_encoder_neighbours_are_the_interference_graphs(monkeypatch):
    from mallocgame.problem.graph import CliquePath, interference_graph
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero import encoder

    problem, hw = _intervals_problem()
    graph = interference_graph(problem)
    data = GameData(problem, hw)
    assert [near.tolist() for near in encoder.neighbours(data)] == [sorted(graph.adj[i]) for i in range(problem.n)]
    path = CliquePath.of(problem)  # the compressed form serves the same
    monkeypatch.setattr(encoder, "problem_conflicts", lambda p: path if p is problem else None)
    assert [near.tolist() for near in encoder.neighbours(data)] == [sorted(graph.adj[i]) for i in range(problem.n)]


def test_encoder_state_features_follow_the_game():
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero import encoder

    problem, hw = _intervals_problem(30, seed=5)
    game = Game(problem, hw, GameConfig(variant="order", k=8, order="xla"))
    seen = 0
    while not game.done:
        obs = game.observation()
        vec = encoder.network_vector(game, obs)
        assert vec.shape == (obs.as_vector().shape[0] + encoder.EXTRA,) and np.isfinite(vec).all()
        st = encoder.state_features(game)
        i, d = game.current, game.data
        near = d.index.query(d.start_l[i], d.end_l[i])
        pos = d.orders["xla"].position
        undecided = [b for b in near if b != i and pos[b] > game.steps]
        assert st[0] == pytest.approx(len(undecided) / 16.0)
        assert st[1] == pytest.approx(sum(int(d.size[b]) for b in undecided) / d.scale, rel=1e-5)
        seen += bool(undecided)
        game.step(game.greedy_action())
    assert seen > 0 and not encoder.state_features(game).any()


@pytest.mark.parametrize("features,teacher", [("encoder/1", "uniform"), ("encoder/2", "relaxation")])
def test_expert_iteration_trains_resumes_and_its_checkpoint_plays(tmp_path, features, teacher):
    from mallocgame.search.muzero.expert import ExpertConfig, resume, train
    from mallocgame.solvers.muzero import MuZeroSolver

    config = ExpertConfig(min_size=16, max_size=24, student_simulations=3, teacher_simulations=8,
                          states_per_game=3, updates_per_game=2, batch_size=8, features=features,
                          exploration=10.0, teacher_prior=teacher,
                          teacher_exploration=2.0 if teacher == "relaxation" else None)
    out = tmp_path / "x.pt"
    state = train(str(out), config=config, time_limit=60, max_games=2)
    assert state.games == 2 and state.step == 4 and len(state.replay["target"]) > 0
    targets = np.stack(state.replay["target"])
    np.testing.assert_allclose(targets.sum(1), 1.0, rtol=1e-6)
    assert (targets[~np.stack(state.replay["mask"])] == 0).all()  # the teacher never visits an illegal action
    again = resume(str(out), time_limit=60, max_games=3)
    assert again.games == 3 and again.step == 6 and again.config.features == features
    assert again.config.teacher_prior == teacher
    straight = train(str(tmp_path / "y.pt"), config=config, time_limit=60, max_games=3)  # same seed, no stop
    for key, tensor in straight.net.state_dict().items():
        assert torch.equal(tensor, again.net.state_dict()[key]), key
    problem, hw = _layered(25, seed=2)
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=0, simulations=3,
                                                  checkpoint=str(out.with_suffix(".g3.pt"))))
    assert s.stats["prior"] == "network" and s.stats["network_evaluations"] > 0


def test_resume_entry_point_takes_a_checkpoint_path(tmp_path):
    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.train import resume

    fields = {"variant": "order", "k": 4, "order": "start"}
    config = TrainConfig(latent=8, action_latent=4, hidden=8, games_per_iter=1, updates_per_iter=2, batch_size=4,
                         simulations=2, curriculum=Curriculum(min_size=8, max_size=10))
    make = game_factory(fields)
    state = new_state(config, 0, make, fields, Recipe("layered", 12, 0))
    train(state, 2, make)
    path = str(tmp_path / "t.pt")
    ckpt.atomic_save(state.payload(), path)
    again = resume(path)
    assert again.step == state.step and again.config == state.config
    with pytest.raises(ckpt.CheckpointError):
        resume(str(tmp_path / "missing.pt"))
    ckpt.atomic_save(ckpt.model_only(state.payload()), str(tmp_path / "m.pt"))
    with pytest.raises(ckpt.CheckpointError):
        resume(str(tmp_path / "m.pt"))


def test_answer_teacher_labels_follow_the_answer_and_train(tmp_path):
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero.expert import ExpertConfig, answer_policy, train
    from mallocgame.search.uct import play_greedy

    problem, hw = _layered(40, seed=3)
    reference = Game(problem, hw, GameConfig(variant="order", k=8, order="xla"))
    play_greedy(reference)
    def follow(answer):
        game = Game(problem, hw, GameConfig(variant="order", k=8, order="xla"))
        while not game.done:
            target = answer_policy(game, answer)
            assert target.sum() == 1.0 and game.legal_mask()[int(np.argmax(target))]
            game.step(int(np.argmax(target)))
        return game.offsets()

    np.testing.assert_array_equal(follow(reference.offsets()), reference.offsets())  # the labels replay an answer
    answer = reference.offsets()
    answer[np.flatnonzero(answer >= 0)[::2]] = -1  # every other fast buffer slow: offsets of the rest may move
    followed = follow(answer)
    assert (followed[answer < 0] == -1).all() and (followed >= 0).sum() > 0
    with pytest.raises(ValueError, match="teacher_answer"):
        train(str(tmp_path / "x.pt"), config=ExpertConfig(teacher="answer"), max_games=1)
    calls = []

    def all_slow(p, h):
        calls.append(p.n)
        return np.full(p.n, -1, np.int64)

    config = ExpertConfig(min_size=16, max_size=24, student_simulations=2, states_per_game=50, updates_per_game=2,
                          batch_size=8, features="encoder/2", teacher="answer")
    state = train(str(tmp_path / "y.pt"), config=config, time_limit=60, max_games=2, teacher_answer=all_slow)
    assert len(calls) == 2 and state.games == 2
    targets, masks = np.stack(state.replay["target"]), np.stack(state.replay["mask"])
    slow = targets.shape[1] - 1
    assert (targets[masks[:, slow]].argmax(1) == slow).all()  # slow is the label wherever it is legal


def test_earlier_searches_default_to_the_selfplay_network_and_refuse_a_features_checkpoint():
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network
    from mallocgame.problem.model import InputError
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, LEGACY_CHECKPOINT, MuZeroSolver, load_agent_network

    assert load_agent_network(str(DEFAULT_CHECKPOINT))[0].features == "encoder/2"
    assert load_agent_network(str(LEGACY_CHECKPOINT))[0].features == ""
    problem, hw = layered_network(30, seed=2), PRESETS["tpuv4i"]
    s = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=0, simulations=4, method="gumbel"))
    assert s.stats["checkpoint"] == str(LEGACY_CHECKPOINT) and s.stats["simulations"] > 0
    with pytest.raises(InputError, match="reads features 'encoder/2'"):
        MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=30, seed=0, simulations=4, method="gumbel",
                             checkpoint=str(DEFAULT_CHECKPOINT)))
