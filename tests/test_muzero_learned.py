"""The learned-dynamics arm (issue 10, item 5): consistency loss, reanalyse, ``model=learned``.

Training mechanics run on the knapsack stand-in game of ``test_muzero.py``; the solver tests
play the real game with the shipped checkpoint of ``model=learned``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgame.search.muzero.features import ObsArrays  # noqa: E402
from mallocgame.search.muzero.replay import n_step_values  # noqa: E402
from mallocgame.search.muzero.selfplay import Agent  # noqa: E402
from mallocgame.search.muzero.train import (  # noqa: E402
    TrainConfig,
    consistency_loss,
    consistency_targets,
    loss,
    reanalyse,
    train,
)
from tests.test_muzero import TINY, fresh, toy_game  # noqa: E402


# --- consistency loss ------------------------------------------------------------------------
def test_consistency_loss_is_zero_on_the_target_positive_elsewhere_and_stops_the_target_gradient():
    g = torch.Generator().manual_seed(0)
    state = torch.randn(4, 16, generator=g, requires_grad=True)
    emb = torch.randn(4, 5, 8, generator=g, requires_grad=True)
    valid = torch.ones(4)
    same = consistency_loss(state, emb, state.detach().clone(), emb.detach().clone(), valid)
    assert torch.allclose(same, torch.zeros(4), atol=1e-6)
    target_state = torch.randn(4, 16, generator=g, requires_grad=True)
    target_emb = torch.randn(4, 5, 8, generator=g, requires_grad=True)
    other = consistency_loss(state, emb, target_state, target_emb, valid)
    assert (other > 0.05).all()
    other.sum().backward()
    assert target_state.grad is None and target_emb.grad is None  # stop-gradient on the target
    assert state.grad.abs().sum() > 0 and emb.grad.abs().sum() > 0
    past_end = consistency_loss(state, emb, target_state, target_emb, torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert past_end[1] == 0 and past_end[3] == 0 and past_end[0] > 0


def test_batch_carries_the_next_observations_and_the_loss_adds_the_weighted_consistency_term():
    state = fresh(0)
    train(state, 4, toy_game)
    replay = state.replay
    positions = replay.sample_positions(np.random.default_rng(1), 8)
    batch = replay.batch(positions, TINY.unroll)
    for row, (i, t) in enumerate(positions):
        traj = replay.trajectories[i]
        for k in range(1, TINY.unroll + 1):
            if t + k < len(traj):
                np.testing.assert_array_equal(batch.next_vector[row, k - 1], traj.vectors[t + k])
                np.testing.assert_array_equal(batch.next_mask[row, k - 1], traj.masks[t + k])
            else:
                assert batch.valid[row, k] == 0
    t = {k: torch.from_numpy(v) for k, v in batch.__dict__.items()}
    target_state, target_emb = consistency_targets(state.net, t)
    assert not target_state.requires_grad and not target_emb.requires_grad
    with torch.no_grad():
        on, parts = loss(state.net, batch, TINY)
        off, parts_off = loss(state.net, batch, TrainConfig(**{**TINY.__dict__, "consistency_weight": 0.0}))
    assert parts["consistency"] > 0 and parts_off["consistency"] == 0
    assert float(on - off) == pytest.approx(TINY.consistency_weight * parts["consistency"], rel=1e-4)


def test_a_checkpoint_config_without_the_new_fields_resumes_with_them_off():
    old = TINY.as_dict()
    del old["consistency_weight"], old["reanalyse_fraction"]
    config = TrainConfig.from_dict(old)
    assert config.consistency_weight == 0 and config.reanalyse_fraction == 0 and config.reanalysed_per_batch == 0
    assert TrainConfig().consistency_weight > 0 and TrainConfig().reanalyse_fraction > 0


# --- reanalyse ------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["learned", "simulator"])
def test_reanalyse_writes_the_current_networks_search_back_into_the_buffer(model):
    config = TrainConfig(**{**TINY.__dict__, "model": model, "simulations": 6})
    state = fresh(2, config)
    train(state, 4, toy_game)
    replay = state.replay
    i, t = next((i, t) for i, traj in enumerate(replay.trajectories) for t in range(len(traj))
                if traj.masks[t].sum() > 1 and t >= 1)
    traj = replay.trajectories[i]
    before = traj.policies[t].copy()
    with torch.no_grad():  # other weights than the ones that played the game
        for p in state.net.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)) * 0.5)
    assert reanalyse(state, [(i, t), (i, t)], toy_game) == 1
    obs = ObsArrays(traj.vectors[t], traj.action_feats[t], traj.masks[t])
    game = None
    if model == "simulator":
        game = toy_game(traj.recipe)
        for a in traj.actions[:t]:
            game.step(int(a))
    fresh_search = Agent(state.net, config.reanalyse_search_config(), model).search(
        game, np.random.default_rng(123), obs=obs)
    np.testing.assert_allclose(traj.policies[t], fresh_search.policy, atol=1e-6)
    assert traj.root_values[t] == pytest.approx(fresh_search.value, abs=1e-6)
    assert not np.allclose(before, traj.policies[t], atol=1e-3)  # the target did change
    np.testing.assert_allclose(replay.values[i], n_step_values(traj.rewards, traj.root_values, replay.td_steps,
                                                                replay.discount))
    batch = replay.batch([(i, t)], config.unroll)
    np.testing.assert_allclose(batch.target_policy[0, 0], fresh_search.policy, atol=1e-6)


def test_training_with_reanalyse_rewrites_targets_and_is_deterministic():
    a, b = fresh(4), fresh(4)
    for s in (a, b):
        train(s, 12, toy_game)
    assert TINY.reanalysed_per_batch > 0
    pa = [t.policies for t in a.replay.trajectories]
    pb = [t.policies for t in b.replay.trajectories]
    assert all(np.array_equal(x, y) for x, y in zip(pa, pb))
    off = fresh(4, TrainConfig(**{**TINY.__dict__, "reanalyse_fraction": 0.0}))
    train(off, 12, toy_game)
    assert not all(np.array_equal(x, y) for x, y in zip(pa, [t.policies for t in off.replay.trajectories]))


# --- the solver's model=learned -----------------------------------------------------------
def _problem():
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network

    return layered_network(25, seed=4), PRESETS["tpuv4i"]


def test_model_learned_solves_a_map_problem_validly_and_deterministically():
    from mallocgame.engine.runner import run_solver
    from mallocgame.problem.model import Solution, Status
    from mallocgame.solvers.muzero import LEARNED_CHECKPOINT, MuZeroSolver

    problem, hw = _problem()
    opts = {"model": "learned", "simulations": 8}
    a = run_solver("muzero", problem, hw, time_limit=60, seed=3, options=opts)
    b = run_solver("muzero", problem, hw, time_limit=60, seed=3, options=opts)
    assert a.valid and b.valid, (a.violation, b.violation)
    assert a.offsets == b.offsets
    assert a.stats["model"] == "learned" and a.stats["checkpoint"] == str(LEARNED_CHECKPOINT)
    assert a.stats["searched_moves"] > 0 and a.stats["simulations"] > 0
    greedy = run_solver("greedy-xla", problem, hw, time_limit=5, seed=0)
    hinted = MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=60, seed=3, model="learned", simulations=8,
                                  hint=Solution(offsets=greedy.offsets, status=Status.FEASIBLE, solver="hint")))
    assert hinted.objective >= max(greedy.objective, a.objective) * (1 - 1e-9)  # the same candidate selection
    old = run_solver("muzero", problem, hw, time_limit=60, seed=3, options={"search_model": "learned",
                                                                              "simulations": 8})
    assert old.offsets == a.offsets and old.stats["checkpoint"] == a.stats["checkpoint"]  # the old spelling


def test_model_option_refuses_bad_values_other_modes_and_a_contradiction():
    from mallocgame.problem.model import InputError
    from mallocgame.solvers.muzero import MuZeroSolver

    problem, hw = _problem()
    with pytest.raises(InputError, match="^model: must be one of learned, simulator, got 'dreamed'$"):
        MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=10, seed=0, model="dreamed"))
    with pytest.raises(InputError, match="disagree"):
        MuZeroSolver().solve(MuZeroSolver.request(problem, hw, time_limit=10, seed=0, model="learned", search_model="simulator"))
    with pytest.raises(InputError, match="model=learned plays map mode only, not pack mode"):
        MuZeroSolver().solve(MuZeroSolver.request(problem.replace(mode="pack"), hw, time_limit=10, seed=0, model="learned"))


def test_cli_bad_model_is_one_line():
    from tests.conftest import run_cli

    r = run_cli("solve", "example:layered150", "--solver", "muzero", "--solver-option", "model=dreamed")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "model=dreamed: must be one of" in lines[0], r.stderr


def test_train_cli_refuses_a_bad_reanalyse_fraction_and_a_missing_or_foreign_init_in_one_line(tmp_path):
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT
    from tests.conftest import run_cli

    for args, words in ((["--reanalyse-fraction", "2"], "--reanalyse-fraction: must be in [0, 1]"),
                        (["--init", str(tmp_path / "none.pt")], "--init: "),
                        (["--init", str(DEFAULT_CHECKPOINT)], "reads features 'encoder/2'; self-play reads the plain "
                                                              "observation (a network with input features is trained "
                                                              "by expert iteration")):
        r = run_cli("train", "--steps", "1", "--out", str(tmp_path / "x.pt"), *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert words in lines[0], lines[0]
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("name, fields", [("selfplay.pt", {"variant": "order", "k": 16, "order": "xla"}),
                                          ("prefetch.pt", None)])
def test_init_starts_from_a_shipped_plain_observation_network_written_before_newer_fields(name, fields):
    """``--init`` of the shipped self-play / prefetch networks (their saved network config lacks the fields added
    since, which take their defaults): the run starts with exactly their weights; a foreign shape is refused."""
    import torch

    from mallocgame.cli.train import PREFETCH_GAME_FIELDS
    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero.env import game_factory
    from mallocgame.search.muzero.problems import Recipe
    from mallocgame.search.muzero.train import TrainConfig, new_state
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    fields = dict(PREFETCH_GAME_FIELDS) if fields is None else fields
    init = ckpt.load(str(DEFAULT_CHECKPOINT.with_name(name)))
    assert "graph_rounds" not in init["network"]  # written before the graph encoder's fields
    state = new_state(TrainConfig(), 0, game_factory(fields), fields, Recipe("layered", 16, 0), init=init)
    weights = state.net.state_dict()
    assert weights.keys() == init["model"].keys()
    assert all(torch.equal(weights[key], init["model"][key]) for key in weights)
    with pytest.raises(ckpt.CheckpointError, match="another network or game"):
        new_state(TrainConfig(hidden=32), 0, game_factory(fields), fields, Recipe("layered", 16, 0), init=init)
