"""Compile the ``xla`` suite's programs with JAX on XLA:CPU and write their scheduled HLO text.

Every program is plain ``jax.numpy`` / ``jax.lax`` (no flax or optax), compiled with
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
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
from jax import lax  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "mallocgame" / "inputs" / "data" / "xla"
GZIP_ABOVE = 1_000_000


def sds(tree):
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), tree)


# --------------------------------------------------------------------------- blocks

def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def attention(x, p, heads, causal):
    b, t, d = x.shape
    qkv = x @ p["wqkv"] + p["bqkv"]
    q, k, v = jnp.split(qkv.reshape(b, t, 3, heads, d // heads), 3, axis=2)
    q, k, v = (a[:, :, 0].transpose(0, 2, 1, 3) for a in (q, k, v))
    att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d // heads)
    if causal:
        att = jnp.where(jnp.tril(jnp.ones((t, t), bool)), att, -1e9)
    y = jax.nn.softmax(att, -1) @ v
    return y.transpose(0, 2, 1, 3).reshape(b, t, d) @ p["wo"] + p["bo"]


def block(x, p, heads, causal):
    x = x + attention(layer_norm(x, p["g1"], p["b1"]), p, heads, causal)
    h = gelu(layer_norm(x, p["g2"], p["b2"]) @ p["w1"] + p["c1"])
    return x + h @ p["w2"] + p["c2"]


def block_params(d, dtype=jnp.float32):
    s = jax.ShapeDtypeStruct
    return {"wqkv": s((d, 3 * d), dtype), "bqkv": s((3 * d,), dtype), "wo": s((d, d), dtype), "bo": s((d,), dtype),
            "g1": s((d,), dtype), "b1": s((d,), dtype), "g2": s((d,), dtype), "b2": s((d,), dtype),
            "w1": s((d, 4 * d), dtype), "c1": s((4 * d,), dtype), "w2": s((4 * d, d), dtype), "c2": s((d,), dtype)}


# --------------------------------------------------------------------------- GPT-2 training step with Adam

def gpt_params(layers, d, vocab, ctx):
    s = jax.ShapeDtypeStruct
    return {"wte": s((vocab, d), jnp.float32), "wpe": s((ctx, d), jnp.float32),
            "blocks": [block_params(d) for _ in range(layers)], "gf": s((d,), jnp.float32), "bf": s((d,), jnp.float32)}


def gpt_logits(params, ids, heads):
    x = params["wte"][ids] + params["wpe"][: ids.shape[1]]
    for p in params["blocks"]:
        x = block(x, p, heads, True)
    return layer_norm(x, params["gf"], params["bf"]) @ params["wte"].T  # tied head


def gpt_train_step(heads, lr=3e-4, b1=0.9, b2=0.999, eps=1e-8):
    def loss(params, ids, targets):
        logp = jax.nn.log_softmax(gpt_logits(params, ids, heads), -1)
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()

    def step(params, m, v, count, ids, targets):
        value, grads = jax.value_and_grad(loss)(params, ids, targets)
        count = count + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        c1, c2 = 1 - b1 ** count, 1 - b2 ** count
        params = jax.tree.map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v)
        return params, m, v, count, value

    return step


def gpt_train(layers, d, heads, vocab, seq, batch):
    params = gpt_params(layers, d, vocab, seq)
    ids = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    args = (params, params, params, jax.ShapeDtypeStruct((), jnp.float32), ids, ids)
    return gpt_train_step(heads), args, (0, 1, 2)


# --------------------------------------------------------------------------- decoder step with a KV cache

def decode_step(heads):
    def step(params, cache_k, cache_v, ids, pos):
        d = params["wte"].shape[1]
        x = params["wte"][ids][:, None, :] + lax.dynamic_slice_in_dim(params["wpe"], pos, 1)[None]
        new_k, new_v = [], []
        for p, ck, cv in zip(params["blocks"], cache_k, cache_v):
            h = layer_norm(x, p["g1"], p["b1"])
            q, k, v = jnp.split(h @ p["wqkv"] + p["bqkv"], 3, -1)
            b = x.shape[0]
            q, k, v = (a.reshape(b, 1, heads, d // heads).transpose(0, 2, 1, 3) for a in (q, k, v))
            ck = lax.dynamic_update_slice(ck, k, (0, 0, pos, 0))
            cv = lax.dynamic_update_slice(cv, v, (0, 0, pos, 0))
            att = (q @ ck.transpose(0, 1, 3, 2)) / math.sqrt(d // heads)
            att = jnp.where(jnp.arange(ck.shape[2]) <= pos, att, -1e9)
            y = (jax.nn.softmax(att, -1) @ cv).transpose(0, 2, 1, 3).reshape(b, 1, d)
            x = x + y @ p["wo"] + p["bo"]
            x = x + gelu(layer_norm(x, p["g2"], p["b2"]) @ p["w1"] + p["c1"]) @ p["w2"] + p["c2"]
            new_k.append(ck)
            new_v.append(cv)
        logits = layer_norm(x[:, 0], params["gf"], params["bf"]) @ params["wte"].T
        return jnp.argmax(logits, -1), new_k, new_v

    return step


def gpt_decode(layers, d, heads, vocab, context, batch, dtype=jnp.bfloat16):
    params = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, dtype), gpt_params(layers, d, vocab, context))
    cache = [jax.ShapeDtypeStruct((batch, heads, context, d // heads), dtype) for _ in range(layers)]
    args = (params, cache, cache, jax.ShapeDtypeStruct((batch,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))
    return decode_step(heads), args, (1, 2)


# --------------------------------------------------------------------------- LSTM over time (lax.scan), training step

def lstm_train(layers, inp, hidden, steps, batch, lr=0.1):
    s = jax.ShapeDtypeStruct
    params = {"cells": [{"w": s((i, 4 * hidden), jnp.float32), "u": s((hidden, 4 * hidden), jnp.float32),
                         "b": s((4 * hidden,), jnp.float32)} for i in [inp] + [hidden] * (layers - 1)],
              "head": s((hidden, 10), jnp.float32)}

    def cell(p, carry, x):
        h, c = carry
        z = x @ p["w"] + h @ p["u"] + p["b"]
        i, f, g, o = jnp.split(z, 4, -1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    def loss(params, xs, labels):
        for p in params["cells"]:
            zero = jnp.zeros((xs.shape[1], hidden), xs.dtype)
            _, xs = lax.scan(lambda carry, x, p=p: cell(p, carry, x), (zero, zero), xs)
        logp = jax.nn.log_softmax(xs[-1] @ params["head"], -1)
        return -jnp.take_along_axis(logp, labels[:, None], -1).mean()

    def step(params, xs, labels):
        value, grads = jax.value_and_grad(loss)(params, xs, labels)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), value

    args = (params, s((steps, batch, inp), jnp.float32), s((batch,), jnp.int32))
    return step, args, (0,)


# --------------------------------------------------------------------------- convolutional training step

def conv(x, w, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def batch_norm(x, g, b, eps=1e-5):
    mu = x.mean((0, 1, 2))
    var = ((x - mu) ** 2).mean((0, 1, 2))
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def resnet_train(stages, batch, image=32, classes=10, lr=0.1, momentum=0.9):
    s = jax.ShapeDtypeStruct
    params, cin = {"stem": s((3, 3, 3, stages[0][0]), jnp.float32), "blocks": []}, stages[0][0]
    for i, (c, n) in enumerate(stages):
        for j in range(n):
            stride = 2 if j == 0 and i > 0 else 1
            blk = {"w1": s((3, 3, cin, c), jnp.float32), "g1": s((c,), jnp.float32), "b1": s((c,), jnp.float32),
                   "w2": s((3, 3, c, c), jnp.float32), "g2": s((c,), jnp.float32), "b2": s((c,), jnp.float32)}
            if stride != 1 or cin != c:
                blk["ws"] = s((1, 1, cin, c), jnp.float32)
            params["blocks"].append(blk)
            cin = c
    params["fc"] = s((cin, classes), jnp.float32)
    strides = [2 if j == 0 and i > 0 else 1 for i, (c, n) in enumerate(stages) for j in range(n)]

    def forward(params, x):
        x = jax.nn.relu(conv(x, params["stem"]))
        for p, st in zip(params["blocks"], strides):
            y = jax.nn.relu(batch_norm(conv(x, p["w1"], st), p["g1"], p["b1"]))
            y = batch_norm(conv(y, p["w2"]), p["g2"], p["b2"])
            x = jax.nn.relu(y + (conv(x, p["ws"], st) if "ws" in p else x))
        return x.mean((1, 2)) @ params["fc"]

    args = (params, params, s((batch, image, image, 3), jnp.float32), s((batch,), jnp.int32))
    return sgd_momentum_step(forward, lr, momentum), args, (0, 1)


def sgd_momentum_step(forward, lr, momentum):
    """One SGD-with-momentum step of a classifier ``forward(params, x) -> logits``: ``(params, velocity,
    x, labels) -> (params, velocity, loss)`` (cross-entropy; params and velocity are the donated state)."""
    def step(params, velocity, x, labels):
        def loss(params):
            logp = jax.nn.log_softmax(forward(params, x), -1)
            return -jnp.take_along_axis(logp, labels[:, None], -1).mean()

        value, grads = jax.value_and_grad(loss)(params)
        velocity = jax.tree.map(lambda v, g: momentum * v + g, velocity, grads)
        return jax.tree.map(lambda p, v: p - lr * v, params, velocity), velocity, value

    return step


# --------------------------------------------------------------------------- ViT and MLP-Mixer inference

def vit(layers, d, heads, batch, image=224, patch=16, classes=1000, dtype=jnp.bfloat16):
    s = jax.ShapeDtypeStruct
    n = (image // patch) ** 2
    params = {"patch": s((patch * patch * 3, d), dtype), "cls": s((1, 1, d), dtype), "pos": s((1, n + 1, d), dtype),
              "blocks": [block_params(d, dtype) for _ in range(layers)], "gf": s((d,), dtype), "bf": s((d,), dtype),
              "head": s((d, classes), dtype)}

    def forward(params, images):
        b = images.shape[0]
        x = images.reshape(b, image // patch, patch, image // patch, patch, 3).transpose(0, 1, 3, 2, 4, 5)
        x = x.reshape(b, n, patch * patch * 3) @ params["patch"]
        x = jnp.concatenate([jnp.broadcast_to(params["cls"], (b, 1, d)), x], 1) + params["pos"]
        for p in params["blocks"]:
            x = block(x, p, heads, False)
        return layer_norm(x[:, 0], params["gf"], params["bf"]) @ params["head"]

    return forward, (params, s((batch, image, image, 3), dtype)), ()


def mixer(layers, d, batch, image=224, patch=16, tokens_hidden=256, channels_hidden=2048, classes=1000,
          dtype=jnp.bfloat16):
    s = jax.ShapeDtypeStruct
    n = (image // patch) ** 2
    params = {"patch": s((patch * patch * 3, d), dtype), "head": s((d, classes), dtype),
              "blocks": [{"g1": s((d,), dtype), "b1": s((d,), dtype), "t1": s((n, tokens_hidden), dtype),
                          "t2": s((tokens_hidden, n), dtype), "g2": s((d,), dtype), "b2": s((d,), dtype),
                          "c1": s((d, channels_hidden), dtype), "c2": s((channels_hidden, d), dtype)}
                         for _ in range(layers)]}

    def forward(params, images):
        b = images.shape[0]
        x = images.reshape(b, image // patch, patch, image // patch, patch, 3).transpose(0, 1, 3, 2, 4, 5)
        x = x.reshape(b, n, patch * patch * 3) @ params["patch"]
        for p in params["blocks"]:
            y = layer_norm(x, p["g1"], p["b1"]).transpose(0, 2, 1)
            x = x + (gelu(y @ p["t1"]) @ p["t2"]).transpose(0, 2, 1)
            x = x + gelu(layer_norm(x, p["g2"], p["b2"]) @ p["c1"]) @ p["c2"]
        return x.mean(1) @ params["head"]

    return forward, (params, s((batch, image, image, 3), dtype)), ()


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
    sys.path.insert(0, str(ROOT))
    from mallocgame.importers.jax_program import compile_hlo_text
    from mallocgame.inputs.suites import read_hlo_file
    from mallocgame.intervals import max_live

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
        from mallocgame.importers.jax_program import ArgShape

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
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"{out}: {len(manifest['programs'])} programs, {total / 1e6:.2f} MB in all")


if __name__ == "__main__":
    main()
