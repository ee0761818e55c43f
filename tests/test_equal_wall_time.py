"""The equal-wall-time comparison (experiments/compare_equal_wall_time.py, issue 40 item 6): its set is fresh and fixed."""

from __future__ import annotations

import pytest

from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Curriculum
from tests.conftest import experiment_module

C = experiment_module("compare_equal_wall_time")
H = experiment_module("heldout")


def test_the_torch_seeds_are_no_held_out_confirmation_prefetch_or_training_seed():
    seeds = set(C.TORCH_SEEDS)
    assert len(seeds) == 8 and not seeds & (H.all_seeds() | {r.seed for r in H.prefetch_recipes()})
    assert max(seeds) < H.HELDOUT_SEED_BASE < H.CONFIRM_SEED_BASE < TRAIN_SEED_BASE
    # the curriculum draws its problems from seeds at TRAIN_SEED_BASE and above only
    import numpy as np

    drawn = Curriculum(min_size=100, max_size=200).sample(np.random.default_rng([0, 0]))
    assert drawn.seed >= TRAIN_SEED_BASE


def test_the_contestants_are_the_defaults_the_auto_leaf_and_the_modes_baseline():
    assert C.CONTESTANTS["muzero"] == ("muzero", {}) and C.CONTESTANTS["mcts"] == ("mcts", {})
    assert C.CONTESTANTS["muzero-auto"] == ("muzero", {"leaf": "auto"})
    assert C.BASELINE == {"map": "greedy-xla", "prefetch": "msa"}
    assert ("muzero", "mcts") in C.PAIRS and ("muzero-auto", "mcts") in C.PAIRS


def test_an_unknown_family_is_refused():
    with pytest.raises(SystemExit):
        C.problems(("nonsense",))
