"""The two engines of the prefetch game (MALLOCGAME_ENGINE): the compiled NativePrefetchGame against the Python
PrefetchGame, its reference. Every reward must be equal to the last bit (``==``), and so must the legal actions,
the greedy actions, the options offered (copy windows, holes, extend, where the open interval closes), the fast
intervals, the op times, the copy stalls and the observations, through random and greedy episodes with undo and
clone, on hypothesis-generated programs, on every program of the xla suite and on the HLO fixtures; and mcts in
prefetch mode gives the same answer and the same stats counts in both."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.hardware.spec import PRESETS
from mallocgame.importers.hlo import load_hlo
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.inputs.workloads import with_capacity
from mallocgame.runtime.native_engine import ENGINE_ENV
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_prefetch import NativePrefetchGame, PrefetchData, PrefetchGame
from tests.test_game_prefetch import layered, random_program

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]
DATA = Path(__file__).parent / "data"
HLO_FIXTURES = sorted(p.name[:-len(".hlo.txt")] for p in DATA.glob("*.hlo.txt"))


def test_game_builds_the_engine_named(monkeypatch):
    problem = layered(30, 1)
    config = GameConfig(variant="prefetch")
    monkeypatch.setenv(ENGINE_ENV, "python")
    assert type(Game(problem, HW, config)) is PrefetchGame
    monkeypatch.setenv(ENGINE_ENV, "native")
    game = Game(problem, HW, config)
    assert type(game) is NativePrefetchGame and isinstance(game, PrefetchGame)
    monkeypatch.delenv(ENGINE_ENV)
    assert type(Game(problem, HW, config)) is NativePrefetchGame


def assert_same_state(ref: PrefetchGame, nat: NativePrefetchGame, *, full: bool = True) -> None:
    assert ref.done == nat.done and ref.steps == nat.steps and ref.decisions_left == nat.decisions_left
    assert ref.current == nat.current
    assert ref.total_reward() == nat.total_reward()
    assert ref._time() == nat._time()
    assert np.array_equal(ref.offsets(), nat.offsets()) and ref.offsets().dtype == nat.offsets().dtype
    if not full:
        return
    assert ref.intervals() == nat.intervals()
    assert ref._op_time == nat._core.op_times()
    for kind in (0, 1):
        assert ref._stall[kind] == nat._core.stalls(kind)
    assert (ref._op_total, ref._stall_total) == (nat._core.op_total, nat._core.stall_total)
    assert [ref._rlastw, ref._rstart, ref._rcopy, ref._rbuf] == [nat._rlastw, nat._rstart, nat._rcopy, nat._rbuf]
    assert np.array_equal(ref.legal_actions(), nat.legal_actions())
    assert np.array_equal(ref.legal_mask(), nat.legal_mask())
    if not ref.done:
        a, b = ref._options(), nat._options()
        assert (a.open, a.close_end, a.extend, a.windows, a.holes) == (b.open, b.close_end, b.extend, b.windows, b.holes)
        assert ref.greedy_action() == nat.greedy_action()
    x, y = ref.observation(), nat.observation()
    for field in ("buffer", "profile", "actions", "upcoming", "progress", "mask"):
        assert np.array_equal(getattr(x, field), getattr(y, field)), field
    assert ref.describe_state() == nat.describe_state() and ref.describe_actions() == nat.describe_actions()


def play_both(ref: PrefetchGame, nat: NativePrefetchGame, rng: np.random.Generator, *, greedy_share: float,
              undo_share: float = 0.0, clone_share: float = 0.0, max_steps: float = math.inf,
              full_every: int = 1, undo_at_end: bool = True) -> list[tuple[PrefetchGame, NativePrefetchGame]]:
    """Play both games with the same actions to the end (undoing, and switching to clones, at random); returns the
    pairs of games left behind by clones, which must still agree. The whole state is compared every
    ``full_every`` steps, the rewards and intervals at every step."""
    left_behind = []
    assert_same_state(ref, nat)
    played = 0
    while not ref.done and played < max_steps:
        r = rng.random()
        if r < undo_share and ref.steps > 0:
            ref.undo()
            nat.undo()
        elif r < undo_share + clone_share:
            left_behind.append((ref, nat))
            ref, nat = ref.clone(), nat.clone()
        else:
            if rng.random() < greedy_share:
                action = ref.greedy_action()
                assert nat.greedy_action() == action
            else:
                legal = ref.legal_actions()
                assert np.array_equal(legal, nat.legal_actions())
                action = int(rng.choice(legal))
            assert ref.step(action) == nat.step(action)
            played += 1
        assert_same_state(ref, nat, full=played % full_every == 0)
    assert_same_state(ref, nat)
    while undo_at_end and ref.steps > 0 and rng.random() < 0.5:  # undo from the end
        ref.undo()
        nat.undo()
        assert_same_state(ref, nat)
    return left_behind


def both(problem, hw, config: GameConfig) -> tuple[PrefetchGame, NativePrefetchGame]:
    data = PrefetchData(problem, hw)
    return PrefetchGame(problem, hw, config, data=data), NativePrefetchGame(problem, hw, config, data=data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["random", "random", "layered"]), seed=st.integers(0, 100_000),
       k=st.sampled_from([1, 2, 3, 16]), windows=st.sampled_from([1, 2, 3]),
       order=st.sampled_from(["xla", "start", "size"]), hw=st.sampled_from(["unit", "tpuv4i"]))
def test_engines_agree_on_generated_programs(kind, seed, k, windows, order, hw):
    """random_program: reads before a write, in-place updates, outputs, touches past a buffer's end, alignments,
    sometimes no capacity; layered networks: many segments per buffer."""
    problem = random_program(seed) if kind == "random" else layered(20 + seed % 50, seed, (0.1, 0.3, 0.6)[seed % 3])
    ref, nat = both(problem, PRESETS[hw], GameConfig(variant="prefetch", k=k, windows=windows, order=order))
    rng = np.random.default_rng(seed)
    for ref_left, nat_left in play_both(ref, nat, rng, greedy_share=0.4, undo_share=0.15, clone_share=0.1):
        assert_same_state(ref_left, nat_left)
        play_both(ref_left, nat_left, rng, greedy_share=0.5)


def test_errors_match_the_reference():
    problem = layered(30, 2)
    ref, nat = both(problem, HW, GameConfig(variant="prefetch", k=2, windows=2, order="xla"))
    for game in (ref, nat):
        with pytest.raises(ValueError, match="no step to take back"):
            game.undo()
        with pytest.raises(ValueError, match=r"illegal action 99 \(the game has 6 actions\)"):
            game.step(99)
        with pytest.raises(ValueError, match=r"illegal action -1 \(the game has 6 actions\)"):
            game.step(-1)
    assert_same_state(ref, nat)
    while not ref.done:  # every refused action, at every state, leaves both games as they were
        for action in range(ref.num_actions):
            if not ref.legal_mask()[action]:
                with pytest.raises(ValueError) as want:
                    ref.step(action)
                with pytest.raises(ValueError) as got:
                    nat.step(action)
                assert str(want.value) == str(got.value)
        assert_same_state(ref, nat)
        action = ref.greedy_action()
        assert ref.step(action) == nat.step(action)
    for game in (ref, nat):
        with pytest.raises(ValueError, match="finished game"):
            game.step(game.slow_action)
    while ref.steps:  # a refused action left nothing in the journal: undo walks back to the empty game
        ref.undo()
        nat.undo()
    assert_same_state(ref, nat)
    assert ref.total_reward() == nat.total_reward() == 0.0 and len(nat.offsets()) == 0


def xla_problem(name: str, fraction: float = 0.25):
    """As the held-out protocol and experiments/bench_prefetch_game.py build them."""
    entry = {e.name: e for e in suite_entries("xla")}[name]
    held = with_capacity(entry.build(), fraction)
    return prepare(held, mode="prefetch", hardware=HW, capacity=held.capacity)[0]


@pytest.mark.parametrize("name", [e.name for e in suite_entries("xla")])
def test_engines_agree_on_every_xla_program(name):
    """The greedy episode (mcts's rollout policy) to the end, compared step by step (the whole state every
    500 steps and at the end), then a seeded random episode's first 300 steps, compared at every step."""
    problem = xla_problem(name)
    ref, nat = both(problem, HW, GameConfig(variant="prefetch", order="xla"))
    rng = np.random.default_rng(0)
    random_ref, random_nat = ref.clone(), nat.clone()
    play_both(ref, nat, rng, greedy_share=1.0, full_every=500, undo_at_end=False)
    assert ref.done and nat.done
    play_both(random_ref, random_nat, rng, greedy_share=0.2, undo_share=0.05, clone_share=0.01, max_steps=300)


@pytest.mark.parametrize("name", HLO_FIXTURES)
@pytest.mark.parametrize("fraction", [0.1, 0.4])
def test_engines_agree_on_the_hlo_fixtures(name, fraction):
    problem = prepare(load_hlo(DATA / f"{name}.hlo.txt").problem, mode="prefetch", capacity_fraction=fraction,
                      hardware=HW)[0]
    for order, greedy_share in (("xla", 1.0), ("start", 0.3)):
        ref, nat = both(problem, HW, GameConfig(variant="prefetch", order=order, k=4, windows=3))
        rng = np.random.default_rng(1)
        for pair in play_both(ref, nat, rng, greedy_share=greedy_share, undo_share=0.05, clone_share=0.02):
            play_both(*pair, rng, greedy_share=greedy_share)


@pytest.mark.parametrize("kind", ["layered", "xla"])
def test_greedy_rollout_is_the_step_loop_in_both_engines(kind):
    """``greedy_rollout(stop_step)``: the compiled loop, the Python loop and uct's rollout loop give the same sum
    (to the last bit) and leave the same state, from several states, to a step bound and to the end."""
    from mallocgame.search.uct import MCTSConfig, rollout

    problem = layered(120, 4) if kind == "layered" else xla_problem("resnet20-cifar-train")
    ref, nat = both(problem, HW, GameConfig(variant="prefetch", order="xla", k=4))
    rng = np.random.default_rng(4)
    while not ref.done:
        for stop in (ref.steps + 7, math.inf):
            by_loop = ref.clone()
            want = rollout(by_loop, MCTSConfig(rollout="greedy", epsilon=0.0), rng, stop)
            a, b = ref.clone(), nat.clone()
            assert a.greedy_rollout(stop) == b.greedy_rollout(stop) == want
            assert_same_state(a, b)
            assert a.intervals() == by_loop.intervals() and a.steps == by_loop.steps
        for _ in range(int(rng.integers(1, max(ref.decisions_left // 3, 2)))):
            if ref.done:
                break
            action = int(rng.choice(ref.legal_actions()))
            assert ref.step(action) == nat.step(action)


@pytest.mark.parametrize("seed", [0, 1])
def test_mcts_gives_the_same_answer_and_stats_in_both_engines(monkeypatch, seed):
    """mcts in prefetch mode with a fixed number of simulations per move and time to spare: the same intervals,
    objective and stats counts (simulations among them) from either engine."""
    from mallocgame.solvers.mcts import MCTSSolver

    problem = layered(40, seed)
    answers = {}
    for name in ("python", "native"):
        monkeypatch.setenv(ENGINE_ENV, name)
        answers[name] = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=600, seed=seed, simulations=8))
    py, nat = answers["python"], answers["native"]
    assert py.intervals == nat.intervals and py.objective == nat.objective
    counts = {key for key, v in py.stats.items() if isinstance(v, (int, str)) and not isinstance(v, bool)}
    assert {key: py.stats[key] for key in counts} == {key: nat.stats[key] for key in counts}
    assert py.stats["simulations"] > 0 and py.stats["moves"] > 0


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set from /proc")
def test_dropped_clones_free_their_copy_queues():
    """A search clones a state per simulation and drops it: the clones' copy queues and cover counts (the
    state's C arrays of vectors) must be freed with them, not leak a few KB per clone."""
    game = NativePrefetchGame(xla_problem("resnet20-cifar-train"), HW, GameConfig(variant="prefetch", order="xla", k=4))
    game.greedy_rollout()
    core = game._core
    assert len(core.stalls(0)) + len(core.stalls(1)) >= 100  # queues worth leaking
    for _ in range(2000):  # the allocator's pools warmed up
        core.clone()
    before = resident_bytes()
    for _ in range(10_000):
        core.clone()
    assert resident_bytes() - before < 8 * 2**20
