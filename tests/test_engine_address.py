"""The two engines of the address game (MALLOCGAME_ENGINE): the compiled NativeAddressGame against the Python
AddressGame, its reference. Every reward must be equal to the last bit (``==``), and so must the decision segment,
the candidates, the legal and greedy actions, the placement values, the skyline around the segment, the offsets
and the observations, through random and greedy episodes with clones, on hypothesis-generated programs, on
generated workloads (map and pack mode, with and without a capacity), on every program of the xla suite; and mcts
playing the address game gives the same answer and the same stats counts in both."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem.model import Buffer, Problem
from mallocgame.runtime.native_engine import ENGINE_ENV
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_address import AddressGame, NativeAddressGame
from mallocgame.search.game_data import GameData
from tests.test_engine import programs

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]


def test_game_builds_the_engine_named(monkeypatch):
    problem = layered_network(20, seed=0)
    config = GameConfig(variant="address")
    monkeypatch.setenv(ENGINE_ENV, "python")
    assert type(Game(problem, HW, config)) is AddressGame
    monkeypatch.setenv(ENGINE_ENV, "native")
    game = Game(problem, HW, config)
    assert type(game) is NativeAddressGame and isinstance(game, AddressGame)
    monkeypatch.delenv(ENGINE_ENV)
    assert type(Game(problem, HW, config)) is NativeAddressGame


def assert_same_state(ref: AddressGame, nat: NativeAddressGame, *, full: bool = True) -> None:
    assert ref.done == nat.done and ref.steps == nat.steps and ref.decisions_left == nat.decisions_left
    assert ref.total_reward() == nat.total_reward()
    assert np.array_equal(ref.offsets(), nat.offsets()) and ref.offsets().dtype == nat.offsets().dtype
    assert ref.segment == nat.segment and ref.candidates() == nat.candidates()
    assert np.array_equal(ref.legal_actions(), nat.legal_actions())
    assert ref.legal_actions().dtype == nat.legal_actions().dtype == np.int64
    if not full:
        return
    assert ref._peak == nat._peak
    assert np.array_equal(ref._undecided, nat._undecided)
    assert [ref._undecided[i] for i in range(ref.data.n)] == [nat._undecided[i] for i in range(nat.data.n)]
    if ref.data.mode == "map":
        assert ref._saved == nat._saved
    assert np.array_equal(ref.legal_mask(), nat.legal_mask())
    if not ref.done:
        assert ref.greedy_action() == nat.greedy_action()
        a = ref._seg[0]
        for column in ("_height", "_right", "_prev"):
            assert getattr(ref, column)[a] == getattr(nat, column)[a], column
        for i in ref.candidates():
            assert ref.placement_value(i) == nat.placement_value(i)
    x, y = ref.observation(), nat.observation()
    for field in ("buffer", "profile", "actions", "upcoming", "progress", "mask"):
        assert np.array_equal(getattr(x, field), getattr(y, field)), field
    assert ref.describe_state() == nat.describe_state() and ref.describe_actions() == nat.describe_actions()


def play_both(ref: AddressGame, nat: NativeAddressGame, rng: np.random.Generator, *, greedy_share: float,
              clone_share: float = 0.0, max_steps: float = math.inf,
              full_every: int = 1) -> list[tuple[AddressGame, NativeAddressGame]]:
    """Play both games with the same actions (switching to clones at random); returns the pairs of games left
    behind by clones, which must still agree. The whole state is compared every ``full_every`` steps and at the
    end, the rewards, segment, candidates and legal actions at every step."""
    left_behind = []
    assert_same_state(ref, nat)
    played = 0
    while not ref.done and played < max_steps:
        if rng.random() < clone_share:
            left_behind.append((ref, nat))
            ref, nat = ref.clone(), nat.clone()
        legal = ref.legal_actions()
        action = ref.greedy_action() if rng.random() < greedy_share else int(rng.choice(legal))
        assert ref.step(action) == nat.step(action)
        played += 1
        assert_same_state(ref, nat, full=played % full_every == 0)
    assert_same_state(ref, nat)
    return left_behind


def both(problem: Problem, hw, config: GameConfig, *, mode: str | None = None) -> tuple[AddressGame, NativeAddressGame]:
    data = GameData(problem, hw, mode=mode)
    return AddressGame(problem, hw, config, data=data), NativeAddressGame(problem, hw, config, data=data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=programs(), k=st.sampled_from([1, 2, 3, 16]), seed=st.integers(0, 2**32 - 1))
def test_engines_agree_on_generated_programs(problem, k, seed):
    ref, nat = both(problem, UNIT, GameConfig(variant="address", k=k))
    rng = np.random.default_rng(seed)
    for ref_left, nat_left in play_both(ref, nat, rng, greedy_share=0.3, clone_share=0.1):
        assert_same_state(ref_left, nat_left)
        play_both(ref_left, nat_left, rng, greedy_share=0.5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["layered", "csv-map", "pack", "pack-nocap"]), seed=st.integers(0, 10_000),
       k=st.sampled_from([1, 4, 16]))
def test_engines_agree_on_generated_workloads(kind, seed, k):
    """Generated workloads; "layered" has ops, so its rewards are the roofline's per-op time changes."""
    if kind == "layered":
        problem, hw = layered_network(25 + seed % 60, seed=seed), HW
    elif kind == "csv-map":
        problem, hw = random_intervals(30, seed=seed, max_size=16, with_benefit=True).replace(capacity=40 + seed % 20), UNIT
    else:
        problem, hw = packed_instance(20, seed=seed, capacity=32, horizon=12)[0], UNIT
        if kind == "pack-nocap":
            problem = problem.replace(capacity=None)
    ref, nat = both(problem, hw, GameConfig(variant="address", k=k))
    rng = np.random.default_rng(seed)
    for ref_left, nat_left in play_both(ref, nat, rng, greedy_share=0.5, clone_share=0.05):
        play_both(ref_left, nat_left, rng, greedy_share=0.0)


def test_engines_agree_in_pack_mode_on_a_map_problem():
    ref, nat = both(layered_network(80, seed=3), HW, GameConfig(variant="address", k=4), mode="pack")
    play_both(ref, nat, np.random.default_rng(3), greedy_share=0.5, clone_share=0.05)


def test_a_segment_wider_than_the_python_scan_takes_the_same_candidates():
    """More than 64 buffers start in the first segment: the Python game ranks them with numpy (its other path)."""
    buffers = [Buffer(f"b{i}", 1 + i % 5, i % 7, 8 + i % 3, benefit=float(i % 11)) for i in range(120)]
    for mode, capacity in (("map", 40), ("pack", 60), ("pack", None)):
        problem = Problem("wide", buffers, capacity=capacity, mode=mode)
        ref, nat = both(problem, UNIT, GameConfig(variant="address", k=5))
        assert len(ref.candidates()) == 5
        play_both(ref, nat, np.random.default_rng(2), greedy_share=0.4, clone_share=0.05)


def test_native_errors_match_the_reference():
    problem = packed_instance(12, seed=1, capacity=32, horizon=8)[0]
    ref, nat = both(problem, UNIT, GameConfig(variant="address", k=2))
    for game in (ref, nat):
        with pytest.raises(ValueError, match=r"^closing the only segment would give up|illegal action: closing"):
            game.step(game.slow_action)  # pack mode: the first segment spans every buffer
        with pytest.raises(ValueError, match="^illegal action 7: 2 candidates are offered$"):
            game.step(7)
        with pytest.raises(ValueError, match="^illegal action -1: "):
            game.step(-1)
        with pytest.raises(NotImplementedError, match="undo is not available in the address variant; use clone"):
            game.undo()
        while not game.done:
            game.step(game.greedy_action())
        with pytest.raises(ValueError, match="finished game"):
            game.step(0)
        assert len(game.legal_actions()) == 0 and game.segment is None and game.candidates() == []
    assert_same_state(ref, nat)
    assert ref.total_reward() > 0


def test_buffers_larger_than_the_capacity_are_slow_from_the_start():
    buffers = [Buffer("huge", 100, 0, 4), Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 2, 2, 4)]
    ref, nat = both(Problem("big", buffers, capacity=8, mode="map"), UNIT, GameConfig(variant="address", k=2))
    assert nat.decisions_left == ref.decisions_left == 3
    play_both(ref, nat, np.random.default_rng(0), greedy_share=1.0)
    assert nat.offsets()[0] == -1


@pytest.mark.parametrize("name", [e.name for e in suite_entries("xla")])
def test_engines_agree_on_every_xla_program(name):
    """The greedy episode (mcts's rollout policy) to the end, compared step by step (the whole state every
    500 steps and at the end), then a seeded random episode's first 300 steps, every 25 steps from a clone."""
    problem = {e.name: e for e in suite_entries("xla")}[name].build()
    ref, nat = both(problem, HW, GameConfig(variant="address"))
    random_ref, random_nat = ref.clone(), nat.clone()
    rng = np.random.default_rng(0)
    play_both(ref, nat, rng, greedy_share=1.0, full_every=500)
    assert ref.done and nat.done
    play_both(random_ref, random_nat, rng, greedy_share=0.2, clone_share=0.04, max_steps=300, full_every=25)


@pytest.mark.parametrize("kind", ["layered", "pack", "pack-nocap"])
def test_greedy_rollout_is_the_step_loop_in_both_engines(kind):
    """``greedy_rollout(stop_step)``: the compiled loop, the Python loop and uct's rollout loop give the same sum
    (to the last bit) and leave the same state, from several states, to a step bound and to the end."""
    from mallocgame.search.uct import MCTSConfig, rollout

    if kind == "layered":
        problem, hw = layered_network(300, seed=5), HW
    else:
        problem, hw = packed_instance(60, seed=5, capacity=32, horizon=20)[0], UNIT
        if kind == "pack-nocap":
            problem = problem.replace(capacity=None)
    ref, nat = both(problem, hw, GameConfig(variant="address", k=4))
    rng = np.random.default_rng(5)
    while not ref.done:
        for stop in (ref.steps + 7, math.inf):
            by_loop = ref.clone()
            want = rollout(by_loop, MCTSConfig(), rng, stop)
            a, b = ref.clone(), nat.clone()
            assert a.greedy_rollout(stop) == b.greedy_rollout(stop) == want
            assert_same_state(a, b)
            assert np.array_equal(a.offsets(), by_loop.offsets()) and a.steps == by_loop.steps
        for _ in range(int(rng.integers(1, max(problem.n // 4, 2)))):
            if ref.done:
                break
            action = int(rng.choice(ref.legal_actions()))
            assert ref.step(action) == nat.step(action)


@pytest.mark.parametrize("mode, seed", [("map", 0), ("map", 1), ("pack", 0)])
def test_mcts_gives_the_same_answer_and_stats_in_both_engines(monkeypatch, mode, seed):
    """mcts playing the address game with a fixed number of simulations per move and time to spare: the same
    offsets, objective and stats counts (simulations among them) from either engine."""
    from mallocgame.solvers.mcts import MCTSSolver

    if mode == "map":
        problem, hw = layered_network(60, seed=seed), HW
    else:
        problem, hw = packed_instance(30, seed=seed, capacity=32, horizon=12)[0], UNIT
    answers = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        request = MCTSSolver.request(problem, hw, time_limit=600, seed=seed, simulations=8, variant="address")
        answers[name] = MCTSSolver().solve(request)
    py, nat = answers["python"], answers["native"]
    assert py.offsets == nat.offsets and py.objective == nat.objective
    counts = {key for key, v in py.stats.items() if isinstance(v, (int, str)) and not isinstance(v, bool)}
    assert {key: py.stats[key] for key in counts} == {key: nat.stats[key] for key in counts}
    assert py.stats["simulations"] > 0 and py.stats["variant"] == "address"


def test_muzero_in_pack_mode_gives_the_same_answer_in_both_engines(monkeypatch):
    """muzero's pack-mode game is the address game, its network reads the observation: the same offsets,
    objective and simulations from either engine."""
    from mallocgame.solvers.muzero import MuZeroSolver

    problem = packed_instance(40, seed=2, capacity=32, horizon=14)[0]
    answers = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        answers[name] = MuZeroSolver().solve(MuZeroSolver.request(problem, UNIT, time_limit=600, seed=0, simulations=8))
    py, nat = answers["python"], answers["native"]
    assert py.stats["variant"] == "address" and py.stats["simulations"] > 0
    assert (py.offsets, py.objective, py.stats["simulations"]) == (nat.offsets, nat.objective, nat.stats["simulations"])
