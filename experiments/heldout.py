"""The held-out protocol of the guided search (issue 21, item 1): problems nobody tunes or trains on.

Fixed in code before any evaluation with it (``HELDOUT_DIGEST`` pins the generated recipes; a test
fails if they change), never imported by training code (it lives in ``experiments/``, outside the
installed package, and ``tests/test_heldout.py`` checks that no module of ``mallocgame`` names it):

* ``generated``: fresh seeds (``HELDOUT_SEED_BASE`` + 1000 x kind index + i, below the training
  stream's ``TRAIN_SEED_BASE`` = 1,000,000 and away from the tuning seeds 201-212 and every seed the
  project evaluated before: 101-108, 11-16, 3000-3029) for every generator family of
  :class:`mallocgame.search.muzero.problems.Recipe` (``layered``, ``intervals``, ``realistic``), sizes
  150-2,000 buffers, capacities 20-50% of the max live bytes, map mode;
* ``suite``: the ``realistic`` suite (``mallocgame suites``);
* ``hlo``: the XLA programs in ``tests/data/*.hlo.txt`` imported with :func:`mallocgame.importers.import_hlo`,
  map mode at 25% and 40% of the max live bytes on ``tpuv4i``;
* ``xla``: the ``xla`` suite's entries (JAX programs compiled by XLA, 285-13,465 buffers; committed in
  3d0d9b3 while this protocol's first run was starting, and read by it) at the same two capacities;
* ``torch``: the ExecuTorch benchmark's eight models (:data:`mallocgame.inputs.torch_models.BENCHMARK_MODELS`:
  MobileNetV2, ResNet-18/50, VGG-11, U-Net, MLP-Mixer, an encoder, a GPT decoder; batch 1, 36-377 buffers)
  exported by ``torch.export`` and imported as ``mallocgame import torch`` does, at the same two capacities.
  Added after the networks up to xla21 were trained, none of which saw a torch-exported program; the
  curriculum's ``torch`` kind draws widths disjoint from these (``TORCH_HELD_OUT_WIDTHS``, a test checks).

:func:`confirmation` draws a second set only from the chosen checkpoint's SHA-256 (seeds derived from
it, ``CONFIRM_SEED_BASE`` and up, disjoint from both ranges above), and refuses to run unless the
file's hash is the one given: it cannot be looked at before a checkpoint is chosen. Report it as it
comes out.

Problems are :class:`Held` rows (family, label, problem, hardware), smallest first within the set, so a
run cut short by its time has covered every family at the small sizes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Recipe, build

ROOT = Path(__file__).resolve().parents[1]
HELDOUT_SEED_BASE = 700_000
CONFIRM_SEED_BASE = 800_000
CONFIRM_SEED_SPAN = 100_000  # confirmation seeds lie in [CONFIRM_SEED_BASE, CONFIRM_SEED_BASE + 2 x SPAN)
SIZES = (150, 200, 300, 500, 750, 1000, 1500, 2000)
CAPACITIES = (0.2, 0.3, 0.4, 0.5)
#: The generator families of the fixed set, as they were when it was fixed (the curriculum's later ``xla`` kind,
#: XLA-compiled programs of random architecture, is not one: its held-out programs are the xla suite and the HLO
#: fixtures, here as they are).
GENERATED_KINDS = ("layered", "intervals", "realistic")
HLO_CAPACITIES = (0.25, 0.4)
#: Seeds the project evaluated on before this protocol (tuning 201-212; earlier held-out sets), never fresh.
USED_SEEDS = frozenset(range(201, 213)) | frozenset(range(3000, 3030)) | frozenset(range(101, 109)) | frozenset(
    range(11, 17))
#: SHA-256 of the generated recipes (:func:`digest`), written when the set was fixed, before any run on it.
HELDOUT_DIGEST = "c029028c4e8a3c4a04e3efc501ad4214a7e02d62fe72e10c15aa6a94ecb43ac0"


@dataclass(frozen=True)
class Held:
    family: str  # a Recipe kind, "suite" or "hlo" (or "xla")
    label: str
    problem: object
    hardware: object


def generated_recipes(per_kind: int = 8) -> list[Recipe]:
    """``per_kind`` recipes per generator family: every size of ``SIZES`` once, capacities cycling."""
    return [Recipe(kind, SIZES[i % len(SIZES)], HELDOUT_SEED_BASE + 1000 * k + i,
                   CAPACITIES[(i + k) % len(CAPACITIES)])
            for k, kind in enumerate(GENERATED_KINDS) for i in range(per_kind)]


def digest(recipes: list[Recipe]) -> str:
    return hashlib.sha256(json.dumps([r.as_dict() for r in recipes], sort_keys=True).encode()).hexdigest()


def recipe_label(r: Recipe) -> str:
    return f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}"


# The fixtures of tests/data the protocol was fixed with (a fixture added later, linalg_solve, is not held out: the
# set stays what the recorded runs used)
HELDOUT_HLO = ("bert_convert_fwd", "cnn_fwd", "mlp_sgd_donated", "transformer_fwd", "transformer_scan_fwd",
               "transformer_train")


def hlo_files() -> list[Path]:
    return [ROOT / "tests" / "data" / f"{name}.hlo.txt" for name in HELDOUT_HLO]


def held_out(families: tuple[str, ...] = ("generated", "suite", "hlo", "xla", "torch")) -> list[Held]:
    """The held-out set (module docstring), smallest problems first within each part."""
    out: list[Held] = []
    if "generated" in families:
        for r in sorted(generated_recipes(), key=lambda r: (r.n, GENERATED_KINDS.index(r.kind))):
            problem, hw = build(r)
            out.append(Held(r.kind, recipe_label(r), problem, hw))
    if "suite" in families:
        from mallocgame.hardware.spec import PRESETS
        from mallocgame.inputs.suites import suite_entries

        for e in suite_entries("realistic"):
            problem = e.build()
            out.append(Held("suite", e.name, problem, problem.hardware or PRESETS["tpuv4i"]))
    out += _imported("hlo" in families, "xla" in families, "torch" in families)
    return out


def torch_programs() -> list[tuple[str, object]]:
    """``(name, program)`` of the held-out ``torch`` family, smallest first (exported once, then cached)."""
    from mallocgame.inputs.torch_models import BENCHMARK_MODELS  # torch: only when the family is asked for
    from mallocgame.search.muzero.problems import torch_program

    return sorted(((name, torch_program(model, args)) for name, (model, args) in BENCHMARK_MODELS.items()),
                  key=lambda pair: pair[1].n)


def _imported(hlo: bool = True, xla: bool = True, torch: bool = True) -> list[Held]:
    """The HLO fixtures, the ``xla`` suite's entries (when it exists) and the ``torch`` family's programs in map
    mode at ``HLO_CAPACITIES``."""
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.importers import import_hlo
    from mallocgame.inputs.suites import SUITES, suite_entries
    from mallocgame.inputs.workloads import with_capacity

    programs = [("hlo", p.name.removesuffix(".hlo.txt"), import_hlo(p)) for p in hlo_files()] if hlo else []
    if xla and "xla" in SUITES:
        programs += [("xla", e.name, e.build()) for e in suite_entries("xla")]
    if torch:
        programs += [("torch", name, program) for name, program in torch_programs()]
    out = []
    for family, name, program in programs:
        for frac in HLO_CAPACITIES:
            problem = with_capacity(program, frac).replace(mode="map")
            out.append(Held(family, f"{family}:{name}-c{frac:g}", problem, problem.hardware or PRESETS["tpuv4i"]))
    return out


# --- prefetch mode (issue 21 items 3 and 5), fixed before the prefetch network was measured ---------------------
#: Extra fresh seeds for prefetch mode at the small sizes that 16 simulations per move can afford (a prefetch game
#: has a decision per use segment and a rollout to the end per simulation: ~10 s at 150 buffers, minutes at 250),
#: for the generator families with ops (random intervals have none). Away from every range above and below the
#: training stream.
PREFETCH_SEED_BASE = 750_000
PREFETCH_SIZES = (150, 200, 250)
PREFETCH_KINDS = ("layered", "realistic")
#: SHA-256 of :func:`prefetch_recipes` (:func:`digest`), written when the set was fixed, before any run on it.
PREFETCH_DIGEST = "6300acdf0317bbaafd8969e4ea7668c88b9b441904e4a96afac3324b1164874b"


def prefetch_recipes(per_kind: int = 6) -> list[Recipe]:
    """``per_kind`` small recipes per generator family with ops: sizes ``PREFETCH_SIZES`` cycling, capacities too."""
    return [Recipe(kind, PREFETCH_SIZES[i % len(PREFETCH_SIZES)], PREFETCH_SEED_BASE + 1000 * k + i,
                   CAPACITIES[(i + k) % len(CAPACITIES)]) for k, kind in enumerate(PREFETCH_KINDS)
            for i in range(per_kind)]


def held_out_prefetch(families: tuple[str, ...] = ("small", "generated", "suite", "hlo", "xla", "torch")
                      ) -> list[Held]:
    """The held-out set in prefetch mode: ``small`` (:func:`prefetch_recipes`), and every problem of
    :func:`held_out` that has ops (``generated`` layered and realistic, the ``suite``, ``hlo`` and ``xla``
    programs at their capacities), each turned to prefetch mode as ``mallocgame solve --mode prefetch`` reads
    it (:func:`mallocgame.inputs.load.prepare`); smallest first within each part, families as in :func:`held_out`."""

    out: list[Held] = []
    if "small" in families:
        for r in sorted(prefetch_recipes(), key=lambda r: (r.n, GENERATED_KINDS.index(r.kind))):
            problem, hw = build(r)
            out.append(Held(r.kind, recipe_label(r), problem, hw))
    out += held_out(tuple(f for f in families if f != "small"))
    return in_prefetch_mode(out)


def in_prefetch_mode(held: list[Held]) -> list[Held]:
    """The problems of ``held`` that have ops, each turned to prefetch mode at its capacity as ``mallocgame solve
    --mode prefetch`` reads it (:func:`mallocgame.inputs.load.prepare`)."""
    from mallocgame.inputs.load import prepare

    # the capacity given, else prepare would take the hardware's (128 MiB on tpuv4i) instead of the held-out one
    return [Held(h.family, h.label, prepare(h.problem, mode="prefetch", hardware=h.hardware,
                                            capacity=h.problem.capacity)[0], h.hardware)
            for h in held if h.problem.has_ops]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def with_candidate(contestants: dict, pairs: tuple, spec: str | None, against: tuple[str, ...]) -> tuple[dict, tuple]:
    """``contestants`` and ``pairs`` with the candidate network ``spec`` (``NAME=CHECKPOINT``): contestant ``NAME``
    is the ``muzero`` solver with that checkpoint, compared with each of ``against``. Its CSV rows carry ``NAME``,
    so give a name per checkpoint (its SHA-256 goes in the write-up)."""
    if not spec:
        return contestants, pairs
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"--candidate: give NAME=CHECKPOINT, got {spec!r}")
    if name in contestants:
        raise SystemExit(f"--candidate: {name!r} is already a contestant")
    if not Path(path).is_file():
        raise SystemExit(f"--candidate: {path}: no such file")
    return ({**contestants, name: ("muzero", {"checkpoint": str(path)})},
            pairs + tuple((name, other) for other in against))


def confirmation_recipes(checkpoint: str | Path, sha256: str, per_kind: int = 4) -> list[Recipe]:
    """The confirmation set's recipes, drawn from the chosen checkpoint's hash; refuses anything else.

    ``sha256`` must be the 64-hex-digit SHA-256 of the file ``checkpoint`` (the one chosen on the
    tuning set): a wrong, short or missing hash raises ``ValueError`` before any problem exists.
    """
    if not isinstance(sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError("confirmation set: give the chosen checkpoint's SHA-256 (64 lowercase hex digits)")
    actual = file_sha256(checkpoint)
    if actual != sha256:
        raise ValueError(f"confirmation set: {checkpoint} has SHA-256 {actual}, not the {sha256} given")
    base = CONFIRM_SEED_BASE + int(sha256[:12], 16) % CONFIRM_SEED_SPAN
    return [Recipe(kind, SIZES[(i * 3 + k) % len(SIZES)], base + 1000 * k + i, CAPACITIES[(i + 2 * k) % len(CAPACITIES)])
            for k, kind in enumerate(GENERATED_KINDS) for i in range(per_kind)]


def confirmation(checkpoint: str | Path, sha256: str, per_kind: int = 4) -> list[Held]:
    """The confirmation set's problems (:func:`confirmation_recipes`), smallest first."""
    out = []
    for r in sorted(confirmation_recipes(checkpoint, sha256, per_kind),
                    key=lambda r: (r.n, GENERATED_KINDS.index(r.kind))):
        problem, hw = build(r)
        out.append(Held(r.kind, recipe_label(r), problem, hw))
    return out


def confirmation_for(args, checkpoint: str | Path, to_mode=None) -> list[Held]:
    """The confirmation set a held-out script's ``--confirmation SHA256`` asks for, or ``SystemExit`` with one line.

    ``to_mode`` maps the drawn problems (e.g. :func:`in_prefetch_mode`); ``args.families`` becomes
    ``"confirmation"`` so that the run's first line says what it ran.
    """
    try:
        drawn = confirmation(checkpoint, args.confirmation)
    except ValueError as exc:
        raise SystemExit(f"--confirmation: {exc}") from None
    args.families = "confirmation"
    return to_mode(drawn) if to_mode is not None else drawn


def all_seeds() -> set[int]:
    """Every seed of the generated held-out set."""
    return {r.seed for r in generated_recipes()}


assert max(all_seeds() | {r.seed for r in prefetch_recipes()}) < CONFIRM_SEED_BASE
assert CONFIRM_SEED_BASE + 2 * CONFIRM_SEED_SPAN <= TRAIN_SEED_BASE
