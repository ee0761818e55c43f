"""The curriculum's programs of real compilers (issue 21 item 3): ``xla`` (JAX programs of random architecture
compiled by XLA:CPU, imported from their HLO) and ``torch`` (PyTorch models of random architecture exported by
``torch.export``), each built once and cached, so a replayed recipe is the same program without jax or torch.
One test for both kinds, swapping the architecture picker and the builder the cache must spare."""

from __future__ import annotations

import pytest

from mallocgame.formats.io import workload_text
from mallocgame.search.muzero import problems
from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Recipe, build, torch_architecture, xla_architecture

# kind -> (its architecture picker, the builder a cached recipe must not call, the cached file's suffix, dependency)
KINDS = {"xla": (xla_architecture, "_compile_xla", "hlo.txt.gz", "jax"),
         "torch": (torch_architecture, "_export_torch", "json.gz", "torch")}


def _seed_of(kind: str, model: str) -> int:
    pick = KINDS[kind][0]
    return next(TRAIN_SEED_BASE + i for i in range(1000) if pick(TRAIN_SEED_BASE + i)[0] == model)


@pytest.mark.parametrize("kind, model, cap", [("xla", "lstm-train", 200), ("xla", "vit", 200),
                                              ("torch", "resnet", 120), ("torch", "encoder", 120)])
def test_a_compiled_recipe_is_a_program_within_its_cap_and_is_read_back_from_the_cache(kind, model, cap, tmp_path,
                                                                                      monkeypatch):
    _, builder, suffix, dependency = KINDS[kind]
    pytest.importorskip(dependency)
    monkeypatch.setenv("MALLOCGAME_CACHE", str(tmp_path))
    recipe = Recipe(kind, cap, _seed_of(kind, model), 0.3)
    problem, hw = build(recipe)
    assert problem.mode == "map" and problem.has_ops and 0 < problem.n <= cap
    assert problem.capacity > 0 and hw.name == "tpuv4i"
    assert list((tmp_path / f"{kind}-curriculum").glob(f"{model}-*.{suffix}")), "the built program is kept"

    def no_build(*_):
        raise AssertionError("a cached recipe was built again")

    monkeypatch.setattr(problems, builder, no_build)
    again, _ = build(recipe)
    assert workload_text(again) == workload_text(problem)
