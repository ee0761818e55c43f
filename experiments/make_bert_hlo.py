"""Generate the BERT-style HLO fixture whose schedule front-loads the weight conversions.

A mixed-precision BERT encoder (post-LN, GELU FFN, 4 layers, hidden 256, 4 heads, FFN 1024,
seq 128, batch 1): master weights are f32 parameters cast to bf16 inside the program for every
matmul (``w.astype(bfloat16)``), as mixed-precision inference and training steps do. XLA:CPU
keeps each rounded weight as an f32 copy (one ``convert_convert_fusion`` per weight, f32 -> bf16
-> f32) and its scheduler runs every op that reads only parameters first, so all 16 conversions
run before the first dot and every converted copy is live at once -- the pattern issue 11
describes for BERT-base (331 MiB of up-cast weights of 351 MiB of temporaries).

Writes ``tests/data/bert_convert_fwd.hlo.txt`` (``jax.jit(f).lower(...).compile().as_text()``,
compiled with ``--xla_cpu_experimental_ynn_fusion_type=`` like the other fixtures, see
``experiments/make_hlo_fixtures.py``) and prints where the converts sit in the schedule.
JAX is a dev tool here (``pip install jax jaxlib``); the tests and experiments read the
committed text.

Run from the project root:  ``python experiments/make_bert_hlo.py``  (a few seconds).
"""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "bert_convert_fwd.hlo.txt")
D, HEADS, SEQ, BATCH, FF, LAYERS = 256, 4, 128, 1, 1024, 4


def main() -> int:
    os.environ["XLA_FLAGS"] = "--xla_cpu_experimental_ynn_fusion_type="
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        raise SystemExit(f"{exc}: this script needs JAX (pip install jax jaxlib)") from None
    bf16 = jnp.bfloat16

    def layernorm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    def dense(x, w):  # bf16 matmul of an f32 master weight, f32 accumulation
        return jnp.dot(x.astype(bf16), w.astype(bf16), preferred_element_type=jnp.float32)

    def layer(x, p):
        qkv = dense(x, p["wqkv"])
        q, k, v = jnp.split(qkv, 3, axis=-1)

        def heads(t):
            return t.reshape(BATCH, SEQ, HEADS, D // HEADS).transpose(0, 2, 1, 3)

        q, k, v = heads(q), heads(k), heads(v)
        att = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) / (D // HEADS) ** 0.5, axis=-1)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, D)
        x = layernorm(x + dense(o, p["wo"]), p["g1"], p["b1"])
        h = jax.nn.gelu(dense(x, p["w1"]), approximate=True)
        return layernorm(x + dense(h, p["w2"]), p["g2"], p["b2"])

    def bert_convert_fwd(x, params):
        for p in params:
            x = layer(x, p)
        return x

    key = jax.random.PRNGKey(0)
    params = []
    for k in jax.random.split(key, LAYERS):
        ks = jax.random.split(k, 4)
        params.append({"wqkv": jax.random.normal(ks[0], (D, 3 * D)) * 0.05,
                       "wo": jax.random.normal(ks[1], (D, D)) * 0.05,
                       "w1": jax.random.normal(ks[2], (D, FF)) * 0.05,
                       "w2": jax.random.normal(ks[3], (FF, D)) * 0.05,
                       "g1": jnp.ones((D,)), "b1": jnp.zeros((D,)), "g2": jnp.ones((D,)), "b2": jnp.zeros((D,))})
    x = jax.random.normal(key, (BATCH, SEQ, D))
    text = jax.jit(bert_convert_fwd).lower(x, params).compile().as_text()
    with open(OUT, "w") as fh:
        fh.write(text)
    entry = text[text.index("ENTRY"):]
    lines = [ln for ln in entry.splitlines() if "=" in ln and "parameter(" not in ln and "constant(" not in ln]
    converts = [i for i, ln in enumerate(lines) if re.search(r"\bconvert", ln)]
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(text)} chars, jax {jax.__version__}, "
          f"{len(lines)} ENTRY instructions; convert-like instructions at positions {converts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
