"""The prefetch game's network (issue 21 item 3): the shipped checkpoint, how the muzero solver picks it, and
expert iteration in prefetch mode."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgame.engine.runner import run_solver  # noqa: E402
from mallocgame.hardware.spec import PRESETS  # noqa: E402
from mallocgame.inputs.generate import layered_network  # noqa: E402
from mallocgame.search.game import GameConfig  # noqa: E402
from mallocgame.solvers import muzero as mz  # noqa: E402


def _prefetch(n=40, seed=5, capacity=0.3):
    return layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="prefetch"), PRESETS["tpuv4i"]


def test_shipped_prefetch_checkpoint_plays_the_solvers_prefetch_game():
    from mallocgame.search.muzero.torchless import load_agent_network

    assert mz.PREFETCH_CHECKPOINT.is_file()
    net, game = load_agent_network(str(mz.PREFETCH_CHECKPOINT))
    problem, _ = _prefetch()
    assert GameConfig(**game) == mz._game_config(problem, game)  # the game the solver plays in prefetch mode
    assert net.features == ""  # the plain observation
    assert mz.PREFETCH_CHECKPOINT.stat().st_size < 400_000  # model-only: small enough to ship


def test_muzero_plays_the_prefetch_network_validly_and_deterministically():
    problem, hw = _prefetch()
    opts = {"simulations": 4, "checkpoint": str(mz.PREFETCH_CHECKPOINT)}
    a, b = (run_solver("muzero", problem, hw, time_limit=60, seed=3, options=opts) for _ in range(2))
    assert a.valid, a.violation
    assert a.stats["prior"] == "network" and a.stats["network_evaluations"] > 0
    assert a.intervals == b.intervals and a.objective == b.objective and len(a.intervals) > 0
    uniform = run_solver("muzero", problem, hw, time_limit=60, seed=3, options={"simulations": 4, "prior": "uniform"})
    assert uniform.valid and uniform.stats["prior"] == "uniform" and uniform.stats["network_evaluations"] == 0


def test_muzero_default_prior_in_prefetch_mode_says_which_played():
    problem, hw = _prefetch(30, seed=3)
    rep = run_solver("muzero", problem, hw, time_limit=60, seed=0, options={"simulations": 2})
    assert rep.valid, rep.violation
    if mz.PREFETCH_NETWORK_BY_DEFAULT:
        assert rep.stats["prior"] == "network" and rep.stats["checkpoint"] == str(mz.PREFETCH_CHECKPOINT)
    else:
        assert rep.stats["prior"].startswith("uniform") and str(mz.PREFETCH_CHECKPOINT) in rep.stats["prior"]
    # map mode's network is never read in the prefetch game
    other = run_solver("muzero", problem, hw, time_limit=60, seed=0,
                       options={"simulations": 2, "checkpoint": str(mz.DEFAULT_CHECKPOINT)})
    assert other.stats["prior"].startswith("uniform (no network trained for prefetch")


def test_expert_iteration_in_prefetch_mode_trains_a_network_the_solver_uses(tmp_path):
    from mallocgame.search.muzero.expert import GAME_FIELDS, ExpertConfig, train

    config = ExpertConfig(mode="prefetch", min_size=12, max_size=16, layered_share=1.0, student_simulations=2,
                          teacher_simulations=6, states_per_game=3, updates_per_game=2, batch_size=8,
                          selection="untried-uct", prior_power=2.0, commit="max", teacher_target="mix")
    out = tmp_path / "pf.pt"
    state = train(str(out), config=config, time_limit=60, max_games=2)
    assert state.games == 2 and state.game_fields == GAME_FIELDS["prefetch"]
    targets = np.stack(state.replay["target"])
    np.testing.assert_allclose(targets.sum(1), 1.0, rtol=1e-6)
    assert (targets[~np.stack(state.replay["mask"])] == 0).all()
    assert targets.shape[1] == GameConfig(**GAME_FIELDS["prefetch"]).num_actions
    problem, hw = _prefetch(20, seed=1)
    rep = run_solver("muzero", problem, hw, time_limit=30, seed=0,
                     options={"simulations": 2, "checkpoint": str(out.with_suffix(".g2.pt"))})
    assert rep.valid and rep.stats["prior"] == "network"


def test_prefetch_expert_config_refuses_what_the_prefetch_game_cannot_play():
    from mallocgame.search.muzero.expert import ExpertConfig

    with pytest.raises(ValueError, match="intervals have no ops"):
        ExpertConfig(mode="prefetch", layered_share=0.6)
    with pytest.raises(ValueError, match="no reanalyse"):
        ExpertConfig(mode="prefetch", layered_share=1.0, reanalyse_per_game=2)
    with pytest.raises(ValueError, match="plain observation"):
        ExpertConfig(mode="prefetch", layered_share=1.0, features="encoder/2")
    ExpertConfig(mode="prefetch", layered_share=1.0, teacher="answer")  # a solver's answer teaches (answer_action)
    with pytest.raises(ValueError, match="unknown mode"):
        ExpertConfig(mode="pack")


def test_expert_iteration_in_prefetch_mode_learns_a_solvers_answer(tmp_path):
    """teacher="answer": each labelled state's target is the one-hot move that follows the answer (msa's here)."""
    from mallocgame.search.muzero.expert import GAME_FIELDS, ExpertConfig, train

    asked = []

    def msa_answer(problem, hardware):
        asked.append(problem.mode)
        report = run_solver("msa", problem, hardware, time_limit=10, seed=0)
        assert report.valid
        return list(report.intervals)

    config = ExpertConfig(mode="prefetch", min_size=12, max_size=16, layered_share=1.0, student_simulations=2,
                          teacher="answer", states_per_game=3, updates_per_game=2, batch_size=8,
                          selection="untried-uct", prior_power=2.0, commit="max")
    state = train(str(tmp_path / "pf.pt"), config=config, time_limit=60, max_games=2, teacher_answer=msa_answer)
    assert asked == ["prefetch", "prefetch"] and state.game_fields == GAME_FIELDS["prefetch"]
    targets = np.stack(state.replay["target"])
    assert len(targets) > 0
    assert ((targets == 0) | (targets == 1)).all() and (targets.sum(1) == 1).all()
    assert (targets[~np.stack(state.replay["mask"])] == 0).all()  # always a legal move
