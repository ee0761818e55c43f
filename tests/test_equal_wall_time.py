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


def test_the_harness_imports_every_contestants_preload_before_its_first_timed_run(monkeypatch, tmp_path):
    # run_solver imports a solver's preload inside the wall time the harness measures: only the first run of a
    # solver would pay its first import, so the harness imports them all before any run
    import argparse
    from types import SimpleNamespace

    from mallocgame.engine import runner
    from mallocgame.search.muzero.problems import Recipe, build

    M = experiment_module("heldout_muzero_mcts")
    events = []
    monkeypatch.setattr(runner, "preload", lambda solver: events.append(("preload", solver.name)))

    def timed_run(name, problem, hardware, **kw):
        events.append(("run", name))
        return SimpleNamespace(valid=True, objective=1.0, gap=0.0, stats={}, violation=None)

    monkeypatch.setattr(M, "run_solver", timed_run)
    monkeypatch.setattr(M, "problem_bound", lambda problem, hardware: SimpleNamespace(value=1.0))
    problem, hw = build(Recipe("layered", 30, 7))
    held = [H.Held("layered", "layered-a", problem, hw), H.Held("layered", "layered-b", problem.replace(), hw)]
    args = argparse.Namespace(families="generated", budgets="t1", contestants="mcts,muzero", seed=0, time_limit=1.0,
                              max_n=None, min_n=None)
    M.run_heldout(args, lambda families: held, C.CONTESTANTS, ["t1"], ["mcts", "muzero"], tmp_path / "runs.csv", [],
                  lambda line="": None)
    first_run = events.index(("run", "mcts"))
    assert {e for e in events[:first_run]} == {("preload", "mcts"), ("preload", "muzero")}
    assert [e for e in events if e[0] == "run"] == [("run", "mcts"), ("run", "muzero")] * 2
