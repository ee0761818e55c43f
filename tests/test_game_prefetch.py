"""The prefetch variant of the mallocGame (search.game_prefetch) and mcts in prefetch mode (solvers/mcts.py).

Every state's intervals are a valid answer, the rewards telescope to the prefetch evaluator's value, the
masks say exactly which actions step() takes, undo and clone restore and separate states, and mcts returns
valid answers never worse than the greedy playout of its game, the lifted map greedy or its hint."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.algorithms.placement import greedy_place, xla_order
from mallocgame.engine.runner import run_solver
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import Buffer, FastInterval, Op, Operand, Problem, Solution, Status
from mallocgame.search.game import ACTION_FEATURES, Game, GameConfig, observation_dims
from mallocgame.search.game_prefetch import IN_PLACE, PrefetchGame, intervals_of, rows_of
from mallocgame.search.uct import play_greedy

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]  # unit: fast 10 B/s, slow 1 B/s, copies 1 B/s, 1 FLOP/s


def layered(n: int, seed: int, fraction: float = 0.3) -> Problem:
    return layered_network(n, seed=seed, capacity_fraction=fraction).replace(mode="prefetch")


def random_program(seed: int) -> Problem:
    """Parameters read several times, in-place updates, reads before a buffer's first write, outputs, touches
    past a buffer's end (never servable), zero-FLOP and compute-bound ops, alignments, sometimes no capacity:
    the corners layered networks lack."""
    rng = np.random.default_rng(seed)
    n_ops, n_bufs = int(rng.integers(4, 12)), int(rng.integers(2, 9))
    kinds = rng.choice(["weight", "activation", "output", "activation"], n_bufs)
    touches: dict[int, list[tuple[str, str, int]]] = {t: [] for t in range(n_ops)}
    buffers = []
    for i in range(n_bufs):
        bid, size = f"b{i}", int(rng.integers(1, 6)) * 2
        ops = sorted(rng.choice(n_ops, size=int(rng.integers(1, min(n_ops, 5) + 1)), replace=False).tolist())
        for j, t in enumerate(ops):
            if kinds[i] == "weight":
                access = ["read"]
            elif j == 0:
                access = ["write"] if rng.random() < 0.8 else ["read"]
            else:
                access = [["read"], ["write"], ["read", "write"]][int(rng.choice(3, p=[0.6, 0.2, 0.2]))]
            for a in access:
                touches[t].append((bid, a, size))
        start = 0 if kinds[i] == "weight" and rng.random() < 0.5 else ops[0]
        end = n_ops if kinds[i] == "output" else ops[-1] + 1
        if len(ops) > 1 and rng.random() < 0.15:
            end = ops[-2] + 1  # the last touch lies past the end: it can only be slow
        buffers.append(Buffer(bid, size, start, end, alignment=int(rng.choice([1, 1, 4])), kind=str(kinds[i])))
    ops = tuple(Op(f"op{t}", flops=float(rng.choice([0.0, 4.0, 40.0])), operands=tuple(Operand(*o) for o in touches[t]))
                for t in range(n_ops))
    capacity = None if rng.random() < 0.1 else int(rng.integers(6, 20))
    return Problem(f"random-{seed}", tuple(buffers), ops=ops, capacity=capacity, mode="prefetch")


def exact_value(problem: Problem, hw, intervals) -> float:
    ev = PrefetchEvaluator.of(problem, hw)
    return ev.value(intervals) / ev.time_all_slow


def play(game: Game, rng: np.random.Generator, greedy_share: float = 0.3, check_every_step: bool = False) -> list[float]:
    """Random legal play (some greedy moves); with ``check_every_step`` each state is validated and scored."""
    rewards = []
    problem, hw = game.data.problem, game.data.hardware
    while not game.done:
        legal = game.legal_actions()
        assert game.slow_action in legal.tolist()
        action = game.greedy_action() if rng.random() < greedy_share else int(rng.choice(legal))
        assert action in legal.tolist()
        rewards.append(game.step(action))
        if check_every_step:
            assert validate_intervals(problem, game.intervals()) is None
            assert game.total_reward() == pytest.approx(exact_value(problem, hw, game.intervals()), abs=1e-9)
        assert len(rewards) <= problem.touches.ops.size, "more decisions than touches"
    return rewards


# ---------------------------------------------------------------- valid answers, exact rewards

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), k=st.sampled_from([1, 2, 4]), windows=st.sampled_from([1, 2, 3]),
       order=st.sampled_from(["xla", "start", "size"]))
def test_every_state_is_valid_and_rewards_are_the_exact_change_of_time(seed, k, windows, order):
    problem = random_program(seed)
    game = Game(problem, UNIT, GameConfig(variant="prefetch", k=k, windows=windows, order=order))
    rewards = play(game, np.random.default_rng(seed), check_every_step=True)
    assert sum(rewards) == pytest.approx(game.total_reward(), abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_random_playouts_on_layered_networks_are_valid_and_telescope(seed):
    problem = layered(40 + 10 * (seed % 4), seed, fraction=(0.15, 0.3, 0.6)[seed % 3])
    game = Game(problem, HW, GameConfig(variant="prefetch", k=(2, 4, 8)[seed % 3], windows=1 + seed % 3, order="xla"))
    rewards = play(game, np.random.default_rng(seed), greedy_share=(0.0, 0.5, 0.9)[seed % 3])
    assert validate_intervals(problem, game.intervals()) is None
    assert sum(rewards) == pytest.approx(exact_value(problem, HW, game.intervals()), abs=1e-9)
    assert game.total_reward() == pytest.approx(sum(rewards), abs=1e-12)


def test_greedy_playouts_save_time_and_beat_the_lifted_map_greedy():
    for seed in range(3):
        problem = layered(120, seed)
        game = Game(problem, HW, GameConfig(variant="prefetch", order="xla"))
        play_greedy(game)
        assert validate_intervals(problem, game.intervals()) is None
        value = exact_value(problem, HW, game.intervals())
        assert value == pytest.approx(game.total_reward(), abs=1e-9) and value > 0
        lifted = lift_map_answer(problem, greedy_place(problem, xla_order(problem, game.data.benefit), problem.capacity))
        assert value > exact_value(problem, HW, lifted)


# ---------------------------------------------------------------- the rules of a segment, on tiny programs

def program(ops: list[list[tuple[str, str, int]]], buffers: list[tuple[str, int, str]], *, capacity: int = 16,
            flops: list[float] | None = None) -> Problem:
    first, last = {}, {}
    for t, operands in enumerate(ops):
        for b, _, _ in operands:
            first.setdefault(b, t)
            last[b] = t
    bufs = tuple(Buffer(b, size, first[b], len(ops) if kind == "output" else last[b] + 1, kind=kind)
                 for b, size, kind in buffers)
    flops = flops or [0.0] * len(ops)
    return Problem("tiny", bufs, ops=tuple(Op(f"op{t}", flops=flops[t], operands=tuple(Operand(*o) for o in operands))
                                         for t, operands in enumerate(ops)), capacity=capacity, mode="prefetch")


def tiny_game(problem: Problem, **config) -> PrefetchGame:
    return Game(problem, UNIT, GameConfig(variant="prefetch", **config))


def test_a_weight_is_prefetched_in_the_window_the_picker_chooses():
    # w (4 bytes, a 4 s copy) read at op 4; ops 0..3 take 1, 2, 3, 4 s (FLOPs): the XLA picker wants >= 6 s of
    # estimated op time inside (c, 4): the latest such c is 1 (ops 2 and 3: 7 s); "earliest" is c = -1.
    p = program([[("x", "write", 1)]] * 4 + [[("w", "read", 4)]], [("x", 1, "activation"), ("w", 4, "weight")],
                flops=[1.0, 2.0, 3.0, 4.0, 0.0])
    g = tiny_game(p, order="start", windows=3, k=2)
    while g.current != 1:
        g.step(g.slow_action)
    o = g._options()
    assert o.windows == [1, None, -1]
    assert o.windows[1] is None and o.holes[1] == []  # "safe" equals "xla" here (no operand to speed up): masked
    mask = g.legal_mask()
    assert mask.tolist() == [True, False, False, False, True, False, False, True]
    reward = g.step(0)
    assert g.intervals() == (FastInterval(1, 0, 4, 5, 1),)
    # op 4: 4 B slow (4 s) -> fast (0.4 s); the copy fits its 7 s window: no stall
    assert reward * PrefetchEvaluator.of(p, UNIT).time_all_slow == pytest.approx(3.6)


def test_in_place_segments_offer_one_window_and_extend_keeps_the_interval():
    # a written at 0 (pure write), read at 1 and 3; b (8 bytes) lives at op 2 only.
    p = program([[("a", "write", 4)], [("a", "read", 4)], [("b", "write", 8)], [("a", "read", 4)]],
                [("a", 4, "activation"), ("b", 8, "activation")], capacity=10)
    g = tiny_game(p, order="start", k=2)
    assert g.current == 0 and g._options().windows == [IN_PLACE, None]
    assert g.legal_mask().tolist() == [True, False, False, False, False, True]  # no extend without an interval
    g.step(0)
    assert g.intervals() == (FastInterval(0, 0, 0, 1, None),)
    assert g.legal_mask()[g.extend_action]
    g.step(g.extend_action)
    assert g.intervals() == (FastInterval(0, 0, 0, 2, None),)
    g.step(g.extend_action)  # resident across op 2, where b must then go above it
    assert g.intervals() == (FastInterval(0, 0, 0, 4, None),)
    assert g.current == 1 and g._options().holes[0] == []  # 4 + 8 > 10: b does not fit
    g.step(g.slow_action)
    assert g.done and validate_intervals(p, g.intervals()) is None


def test_extend_is_illegal_when_another_buffer_holds_the_addresses_in_the_gap():
    p = program([[("a", "write", 4)], [("b", "write", 8)], [("a", "read", 4)]],
                [("a", 4, "activation"), ("b", 8, "activation")], capacity=8)
    g = tiny_game(p, order="size")  # b first: it takes [0, 8) at op 1
    g.step(0)
    assert g.intervals() == (FastInterval(1, 0, 1, 2, None),)
    g.step(0)  # a produced in place at op 0 at offset 0 (b is not live there)
    assert g.intervals()[-1] == FastInterval(0, 0, 0, 1, None)
    mask = g.legal_mask()
    assert not mask[g.extend_action]
    with pytest.raises(ValueError):
        g.step(g.extend_action)
    # the value is needed at op 2, so closing a evicts it; its window (0, 1) is empty: the whole copy stalls
    g.step(g.slow_action)
    ev = PrefetchEvaluator.of(p, UNIT)
    assert validate_intervals(p, g.intervals()) is None
    assert ev.breakdown(g.intervals()).stall == pytest.approx(4.0)
    assert g.total_reward() == pytest.approx(ev.value(g.intervals()) / ev.time_all_slow, abs=1e-12)


def test_a_value_is_kept_resident_until_its_eviction_fits():
    # a (output) written at 0 and never touched again: evicted after op 0, before its interval ends; ops 1..4 take
    # 2.5 s each, the copy 4 s: the interval is kept to op 4 (1.5 x 4 s = 6 s of window needs ops 1..3).
    p = program([[("a", "write", 4)], [], [], [], []], [("a", 4, "output")], flops=[0.0, 2.5, 2.5, 2.5, 2.5])
    g = tiny_game(p)
    g.step(0)
    assert g.done and g.intervals() == (FastInterval(0, 0, 0, 4, None),)
    assert PrefetchEvaluator.of(p, UNIT).breakdown(g.intervals()).stall == 0.0


def test_every_masked_action_is_refused_and_every_legal_one_taken():
    for seed in range(25):
        problem = random_program(seed)
        game = Game(problem, UNIT, GameConfig(variant="prefetch", k=2, windows=3, order="xla"))
        rng = np.random.default_rng(seed)
        while not game.done:
            mask = game.legal_mask()
            assert mask.shape == (game.num_actions,) and mask[game.slow_action]
            for a in range(game.num_actions):
                probe = game.clone()
                if mask[a]:
                    probe.step(a)
                    assert validate_intervals(problem, probe.intervals()) is None
                else:
                    with pytest.raises(ValueError):
                        probe.step(a)
            game.step(int(rng.choice(np.flatnonzero(mask))))


# ---------------------------------------------------------------- undo, clone, determinism, the interface

def test_undo_restores_every_state_and_clones_are_independent():
    problem = layered(60, 5, 0.25)
    game = Game(problem, HW, GameConfig(variant="prefetch", k=3, windows=3, order="xla"))
    rng = np.random.default_rng(5)
    seen = [(game.intervals(), game.total_reward(), game.legal_mask().tolist())]
    while not game.done:
        game.step(int(rng.choice(game.legal_actions())))
        seen.append((game.intervals(), game.total_reward(), game.legal_mask().tolist()))
    twin = game.clone()
    while game.steps:
        game.undo()
        seen.pop()
        intervals, total, mask = seen[-1]
        assert game.intervals() == intervals and game.legal_mask().tolist() == mask
        assert game.total_reward() == pytest.approx(total, abs=1e-12)
    assert twin.done and twin.intervals() != game.intervals()
    with pytest.raises(ValueError):
        game.undo()
    # a replay from the start gives the same values again
    play_greedy(game)
    again = Game(problem, HW, GameConfig(variant="prefetch", k=3, windows=3, order="xla"))
    play_greedy(again)
    assert game.intervals() == again.intervals() and game.total_reward() == again.total_reward()


def test_rows_and_observations():
    problem = layered(50, 2)
    config = GameConfig(variant="prefetch", k=3, windows=2)
    game = Game(problem, HW, config)
    assert isinstance(game, PrefetchGame) and game.num_actions == config.num_actions == 3 * 2 + 2
    dims = observation_dims(config)
    while not game.done:
        obs = game.observation()
        assert obs.actions.shape == (dims["num_actions"], ACTION_FEATURES)
        assert obs.as_vector().shape == (dims["obs_dim"],) and np.isfinite(obs.as_vector()).all()
        assert (obs.mask == game.legal_mask()).all() and (obs.actions[:, 7] >= obs.mask).all()
        assert len(game.describe_actions()) == int(obs.mask.sum())
        assert game.describe_state().startswith("step ")
        game.step(game.greedy_action())
    assert intervals_of(game.offsets()) == game.intervals() == intervals_of(rows_of(game.intervals()))
    assert game.describe_state().startswith("done") and not game.legal_mask().any()
    with pytest.raises(ValueError):
        game.step(game.slow_action)
    with pytest.raises(ValueError):
        GameConfig(variant="prefetch", windows=4)


def test_a_program_without_ops_has_no_prefetch_game():
    p = Problem("csv", (Buffer("a", 4, 0, 2),), capacity=8, mode="prefetch")
    with pytest.raises(ValueError, match="ops"):
        Game(p, UNIT, GameConfig(variant="prefetch"))


# ---------------------------------------------------------------- mcts in prefetch mode

def prefetch_greedy_value(problem: Problem, **config) -> float:
    game = Game(problem, HW, GameConfig(variant="prefetch", k=4, order="xla", **config))
    play_greedy(game)
    return PrefetchEvaluator.of(problem, HW).value(game.intervals())


@pytest.mark.parametrize("n, seed", [(60, 1), (90, 2), (120, 3)])
def test_mcts_returns_valid_answers_at_least_as_good_as_the_greedy_playout(n, seed):
    problem = layered(n, seed)
    report = run_solver("mcts", problem, HW, time_limit=1.5, seed=0, options={"simulations": 4})
    assert report.valid, report.violation
    assert report.objective >= prefetch_greedy_value(problem) - 1e-12
    lifted = lift_map_answer(problem, greedy_place(problem, xla_order(problem, PrefetchEvaluator.of(problem, HW).base.benefits),
                                                   problem.capacity))
    assert report.objective >= PrefetchEvaluator.of(problem, HW).value(lifted) - 1e-12


def test_mcts_search_improves_on_the_greedy_playout_and_is_deterministic():
    problem = layered(30, 6)
    options = {"simulations": 6}
    a = run_solver("mcts", problem, HW, time_limit=30, seed=3, options=options)
    b = run_solver("mcts", problem, HW, time_limit=30, seed=3, options=options)
    assert a.valid and a.intervals == b.intervals and a.objective == b.objective
    assert a.stats["finished_greedily_at"] is None  # the clock did not bind: the answer is the search's
    assert a.objective > prefetch_greedy_value(problem)


def test_mcts_keeps_a_better_hint_and_lifts_a_map_hint():
    problem = layered(80, 4)
    ev = PrefetchEvaluator.of(problem, HW)
    good = run_solver("mcts", problem, HW, time_limit=3, seed=1, options={"simulations": 8})
    hint = Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode="prefetch", intervals=good.intervals)
    quick = run_solver("mcts", problem, HW, time_limit=0.3, seed=2, hint=hint, options={"simulations": 1})
    assert quick.valid and quick.objective >= ev.value(good.intervals)
    offsets = greedy_place(problem, xla_order(problem, ev.base.benefits), problem.capacity)
    map_hint = Solution(offsets=tuple(None if o < 0 else int(o) for o in offsets), status=Status.FEASIBLE, mode="map")
    report = run_solver("mcts", problem, HW, time_limit=0.3, seed=2, hint=map_hint, options={"simulations": 1})
    assert report.valid and report.objective >= ev.value(lift_map_answer(problem, offsets)) - 1e-12


def test_mcts_on_an_empty_or_full_prefetch_program():
    empty = Problem("empty", (), capacity=64, mode="prefetch")
    assert run_solver("mcts", empty, UNIT, time_limit=1, seed=0).valid
    problem = layered(30, 1)
    nothing_fits = problem.replace(capacity=min(b.size for b in problem.buffers) - 1)
    report = run_solver("mcts", nothing_fits, HW, time_limit=1, seed=0)
    assert report.valid and report.placed == 0 and report.objective == 0.0


def _key(iv: FastInterval) -> tuple:
    return iv.buffer, iv.start, iv.end, iv.offset, -3 if iv.copy_start is None else iv.copy_start


@pytest.mark.parametrize("seed", range(6))
def test_following_an_episode_of_the_game_replays_it_exactly(seed):
    """answer_action (the expert-iteration teacher that follows a solver's answer) is exact on answers the game can
    express: an episode of greedy and random moves, followed move by move, gives the same intervals and reward."""
    from mallocgame.search.muzero.expert import GAME_FIELDS, stays_by_buffer

    problem = layered(60, seed) if seed % 2 else random_program(seed)
    config = GameConfig(**GAME_FIELDS["prefetch"])
    rng = np.random.default_rng(seed)
    played = Game(problem, HW, config)
    while not played.done:
        legal = np.flatnonzero(played.legal_mask())
        played.step(played.greedy_action() if rng.random() < 0.5 else int(rng.choice(legal)))
    stays = stays_by_buffer(played.intervals())
    follower = Game(problem, HW, config)
    while not follower.done:
        action = follower.answer_action(stays)
        assert follower.legal_mask()[action]
        follower.step(action)
    assert sorted(map(_key, follower.intervals())) == sorted(map(_key, played.intervals()))
    assert follower.total_reward() == pytest.approx(played.total_reward(), abs=1e-12)


def test_following_msa_answer_gives_legal_moves_and_a_valid_answer():
    from mallocgame.search.muzero.expert import GAME_FIELDS, stays_by_buffer

    problem = layered(80, 3)
    answer = run_solver("msa", problem, HW, time_limit=5, seed=0)
    assert answer.valid
    for follow_offsets in (True, False):
        game = Game(problem, HW, GameConfig(**GAME_FIELDS["prefetch"]))
        while not game.done:
            action = game.answer_action(stays_by_buffer(answer.intervals), follow_offsets)
            assert game.legal_mask()[action]
            game.step(action)
        assert validate_intervals(problem, list(game.intervals())) is None
