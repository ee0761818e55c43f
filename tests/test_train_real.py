"""Training at real size: named curricula, tuning recipes, tuning during training, simulator reanalyse at scale
and the ``mallocgame train`` flags that reach them (small problems and a toy game: a few seconds)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgame.search.muzero import checkpoint as ckpt  # noqa: E402
from mallocgame.search.muzero.problems import (  # noqa: E402
    REAL_SIZES,
    TRAIN_SEED_BASE,
    TUNING_SEED_BASE,
    Curriculum,
    Recipe,
    named_curriculum,
    tuning_recipes,
)
from mallocgame.search.muzero.train import TrainConfig, best_path, new_state, reanalyse, train  # noqa: E402
from tests.conftest import run_cli  # noqa: E402
from tests.test_muzero import TINY, params, toy_game  # noqa: E402


def kinds(curriculum: Curriculum, draws: int = 400) -> dict[str, int]:
    rng = np.random.default_rng(0)
    out: dict[str, int] = {}
    for _ in range(draws):
        r = curriculum.sample(rng)
        assert curriculum.min_size <= r.n <= curriculum.max_size and r.seed >= TRAIN_SEED_BASE
        out[r.kind] = out.get(r.kind, 0) + 1
    return out


def test_real_curriculum_draws_every_family_at_real_size_and_prefetch_never_intervals():
    real_map, real_prefetch = named_curriculum("real", "map"), named_curriculum("real", "prefetch")
    assert (real_map.min_size, real_map.max_size) == REAL_SIZES == (1000, 15000)
    assert set(kinds(real_map)) == {"xla", "torch", "layered", "intervals"}
    assert set(kinds(real_prefetch)) == {"xla", "torch", "layered"}  # the prefetch game needs ops
    assert named_curriculum("real", "map", 2000, 3000).max_size == 3000


def test_small_curriculum_is_the_original_stream():
    small, original = named_curriculum("small", "map"), Curriculum(min_size=16, max_size=64)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    assert [small.sample(a) for _ in range(50)] == [original.sample(b) for _ in range(50)]
    with pytest.raises(ValueError, match="unknown curriculum 'huge'"):
        named_curriculum("huge", "map")


def test_tuning_recipes_are_fixed_span_the_sizes_and_are_never_drawn():
    real = named_curriculum("real", "map")
    recipes = tuning_recipes(real, 4)
    assert recipes == tuning_recipes(real, 4)
    assert [r.n for r in recipes] == [1000, 5666, 10333, 15000]
    assert [r.kind for r in recipes] == ["xla", "torch", "layered", "intervals"]
    assert [r.seed for r in recipes] == [TUNING_SEED_BASE + i for i in range(4)]
    assert "intervals" not in {r.kind for r in tuning_recipes(named_curriculum("real", "prefetch"), 6)}
    rng = np.random.default_rng(1)
    drawn = {real.sample(rng).seed for _ in range(20_000)}
    assert not drawn & {r.seed for r in recipes}


def test_tuning_during_training_keeps_the_best_and_leaves_the_run_unchanged(tmp_path):
    recipes = [Recipe("layered", 6, 11), Recipe("layered", 7, 12)]
    plain = new_state(TINY, 4, toy_game, {"variant": "toy"}, Recipe("layered", 5, 1))
    tuned = new_state(TINY, 4, toy_game, {"variant": "toy"}, Recipe("layered", 5, 1))
    path = str(tmp_path / "run.pt")
    train(plain, 12, toy_game)
    train(tuned, 12, toy_game, checkpoint_path=path, tuning=recipes, tune_every=1)
    assert all(np.array_equal(x, y) for x, y in zip(params(plain), params(tuned)))  # no draw from the run's rng
    entries = [e for e in tuned.log if "tune_vs_greedy" in e]
    assert len(entries) == len(tuned.log) == 3
    assert all(e["tune_value_mae"] >= 0 and e["tune_value_base"] > 0 for e in entries)
    scores = [e["tune_vs_greedy"] for e in entries]
    best = ckpt.load(best_path(path))
    assert "train" not in best and best["summary"]["tune_vs_greedy"] == max(scores)
    assert entries[0].get("best") == 1
    assert best_path("out/run.pt") == "out/run.best.pt"


def test_simulator_reanalyse_builds_each_program_once():
    built: list[Recipe] = []

    def counting(recipe: Recipe):
        built.append(recipe)
        return toy_game(recipe)

    config = TrainConfig(games_per_iter=2, updates_per_iter=2, batch_size=8, unroll=2, td_steps=2, simulations=2,
                         latent=16, action_latent=8, hidden=16, model="simulator", rollout_depth=2,
                         reanalyse_fraction=1.0, curriculum=Curriculum(min_size=8, max_size=8))
    state = new_state(config, 0, toy_game, {"variant": "toy"}, Recipe("layered", 5, 1))
    train(state, 2, toy_game)
    positions = state.replay.sample_positions(np.random.default_rng(3), 8)
    assert reanalyse(state, positions, counting) == len(set(positions)) > 2
    assert len(built) == len({state.replay.trajectories[i].recipe for i, _ in set(positions)}) <= 2


def test_train_cli_prefetch_mode_writes_the_solvers_game_and_a_best_checkpoint(tmp_path):
    out = tmp_path / "pf.pt"
    r = run_cli("train", "--mode", "prefetch", "--min-size", "20", "--max-size", "24", "--model", "simulator",
                "--rollout-depth", "4", "--steps", "2", "--games-per-iter", "1", "--updates-per-iter", "2",
                "--batch-size", "4", "--simulations", "2", "--reanalyse-fraction", "0", "--tune-every", "1",
                "--tune-count", "1", "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "tune_vs_greedy=" in r.stdout and "tuning recipes: layered-20-c0.25-s1970000" in r.stdout
    saved = ckpt.load(str(out))
    assert saved["game"] == {"variant": "prefetch", "k": 4, "order": "xla", "windows": 2}
    assert saved["train"]["rollout_depth"] == 4 and saved["train"]["model"] == "simulator"
    assert ckpt.load(str(tmp_path / "pf.best.pt"))["game"] == saved["game"]


@pytest.mark.parametrize("args, words", [
    (["--rollout-depth", "3"], "--rollout-depth: needs --model simulator"),
    (["--tune-every", "-1"], "--tune-every: must be >= 0"),
    (["--curriculum", "real", "--max-size", "500"], "--max-size: must be >= --min-size (1000)"),
])
def test_train_cli_refuses_bad_real_size_settings_in_one_line(tmp_path, args, words):
    r = run_cli("train", "--steps", "1", "--out", str(tmp_path / "x.pt"), *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert words in lines[0], lines[0]
    assert not (tmp_path / "x.pt").exists()
