"""The curriculum's ``xla`` family (issue 21 item 3): JAX programs of random architecture, compiled by XLA:CPU,
imported from their HLO and cached, so a replayed recipe is the same program without jax."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.search.muzero import problems
from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Recipe, build, xla_architecture

pytest.importorskip("jax")


def _seed_of(model: str) -> int:
    return next(TRAIN_SEED_BASE + i for i in range(1000) if xla_architecture(TRAIN_SEED_BASE + i)[0] == model)


@pytest.mark.parametrize("model", ["lstm-train", "vit"])
def test_an_xla_recipe_is_a_compiled_program_within_its_cap_and_is_read_back_from_the_cache(model, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.setenv("MALLOCGAME_CACHE", str(tmp_path))
    recipe = Recipe("xla", 200, _seed_of(model), 0.3)
    problem, hw = build(recipe)
    assert problem.mode == "map" and problem.has_ops and 0 < problem.n <= 200
    assert problem.capacity > 0 and hw.name == "tpuv4i"
    cached = list((tmp_path / "xla-curriculum").glob(f"{model}-*.hlo.txt.gz"))
    assert cached, "the compiled program is kept"

    def no_compile(*_):
        raise AssertionError("a cached recipe was compiled again")

    monkeypatch.setattr(problems, "_compile_xla", no_compile)
    again, _ = build(recipe)
    assert again.n == problem.n and again.capacity == problem.capacity
    for field in ("size", "start", "end"):
        assert np.array_equal(getattr(again.arrays, field), getattr(problem.arrays, field))
