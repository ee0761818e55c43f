"""The curriculum's ``torch`` family (issue 21 item 3): PyTorch models of random architecture, widths disjoint from
the held-out ``torch`` family's, drawn at their share; the models' defaults are the ExecuTorch benchmark's (the
held-out family). Building and caching a recipe: ``tests/test_xla_curriculum.py``, for both compiled kinds."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.search.muzero.problems import (
    TORCH_HELD_OUT_WIDTHS,
    TORCH_MODELS,
    TRAIN_SEED_BASE,
    Curriculum,
    torch_architecture,
    torch_widths,
)

torch = pytest.importorskip("torch")


def test_the_torch_curriculum_draws_every_model_and_never_a_held_out_width():
    drawn = [torch_architecture(TRAIN_SEED_BASE + i) for i in range(3000)]
    assert {model for model, _ in drawn} == set(TORCH_MODELS)
    for model, args in drawn:
        assert not torch_widths(model, args) & TORCH_HELD_OUT_WIDTHS, (model, args)


def test_the_held_out_torch_programs_have_the_widths_the_curriculum_avoids():
    from mallocgame.inputs.torch_models import BENCHMARK_MODELS

    for model, args in BENCHMARK_MODELS.values():
        assert torch_widths(model, args) <= TORCH_HELD_OUT_WIDTHS, (model, args)


@pytest.mark.parametrize("torch_share", [0.0, 0.3])
def test_a_torch_share_draws_torch_programs_and_share_0_replays_the_old_stream(torch_share):
    old = Curriculum(min_size=16, max_size=600, realistic_share=0.3, xla_share=0.2)
    new = Curriculum(min_size=16, max_size=600, realistic_share=0.3, xla_share=0.2, torch_share=torch_share)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    drawn_old = [old.sample(a) for _ in range(1000)]
    drawn_new = [new.sample(b) for _ in range(1000)]
    share = sum(r.kind == "torch" for r in drawn_new) / len(drawn_new)
    if torch_share == 0:
        assert drawn_new == drawn_old and share == 0
    else:  # drawn after xla: 0.8 x 0.3 of the draws
        assert 0.19 < share < 0.29 and all(r.seed >= TRAIN_SEED_BASE for r in drawn_new)


def test_the_models_defaults_are_the_benchmarks_models():
    from mallocgame.inputs.torch_models import build as build_model

    resnet18, (x,) = build_model("resnet", {"counts": (2, 2, 2, 2)})
    assert tuple(x.shape) == (1, 3, 224, 224)
    convs = [m for m in resnet18.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 1 + 16 + 3 and convs[0].out_channels == 64  # stem, 8 blocks of 2, 3 projections
    assert sum(p.numel() for p in resnet18.parameters()) == 11_689_512  # torchvision's ResNet-18
    vgg, _ = build_model("vgg", {})
    assert sum(p.numel() for p in vgg.parameters()) == 9_220_480 + 512 * 7 * 7 * 1024 + 1024 + 1024 * 1000 + 1000
    with pytest.raises(ValueError, match="unknown torch model"):
        build_model("resnet", {"depth": 3})
