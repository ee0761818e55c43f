"""Map mode's search starts from its best answer (option ``start="answer"`` of mcts and muzero; search/uct.py
``answer_game``, search/game_order.py ``answer_order``)."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import ANSWER_ORDER, answer_order, use_answer_order
from mallocgame.search.uct import play_greedy

HW = PRESETS["tpuv4i"]


def _problem(seed: int, n: int = 80):
    """Layered programs on which the address game's greedy episode beats greedy-xla's (seeds 3 and 4)."""
    return layered_network(n, seed=seed, capacity_fraction=0.3).replace(mode="map")


def _greedy(problem, data, cfg: GameConfig) -> Game:
    game = Game(problem, HW, cfg, data=data)
    play_greedy(game)
    return game


def _fallback_greedy_values(problem) -> dict[str, float]:
    """The objective of each game shape's greedy episode (the fallback answers the old default ends at)."""
    data = GameData(problem, HW)
    out = {}
    for cfg in (GameConfig(variant="order", k=16, order="xla"), GameConfig(variant="order", k=16, order="start"),
                GameConfig(variant="address", k=16)):
        out[f"{cfg.variant}-{cfg.order}"] = float(data.evaluator.value(_greedy(problem, data, cfg).offsets()))
    return out


@pytest.mark.parametrize("seed", [3, 4])
def test_the_answer_order_puts_fast_buffers_by_offset_and_its_greedy_replays_the_answer(seed):
    problem = _problem(seed)
    data = GameData(problem, HW)
    address = _greedy(problem, data, GameConfig(variant="address", k=16))
    offsets = address.offsets()
    order = answer_order(data, offsets)
    assert sorted(order.tolist()) == list(range(problem.n))
    fast = int((offsets >= 0).sum())
    assert (np.diff(offsets[order[:fast]]) >= 0).all() and (offsets[order[fast:]] < 0).all()
    use_answer_order(data, offsets)
    replay = _greedy(problem, data, GameConfig(variant="order", k=16, order=ANSWER_ORDER))
    assert replay.total_reward() >= address.total_reward()
    xla = _greedy(problem, data, GameConfig(variant="order", k=16, order="xla"))
    assert replay.total_reward() > xla.total_reward()  # the case the option is for: the xla order's greedy is behind


@pytest.mark.parametrize("seed", [3, 4])
def test_start_answer_begins_at_the_best_fallback_answer_and_never_ends_below_it(seed):
    problem = _problem(seed)
    fallbacks = _fallback_greedy_values(problem)
    rep = run_solver("mcts", problem, HW, time_limit=60, seed=1, options={"simulations": 4, "start": "answer"})
    assert rep.valid
    assert rep.stats["start"] == "answer (greedy-address-start)"
    assert rep.objective >= max(fallbacks.values()) - 1e-12
    old = run_solver("mcts", problem, HW, time_limit=60, seed=1, options={"simulations": 4, "start": "game"})
    assert "start" not in old.stats  # the game's own order: nothing changed
    assert old.objective >= max(fallbacks.values()) - 1e-12


def test_start_answer_is_reproducible_under_a_seed():
    problem = _problem(3)
    runs = [run_solver("mcts", problem, HW, time_limit=60, seed=7, options={"simulations": 6, "start": "answer"})
            for _ in range(2)]
    assert runs[0].offsets == runs[1].offsets
    assert runs[0].stats["simulations"] == runs[1].stats["simulations"] > 0


@pytest.mark.parametrize("seed", [0, 4])  # greedy-xla's answer is the best fallback on 0, the address game's on 4
def test_start_answer_uniform_control_is_mcts(seed):
    problem = _problem(seed)
    opts = {"simulations": 6, "start": "answer"}
    mcts = run_solver("mcts", problem, HW, time_limit=60, seed=2, options=opts)
    uni = run_solver("muzero", problem, HW, time_limit=60, seed=2, options={**opts, "prior": "uniform"})
    assert uni.stats["start"] == mcts.stats["start"]
    assert uni.offsets == mcts.offsets and uni.stats["simulations"] == mcts.stats["simulations"]


def test_start_answer_plays_the_network_only_in_the_order_it_was_trained_on():
    opts = {"simulations": 6, "start": "answer"}
    problem = _problem(4)  # the address game's answer is the best: its order is played, without the network
    mcts = run_solver("mcts", problem, HW, time_limit=60, seed=2, options=opts)
    net = run_solver("muzero", problem, HW, time_limit=60, seed=2, options=opts)
    assert net.stats["start"] == "answer (greedy-address-start)"
    assert net.stats["prior"].startswith("uniform (the prior reads the game in xla order")
    assert net.stats["network_evaluations"] == 0 and net.offsets == mcts.offsets
    problem = _problem(0)  # greedy-xla's answer is the best: greedy-xla's order is played, with the network
    net = run_solver("muzero", problem, HW, time_limit=60, seed=2, options=opts)
    assert net.valid and net.stats["prior"] == "network" and net.stats["network_evaluations"] > 0
    assert net.stats["start"].startswith("game (greedy-xla")
    assert net.objective >= max(_fallback_greedy_values(problem).values()) - 1e-12


def test_start_answer_keeps_the_relaxation_prior_in_the_answers_order(monkeypatch):
    import mallocgame.solvers.muzero as muzero

    limits = []

    def relaxation_set(data, time_limit=muzero.RELAX_SECONDS):
        limits.append(time_limit)
        return real(data, time_limit=time_limit)

    real = muzero.relaxation_set
    monkeypatch.setattr(muzero, "relaxation_set", relaxation_set)
    opts = {"simulations": 6, "start": "answer"}
    problem = _problem(4)  # the address game's answer is the best: its order is played
    relax = run_solver("muzero", problem, HW, time_limit=4, seed=2, options={**opts, "prior": "relaxation"})
    assert relax.valid and relax.stats["start"] == "answer (greedy-address-start)"
    assert relax.stats["prior"] == "relaxation" and relax.stats["network_evaluations"] == 0
    assert limits and all(0 < t <= muzero.RELAX_SHARE * 4 for t in limits)  # a share of the limit, as in its own order
    net = run_solver("muzero", problem, HW, time_limit=60, seed=2, options=opts)
    assert net.stats["prior"].startswith("uniform (the prior reads the game in xla order")


def test_start_answer_plays_the_game_outside_map_modes_fixed_order_game():
    problem = _problem(3, n=40)
    rep = run_solver("mcts", problem, HW, time_limit=60, seed=0,
                     options={"simulations": 2, "start": "answer", "variant": "address"})
    assert rep.valid and rep.stats["start"].startswith("game (")


def _searches(problem, simulations: int, known: bool, prior=None, seed: int = 0, leaf: str = "rollout"):
    import math

    from mallocgame.runtime.budget import Budget
    from mallocgame.search.uct import MCTSConfig, UCTSearch, reference_value

    game = Game(problem, HW, GameConfig(variant="order", k=16, order="xla"))
    cfg = MCTSConfig(simulations=simulations, commit="max", guided="untried-uct", known_greedy=known, leaf=leaf)
    search = UCTSearch(cfg, np.random.default_rng(seed), prior=prior,
                       leaf_value=reference_value if leaf != "rollout" else None)
    result = search.run(game, budget=Budget.start(math.inf))
    return search, result, game


def test_known_greedy_gives_the_moves_simulations_to_the_alternatives_and_never_commits_below_the_greedy():
    problem = _problem(3)
    data = GameData(problem, HW)
    greedy = _greedy(problem, data, GameConfig(variant="order", k=16, order="xla")).total_reward()
    search, result, game = _searches(problem, 1, known=True)
    assert search.known_moves > 0
    assert game.total_reward() >= greedy - 1e-12  # the committed path, not only the best episode
    assert result.best.value > greedy  # one alternative a move, not a replay of the greedy's: it found better
    _, plain, plain_game = _searches(problem, 1, known=False)
    assert plain.best.value == pytest.approx(greedy, abs=1e-12)  # one simulation a move replays the greedy episode


def test_known_greedy_with_a_uniform_prior_is_the_plain_search():
    from mallocgame.search.muzero.guide import uniform_prior

    problem = _problem(4)
    runs = []
    for prior in (None, uniform_prior):
        search, result, game = _searches(problem, 3, known=True, prior=prior, seed=5)
        runs.append((result.best.value, result.best.offsets.tolist(), result.simulations, search.known_moves,
                     game.offsets().tolist()))
    assert runs[0] == runs[1]


def test_known_greedy_needs_greedy_rollouts_to_the_end():
    from mallocgame.search.uct import MCTSConfig

    with pytest.raises(ValueError, match="known_greedy"):
        MCTSConfig(known_greedy=True, rollout_depth=8)
    for leaf in ("value", "mixed"):
        with pytest.raises(ValueError, match="known_greedy"):
            MCTSConfig(known_greedy=True, leaf=leaf)
    assert MCTSConfig(known_greedy=True, leaf="auto").known_greedy  # decided by the run: where auto plays rollouts


@pytest.mark.parametrize(("solver", "seed"), [("mcts", 4), ("muzero", 0), ("muzero", 4)])
def test_start_answer_leaf_auto_playing_rollouts_keeps_the_known_greedy_returns(solver, seed):
    """Where ``leaf="auto"`` plays rollouts to the end (60 s for a small program affords them), the search at
    ``start="answer"`` is the ``leaf="rollout"`` search: the same answer and the same known greedy moves."""
    problem = _problem(seed)
    opts = {"simulations": 4, "start": "answer"}
    rollout = run_solver(solver, problem, HW, time_limit=60, seed=2, options={**opts, "leaf": "rollout"})
    auto = run_solver(solver, problem, HW, time_limit=60, seed=2,
                      options={**opts, "leaf": "auto", **({"leaf_value": "reference"} if solver == "muzero" else {})})
    assert auto.valid and auto.stats["leaf_played"] == "rollout" and auto.stats["start"] == rollout.stats["start"]
    assert auto.stats["known_greedy_moves"] == rollout.stats["known_greedy_moves"] > 0
    assert auto.offsets == rollout.offsets and auto.stats["simulations"] == rollout.stats["simulations"]


def test_known_greedy_with_leaf_auto_playing_mixed_leaves_changes_nothing(monkeypatch):
    import mallocgame.search.uct as uct

    problem = _problem(3)
    search, _, _ = _searches(problem, 3, known=True, seed=5, leaf="auto")
    assert search.leaf == "rollout" and search.known_moves > 0  # the time affords rollouts: known returns
    monkeypatch.setattr(uct, "auto_leaf", lambda *args, **kwargs: "mixed")
    runs = []
    for k in (True, False):
        search, result, game = _searches(problem, 3, known=k, seed=5, leaf="auto")
        assert search.leaf == "mixed" and search.known_moves == 0 and search.leaf_calls > 0
        runs.append((result.best.value, result.best.offsets.tolist(), result.simulations, game.offsets().tolist()))
    assert runs[0] == runs[1]
    rep = run_solver("mcts", problem, HW, time_limit=60, seed=2,
                     options={"simulations": 4, "start": "answer", "leaf": "auto"})
    assert rep.valid and rep.stats["leaf_played"] == "mixed" and rep.stats["known_greedy_moves"] == 0


def test_start_answer_keeps_the_games_order_where_its_greedy_episode_is_the_best_answer():
    problem = _problem(0)  # greedy-xla's answer beats the other game shapes' greedy episodes here
    fallbacks = _fallback_greedy_values(problem)
    assert fallbacks["order-xla"] > max(fallbacks["order-start"], fallbacks["address-start"])
    rep = run_solver("mcts", problem, HW, time_limit=60, seed=1, options={"simulations": 4, "start": "answer"})
    assert rep.valid and rep.stats["start"] == "game (greedy-xla: the game's own greedy episode)"
    assert rep.stats["known_greedy_moves"] > 0
    assert rep.objective >= fallbacks["order-xla"] - 1e-12
