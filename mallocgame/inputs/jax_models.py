"""JAX models of ML programs (plain ``jax.numpy`` / ``jax.lax``, no flax or optax), as ``(function,
example arguments, donated argument indices)``: the ``xla`` suite's programs
(``experiments/make_xla_suite.py``) and the curriculum's XLA-compiled programs of random architecture
(:func:`mallocgame.search.muzero.problems.xla_workload`) are built from them.

Every builder returns ``(fn, args, donate)``: ``args`` a tuple of pytrees of ``jax.ShapeDtypeStruct``,
``donate`` the indices of the arguments XLA may reuse (the training state), so
``compile_hlo_text(lambda: (fn, args), None, donate)`` (:mod:`mallocgame.importers.jax_program`, the
``import jax`` door) gives XLA:CPU's scheduled HLO text. Importing this module imports jax (a heavy
dependency: import it inside the function that needs it).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402


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
