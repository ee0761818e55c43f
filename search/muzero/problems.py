"""Seeded recipes of training and evaluation problems (no torch).

A :class:`Recipe` names a generator and its arguments, so a problem is rebuilt exactly
from a few numbers: replay buffers store recipes instead of observations, and held-out
evaluation uses seeds the training stream never draws (training seeds are >= ``TRAIN_SEED_BASE``).

* ``layered``: :func:`mallocgame.inputs.generate.layered_network` on the ``tpuv4i`` preset (workloads with ops);
* ``intervals``: :func:`mallocgame.inputs.generate.random_intervals` with benefits, map mode, capacity
  = ``capacity_fraction`` x max live bytes, on the ``unit`` preset (additive benefits);
* ``realistic``: a model program of :mod:`mallocgame.inputs.workloads` (MLP, ResNet, MobileNetV2,
  transformer encoder, GPT decoder or decode step, inference or a training step) whose architecture
  is drawn from ``seed`` (:func:`realistic_workload`, at most ``n`` buffers), capacity
  ``capacity_fraction`` x max live bytes, on the ``tpuv4i`` preset. Widths, hidden sizes and image
  sizes come from grids disjoint from those of the ``realistic`` suite, so training never sees an
  architecture the suite evaluates on.
* ``xla``: a JAX program of random architecture compiled by XLA:CPU (:func:`xla_workload`; needs jax once per
  program, then cached);
* ``torch``: a PyTorch model of random architecture exported by ``torch.export`` and imported through the
  ``import torch`` door (:func:`torch_workload`; needs torch once per program, then cached). Widths come from grids
  disjoint from the held-out ``torch`` family's (``TORCH_HELD_OUT_WIDTHS``).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mallocgame.formats.io import atomic_output, load_problem, workload_text
from mallocgame.hardware.spec import PRESETS, HardwareSpec
from mallocgame.importers.jax_program import compile_hlo_text
from mallocgame.importers.torch_export import export_module, import_exported
from mallocgame.inputs import workloads as w
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.inputs.suites import read_hlo_file
from mallocgame.inputs.workloads import with_capacity
from mallocgame.problem.aliasing import merge_inplace
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import Problem

TRAIN_SEED_BASE = 1_000_000
KINDS = ("layered", "intervals", "realistic", "xla", "torch")


@dataclass(frozen=True)
class Recipe:
    kind: str  # one of KINDS
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
    if recipe.kind == "realistic":
        problem = with_capacity(realistic_workload(recipe.n, recipe.seed), recipe.capacity_fraction)
        return problem.replace(mode="map"), PRESETS["tpuv4i"]
    if recipe.kind in ("xla", "torch"):
        workload = xla_workload if recipe.kind == "xla" else torch_workload
        problem = with_capacity(workload(recipe.n, recipe.seed), recipe.capacity_fraction)
        return problem.replace(mode="map"), PRESETS["tpuv4i"]
    if recipe.kind == "intervals":
        problem = random_intervals(recipe.n, seed=recipe.seed, with_benefit=True)
        capacity = max(int(max_live(problem) * recipe.capacity_fraction), int(problem.arrays.size.max()))
        return problem.replace(capacity=capacity, mode="map"), PRESETS["unit"]
    raise ValueError(f"unknown problem kind {recipe.kind!r} (known: {', '.join(KINDS)})")


def _picker(rng: np.random.Generator):
    """``pick(options)``: one of ``options``, drawn from ``rng`` (the architecture draws' one move)."""
    return lambda options: options[int(rng.integers(len(options)))]


def realistic_workload(max_buffers: int, seed: int, tries: int = 64) -> Problem:
    """A model program drawn from ``seed`` with ``max_buffers // 2`` to ``max_buffers`` buffers (failing
    that in ``tries`` draws: the largest that fits, else the smallest). Grids avoid the ``realistic``
    suite's widths (1024/2048/4096), channel bases (16, 64), image size (224) and hidden sizes
    (128/256/768/1024), so no suite entry is drawn.

    >>> realistic_workload(200, 1_000_001).n <= 200
    True
    """
    rng = np.random.default_rng(seed)
    pick = _picker(rng)

    def draw() -> Problem:
        family = pick(("mlp", "resnet", "mobilenet", "encoder", "gpt", "decode"))
        if family == "mlp":
            depth = int(rng.integers(2, 9))
            widths = [pick((256, 784, 1000))] + [pick((512, 768, 1536, 3072)) for _ in range(depth)] + [pick((10, 100))]
            return w.mlp(widths, batch=pick((16, 64, 128, 384)), training=bool(rng.random() < 0.5))
        if family == "resnet":
            cifar = bool(rng.random() < 0.5)
            base = pick((24, 48))
            stages = [(base * 2**i, int(rng.integers(1, 4))) for i in range(int(rng.integers(3, 5)))]
            return w.resnet(stages, batch=pick((2, 16, 48)), image=32 if cifar else pick((128, 160, 192)),
                            classes=10 if cifar else 1000, cifar_stem=cifar, training=cifar and rng.random() < 0.5)
        if family == "mobilenet":
            return w.mobilenet_v2(batch=pick((2, 4, 16)), image=pick((128, 160, 192)))
        hidden, heads = pick(((192, 3), (384, 6), (512, 8), (640, 10)))
        layers = int(rng.integers(1, 25))
        if family == "encoder":
            training = bool(rng.random() < 0.3)
            return w.transformer_encoder(layers=layers, hidden=hidden, heads=heads, seq=pick((32, 96, 192)),
                                         batch=pick((1, 2, 8, 16)), pooler=training or rng.random() < 0.5,
                                         classes=2 if training else None, training=training)
        if family == "gpt":
            return w.gpt_decoder(layers=layers, hidden=hidden, heads=heads, seq=pick((64, 128, 512)),
                                 batch=pick((1, 2)), vocab=32000)
        return w.gpt_decode_step(layers=layers, hidden=hidden, heads=heads, context=pick((128, 256, 1024)),
                                 batch=pick((1, 4, 16)))

    return _first_within(max_buffers, (draw() for _ in range(tries)))


def _first_within(max_buffers: int, programs: Iterator[Problem]) -> Problem:
    """The first of ``programs`` with ``max_buffers // 2`` to ``max_buffers`` buffers (the rest are not drawn);
    failing that the largest below ``max_buffers``, else the smallest."""
    fits = too_big = None
    for problem in programs:
        if max_buffers // 2 <= problem.n <= max_buffers:
            return problem
        if problem.n <= max_buffers:
            fits = problem if fits is None or problem.n > fits.n else fits
        else:
            too_big = problem if too_big is None or problem.n < too_big.n else too_big
    return fits if fits is not None else too_big


#: The ``xla`` family's models (:mod:`mallocgame.inputs.jax_models`) and, per model, the argument that
#: sets its length (layers, time steps, blocks per stage), which :func:`xla_workload` scales to fit.
XLA_MODELS = {"gpt-train": "layers", "decode": "layers", "lstm-train": "steps", "resnet-train": "blocks",
              "vit": "layers", "mixer": "layers"}
#: Widths the ``xla`` suite and the HLO fixtures use (model width, LSTM hidden size, ResNet channel base):
#: the family's grids avoid them (a test checks the draws).
XLA_HELD_OUT_WIDTHS = frozenset({16, 32, 64, 128, 256, 384, 512, 768, 1024})


def xla_architecture(seed: int) -> tuple[str, dict]:
    """``(model, arguments)`` of an ``xla`` recipe's program, drawn from ``seed`` (no jax needed).

    >>> xla_architecture(1_000_001)[0] in XLA_MODELS
    True
    """
    rng = np.random.default_rng(seed)
    pick = _picker(rng)

    model = pick(tuple(XLA_MODELS))
    d, heads = pick(((96, 3), (160, 5), (192, 6), (320, 5), (448, 7)))
    if model == "gpt-train":
        return model, {"layers": int(rng.integers(1, 7)), "d": d, "heads": heads, "vocab": pick((1000, 2000, 8000)),
                       "seq": pick((32, 48, 96)), "batch": pick((2, 3, 8))}
    if model == "decode":
        return model, {"layers": int(rng.integers(1, 9)), "d": d, "heads": heads, "vocab": pick((1000, 8000)),
                       "context": pick((64, 192, 384)), "batch": pick((1, 2, 16))}
    if model == "lstm-train":
        return model, {"layers": int(rng.integers(1, 3)), "inp": pick((40, 96)), "hidden": pick((80, 160, 320)),
                       "steps": pick((4, 8, 12, 24)), "batch": pick((8, 24, 48))}
    if model == "resnet-train":
        return model, {"base": pick((8, 24)), "stages": int(rng.integers(2, 4)), "blocks": int(rng.integers(1, 3)),
                       "batch": pick((8, 24, 48)), "image": pick((24, 32))}
    if model == "vit":
        return model, {"layers": int(rng.integers(1, 7)), "d": d, "heads": heads, "batch": pick((1, 2, 4)),
                       "image": pick((64, 96, 128)), "patch": pick((8, 16))}
    return model, {"layers": int(rng.integers(1, 7)), "d": pick((96, 192, 320)), "batch": pick((1, 2, 4)),
                   "image": pick((64, 96, 128)), "patch": pick((8, 16)), "tokens_hidden": pick((48, 96)),
                   "channels_hidden": pick((384, 640))}


def xla_widths(model: str, args: dict) -> set[int]:
    """The widths of a drawn architecture that :data:`XLA_HELD_OUT_WIDTHS` must not contain."""
    if model == "lstm-train":
        return {args["hidden"]}
    if model == "resnet-train":
        return {args["base"]}  # the channel base (the suite's ResNet-20 has 16)
    return {args["d"]}


def cache_dir(kind: str = "xla") -> Path:
    """Where the programs of the ``xla`` or ``torch`` recipes are kept: ``$MALLOCGAME_CACHE/<kind>-curriculum``, by
    default ``~/.cache/mallocgame/<kind>-curriculum`` (a replayed recipe is read back, not compiled again)."""
    root = os.environ.get("MALLOCGAME_CACHE") or str(Path.home() / ".cache" / "mallocgame")
    return Path(root) / f"{kind}-curriculum"


def _program_key(model: str, args: dict) -> str:
    def text(v):
        return "x".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)

    return model + "".join(f"-{k}{text(v)}" for k, v in sorted(args.items()))


def xla_program(model: str, args: dict) -> Problem:
    """The imported (in-place pairs merged) program of ``model`` with ``args``, compiled once and cached."""
    key = _program_key(model, args)
    path = cache_dir("xla") / f"{key}.hlo.txt.gz"
    if not path.is_file():
        text = _compile_xla(model, args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, "wb") as fh:
            fh.write(gzip.compress(text.encode(), mtime=0))
    return read_hlo_file(path, key)


def _compile_xla(model: str, args: dict) -> str:
    from mallocgame.inputs import jax_models as m  # jax (2-3 s): only for a program not yet in the cache

    a = args
    if model == "gpt-train":
        built = m.gpt_train(a["layers"], a["d"], a["heads"], a["vocab"], a["seq"], a["batch"])
    elif model == "decode":
        built = m.gpt_decode(a["layers"], a["d"], a["heads"], a["vocab"], a["context"], a["batch"])
    elif model == "lstm-train":
        built = m.lstm_train(a["layers"], a["inp"], a["hidden"], a["steps"], a["batch"])
    elif model == "resnet-train":
        stages = [(a["base"] * 2**i, a["blocks"]) for i in range(a["stages"])]
        built = m.resnet_train(stages, a["batch"], image=a["image"])
    elif model == "vit":
        built = m.vit(a["layers"], a["d"], a["heads"], a["batch"], image=a["image"], patch=a["patch"])
    elif model == "mixer":
        built = m.mixer(a["layers"], a["d"], a["batch"], image=a["image"], patch=a["patch"],
                        tokens_hidden=a["tokens_hidden"], channels_hidden=a["channels_hidden"])
    else:
        raise ValueError(f"unknown xla model {model!r} (known: {', '.join(XLA_MODELS)})")
    fn, fargs, donate = built
    return compile_hlo_text(lambda: (fn, fargs), None, donate)


def xla_workload(max_buffers: int, seed: int, tries: int = 4) -> Problem:
    """The ``xla`` recipe's program: the architecture of :func:`xla_architecture`, its length argument
    (:data:`XLA_MODELS`) scaled in up to ``tries`` compilations until the program has ``max_buffers // 2``
    to ``max_buffers`` buffers (failing that: the largest below ``max_buffers``, else the smallest)."""
    model, args = xla_architecture(seed)
    return _scaled_to_fit(xla_program, model, args, XLA_MODELS[model], max_buffers, tries)


def _scaled_to_fit(program, model: str, args: dict, length: str, max_buffers: int, tries: int,
                   most: int | None = None) -> Problem:
    """The first of ``program(model, args)`` with ``max_buffers // 2`` to ``max_buffers`` buffers, ``args[length]``
    (at most ``most``) rescaled after each of up to ``tries`` builds (:func:`_first_within` picks when none fits)."""

    def scaled() -> Iterator[Problem]:
        nonlocal args
        for _ in range(tries):
            problem = program(model, args)
            yield problem
            # buffers grow about linearly with the length argument: aim at 3/4 of the cap
            n = max(1, int(round(args[length] * 0.75 * max_buffers / problem.n)))
            n = n if most is None else min(n, most)
            if n == args[length]:
                return
            args = {**args, length: n}

    return _first_within(max_buffers, scaled())


#: The ``torch`` family's models (:mod:`mallocgame.inputs.torch_models`) and, per model, the argument that sets
#: its length (stages, blocks, convolutions per stage, levels, layers), which :func:`torch_workload` scales to fit.
TORCH_MODELS = {"mobilenet": "stages", "resnet": "blocks", "vgg": "convs", "unet": "depth", "mixer": "layers",
                "encoder": "layers", "gpt": "layers"}
#: The longest a model can be: MobileNetV2 has 7 stages; a U-Net of 5 levels is as deep as the drawn inputs allow.
TORCH_MOST = {"mobilenet": 7, "unet": 5}
#: The widths of the held-out ``torch`` family (the ExecuTorch benchmark's models: MobileNetV2 at width 1, ResNet
#: and VGG at base 64, U-Net at 32 channels, Mixer at 512, encoder and GPT at 768): the family's grids avoid them.
TORCH_HELD_OUT_WIDTHS = frozenset({1.0, 32, 64, 512, 768})
#: The argument of each model that :data:`TORCH_HELD_OUT_WIDTHS` is about (its default is the held-out width).
TORCH_WIDTH_ARG = {"mobilenet": "width", "resnet": "base", "vgg": "base", "unet": "c", "mixer": "d", "encoder": "d",
                   "gpt": "d"}


def torch_architecture(seed: int) -> tuple[str, dict]:
    """``(model, arguments)`` of a ``torch`` recipe's program, drawn from ``seed`` (no torch needed).

    >>> torch_architecture(1_000_001)[0] in TORCH_MODELS
    True
    """
    rng = np.random.default_rng(seed)
    pick = _picker(rng)

    model = pick(tuple(TORCH_MODELS))
    batch = pick((1, 2, 4, 8))
    if model == "mobilenet":
        return model, {"width": pick((0.5, 0.75, 1.25)), "stages": int(rng.integers(3, 8)), "batch": batch,
                       "image": pick((96, 160, 192))}
    if model == "resnet":
        return model, {"base": pick((16, 24, 40, 48)), "blocks": int(rng.integers(1, 4)),
                       "stages": int(rng.integers(2, 5)), "bottleneck": bool(rng.random() < 0.4), "batch": batch,
                       "image": pick((64, 96, 160))}
    if model == "vgg":
        return model, {"base": pick((16, 24, 40, 48)), "convs": int(rng.integers(1, 4)),
                       "stages": int(rng.integers(3, 6)), "batch": batch, "image": pick((64, 96, 160))}
    if model == "unet":
        return model, {"c": pick((8, 12, 20, 40)), "depth": int(rng.integers(2, 6)), "batch": batch,
                       "image": pick((64, 96, 160))}
    d, heads = pick(((96, 3), (160, 5), (192, 6), (320, 5), (448, 7)))
    if model == "mixer":
        return model, {"d": d, "layers": int(rng.integers(1, 9)), "tokens_hidden": pick((48, 96, 192)),
                       "channels_hidden": pick((384, 640, 1280)), "patch": pick((8, 16)), "batch": batch,
                       "image": pick((64, 96, 160))}
    layers, seq = int(rng.integers(1, 9)), pick((32, 96, 192, 384))
    if model == "encoder":
        return model, {"d": d, "heads": heads, "layers": layers, "seq": seq, "batch": batch}
    return model, {"vocab": pick((1000, 2000, 16000)), "d": d, "heads": heads, "layers": layers, "seq": seq,
                   "batch": batch}


def torch_widths(model: str, args: dict) -> set:
    """The width of a drawn architecture that :data:`TORCH_HELD_OUT_WIDTHS` must not contain."""
    return {args[TORCH_WIDTH_ARG[model]]}


def torch_program(model: str, args: dict) -> Problem:
    """The program of ``model`` with ``args`` (:func:`mallocgame.inputs.torch_models.build`, weights from
    ``torch.manual_seed(0)``) exported by ``torch.export`` and imported as ``mallocgame import torch`` does, in-place
    pairs merged; exported once and cached as the workload JSON the reader reads back."""
    key = _program_key(model, args)
    path = cache_dir("torch") / f"{key}.json.gz"
    if not path.is_file():
        text = workload_text(_export_torch(model, args))
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, "wb") as fh:
            fh.write(gzip.compress(text.encode(), mtime=0))
    return load_problem(path).replace(name=key)


def _export_torch(model: str, args: dict) -> Problem:
    import torch  # heavy (seconds): only for a program not yet in the cache

    from mallocgame.inputs import torch_models  # imports torch at its top

    with torch.random.fork_rng():  # the weights from seed 0, without resetting a training run's global generator
        torch.manual_seed(0)
        module, inputs = torch_models.build(model, args)
    return merge_inplace(import_exported(export_module(module, inputs), name=_program_key(model, args)))


def torch_workload(max_buffers: int, seed: int, tries: int = 4) -> Problem:
    """The ``torch`` recipe's program: the architecture of :func:`torch_architecture`, its length argument
    (:data:`TORCH_MODELS`) scaled in up to ``tries`` exports until the program has ``max_buffers // 2`` to
    ``max_buffers`` buffers (failing that: the largest below ``max_buffers``, else the smallest)."""
    model, args = torch_architecture(seed)
    return _scaled_to_fit(torch_program, model, args, TORCH_MODELS[model], max_buffers, tries,
                          most=TORCH_MOST.get(model))


@dataclass(frozen=True)
class Curriculum:
    """The distribution self-play draws problems from."""

    min_size: int = 16
    max_size: int = 64
    layered_share: float = 0.75
    min_capacity_fraction: float = 0.25
    max_capacity_fraction: float = 0.6
    realistic_share: float = 0.0  # drawn first; the rest is split by ``layered_share``
    xla_share: float = 0.0  # drawn before that: XLA-compiled programs of random architecture (needs jax)
    torch_share: float = 0.0  # drawn after xla: torch-exported programs of random architecture (needs torch)

    def sample(self, rng: np.random.Generator) -> Recipe:
        # No extra draw at share 0: curricula without realistic, xla or torch programs replay their old streams.
        if self.xla_share > 0 and rng.random() < self.xla_share:
            kind = "xla"
        elif self.torch_share > 0 and rng.random() < self.torch_share:
            kind = "torch"
        elif self.realistic_share > 0 and rng.random() < self.realistic_share:
            kind = "realistic"
        else:
            kind = "layered" if rng.random() < self.layered_share else "intervals"
        n = int(rng.integers(self.min_size, self.max_size + 1))
        seed = TRAIN_SEED_BASE + int(rng.integers(0, 2**31 - 1))
        frac = float(np.round(rng.uniform(self.min_capacity_fraction, self.max_capacity_fraction), 3))
        return Recipe(kind, n, seed, frac)


#: ``mallocgame train --curriculum``'s named curricula. ``small``: the layered and random-interval programs of the
#: size flags (the original self-play curriculum); ``real``: programs at real size, 1,000-15,000 buffers, of every
#: family with ops or intervals -- XLA-compiled JAX programs, torch-exported programs, layered programs and (map mode
#: only: they have no ops, which the prefetch game needs) random intervals -- at 20-50% of the max live bytes.
CURRICULA = ("small", "real")
REAL_SIZES = (1000, 15000)


def named_curriculum(name: str, mode: str, min_size: int | None = None, max_size: int | None = None) -> Curriculum:
    """The curriculum ``name`` (:data:`CURRICULA`) for ``mode`` (``"map"`` or ``"prefetch"``); ``min_size`` /
    ``max_size`` replace the curriculum's own sizes where given."""
    if name not in CURRICULA:
        raise ValueError(f"unknown curriculum {name!r} (known: {', '.join(CURRICULA)})")
    layered_share = 1.0 if mode == "prefetch" else 0.75
    if name == "small":
        return Curriculum(min_size=16 if min_size is None else min_size, max_size=64 if max_size is None else max_size,
                          layered_share=layered_share)
    return Curriculum(min_size=REAL_SIZES[0] if min_size is None else min_size,
                      max_size=REAL_SIZES[1] if max_size is None else max_size,
                      layered_share=1.0 if mode == "prefetch" else 0.6, min_capacity_fraction=0.2,
                      max_capacity_fraction=0.5, xla_share=0.3, torch_share=0.3)


#: Seeds of the tuning recipes that ``mallocgame train`` chooses its best checkpoint on: in the curriculum's range
#: (>= TRAIN_SEED_BASE; a training stream draws one of them among 2^31 with negligible chance), apart from
#: experiments/level_muzero_mcts.py's second tuning set (1,960,000-1,960,011) and far from every held-out seed.
TUNING_SEED_BASE = 1_970_000


def tuning_recipes(curriculum: Curriculum, count: int = 4) -> list[Recipe]:
    """``count`` fixed recipes of ``curriculum``'s families and sizes for choosing checkpoints: the families that
    the curriculum draws (xla, torch, layered, intervals, realistic) in turn, sizes spread evenly from ``min_size``
    to ``max_size``, capacities 25% and 40% of the max live bytes. Never a training draw (:data:`TUNING_SEED_BASE`)
    nor a held-out program (the families avoid the held-out suites' architectures)."""
    kinds = [k for k, share in (("xla", curriculum.xla_share), ("torch", curriculum.torch_share),
                                ("realistic", curriculum.realistic_share),
                                ("layered", curriculum.layered_share),
                                ("intervals", 1.0 - curriculum.layered_share)) if share > 0]
    lo, hi = curriculum.min_size, curriculum.max_size
    sizes = [lo + (hi - lo) * i // max(1, count - 1) for i in range(count)]
    return [Recipe(kinds[i % len(kinds)], sizes[i], TUNING_SEED_BASE + i, (0.25, 0.4)[i % 2]) for i in range(count)]
