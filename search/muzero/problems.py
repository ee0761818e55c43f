"""Seeded recipes of training and evaluation problems (no torch).

A :class:`Recipe` names a generator and its arguments, so a problem is rebuilt exactly
from a few numbers: replay buffers store recipes instead of observations, and held-out
evaluation uses seeds the training stream never draws (training seeds are >= ``TRAIN_SEED_BASE``).

* ``layered``: :func:`mallocgame.inputs.generate.layered_network` on the ``tpuv4i`` preset (workloads with ops);
* ``intervals``: :func:`mallocgame.inputs.generate.random_intervals` with benefits, map mode, capacity
  = ``capacity_fraction`` x max live bytes, on the ``unit`` preset (additive benefits).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from hardware.spec import PRESETS, HardwareSpec
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.intervals import max_live
from mallocgame.model import Problem

TRAIN_SEED_BASE = 1_000_000
KINDS = ("layered", "intervals")


@dataclass(frozen=True)
class Recipe:
    kind: str  # "layered" | "intervals"
    n: int
    seed: int
    capacity_fraction: float = 0.4

    def as_dict(self) -> dict:
        return asdict(self)


def build(recipe: Recipe) -> tuple[Problem, HardwareSpec]:
    """The map-mode problem and hardware of ``recipe``."""
    if recipe.kind == "layered":
        problem = layered_network(recipe.n, seed=recipe.seed, capacity_fraction=recipe.capacity_fraction)
        return problem.replace(mode="map"), PRESETS["tpuv4i"]
    if recipe.kind == "intervals":
        problem = random_intervals(recipe.n, seed=recipe.seed, with_benefit=True)
        capacity = max(int(max_live(problem) * recipe.capacity_fraction), int(problem.arrays.size.max()))
        return problem.replace(capacity=capacity, mode="map"), PRESETS["unit"]
    raise ValueError(f"unknown problem kind {recipe.kind!r} (known: {', '.join(KINDS)})")


@dataclass(frozen=True)
class Curriculum:
    """The distribution self-play draws problems from."""

    min_size: int = 16
    max_size: int = 64
    layered_share: float = 0.75
    min_capacity_fraction: float = 0.25
    max_capacity_fraction: float = 0.6

    def sample(self, rng: np.random.Generator) -> Recipe:
        kind = "layered" if rng.random() < self.layered_share else "intervals"
        n = int(rng.integers(self.min_size, self.max_size + 1))
        seed = TRAIN_SEED_BASE + int(rng.integers(0, 2**31 - 1))
        frac = float(np.round(rng.uniform(self.min_capacity_fraction, self.max_capacity_fraction), 3))
        return Recipe(kind, n, seed, frac)
