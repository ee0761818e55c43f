"""Compile the ``xla`` suite's programs with JAX on XLA:CPU and write their scheduled HLO text.

The models are :mod:`mallocgame.inputs.jax_models` (plain ``jax.numpy`` / ``jax.lax``), compiled with
``jax.jit(f, donate_argnums=...).lower(*ShapeDtypeStructs).compile().as_text()`` on the CPU
backend (:func:`mallocgame.importers.jax_program.compile_hlo_text`, the ``import jax`` door), and
written to ``mallocgame/inputs/data/xla/NAME.hlo.txt`` (gzipped, ``.hlo.txt.gz``, above 1 MB)
with a manifest ``suite.json`` (names, descriptions, files, JAX version) that the ``xla`` suite
reads, so tests and users need no JAX. Each file is read back through the suite loader and its
buffers, ops and max live bytes are printed.

    nice python experiments/make_xla_suite.py [--only NAME,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
from xla_suite_facts import write_facts  # noqa: E402

from mallocgame.importers.jax_program import ArgShape, compile_hlo_text  # noqa: E402
from mallocgame.inputs.jax_models import gpt_decode, gpt_train, lstm_train, mixer, resnet_train, vit  # noqa: E402
from mallocgame.inputs.suites import _xla_dir, read_hlo_file  # noqa: E402
from mallocgame.problem.intervals import max_live  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "mallocgame" / "inputs" / "data" / "xla"
GZIP_ABOVE = 1_000_000


PROGRAMS = {
    "gpt2-tiny-train-adam": (lambda: gpt_train(2, 128, 4, 4096, 64, 4),
                             "GPT-2-style decoder, 2 layers, width 128, vocab 4096, 64 tokens, batch 4: "
                             "one Adam training step (params, m, v donated)"),
    "gpt2-small-train-adam": (lambda: gpt_train(12, 768, 12, 50257, 256, 4),
                              "GPT-2 small (12 layers, width 768, vocab 50257, tied head), 256 tokens, batch 4: "
                              "one Adam training step (params, m, v donated)"),
    "gpt2-medium-decode-kv": (lambda: gpt_decode(24, 1024, 16, 50257, 1024, 8),
                              "GPT-2 medium (24 layers, width 1024), bf16, one decode step at batch 8 with a "
                              "1024-token KV cache updated in place (caches donated)"),
    "lstm2-scan128-train": (lambda: lstm_train(2, 128, 256, 128, 32),
                            "2-layer LSTM (hidden 256) over 128 steps with lax.scan, batch 32: one SGD training "
                            "step (forward and backward scans, expanded by the importer)"),
    "lstm3-scan150-train": (lambda: lstm_train(3, 128, 256, 150, 32),
                            "3-layer LSTM (hidden 256) over 150 steps with lax.scan, batch 32: one SGD training "
                            "step (the suite's largest once the loops are expanded)"),
    "gpt2-medium-train-adam": (lambda: gpt_train(24, 1024, 16, 50257, 256, 2),
                               "GPT-2 medium (24 layers, width 1024, vocab 50257, tied head), 256 tokens, batch 2: "
                               "one Adam training step (params, m, v donated)"),
    "resnet20-cifar-train": (lambda: resnet_train([(16, 3), (32, 3), (64, 3)], 64),
                             "ResNet-20 on 32x32 images, batch 64, batch norm: one SGD-momentum training step"),
    "vit-s16-b8": (lambda: vit(12, 384, 6, 8),
                   "ViT-S/16 at 224x224, bf16, batch 8: inference"),
    "mixer-s16-b8": (lambda: mixer(8, 512, 8),
                     "MLP-Mixer-S/16-like (8 layers, width 512) at 224x224, bf16, batch 8: inference"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="Comma-separated program names (default: all).")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "suite.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"programs": {}}
    names = args.only.split(",") if args.only else list(PROGRAMS)
    for name in names:
        make, description = PROGRAMS[name]
        fn, fargs, donate = make()
        flat = jax.tree.leaves(fargs)
        t0 = time.perf_counter()
        # compile_hlo_text takes positional ShapeDtypeStruct trees through a wrapper of flat arguments
        treedef = jax.tree.structure(fargs)

        def flat_fn(*leaves, fn=fn, treedef=treedef):
            return fn(*jax.tree.unflatten(treedef, list(leaves)))

        counts = [len(jax.tree.leaves(a)) for a in fargs]
        starts = [sum(counts[:i]) for i in range(len(counts))]
        flat_donate = [starts[i] + k for i in donate for k in range(counts[i])]
        names_of = {jnp.dtype(jnp.bfloat16): "bf16", jnp.dtype(jnp.float32): "f32", jnp.dtype(jnp.int32): "s32",
                    jnp.dtype(jnp.float16): "f16"}
        shapes = [ArgShape(names_of[jnp.dtype(a.dtype)], tuple(a.shape)) for a in flat]
        text = compile_hlo_text(flat_fn, shapes, flat_donate)
        seconds = time.perf_counter() - t0
        for old in (out / f"{name}.hlo.txt", out / f"{name}.hlo.txt.gz"):
            if old.exists():
                old.unlink()
        data = text.encode()
        if len(data) > GZIP_ABOVE:
            path = out / f"{name}.hlo.txt.gz"
            path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        else:
            path = out / f"{name}.hlo.txt"
            path.write_bytes(data)
        manifest["programs"][name] = {"file": path.name, "description": description}
        problem = read_hlo_file(path, name)
        print(f"{name}: {path.name} {path.stat().st_size / 1e6:.2f} MB ({len(data) / 1e6:.2f} MB text), "
              f"compiled in {seconds:.1f} s; buffers={problem.n} ops={len(problem.ops)} "
              f"max_live_bytes={max_live(problem)}", flush=True)
    manifest["programs"] = {k: manifest["programs"][k] for k in PROGRAMS if k in manifest["programs"]}
    manifest["made_by"] = f"experiments/make_xla_suite.py with jax {jax.__version__}, jaxlib {jaxlib.__version__}, XLA:CPU"
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    if out.resolve() == _xla_dir().resolve():  # the listing's facts (mallocgame suites xla reads them)
        write_facts()
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"{out}: {len(manifest['programs'])} programs, {total / 1e6:.2f} MB in all")


if __name__ == "__main__":
    main()
