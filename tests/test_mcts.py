"""Plain UCT (search.mcts) and the ``mcts`` solver: finds what the greedy misses, keeps incumbents, honours budgets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import Buffer, Problem, Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.uct import MCTSConfig, UCTSearch, play_greedy
from mallocgame.solvers.mcts import MCTSSolver

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]


def greedy_trap() -> Problem:
    """The densest buffer (a) blocks the two others (b + c = 8 > 5); the optimum leaves a slow."""
    bufs = (Buffer("a", 6, 0, 2, 5.0), Buffer("b", 5, 0, 2, 4.0), Buffer("c", 5, 0, 2, 4.0))
    return Problem("trap", bufs, capacity=10)


@pytest.mark.parametrize("variant", ["order", "address"])
def test_search_escapes_the_greedy_trap(variant):
    problem = greedy_trap()
    greedy = Game(problem, UNIT, GameConfig(variant=variant))
    play_greedy(greedy)
    assert greedy.total_reward() == pytest.approx(5 / 13)
    game = Game(problem, UNIT, GameConfig(variant=variant))
    result = UCTSearch(MCTSConfig(simulations=50, rollout_depth=None), np.random.default_rng(0)).run(
        game, budget=Budget.start(math.inf))
    assert result.best.value == pytest.approx(8 / 13)
    assert result.best.offsets.tolist() in ([-1, 0, 5], [-1, 5, 0])
    assert result.searched_moves >= 1 and result.simulations >= 50


def test_solver_answer_is_valid_and_no_worse_than_both_greedy_episodes():
    problem = layered_network(80, seed=3)
    ev = Evaluator(problem, HW)
    sol = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=30, seed=0, simulations=8))
    assert validate(problem, sol.offsets) is None
    value = ev.value(sol.offsets)
    assert sol.objective == pytest.approx(value, rel=1e-9)
    for variant in ("order", "address"):
        g = Game(problem, HW, GameConfig(variant=variant))
        play_greedy(g)
        assert value >= ev.value(g.offsets()) - 1e-15
    assert 0 <= sol.stats["value_normalised"] <= 1
    assert sol.stats["finished_greedily_at"] is None  # 30 s is plenty: every move was searched
    times = [t for t, _ in sol.history]
    values = [v for _, v in sol.history]
    assert times == sorted(times) and values == sorted(values) and values[-1] == pytest.approx(value)


def test_short_time_limit_finishes_greedily_with_a_valid_answer():
    problem = layered_network(2000, seed=9)  # large enough that 64 simulations a move cannot finish in 0.3 s
    report = run_solver("mcts", problem, HW, time_limit=0.3, seed=0, options={"simulations": 64})
    assert report.valid and report.placed > 0
    assert report.stats["finished_greedily_at"] is not None
    assert report.stats["moves"] < problem.n


def test_no_time_at_all_still_returns_a_valid_map_answer():
    # The deadline has passed before the first move: no search, the greedy finishes the episode.
    problem = layered_network(3000, seed=2)
    report = run_solver("mcts", problem, HW, time_limit=0.01, seed=0)
    assert report.valid and report.objective >= 0
    assert report.stats["finished_greedily_at"] == 0 and report.stats["simulations"] == 0


def test_an_episode_stopped_at_the_deadline_counts_only_in_map_mode():
    from mallocgame.inputs.generate import packed_instance
    from mallocgame.search.uct import episode_of

    problem = layered_network(50, seed=1)
    game = Game(problem, HW, GameConfig(variant="order", order="xla"))
    for _ in range(10):
        game.step(game.greedy_action())
    assert play_greedy(game.clone(), deadline=0.0) is False  # stopped before its first step
    ep = episode_of(game, "partial")
    assert validate(problem, ep.offsets) is None and ep.value == game.total_reward() > 0
    assert ep.value * Evaluator(problem, HW).time_all_slow == pytest.approx(Evaluator(problem, HW).value(ep.offsets))
    pack, _ = packed_instance(20, seed=1)
    g = Game(pack, UNIT, GameConfig(variant="address"))
    g.step(g.greedy_action())
    assert episode_of(g, "partial").value == -np.inf


def test_hint_is_kept_when_the_search_does_worse():
    problem = layered_network(70, seed=4)
    strong = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=30, seed=1, simulations=48))
    hint = Solution(offsets=strong.offsets, status=Status.FEASIBLE, solver="hint")
    weak = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=30, seed=2, simulations=1, hint=hint))
    ev = Evaluator(problem, HW)
    assert ev.value(weak.offsets) >= ev.value(strong.offsets) - 1e-15


@pytest.mark.parametrize("options", [dict(variant="order", order="xla"), dict(rollout="random"),
                                     dict(epsilon=0.3, rollout_depth=None), dict(k=2, variant="order")])
def test_options_give_valid_deterministic_answers(options):
    problem = layered_network(40, seed=6)
    a = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=30, seed=3, simulations=6, **options))
    b = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=30, seed=3, simulations=6, **options))
    assert validate(problem, a.offsets) is None and a.offsets == b.offsets


def test_pack_mode_places_everything_or_says_unknown():
    from mallocgame.inputs.generate import packed_instance

    problem, _ = packed_instance(30, seed=3, capacity=64, horizon=16)
    sol = MCTSSolver().solve(MCTSSolver.request(problem, UNIT, time_limit=30, seed=0, simulations=16))
    complete = all(o is not None for o in sol.offsets)
    assert validate(problem, sol.offsets, mode="map") is None
    assert (sol.status is Status.FEASIBLE) == complete
    if complete:
        assert validate(problem, sol.offsets) is None and sol.objective <= 64


def test_bad_config_is_rejected():
    with pytest.raises(ValueError):
        MCTSConfig(rollout="nope")
    with pytest.raises(ValueError):
        MCTSConfig(simulations=0)


def test_a_moves_budget_is_its_share_of_the_search_less_the_reserve_and_the_grace_follows_the_budget():
    import time as clock

    from mallocgame.search.uct import _move_budget, greedy_finish_until

    search = Budget(10.0, clock.monotonic())
    before = clock.monotonic()
    move = _move_budget(search, 4, reserve=2.0)
    after = clock.monotonic()
    # the old hand rule: now + (deadline - now - reserve) / moves_left
    assert (before + (search.deadline - before - 2.0) / 4 - 1e-9 <= move.deadline
            <= after + (search.deadline - after - 2.0) / 4 + 1e-9)
    assert greedy_finish_until(Budget(10.0, 100.0)) == 110.0 + 0.02 * 10.0 + 0.2


def test_auto_leaf_is_the_muzero_prefetch_leaf_without_a_network(monkeypatch):
    """``leaf="auto"``: where the time per move does not afford two rollouts to the end (here forced, so that a
    simulation budget keeps the answer deterministic) mixed leaves of 64 greedy steps valued by the greedy episode's
    return to go, exactly as the muzero solver's prefetch default (uniform prior there) plays them."""
    import mallocgame.search.uct as uct

    monkeypatch.setattr(uct, "auto_leaf", lambda *args, **kwargs: "mixed")
    problem = layered_network(60, seed=5, capacity_fraction=0.3).replace(mode="prefetch")
    mcts = run_solver("mcts", problem, HW, time_limit=600, seed=2, options={"simulations": 2, "leaf": "auto"})
    muzero = run_solver("muzero", problem, HW, time_limit=600, seed=2, options={"simulations": 2})
    assert mcts.valid and muzero.valid
    assert mcts.stats["leaf"] == "auto" and mcts.stats["leaf_played"] == "mixed" and mcts.stats["leaf_calls"] > 0
    assert (mcts.stats["leaf_steps"], mcts.stats["leaf_value"]) == (64, "reference")
    assert (mcts.objective, mcts.stats["simulations"], mcts.stats["leaf_calls"]) == (
        muzero.objective, muzero.stats["simulations"], muzero.stats["leaf_calls"])
    rollouts = run_solver("mcts", problem, HW, time_limit=600, seed=2, options={"simulations": 2, "leaf": "rollout"})
    assert "leaf" not in rollouts.stats  # a rollout search has no leaf statistics
