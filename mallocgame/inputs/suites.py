"""Built-in suites of inputs for ``mallocgame compare`` and the command ``mallocgame suites``.

A suite is a named list of entries; an entry builds one :class:`~mallocgame.problem.model.Problem`
on demand. Generated suites live here (package code), so they work after a plain
``pip install``; the MiniMalloc and trace suites read the CSVs of the shared benchmark
folder, found by :func:`benchmarks_dir`.

* ``realistic``: MLPs, CNNs, transformers (BERT-base included) and Strassen matmul
  programs from :mod:`mallocgame.inputs.workloads` / :mod:`mallocgame.importers.matmul`, in map mode on
  the ``tpuv4i`` cost model, with the fast memory set to :data:`CAPACITY_FRACTION` (40%)
  of each workload's max live bytes (capped at the chip's 128 MiB), aligned down to 512;
* ``quick``: five small workloads from ``realistic``, for a comparison in about a minute;
* ``matmul``: the Strassen and schoolbook programs, and AlphaTensor's own 4x4x4 rank-49
  algorithms for TPU and GPU at 8192 beside Strassen squared and the 4x4 schoolbook program
  (the AlphaTensor experiment; the AlphaTensor entries read ``alphatensor/`` of the benchmark
  folder and are pending without it);
* ``sizes``: synthetic programs whose tensor sizes follow four distributions;
* ``xla``: JAX programs compiled by XLA:CPU (training steps with Adam, a KV-cache decoder step, a
  ``lax.scan`` LSTM, a convolutional training step, ViT and Mixer inference), read from the
  scheduled HLO text committed under ``data/xla/`` (``experiments/make_xla_suite.py`` remakes it;
  no JAX needed here), map mode on ``tpuv4i`` at 25% of the max live bytes (docs/xla_suite.md);
* ``minimalloc``: MiniMalloc's 11 challenging CSVs (pack mode, capacity 1048576);
* ``traces``: small real compiler traces (IREE, MindSpore SOMAS, IOPDDL; pack mode,
  minimise the peak).

An input spec on the command line is a suite name, ``SUITE:ENTRY[,ENTRY...]``, a bundled
``example:NAME`` or a file.

Example:
    >>> [e.name for e in suite_entries("quick")][:2]
    ['encoder-tiny-b4', 'mlp-train-3x1024-b128']
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Callable, Sequence

from mallocgame.formats.io import read_text, without_gz
from mallocgame.importers import matmul as mm
from mallocgame.importers.hlo import parse_hlo_text
from mallocgame.importers.matmul import import_matmul
from mallocgame.importers.matmul import naive as naive_factorization
from mallocgame.inputs import workloads as w
from mallocgame.inputs.load import HLO_SUFFIXES, PROBLEM_SUFFIXES, example_path, read_file
from mallocgame.inputs.workloads import SIZE_DISTRIBUTIONS, TPU, synthetic_program, with_capacity
from mallocgame.problem.aliasing import merge_inplace
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError, Problem, check_regular_file
from mallocgame.problem.suggest import did_you_mean

CAPACITY_FRACTION = 0.4
BENCHMARKS_ENV = "MALLOCGAME_BENCHMARKS"


@dataclass(frozen=True)
class Entry:
    """One input of a suite. ``build()`` returns the problem (capacity set when known)."""

    name: str
    description: str
    build: Callable[[], Problem]
    capacity_fraction: float | None = None
    pending: str | None = None  # why the entry cannot be built here, if it cannot
    # What a listing shows without building it (facts_of's keys), where the suite records them: the xla
    # suite's programs take seconds each to read.
    facts: dict[str, int | None] | None = None


FACT_KEYS = ("buffers", "ops", "max_live", "capacity")


def facts_of(problem: Problem) -> dict[str, int | None]:
    """What ``mallocgame suites NAME`` lists of a built entry: buffers, ops, max live bytes, capacity."""
    return {"buffers": problem.n, "ops": len(problem.ops), "max_live": max_live(problem), "capacity": problem.capacity}


def recorded_facts(raw) -> dict[str, int | None] | None:
    """``raw`` (a manifest's ``facts``) when it holds every key of :data:`FACT_KEYS` as a whole number
    (``capacity`` may be null), else ``None`` (the listing then builds the entry)."""
    if not isinstance(raw, dict) or set(raw) != set(FACT_KEYS):
        return None
    for key, value in raw.items():
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0) and \
                not (key == "capacity" and value is None):
            return None
    return dict(raw)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    entries: Callable[[str | None], list[Entry]]  # argument: --benchmarks DIR or None
    needs_benchmarks: bool = False


# ---------------------------------------------------------------------------- generated workloads

def _workload(name: str, description: str, make: Callable[[], Problem],
              fraction: float = CAPACITY_FRACTION, cap: int | None = None) -> Entry:
    """A generated workload with capacity ``fraction`` x max live bytes, at most ``cap`` (the chip's)."""
    def build() -> Problem:
        return with_capacity(make().replace(name=name, source=f"builtin:{name}"), fraction,
                             hardware_capacity=TPU.capacity if cap is None else cap)

    return Entry(name, description, build, fraction)


def _matmul(name: str, description: str, *, depth: int, size: int, naive: bool = False,
            factorization: str | None = None, pending: str | None = None) -> Entry:
    """A recursive matmul program from the importer's generator (pending until it is installed).

    ``factorization``: a file or built-in name for the importer (default Strassen, or the 2x2
    schoolbook with ``naive``); ``pending`` says why the entry cannot be built here.
    """
    try:
        if not hasattr(mm, "import_matmul"):
            pending = pending or "mallocgame.importers.matmul has no import_matmul"
    except Exception as exc:  # the importer is optional here: its absence only suspends the entry
        pending = pending or f"matmul generator unavailable ({exc.__class__.__name__}: {exc})"

    def make() -> Problem:
        source = factorization if factorization is not None else (naive_factorization(2) if naive else None)
        return import_matmul(source, depth=depth, size=size, dtype="bf16")

    return dataclasses.replace(_workload(name, description, make), pending=pending)


def _realistic_entries() -> list[Entry]:
    resnet18 = [(64, 2), (128, 2), (256, 2), (512, 2)]
    cifar = [(16, 3), (32, 3), (64, 3)]
    return [
        _workload("mlp-4x2048-b32", "MLP 784-2048x4-10, batch 32, inference (weight-bound)",
                  lambda: w.mlp([784, 2048, 2048, 2048, 2048, 10], batch=32)),
        _workload("mlp-3x4096-b256", "MLP 1024-4096x3-1024, batch 256, inference",
                  lambda: w.mlp([1024, 4096, 4096, 4096, 1024], batch=256)),
        _workload("mlp-train-3x1024-b128", "MLP 784-1024x3-10, batch 128, one SGD training step",
                  lambda: w.mlp([784, 1024, 1024, 1024, 10], batch=128, training=True)),
        _workload("mlp-train-6x2048-b512", "MLP 2048x7-1000, batch 512, one SGD training step",
                  lambda: w.mlp([2048] * 7 + [1000], batch=512, training=True)),
        _workload("resnet20-cifar-b32", "ResNet-20 on 32x32 images, batch 32, inference",
                  lambda: w.resnet(cifar, batch=32, image=32, classes=10, cifar_stem=True)),
        _workload("resnet8-cifar-train-b64", "ResNet-8 on 32x32 images, batch 64, one SGD training step",
                  lambda: w.resnet([(16, 1), (32, 1), (64, 1)], batch=64, image=32, classes=10,
                                   cifar_stem=True, training=True)),
        _workload("resnet18-b1", "ResNet-18 at 224x224, batch 1, inference",
                  lambda: w.resnet(resnet18, batch=1)),
        _workload("resnet18-b8", "ResNet-18 at 224x224, batch 8, inference",
                  lambda: w.resnet(resnet18, batch=8)),
        _workload("resnet34-b4", "ResNet-34 at 224x224, batch 4, inference",
                  lambda: w.resnet([(64, 3), (128, 4), (256, 6), (512, 3)], batch=4)),
        _workload("mobilenetv2-b1", "MobileNetV2 at 224x224, batch 1, inference (depthwise convs)",
                  lambda: w.mobilenet_v2(batch=1)),
        _workload("mobilenetv2-b8", "MobileNetV2 at 224x224, batch 8, inference",
                  lambda: w.mobilenet_v2(batch=8)),
        _workload("vgg11-b1", "VGG-11 at 224x224, batch 1, inference (a 205 MB fc1 weight)",
                  lambda: w.vgg(batch=1)),
        _workload("encoder-tiny-b4", "Transformer encoder 2 layers, hidden 128, 2 heads, seq 64, batch 4",
                  lambda: w.transformer_encoder(layers=2, hidden=128, heads=2, seq=64, batch=4)),
        _workload("encoder-small-b4", "Transformer encoder 4 layers, hidden 256, 4 heads, seq 128, batch 4",
                  lambda: w.transformer_encoder(layers=4, hidden=256, heads=4, seq=128, batch=4)),
        _workload("encoder-small-train-b8", "Transformer encoder 2 layers, hidden 256, seq 128, batch 8, "
                  "classifier, one SGD training step",
                  lambda: w.transformer_encoder(layers=2, hidden=256, heads=4, seq=128, batch=8, pooler=True,
                                                classes=2, training=True)),
        *[_workload(f"bert-base-b{b}", f"BERT-base (12 layers, hidden 768, seq 128), batch {b}, inference",
                    lambda b=b: w.bert_base(batch=b)) for b in (1, 2, 4, 8)],
        _workload("bert-large-b1", "BERT-large (24 layers, hidden 1024, 16 heads, seq 128), batch 1, inference",
                  lambda: w.transformer_encoder(layers=24, hidden=1024, heads=16, seq=128, batch=1, vocab=30522,
                                                pooler=True)),
        _workload("gpt2-small-s256-b1", "GPT-2 small (12 layers, hidden 768) over 256 tokens, batch 1, "
                  "tied LM head (vocab 50257)",
                  lambda: w.gpt_decoder(layers=12, hidden=768, heads=12, seq=256, batch=1, vocab=50257)),
        _workload("gpt2-small-decode-b8", "GPT-2 small, one decode step, batch 8, KV cache of 512 tokens",
                  lambda: w.gpt_decode_step(layers=12, hidden=768, heads=12, context=512, batch=8)),
        _matmul("strassen-d1-n2048", "Strassen 2x2 rank 7, depth 1, 2048x2048 bf16 matrices", depth=1, size=2048),
        _matmul("strassen-d2-n2048", "Strassen 2x2 rank 7, depth 2, 2048x2048 bf16 matrices", depth=2, size=2048),
        _matmul("naive-2x2-d2-n2048", "Schoolbook 2x2 rank 8 (baseline for Strassen), depth 2, 2048x2048 bf16",
                depth=2, size=2048, naive=True),
    ]


QUICK = ("encoder-tiny-b4", "mlp-train-3x1024-b128", "resnet8-cifar-train-b64", "mobilenetv2-b1", "strassen-d1-n2048")


def _quick_entries() -> list[Entry]:
    by_name = {e.name: e for e in _realistic_entries()}
    return [by_name[n] for n in QUICK]


ALPHATENSOR = (("alphatensor-tpu-4x4x4-n8192", "alphatensor_tpu_4x4x4_rank49.npy",
                "AlphaTensor's 4x4x4 rank-49 algorithm found for TPU v2"),
               ("alphatensor-gpu-4x4x4-n8192", "alphatensor_gpu_4x4x4_rank49.npy",
                "AlphaTensor's 4x4x4 rank-49 algorithm found for V100 GPUs"),
               ("strassen-squared-4x4x4-n8192", "strassen_squared_4x4x4_rank49.npy",
                "Strassen squared, 4x4x4 rank 49 (AlphaTensor's baseline)"))


def _matmul_entries(explicit: str | None = None) -> list[Entry]:
    """Strassen and schoolbook programs, and AlphaTensor's algorithms from ``alphatensor/`` (pending without it)."""
    try:
        folder, missing = benchmarks_dir(explicit, subfolder="alphatensor") / "alphatensor", None
    except InputError as exc:
        folder, missing = Path("alphatensor"), str(exc)
    alphatensor = []
    for name, file, description in ALPHATENSOR:
        path = folder / file
        pending = missing or (None if path.is_file() else f"{path}: file not found")
        alphatensor.append(_matmul(name, f"{description}, depth 1, 8192x8192 bf16", depth=1, size=8192,
                                   factorization=str(path), pending=pending))
    return [e for e in _realistic_entries() if e.name.startswith(("strassen", "naive"))] + [
        _matmul("strassen-d1-n4096", "Strassen 2x2 rank 7, depth 1, 4096x4096 bf16 matrices", depth=1, size=4096),
        _matmul("naive-2x2-d1-n4096", "Schoolbook 2x2 rank 8, depth 1, 4096x4096 bf16", depth=1, size=4096,
                naive=True),
        *alphatensor,
        _matmul("naive-4x4x4-n8192", "Schoolbook 4x4 rank 64 (the baseline of the 4x4x4 programs), depth 1, "
                "8192x8192 bf16", depth=1, size=8192, factorization="naive4"),
    ]


def _sizes_entries() -> list[Entry]:
    return [_workload(f"synthetic-{dist}-s{seed}", f"synthetic 150-op program, {dist} tensor sizes, seed {seed}",
                      lambda dist=dist, seed=seed: synthetic_program(150, sizes=dist, seed=seed), cap=None)
            for dist in SIZE_DISTRIBUTIONS for seed in (0, 1)]


# ---------------------------------------------------------------------------- XLA:CPU programs compiled from JAX

XLA_CAPACITY_FRACTION = 0.25


def read_hlo_file(path: str | os.PathLike, name: str | None = None, **options) -> Problem:
    """A scheduled HLO text file (``.hlo.txt``, or gzipped ``.hlo.txt.gz``) as the workload ``import hlo``
    writes and the workload reader reads back (in-place pairs merged); ``options``: the importer's
    (:func:`mallocgame.importers.hlo.parse_hlo_text`: ``loop_state``, ``max_expanded_ops``)."""
    path = Path(path)
    text = read_text(str(path))  # gunzips a .gz
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the importer's notes (scaled loops, ...) were read when the suite was made
        problem = parse_hlo_text(text, str(path), name=name, **options).problem
    return merge_inplace(problem)


def _xla_dir() -> Path:
    return Path(str(files("mallocgame.inputs") / "data" / "xla"))


def _xla_entries() -> list[Entry]:
    """experiments/make_xla_suite.py's programs, read from the committed HLO text (no JAX needed)."""
    folder = _xla_dir()
    manifest = folder / "suite.json"
    if not manifest.is_file():
        raise InputError(f"{manifest}: file not found (run experiments/make_xla_suite.py)")
    programs = json.loads(manifest.read_text())["programs"]
    out = []
    for name, info in programs.items():
        path = folder / info["file"]

        def make(path=path, name=name) -> Problem:
            return read_hlo_file(path, name)

        entry = _workload(name, info["description"], make, XLA_CAPACITY_FRACTION)
        out.append(dataclasses.replace(entry, pending=None if path.is_file() else f"{path}: file not found",
                                       facts=recorded_facts(info.get("facts"))))
    return out


# ---------------------------------------------------------------------------- benchmark files

def benchmark_candidates(explicit: str | None = None) -> list[Path]:
    """Where the shared benchmark folder is looked for, in order."""
    if explicit:
        return [Path(explicit)]
    found = []
    if os.environ.get(BENCHMARKS_ENV):
        found.append(Path(os.environ[BENCHMARKS_ENV]))
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():  # running from a source checkout (editable install)
        found.append(repo.parent / "shared" / "benchmarks")
    found += [Path.cwd().parent / "shared" / "benchmarks", Path.cwd() / "shared" / "benchmarks"]
    return list(dict.fromkeys(found))


def benchmarks_dir(explicit: str | None = None, *, subfolder: str = "minimalloc") -> Path:
    """The folder holding ``subfolder`` (e.g. ``minimalloc/A.1048576.csv``); InputError if none does."""
    tried = benchmark_candidates(explicit)
    for root in tried:
        if (root / subfolder).is_dir():
            return root
        if root.name == subfolder and root.is_dir():
            return root.parent
    where = ", ".join(str(p) for p in tried)
    raise InputError(f"benchmark files not found (looked for {subfolder}/ in: {where}); "
                     f"pass --benchmarks DIR or set {BENCHMARKS_ENV}")


def _file_entry(path: Path, description: str | None = None) -> Entry:
    """A problem file, read when the entry is built; named by its stem (``A.1048576.csv`` -> ``A``)."""
    def build() -> Problem:
        return read_file(path)

    plain = without_gz(path.name)
    if plain.endswith(".csv"):
        name = plain.split(".")[0]
    else:
        suffix = next((x for x in (".json", *HLO_SUFFIXES) if plain.endswith(x)), None)
        name = plain[:-len(suffix)] if suffix else Path(plain).stem
    return Entry(name, str(path) if description is None else description, build)


def _minimalloc_entries(explicit: str | None) -> list[Entry]:
    folder = benchmarks_dir(explicit) / "minimalloc"
    files = [folder / f"{c}.1048576.csv" for c in "ABCDEFGHIJK"]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise InputError(f"{missing[0]}: file not found (suite minimalloc needs A..K.1048576.csv)")
    return [_file_entry(f, "MiniMalloc challenging instance, pack at capacity 1048576") for f in files]


TRACES = (("idealloc-iree", "iree_mobilenet.csv", "IREE MobileNet transient buffers"),
          ("idealloc-iree", "iree_mobilebert.csv", "IREE MobileBERT transient buffers"),
          ("idealloc-somas", "resnet50.csv", "MindSpore SOMAS ResNet-50 tensors"),
          ("idealloc-iopddl", "G_1.csv", "IOPDDL G (idealloc's DSA conversion)"),
          ("idealloc-somas", "tiny_bert.csv", "MindSpore SOMAS TinyBERT tensors"))


def _trace_entries(explicit: str | None) -> list[Entry]:
    root = benchmarks_dir(explicit, subfolder="idealloc-iree")
    out = []
    for folder, name, description in TRACES:
        path = root / folder / name
        if not path.is_file():
            raise InputError(f"{path}: file not found (suite traces)")
        out.append(_file_entry(path, f"{description}; pack, minimise the peak"))
    return out


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("quick", "five small realistic workloads: a comparison in about a minute", lambda _: _quick_entries()),
    Suite("realistic", f"MLPs, CNNs, transformers (BERT-base b1-8), Strassen matmul; tpuv4i, "
          f"capacity {CAPACITY_FRACTION:.0%} of max live", lambda _: _realistic_entries()),
    Suite("matmul", "Strassen, AlphaTensor's 4x4x4 TPU/GPU algorithms and schoolbook matmul programs "
          "(AlphaTensor experiment)", _matmul_entries),
    Suite("sizes", "synthetic programs: uniform, lognormal, bimodal, heavy-tail tensor sizes",
          lambda _: _sizes_entries()),
    Suite("xla", f"JAX programs compiled by XLA:CPU (GPT-2 Adam steps, KV-cache decode, LSTM scan, ResNet step, "
          f"ViT, Mixer); tpuv4i, capacity {XLA_CAPACITY_FRACTION:.0%} of max live", lambda _: _xla_entries()),
    Suite("minimalloc", "MiniMalloc's 11 challenging pack instances A-K (capacity 1048576)",
          _minimalloc_entries, needs_benchmarks=True),
    Suite("traces", "real compiler traces (IREE, SOMAS, IOPDDL), pack mode, minimise the peak",
          _trace_entries, needs_benchmarks=True),
)}


def suite_entries(name: str, benchmarks: str | None = None, *, include_pending: bool = False) -> list[Entry]:
    """The entries of suite ``name`` (pending ones left out unless asked for)."""
    if name not in SUITES:
        raise InputError(f"unknown suite {name!r} (suites: {', '.join(SUITES)}){did_you_mean(name, SUITES)}")
    entries = SUITES[name].entries(benchmarks)
    return entries if include_pending else [e for e in entries if e.pending is None]


def looks_like_file(spec: str) -> bool:
    return os.sep in spec or without_gz(spec).endswith(PROBLEM_SUFFIXES) or os.path.exists(spec)


def resolve_inputs(specs: Sequence[str], benchmarks: str | None = None) -> list[Entry]:
    """Entries for command-line input specs: suite names, ``SUITE:ENTRY[,ENTRY]`` or files.

    Raises :class:`InputError` (one line) for an unknown suite or entry, or a missing file.
    """
    out: list[Entry] = []
    for spec in specs:
        suite, _, wanted = spec.partition(":")
        if suite in SUITES and not looks_like_file(spec):
            entries = suite_entries(suite, benchmarks, include_pending=True)
            if wanted:
                by_name = {e.name: e for e in entries}
                for n in wanted.split(","):
                    if n not in by_name:
                        raise InputError(f"{spec}: suite {suite!r} has no entry {n!r} "
                                         f"(entries: {', '.join(by_name)}){did_you_mean(n, by_name)}")
                    if by_name[n].pending:
                        raise InputError(f"{spec}: entry {n!r} is pending: {by_name[n].pending}")
                entries = [by_name[n] for n in wanted.split(",")]
            else:
                entries = [e for e in entries if e.pending is None]
            out += entries
        elif spec.startswith("example:"):
            path = Path(example_path(spec.split(":", 1)[1]))
            out.append(_file_entry(path, spec if without_gz(path.name).endswith(".csv") else None))
        elif os.path.isdir(spec):  # a folder of inputs: its problem files, by name
            found = sorted(f for f in Path(spec).iterdir()
                           if f.is_file() and without_gz(f.name).endswith(PROBLEM_SUFFIXES))
            if not found:
                raise InputError(f"{spec}: a folder with no .csv, .json or .hlo.txt problem files (gzipped or not)")
            out += [_file_entry(f) for f in found]
        elif looks_like_file(spec):
            path = Path(spec)

            check_regular_file(spec)  # missing or a FIFO: one line
            out.append(_file_entry(path))
        else:
            raise InputError(f"{spec}: not a suite ({', '.join(SUITES)}) and no such file{did_you_mean(spec, SUITES)}")
    return out
