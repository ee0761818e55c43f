"""The mallocGame (search.game): legal play gives valid answers, rewards telescope to the evaluator's value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import peak, validate
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.problem.model import Buffer, Problem, offsets_array
from mallocgame.search.game import ACTION_FEATURES, BUFFER_FEATURES, Game, GameConfig, observation_dims
from mallocgame.search.game_address import AddressGame
from mallocgame.search.game_order import OrderGame

HW, UNIT = PRESETS["tpuv4i"], PRESETS["unit"]
VARIANTS = ("order", "address")


def make_problem(kind: str, seed: int):
    """A small problem of one of four kinds, with the hardware it is scored on."""
    if kind == "layered":
        return layered_network(25 + seed % 30, seed=seed), HW
    if kind == "csv-map":
        p = random_intervals(30, seed=seed, max_size=16, with_benefit=True)
        return p.replace(capacity=40 + seed % 20), UNIT
    if kind == "pack":
        p, _ = packed_instance(20, seed=seed, capacity=32, horizon=12)
        return p, UNIT
    if kind == "pack-nocap":
        p, _ = packed_instance(20, seed=seed, capacity=32, horizon=12)
        return p.replace(capacity=None), UNIT
    raise ValueError(kind)


def play(game: Game, rng: np.random.Generator) -> list[float]:
    rewards = []
    limit = 3 * game.data.n + 2
    while not game.done:
        legal = game.legal_actions()
        assert len(legal) > 0, "a live game must offer an action"
        rewards.append(game.step(int(rng.choice(legal))))
        assert len(rewards) <= limit, "episode does not terminate"
    return rewards


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["layered", "csv-map", "pack", "pack-nocap"]), variant=st.sampled_from(VARIANTS),
       seed=st.integers(0, 10_000), k=st.sampled_from([1, 2, 4, 16]),
       order=st.sampled_from(["start", "xla", "size"]))
def test_legal_play_is_valid_and_rewards_telescope(kind, variant, seed, k, order):
    problem, hw = make_problem(kind, seed)
    game = Game(problem, hw, GameConfig(variant=variant, k=k, order=order))
    rewards = play(game, np.random.default_rng(seed))
    off = game.offsets()
    assert validate(problem, off, mode="map") is None  # capacity, alignment, no overlap
    assert sum(rewards) == pytest.approx(game.total_reward(), abs=1e-12)
    a = problem.arrays
    if problem.mode == "map":
        ev = Evaluator(problem, hw)
        assert sum(rewards) * ev.time_all_slow == pytest.approx(ev.value(off), rel=1e-9, abs=1e-15)
        assert 0.0 <= sum(rewards) <= 1.0 + 1e-12
    elif problem.capacity is not None:
        assert sum(rewards) == pytest.approx(a.size[off >= 0].sum() / a.size.sum())
    else:  # no capacity: every buffer is placed and the return is 1 - peak / total bytes
        assert (off >= 0).all() and validate(problem, off) is None
        assert sum(rewards) == pytest.approx(1 - peak(problem, off.tolist()) / a.size.sum())


@pytest.mark.parametrize("variant", VARIANTS)
def test_clone_is_independent(variant):
    problem, hw = make_problem("layered", 3)
    game = Game(problem, hw, GameConfig(variant=variant, k=4))
    for _ in range(5):
        game.step(game.greedy_action())
    before = (game.offsets(), game.legal_mask(), game.total_reward(), game.observation().as_vector())
    twin = game.clone()
    play(twin, np.random.default_rng(0))
    assert twin.done and not game.done
    assert (game.offsets() == before[0]).all() and (game.legal_mask() == before[1]).all()
    assert game.total_reward() == before[2]
    assert np.array_equal(game.observation().as_vector(), before[3])
    # The original still plays to the same end as a fresh copy would.
    a, b = game.clone(), game.clone()
    play(a, np.random.default_rng(5)), play(b, np.random.default_rng(5))
    assert (a.offsets() == b.offsets()).all() and a.total_reward() == b.total_reward()


def brute_force_offsets(problem: Problem, off: np.ndarray, i: int, k: int) -> list[int]:
    """The k lowest canonical offsets of buffer i that fit, by checking every candidate directly."""
    a = problem.arrays
    inter = [j for j in range(problem.n) if off[j] >= 0 and a.start[j] < a.end[i] and a.start[i] < a.end[j]]
    al = int(a.alignment[i])
    cands = {0} | {-(-(int(off[j] + a.size[j])) // al) * al for j in inter}
    fits = []
    for c in sorted(cands):
        if problem.capacity is not None and c + a.size[i] > problem.capacity:
            continue
        if all(c + a.size[i] <= off[j] or off[j] + a.size[j] <= c for j in inter):
            fits.append(c)
    return fits[:k]


@pytest.mark.parametrize("kind", ["layered", "csv-map", "pack"])
def test_order_mask_lists_the_k_lowest_feasible_canonical_offsets(kind):
    problem, hw = make_problem(kind, 7)
    k = 3
    game = Game(problem, hw, GameConfig(variant="order", k=k))
    assert isinstance(game, OrderGame) and game.num_actions == k + 1
    rng = np.random.default_rng(1)
    while not game.done:
        expected = brute_force_offsets(problem, game.offsets(), game.current, k)
        offered = [h[0] for h in game.holes()]
        assert offered == expected
        mask = game.legal_mask()
        assert mask[:k].tolist() == [j < len(expected) for j in range(k)]
        assert mask[k] == (problem.mode == "map" or not expected)
        assert np.array_equal(game.observation().mask, mask)
        game.step(int(rng.choice(game.legal_actions())))


@pytest.mark.parametrize("kind", ["layered", "pack"])
def test_address_candidates_fit_the_lowest_segment(kind):
    problem, hw = make_problem(kind, 4)
    k = 3
    game = Game(problem, hw, GameConfig(variant="address", k=k))
    assert isinstance(game, AddressGame)
    a = problem.arrays
    rng = np.random.default_rng(2)
    while not game.done:
        t0, t1, h = game.segment
        cands = game.candidates()
        assert 1 <= len(cands) <= k
        undecided = [i for i in range(problem.n) if game._undecided[i]]
        al = a.alignment
        inside = [i for i in undecided if a.start[i] >= t0 and a.end[i] <= t1
                  and -(-h // al[i]) * al[i] + a.size[i] <= problem.capacity]
        rank = game.data.skyline.rank
        assert cands == sorted(inside, key=lambda i: rank[i])[:k]
        # Nothing placed overlaps the segment above its floor: the floor is really free.
        off = game.offsets()
        for j in np.flatnonzero(off >= 0):
            if a.start[j] < t1 and t0 < a.end[j]:
                assert off[j] + a.size[j] <= h
        game.step(int(rng.choice(game.legal_actions())))


def test_illegal_actions_raise():
    problem, hw = make_problem("pack", 1)
    game = Game(problem, hw, GameConfig(variant="order", k=2))
    assert game.legal_mask()[0] and not game.legal_mask()[2]  # pack mode: slow only when nothing fits
    with pytest.raises(ValueError):
        game.step(2)
    with pytest.raises(ValueError):
        game.step(7)


def test_address_close_raises_the_segment_and_ends_the_episode():
    # a then b side by side in time, c under both; closing a segment raises it to its neighbour.
    p = Problem("t", (Buffer("a", 4, 0, 2, 5.0), Buffer("b", 8, 2, 4, 1.0), Buffer("c", 4, 0, 4, 1.0)), capacity=8)
    game = Game(p, UNIT, GameConfig(variant="address", k=4))
    assert game.segment == (0, 4, 0) and [p.buffers[i].id for i in game.candidates()] == ["a", "c", "b"]
    game.step(0)  # a at 0 on [0, 2): the lowest segment is now [2, 4) at 0
    assert game.segment == (2, 4, 0)
    game.step(game.slow_action)  # close [2, 4): it rises to 4 and merges; b (size 8) no longer fits
    assert game.segment == (0, 4, 4) and [p.buffers[i].id for i in game.candidates()] == ["c"]
    game.step(game.slow_action)  # close the only segment: everything left goes slow
    assert game.done and game.segment is None
    assert game.offsets().tolist() == [0, -1, -1]
    assert game.total_reward() == pytest.approx(5.0 / 7.0)


def test_observation_shapes_match_the_declared_dims():
    problem, hw = make_problem("layered", 5)
    for variant in VARIANTS:
        cfg = GameConfig(variant=variant, k=5, upcoming=3, profile_bins=8)
        dims = observation_dims(cfg)
        game = Game(problem, hw, cfg)
        while True:
            obs = game.observation()
            assert obs.as_vector().shape == (dims["obs_dim"],) and obs.as_vector().dtype == np.float32
            assert obs.actions.shape == (cfg.k + 1, ACTION_FEATURES) and obs.buffer.shape == (BUFFER_FEATURES,)
            assert obs.upcoming.shape == (3, BUFFER_FEATURES) and obs.profile.shape == (8,)
            assert np.isfinite(obs.as_vector()).all() and np.isfinite(obs.actions).all()
            assert np.array_equal(obs.mask, game.legal_mask())
            if game.done:
                break
            game.step(game.greedy_action())


def test_greedy_xla_order_replays_greedy_xla():
    from mallocgame.solvers.greedy_xla import GreedyXLA

    problem, hw = layered_network(150, seed=8), HW
    game = Game(problem, hw, GameConfig(variant="order", order="xla", k=64))
    while not game.done:
        game.step(game.greedy_action())
    expected = GreedyXLA().solve(GreedyXLA.request(problem, hw, time_limit=5, seed=0)).offsets
    assert np.array_equal(game.offsets(), offsets_array(expected))


def test_play_greedy_prints_each_step_and_a_valid_end(tmp_path):
    from tests.conftest import DATA, run_cli

    out = tmp_path / "sol.csv"
    proc = run_cli("play", str(DATA / "pack40.64.csv"), "--policy", "greedy", "--variant", "address", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("step ") for line in lines) >= 40  # one per buffer, plus closes
    assert lines[-1].startswith("done: 40/40 buffers in fast memory, return 1") and lines[-1].endswith("valid")
    assert out.exists() and len(out.read_text().splitlines()) == 41


def test_play_interactive_reads_actions_and_rejects_bad_ones():
    from tests.conftest import DATA, run_cli

    path = str(DATA / "layered150.json")
    ok = run_cli("play", path, "--variant", "address", "--k", "4", input="1\n\n4\ng\n")
    assert ok.returncode == 0, ok.stderr
    prompts = ok.stdout.count("action> ") - ok.stdout.count("(greedy)")  # after "g" the greedy plays on
    assert prompts == 4 and "valid" in ok.stdout.splitlines()[-1]
    for text, reason in (("9\n", "is not legal"), ("x\n", "expected an action index"), ("", "input ended")):
        bad = run_cli("play", path, "--k", "4", input=text)
        assert bad.returncode == 2 and reason in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    missing = run_cli("play", "no-such-file.csv")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("kind", ["layered", "csv-map", "pack-nocap"])
def test_order_undo_restores_the_state_exactly(kind):
    problem, hw = make_problem(kind, 12)
    game = Game(problem, hw, GameConfig(variant="order", k=4))
    rng = np.random.default_rng(3)
    snapshots = []
    while not game.done:
        snapshots.append((game.offsets(), game.total_reward(), game.legal_mask(), game.observation().as_vector()))
        game.step(int(rng.choice(game.legal_actions())))
    final = game.total_reward()
    for off, total, mask, obs in reversed(snapshots):
        game.undo()
        assert (game.offsets() == off).all() and game.total_reward() == total
        assert (game.legal_mask() == mask).all() and np.array_equal(game.observation().as_vector(), obs)
    with pytest.raises(ValueError):
        game.undo()
    replay = game.clone()
    play(replay, np.random.default_rng(3))
    assert replay.total_reward() == final  # the same actions from the restored start give the same return
    with pytest.raises(NotImplementedError):
        Game(problem, hw, GameConfig(variant="address")).undo()
