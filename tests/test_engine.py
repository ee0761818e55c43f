"""The two engines of the order game (MALLOCGAME_ENGINE): the compiled NativeOrderGame against the Python
OrderGame, its reference. Every reward must be equal to the last bit (``==``), and so must the legal
actions, the greedy actions, the offered holes, the placement values and the offsets, through random and
greedy episodes with undo and clone, on hypothesis-generated programs and on the xla suite's smaller
programs (experiments/bench_engine.py plays every suite program)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.inputs.load import example_path
from mallocgame.inputs.suites import suite_entries
from mallocgame.problem import intervals
from mallocgame.problem.intervals import OverlapIndex
from mallocgame.problem.model import Buffer, InputError, Problem
from mallocgame.runtime.native_engine import ENGINE_ENV, engine
from mallocgame.search import game_order
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import NativeOrderGame, OrderGame
from tests.conftest import run_cli

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]


def test_engine_reads_the_variable(monkeypatch):
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    assert engine() == "native"
    monkeypatch.setenv(ENGINE_ENV, "python")
    assert engine() == "python"
    monkeypatch.setenv(ENGINE_ENV, " Native ")
    assert engine() == "native"
    monkeypatch.setenv(ENGINE_ENV, "fast")
    with pytest.raises(InputError, match=r"^MALLOCGAME_ENGINE='fast': unknown engine \(known: native, python\)$"):
        engine()


@pytest.mark.parametrize("engine_name, returncode", [("bad", 2), ("python", 0), ("native", 0)])
def test_the_cli_takes_either_engine_and_refuses_others_in_one_line(engine_name, returncode):
    r = run_cli("solve", str(example_path("layered150.json")), "--solver", "mcts", "--time-limit", "1",
                env={ENGINE_ENV: engine_name})
    assert r.returncode == returncode, r.stderr
    if returncode:
        assert r.stderr.strip() == "error: MALLOCGAME_ENGINE='bad': unknown engine (known: native, python)"
    else:
        assert r.stdout.startswith("mcts: ") and "Traceback" not in r.stderr


def test_game_builds_the_engine_named(monkeypatch):
    problem = layered_network(20, seed=0)
    monkeypatch.setenv(ENGINE_ENV, "python")
    assert type(Game(problem, HW)) is OrderGame
    monkeypatch.setenv(ENGINE_ENV, "native")
    game = Game(problem, HW)
    assert type(game) is NativeOrderGame and isinstance(game, OrderGame)
    assert type(Game(problem, HW, GameConfig(variant="address"))) is not NativeOrderGame  # only the order game


def assert_same_state(ref: OrderGame, nat: NativeOrderGame) -> None:
    assert ref.done == nat.done and ref.steps == nat.steps and ref.decisions_left == nat.decisions_left
    assert ref.total_reward() == nat.total_reward()
    assert np.array_equal(ref.offsets(), nat.offsets())
    assert ref.current == nat.current
    if ref.data.mode == "map":
        assert ref._saved == nat._saved
    if not ref.done:
        assert ref.holes() == nat.holes()
        assert np.array_equal(ref.legal_actions(), nat.legal_actions())
        assert ref.legal_actions().dtype == nat.legal_actions().dtype == np.int64
        assert np.array_equal(ref.legal_mask(), nat.legal_mask())
        assert ref.greedy_action() == nat.greedy_action()
        assert ref.placement_value(ref.current) == nat.placement_value(nat.current)
    a, b = ref.observation(), nat.observation()
    for field in ("buffer", "profile", "actions", "upcoming", "progress", "mask"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert ref.describe_state() == nat.describe_state() and ref.describe_actions() == nat.describe_actions()


def play_both(ref: OrderGame, nat: NativeOrderGame, rng: np.random.Generator, *, greedy_share: float,
              undo_share: float = 0.0, clone_share: float = 0.0) -> list[tuple[OrderGame, NativeOrderGame]]:
    """Play both games with the same actions to the end (undoing, and switching to clones, at random);
    returns the pairs of games left behind by clones, which must still agree."""
    left_behind = []
    assert_same_state(ref, nat)
    while not ref.done:
        r = rng.random()
        if r < undo_share and ref.steps > 0:
            ref.undo()
            nat.undo()
        elif r < undo_share + clone_share:
            left_behind.append((ref, nat))
            ref, nat = ref.clone(), nat.clone()
        else:
            legal = ref.legal_actions()
            action = ref.greedy_action() if rng.random() < greedy_share else int(rng.choice(legal))
            assert ref.step(action) == nat.step(action)
        assert_same_state(ref, nat)
    while ref.steps > 0 and rng.random() < 0.5:  # undo from the end, and at the start nothing is left
        ref.undo()
        nat.undo()
        assert_same_state(ref, nat)
    return left_behind


def both(problem: Problem, hw, config: GameConfig, *, mode: str | None = None) -> tuple[OrderGame, NativeOrderGame]:
    data = GameData(problem, hw, mode=mode)
    return OrderGame(problem, hw, config, data=data), NativeOrderGame(problem, hw, config, data=data)


@st.composite
def programs(draw):
    """A program of ``n`` buffers with arbitrary sizes, live ranges and alignments, on the unit hardware
    (additive benefits) or as a pack problem with or without a capacity."""
    n = draw(st.integers(1, 40))
    horizon = draw(st.integers(2, 30))
    # sizes in units of 1 byte, or of 2**44 bytes: offsets past 2**43 take the native hole finder's other sort
    unit = draw(st.sampled_from([1, 1, 1, 2**44]))
    buffers = []
    for i in range(n):
        start = draw(st.integers(0, horizon - 1))
        end = draw(st.integers(start + 1, horizon))
        buffers.append(Buffer(f"b{i}", draw(st.integers(1, 64)) * unit, start, end,
                              benefit=float(draw(st.integers(0, 1000))) / 7,
                              alignment=draw(st.sampled_from([1, 1, 2, 4, 8, 16]))))
    kind = draw(st.sampled_from(["map", "pack", "pack-nocap"]))
    capacity = None if kind == "pack-nocap" else draw(st.integers(1, 160)) * unit
    return Problem("hyp", buffers, capacity=capacity, mode="pack" if kind.startswith("pack") else "map")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=programs(), k=st.sampled_from([1, 2, 3, 16]), order=st.sampled_from(["start", "xla", "size"]),
       seed=st.integers(0, 2**32 - 1), tabulated=st.booleans())
def test_engines_agree_on_generated_programs(problem, k, order, seed, tabulated):
    with pytest.MonkeyPatch.context() as patch:
        if not tabulated:  # past the pair budget: the native game queries the overlap index's arrays
            patch.setattr(game_order._DecisionOrder, "PAIR_BUDGET", -1)
        ref, nat = both(problem, UNIT, GameConfig(k=k, order=order))
    assert (nat._dec.cache is not None) == tabulated
    rng = np.random.default_rng(seed)
    for ref_left, nat_left in play_both(ref, nat, rng, greedy_share=0.3, undo_share=0.2, clone_share=0.1):
        assert_same_state(ref_left, nat_left)
        play_both(ref_left, nat_left, rng, greedy_share=0.5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["layered", "csv-map", "pack", "pack-nocap"]), seed=st.integers(0, 10_000),
       k=st.sampled_from([1, 4, 16]), order=st.sampled_from(["start", "xla", "size"]))
def test_engines_agree_on_generated_workloads(kind, seed, k, order):
    """Generated workloads; "layered" has ops, so its rewards are the roofline's per-op time changes."""
    if kind == "layered":
        problem, hw = layered_network(25 + seed % 60, seed=seed), HW
    elif kind == "csv-map":
        problem, hw = random_intervals(30, seed=seed, max_size=16, with_benefit=True).replace(capacity=40 + seed % 20), UNIT
    else:
        problem, hw = packed_instance(20, seed=seed, capacity=32, horizon=12)[0], UNIT
        if kind == "pack-nocap":
            problem = problem.replace(capacity=None)
    ref, nat = both(problem, hw, GameConfig(k=k, order=order))
    rng = np.random.default_rng(seed)
    for ref_left, nat_left in play_both(ref, nat, rng, greedy_share=0.5, undo_share=0.15, clone_share=0.05):
        play_both(ref_left, nat_left, rng, greedy_share=0.0)


def test_engines_agree_in_pack_mode_on_a_map_problem():
    ref, nat = both(layered_network(80, seed=3), HW, GameConfig(k=4), mode="pack")
    play_both(ref, nat, np.random.default_rng(3), greedy_share=0.5, undo_share=0.1, clone_share=0.05)


def test_native_errors_match_the_reference():
    problem = packed_instance(12, seed=1, capacity=32, horizon=8)[0]
    ref, nat = both(problem, UNIT, GameConfig(k=2))
    for game in (ref, nat):
        with pytest.raises(ValueError, match="no step to take back"):
            game.undo()
        assert game.step(game.greedy_action()) > 0
        with pytest.raises(ValueError, match="slow memory is not allowed"):
            game.step(game.slow_action)  # pack mode: an offset fits
        with pytest.raises(ValueError, match="illegal action 7: "):
            game.step(7)
    assert_same_state(ref, nat)
    for game in (ref, nat):
        while not game.done:
            game.step(game.greedy_action())
        with pytest.raises(ValueError, match="finished game"):
            game.step(0)
    assert_same_state(ref, nat)
    # a refused action leaves nothing in the undo journal: undoing every step gives the empty game back
    for _ in range(ref.steps):
        ref.undo()
        nat.undo()
    assert_same_state(ref, nat)
    assert ref.steps == 0 and ref.total_reward() == nat.total_reward() == 0.0
    assert (ref.offsets() == -1).all()


def both_past_budget(problem: Problem, hw, config: GameConfig, patch: pytest.MonkeyPatch, *, index_budget: int,
                     mode: str | None = None, csr: bool = False) -> tuple[OrderGame, NativeOrderGame]:
    """Both games past the decision order's pair budget (no per-position neighbour table), their overlap index
    built with ``index_budget`` stored indices (a small one: checkpoints every few starts, so that a query reads
    a stored set and the starts after it); ``csr``: its stored sets as CSR arrays (as with many checkpoints),
    else as an array each."""
    patch.setattr(game_order._DecisionOrder, "PAIR_BUDGET", -1)
    data = GameData(problem, hw, mode=mode)
    with pytest.MonkeyPatch.context() as sets:
        if csr:
            sets.setattr(intervals, "_SWEEP_CHECKPOINTS", 0)
        data.index = OverlapIndex(data.start, data.end, budget=index_budget)
    assert isinstance(data.index.cp_sets, list) != csr
    ref, nat = OrderGame(problem, hw, config, data=data), NativeOrderGame(problem, hw, config, data=data)
    assert nat._dec.cache is None
    return ref, nat


PAST_BUDGET_PROGRAMS = {
    "layered-map": lambda: (layered_network(400, seed=7), HW, None),
    "layered-pack": lambda: (layered_network(300, seed=8), HW, "pack"),
    "intervals-map": lambda: (random_intervals(400, seed=9, max_size=16, with_benefit=True).replace(capacity=200), UNIT,
                              None),
    "intervals-pack": lambda: (packed_instance(300, seed=10, capacity=64, horizon=60)[0], UNIT, None),
    "intervals-pack-nocap": lambda: (packed_instance(300, seed=11, capacity=64, horizon=60)[0].replace(capacity=None),
                                     UNIT, None),
}


@pytest.mark.parametrize("index_budget, csr", [(50, False), (50, True), (4_000_000, False)])
@pytest.mark.parametrize("name", sorted(PAST_BUDGET_PROGRAMS))
def test_engines_agree_past_the_pair_budget(name, index_budget, csr):
    """Past the pair budget the native game queries the overlap index's arrays in compiled code: the same rewards
    (to the last bit), offsets, holes, legal and greedy actions as the reference, through a greedy and a random
    episode with undo and clone, and the same greedy rollouts from states along the way, on layered programs
    (ops) and random intervals, map and pack modes, with checkpoints at every start and every few starts, their
    sets stored as arrays or as CSR rows."""
    problem, hw, mode = PAST_BUDGET_PROGRAMS[name]()
    with pytest.MonkeyPatch.context() as patch:
        ref, nat = both_past_budget(problem, hw, GameConfig(k=4), patch, index_budget=index_budget, mode=mode,
                                    csr=csr)
        assert (ref.data.index.stride > 1) == (index_budget == 50)
        rng = np.random.default_rng(index_budget)
        for greedy_share in (1.0, 0.3):
            a, b = ref.clone(), nat.clone()
            for a_left, b_left in play_both(a, b, rng, greedy_share=greedy_share, undo_share=0.1, clone_share=0.02):
                assert_same_state(a_left, b_left)
        while not ref.done:
            a, b = ref.clone(), nat.clone()
            assert a.greedy_rollout() == b.greedy_rollout()
            assert_same_state(a, b)
            for _ in range(int(rng.integers(1, problem.n // 5))):
                if ref.done:
                    break
                action = int(rng.choice(ref.legal_actions()))
                assert ref.step(action) == nat.step(action)


def test_the_native_game_past_the_pair_budget_calls_no_python_per_decision():
    """The native game's decisions read the overlap index in compiled code: the decision order's Python
    ``earlier_neighbours`` (the reference's query) is never called, and the game ends where the reference does."""
    problem = layered_network(300, seed=12)

    def refuse(self, pos):
        raise AssertionError(f"earlier_neighbours({pos}) called")

    with pytest.MonkeyPatch.context() as patch:
        ref, nat = both_past_budget(problem, HW, GameConfig(), patch, index_budget=200)
        with pytest.MonkeyPatch.context() as no_python:
            no_python.setattr(game_order._DecisionOrder, "earlier_neighbours", refuse)
            greedy = nat.clone()
            greedy_total = greedy.greedy_rollout()
            stepped = nat.clone()
            rng = np.random.default_rng(12)
            stepped_rewards = [stepped.step(int(rng.choice(stepped.legal_actions()))) for _ in range(150)]
        ref_greedy = ref.clone()
        assert ref_greedy.greedy_rollout() == greedy_total and greedy.done
        assert np.array_equal(ref_greedy.offsets(), greedy.offsets())
        rng = np.random.default_rng(12)
        assert [ref.step(int(rng.choice(ref.legal_actions()))) for _ in range(150)] == stepped_rewards
        assert_same_state(ref, stepped)


XLA_SMALL = ["gpt2-tiny-train-adam", "mixer-s16-b8", "vit-s16-b8", "resnet20-cifar-train", "gpt2-medium-decode-kv"]


@pytest.fixture(scope="module")
def xla_programs():
    entries = {e.name: e for e in suite_entries("xla")}
    return {name: entries[name].build() for name in XLA_SMALL}


@pytest.mark.parametrize("name", XLA_SMALL)
def test_engines_agree_on_xla_programs(xla_programs, name):
    """A greedy and a seeded random episode on the suite's programs under 1,300 buffers, compared at every
    step, then undone halfway and replayed from a clone."""
    problem = xla_programs[name]
    for greedy_share, seed in ((1.0, 0), (0.0, 1)):
        ref, nat = both(problem, HW, GameConfig())
        rng = np.random.default_rng(seed)
        play_both(ref, nat, rng, greedy_share=greedy_share)
        for _ in range(ref.steps // 2):
            ref.undo()
            nat.undo()
        assert_same_state(ref, nat)
        play_both(ref.clone(), nat.clone(), rng, greedy_share=greedy_share, undo_share=0.05)


def test_a_long_undo_journal_is_freed_without_recursion():
    """300,000 steps' undo records (a chain shared by clones) are freed one by one: freed by recursion, a chain
    this long overflowed the C stack (a segmentation fault), so the game runs in a child process."""
    script = textwrap.dedent("""
        from mallocgame.hardware.spec import PRESETS
        from mallocgame.problem.model import Buffer, Problem
        from mallocgame.search.game import GameConfig
        from mallocgame.search.game_order import NativeOrderGame
        n = 300_000
        problem = Problem("chain", [Buffer(f"b{i}", 1, i, i + 1) for i in range(n)], capacity=1, mode="pack")
        game = NativeOrderGame(problem, PRESETS["unit"], GameConfig(k=1))
        while not game.done:
            game.step(0)
        clone = game.clone()
        del game
        clone.undo()
        del clone
        print("freed")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "freed", done.stderr[-2000:]


@pytest.mark.parametrize("kind", ["layered", "pack", "pack-nocap", "xla"])
def test_greedy_rollout_is_the_step_loop_in_both_engines(kind, xla_programs):
    """``greedy_rollout(stop_step)``: the compiled loop, the Python loop and uct's rollout loop give the same sum
    (to the last bit) and leave the same state, from several states, to a step bound and to the end."""
    from mallocgame.search.uct import MCTSConfig, rollout

    if kind == "layered":
        problem, hw = layered_network(300, seed=5), HW
    elif kind == "xla":
        problem, hw = xla_programs["resnet20-cifar-train"], HW
    else:
        problem, hw = packed_instance(60, seed=5, capacity=32, horizon=20)[0], UNIT
        if kind == "pack-nocap":
            problem = problem.replace(capacity=None)
    ref, nat = both(problem, hw, GameConfig(k=4))
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
