"""A network trained in the answer's order: expert iteration plays the game of ``start="answer"`` (option ``order`` of
search/muzero/expert.py, search/uct.py ``answer_start``), and the muzero solver plays such a network there only."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import GameConfig
from mallocgame.search.game_order import ANSWER_ORDER, answer_order
from mallocgame.search.muzero import checkpoint as ckpt
from mallocgame.search.uct import answer_start

HW = PRESETS["tpuv4i"]
ANSWER_GAME = GameConfig(variant="order", k=16, order=ANSWER_ORDER)


def _problem(seed: int, n: int = 80):
    """Layered programs: the address game's greedy episode is the best fallback answer on seed 4, greedy-xla's on 0."""
    return layered_network(n, seed=seed, capacity_fraction=0.3).replace(mode="map")


@pytest.fixture(scope="module")
def answer_checkpoint(tmp_path_factory):
    """The shipped network relabelled as one of the answer's order (the solver reads the ``game`` fields only)."""
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    payload = ckpt.load(str(DEFAULT_CHECKPOINT))
    payload["game"] = {**payload["game"], "order": ANSWER_ORDER}
    path = tmp_path_factory.mktemp("answer") / "answer.pt"
    ckpt.atomic_save(payload, str(path))
    return str(path)


@pytest.mark.parametrize("seed", [0, 4])
def test_answer_start_plays_the_order_of_the_best_fallback_answer_as_the_solver_does(seed, answer_checkpoint):
    problem = _problem(seed)
    stats: dict = {}
    game_cfg, data, incumbents = answer_start(problem, HW, ANSWER_GAME, stats=stats)
    best = max(incumbents, key=lambda e: e.value)
    assert game_cfg == ANSWER_GAME
    np.testing.assert_array_equal(data.orders[ANSWER_ORDER].order, answer_order(data, best.offsets))
    rep = run_solver("muzero", problem, HW, time_limit=60, seed=2,
                     options={"simulations": 4, "start": "answer", "checkpoint": answer_checkpoint})
    assert rep.valid and rep.stats["start"] == stats["start"] == f"answer ({best.source})"


def test_the_solver_plays_an_answer_order_network_at_start_answer_only(answer_checkpoint):
    problem = _problem(4)
    opts = {"simulations": 4, "checkpoint": answer_checkpoint}
    net = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={**opts, "start": "answer"})
    assert net.valid and net.stats["prior"] == "network" and net.stats["network_evaluations"] > 0
    game = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={**opts, "start": "game"})
    assert game.stats["prior"] == "uniform (the network plays the game in the answer's order: start=answer)"
    assert game.stats["network_evaluations"] == 0
    uniform = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 4, "start": "game",
                                                                                "prior": "uniform"})
    assert game.offsets == uniform.offsets  # greedy-xla's order with the uniform prior
    shipped = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={"simulations": 4, "start": "answer"})
    assert shipped.stats["prior"].startswith("uniform (the prior reads the game in xla order")


def test_the_earlier_searches_refuse_an_answer_order_network(tmp_path):
    from mallocgame.problem.model import InputError
    from mallocgame.solvers.muzero import LEGACY_CHECKPOINT, MuZeroSolver

    payload = ckpt.load(str(LEGACY_CHECKPOINT))
    payload["game"] = {**payload["game"], "order": ANSWER_ORDER}
    ckpt.atomic_save(payload, str(tmp_path / "legacy.pt"))
    with pytest.raises(InputError, match="answer's"):
        MuZeroSolver().solve(MuZeroSolver.request(_problem(0, n=30), HW, time_limit=30, seed=0, simulations=2,
                                                  method="gumbel", checkpoint=str(tmp_path / "legacy.pt")))


def test_expert_iteration_in_the_answer_order_writes_a_checkpoint_of_that_game(tmp_path):
    from mallocgame.search.muzero.expert import ExpertConfig, resume, train
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    config = ExpertConfig(min_size=40, max_size=60, student_simulations=2, teacher_simulations=4, states_per_game=3,
                          updates_per_game=2, batch_size=8, features="encoder/2", order=ANSWER_ORDER)
    out = tmp_path / "run.pt"
    state = train(str(out), init=str(DEFAULT_CHECKPOINT), config=config, time_limit=120, max_games=2)
    assert state.games == 2 and len(state.replay["target"]) > 0
    assert ckpt.load(str(out))["game"] == {"variant": "order", "k": 16, "order": ANSWER_ORDER}
    again = resume(str(out), time_limit=120, max_games=3)
    assert again.games == 3 and again.game_fields["order"] == ANSWER_ORDER
    rep = run_solver("muzero", _problem(4), HW, time_limit=60, seed=0,
                     options={"simulations": 2, "start": "answer", "checkpoint": str(out.with_suffix(".g3.pt"))})
    assert rep.valid and rep.stats["prior"] == "network"


def test_the_answer_order_is_map_modes_and_takes_no_reanalyse(tmp_path):
    from mallocgame.search.muzero.expert import ExpertConfig, train

    with pytest.raises(ValueError, match="order"):
        ExpertConfig(mode="prefetch", layered_share=1.0, order=ANSWER_ORDER)
    with pytest.raises(ValueError, match="order"):
        ExpertConfig(order="size")
    with pytest.raises(ValueError, match="no reanalyse"):
        train(str(tmp_path / "x.pt"), config=ExpertConfig(order=ANSWER_ORDER, reanalyse_per_game=1), max_games=1)
