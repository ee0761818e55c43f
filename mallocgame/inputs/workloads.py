"""Analytic generators of realistic ML workloads: MLPs, CNNs and transformers as ``Problem``s.

No framework is needed: each generator writes the program's schedule op by op, with FLOPs and
operand bytes computed from the layer shapes (bf16 by default), as an XLA-style compiler would
see it after fusion; weights are prefetched (live from the op at which their copy must start),
and ``training=True`` appends the backward pass and SGD updates. The conventions, shared by every
generator and checked by hand in ``tests/test_workloads.py``: docs/guide/suites.md, "Generated
workloads". :func:`with_capacity` sets the fast memory to a fraction of the max live bytes.

Example:
    >>> p = transformer_encoder(layers=1, hidden=8, heads=2, seq=4, batch=1, ffn=16)
    >>> [op.kind for op in p.ops][:5], int(p.ops[0].flops)  # q = x @ Wq: 2*4*8*8
    (['matmul', 'matmul', 'matmul', 'attention_scores', 'softmax'], 512)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.load import fraction_capacity
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import Buffer, Op, Operand, Problem

DTYPE_BYTES = 2  # bf16
TPU = PRESETS["tpuv4i"]  # the chip the generated workloads are sized for
ALIGN = TPU.alignment

#: FLOPs per output element of elementwise and normalisation work (forward and backward).
ELEMENTWISE_FLOPS = {
    "relu": 1, "relu6": 2, "gelu": 8, "tanh": 1, "add": 1, "add_relu": 2, "softmax": 5, "layernorm": 8,
    "add_layernorm": 9, "sgd": 2, "xent": 5, "relu_grad": 1, "gelu_grad": 10, "softmax_grad": 4,
    "layernorm_grad": 10, "grad_accumulate": 1,
}


@dataclass(frozen=True)
class Tensor:
    """A value of the program: ``shape`` in elements, ``kind`` one of the buffer kinds."""

    id: str
    shape: tuple[int, ...]
    kind: str = "activation"

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class _Grad:
    """One backward op: it writes the gradient of the inputs at positions ``wrt``.

    ``reads`` names what it reads: ``"dy"`` (the output's gradient), ``"y"`` (the
    output) or an input position. ``alias=True`` means no op: the inputs' gradient is
    ``dy`` itself (an addition's backward).
    """

    wrt: tuple[int, ...]
    reads: tuple[int | str, ...] = ()
    flops: float = 0.0
    kind: str = "elementwise"
    alias: bool = False


@dataclass
class _Step:
    id: str
    kind: str
    flops: float
    reads: list[tuple[Tensor, int]]  # (tensor, bytes)
    writes: list[tuple[Tensor, int]]
    fixed_bytes: int = 0
    inplace: tuple[str, str] | None = None


@dataclass
class _Forward:
    step: _Step
    inputs: tuple[Tensor, ...]
    output: Tensor
    grads: tuple[_Grad, ...]


@dataclass
class Program:
    """A program recorder: forward ops in schedule order, then (optionally) the backward pass.

    The layer helpers (:meth:`dense`, :meth:`conv`, :meth:`attention`, ...) compute
    shapes, FLOPs and bytes; :meth:`build` turns the recorded schedule into a
    :class:`~mallocgame.problem.model.Problem` with ops.
    """

    name: str
    training: bool = False
    dtype_bytes: int = DTYPE_BYTES
    steps: list[_Step] = field(default_factory=list)
    forward: list[_Forward] = field(default_factory=list)
    _ids: set[str] = field(default_factory=set)

    # ------------------------------------------------------------------ tensors
    def _unique(self, wanted: str) -> str:
        bid, k = wanted, 1
        while bid in self._ids:
            k += 1
            bid = f"{wanted}.{k}"
        self._ids.add(bid)
        return bid

    def tensor(self, name: str, shape: Sequence[int], kind: str = "activation") -> Tensor:
        return Tensor(self._unique(name), tuple(int(s) for s in shape), kind)

    def input(self, name: str, shape: Sequence[int]) -> Tensor:
        return self.tensor(name, shape, "input")

    def weight(self, name: str, shape: Sequence[int]) -> Tensor:
        return self.tensor(name, shape, "weight")

    def nbytes(self, t: Tensor) -> int:
        return t.elements * self.dtype_bytes

    # ------------------------------------------------------------------ recording
    def op(self, kind: str, name: str, inputs: Sequence[Tensor], shape: Sequence[int], flops: float, *,
           grads: Sequence[_Grad] = (), read_bytes: dict[str, int] | None = None, fixed_bytes: int = 0,
           inplace: bool = False, out_name: str | None = None) -> Tensor:
        """Record a forward op reading ``inputs`` and writing a new tensor of ``shape``.

        ``read_bytes`` overrides the bytes read of some inputs (partial reads);
        ``inplace`` offers the output the storage of the first input when it dies here.
        """
        out = self.tensor(out_name or name, shape)
        read_bytes = read_bytes or {}
        reads = [(t, read_bytes.get(t.id, self.nbytes(t))) for t in inputs]
        step = _Step(self._unique(f"op.{name}"), kind, float(flops), reads, [(out, self.nbytes(out))],
                     fixed_bytes, (inputs[0].id, out.id) if inplace and inputs else None)
        self.steps.append(step)
        self.forward.append(_Forward(step, tuple(inputs), out, tuple(grads)))
        return out

    def _emit(self, kind: str, name: str, reads: Sequence[Tensor], out: Tensor, flops: float,
              inplace: tuple[str, str] | None = None) -> Tensor:
        self.steps.append(_Step(self._unique(f"op.{name}"), kind, float(flops),
                                [(t, self.nbytes(t)) for t in reads], [(out, self.nbytes(out))], 0, inplace))
        return out

    # ------------------------------------------------------------------ layers
    def matmul(self, x: Tensor, w: Tensor, name: str, *, act: str | None = None) -> Tensor:
        """``x [..., K] @ w [K, N]``; ``act`` fused (inference) or a separate op (training)."""
        m, k = math.prod(x.shape[:-1]), x.shape[-1]
        n = w.shape[-1]
        assert w.shape[0] == k, (x.shape, w.shape)
        shape = (*x.shape[:-1], n)
        fused = act is not None and not self.training
        flops = 2 * m * k * n + (ELEMENTWISE_FLOPS[act] * m * n if fused else 0)
        grads = (_Grad((0,), ("dy", 1), 2 * m * k * n, "matmul"), _Grad((1,), (0, "dy"), 2 * m * k * n, "matmul"))
        y = self.op("matmul", name, [x, w], shape, flops, grads=grads)
        if act is not None and self.training:
            y = self.activation(y, act, f"{name}.{act}")
        return y

    def dense(self, x: Tensor, units: int, name: str, *, act: str | None = None) -> Tensor:
        w = self.weight(f"{name}.w", (x.shape[-1], units))
        return self.matmul(x, w, name, act=act)

    def activation(self, x: Tensor, act: str, name: str) -> Tensor:
        e = x.elements
        grad_kind = f"{act}_grad" if f"{act}_grad" in ELEMENTWISE_FLOPS else "relu_grad"
        return self.op("elementwise", name, [x], x.shape, ELEMENTWISE_FLOPS[act] * e, inplace=not self.training,
                       grads=(_Grad((0,), ("dy", 0), ELEMENTWISE_FLOPS[grad_kind] * e),))

    def add(self, a: Tensor, b: Tensor, name: str, *, relu: bool = False) -> Tensor:
        kind = "add_relu" if relu else "add"
        grads = (_Grad((0, 1), ("dy", "y"), ELEMENTWISE_FLOPS["relu_grad"] * a.elements),) if relu else \
            (_Grad((0, 1), alias=True),)
        return self.op("elementwise", name, [a, b], a.shape, ELEMENTWISE_FLOPS[kind] * a.elements, grads=grads,
                       inplace=True)

    def add_layernorm(self, a: Tensor, b: Tensor, name: str) -> Tensor:
        e = a.elements
        return self.op("layernorm", name, [a, b], a.shape, ELEMENTWISE_FLOPS["add_layernorm"] * e, inplace=True,
                       grads=(_Grad((0, 1), ("dy", "y"), ELEMENTWISE_FLOPS["layernorm_grad"] * e),))

    def conv(self, x: Tensor, cout: int, name: str, *, k: int = 3, stride: int = 1, act: str | None = "relu",
             depthwise: bool = False) -> Tensor:
        """NHWC convolution with 'same' padding; ``depthwise`` keeps the channels."""
        b, h, w_, cin = x.shape
        ho, wo = -(-h // stride), -(-w_ // stride)
        if depthwise:
            cout = cin
            wt = self.weight(f"{name}.w", (k, k, cin))
            macs = b * ho * wo * cin * k * k
        else:
            wt = self.weight(f"{name}.w", (k, k, cin, cout))
            macs = b * ho * wo * cout * k * k * cin
        fused = act is not None and not self.training
        flops = 2 * macs + (ELEMENTWISE_FLOPS[act] * b * ho * wo * cout if fused else 0)
        grads = (_Grad((0,), ("dy", 1), 2 * macs, "conv"), _Grad((1,), (0, "dy"), 2 * macs, "conv"))
        y = self.op("conv", name, [x, wt], (b, ho, wo, cout), flops, grads=grads)
        if act is not None and self.training:
            y = self.activation(y, act, f"{name}.{act}")
        return y

    def max_pool(self, x: Tensor, name: str, *, k: int = 3, stride: int = 2) -> Tensor:
        b, h, w_, c = x.shape
        ho, wo = -(-h // stride), -(-w_ // stride)
        flops = b * ho * wo * c * k * k
        return self.op("reduce", name, [x], (b, ho, wo, c), flops, grads=(_Grad((0,), ("dy", 0), flops),))

    def global_pool(self, x: Tensor, name: str) -> Tensor:
        b, h, w_, c = x.shape
        return self.op("reduce", name, [x], (b, c), x.elements, grads=(_Grad((0,), ("dy",), x.elements),))

    def attention(self, x: Tensor, heads: int, name: str, *, batch: int, seq: int,
                  kv: tuple[Tensor, Tensor] | None = None, kv_seq: int | None = None) -> Tensor:
        """Multi-head self-attention on ``x [B*S, d]``: Q, K, V, scores, softmax, context, output.

        With ``kv`` (a KV cache ``[B*S_kv, d]`` each), the new token's K and V are computed
        as usual but the scores and context read the cache (decode step).
        """
        d = x.shape[-1]
        q = self.dense(x, d, f"{name}.q")
        k = self.dense(x, d, f"{name}.k")
        v = self.dense(x, d, f"{name}.v")
        s_kv = kv_seq or seq
        keys, values = (q, k, v)[1:] if kv is None else kv
        key_inputs = [q, keys] if kv is None else [q, keys, k]
        val_inputs = [None, values] if kv is None else [None, values, v]
        score_flops = 2 * batch * seq * s_kv * d
        scores = self.op("attention_scores", f"{name}.scores", key_inputs, (batch, heads, seq, s_kv), score_flops,
                         grads=(_Grad((0,), ("dy", 1), score_flops, "attention_scores"),
                                _Grad((1,), ("dy", 0), score_flops, "attention_scores")))
        e = scores.elements
        probs = self.op("softmax", f"{name}.softmax", [scores], scores.shape, ELEMENTWISE_FLOPS["softmax"] * e,
                        inplace=not self.training,
                        grads=(_Grad((0,), ("dy", "y"), ELEMENTWISE_FLOPS["softmax_grad"] * e, "softmax"),))
        ctx_flops = 2 * batch * seq * s_kv * d
        val_inputs[0] = probs
        ctx = self.op("attention_context", f"{name}.context", val_inputs, (batch * seq, d), ctx_flops,
                      grads=(_Grad((0,), ("dy", 1), ctx_flops, "attention_context"),
                             _Grad((1,), (0, "dy"), ctx_flops, "attention_context")))
        return self.dense(ctx, d, f"{name}.out")

    def transformer_block(self, x: Tensor, heads: int, ffn: int, name: str, *, batch: int, seq: int,
                          kv: tuple[Tensor, Tensor] | None = None, kv_seq: int | None = None) -> Tensor:
        """Post-LN block (BERT): ``x1 = LN(x + attn(x))``, ``x2 = LN(x1 + W2 gelu(W1 x1))``."""
        a = self.attention(x, heads, f"{name}.attn", batch=batch, seq=seq, kv=kv, kv_seq=kv_seq)
        x1 = self.add_layernorm(a, x, f"{name}.ln1")
        f = self.dense(x1, ffn, f"{name}.ffn1", act="gelu")
        g = self.dense(f, x.shape[-1], f"{name}.ffn2")
        return self.add_layernorm(g, x1, f"{name}.ln2")

    # ------------------------------------------------------------------ backward
    def loss(self, logits: Tensor, labels: Tensor) -> None:
        """Softmax cross-entropy, then the whole backward pass and the SGD updates."""
        e = logits.elements
        dlogits = self.tensor("d.logits", logits.shape)
        self._emit("xent", "xent", [logits, labels], dlogits, ELEMENTWISE_FLOPS["xent"] * e)
        self._backward({logits.id: dlogits})

    def _backward(self, grads: dict[str, Tensor]) -> None:
        consumers: dict[str, int] = {}
        for f in self.forward:
            for t in set(f.inputs):
                consumers[t.id] = consumers.get(t.id, 0) + 1
        pending = dict(consumers)
        weights: dict[str, Tensor] = {}
        for f in reversed(self.forward):
            dy = grads.get(f.output.id)
            for t in set(f.inputs):
                pending[t.id] -= 1
            if dy is None:
                continue
            for rule in f.grads:
                targets = [f.inputs[i] for i in rule.wrt if f.inputs[i].kind != "input"]
                if not targets:
                    continue
                if rule.alias:
                    g = dy
                else:
                    reads = [dy if r == "dy" else f.output if r == "y" else f.inputs[r] for r in rule.reads]
                    g = self._emit(rule.kind, f"d.{f.output.id}>{targets[0].id}", reads,
                                   self.tensor(f"d.{targets[0].id}", targets[0].shape), rule.flops)
                for t in targets:
                    if t.kind == "weight":
                        weights[t.id] = t
                    old = grads.get(t.id)
                    if old is None:
                        grads[t.id] = g
                    else:
                        total = self.tensor(f"d.{t.id}", t.shape)
                        grads[t.id] = self._emit("elementwise", f"d.{t.id}.acc", [old, g], total,
                                                 ELEMENTWISE_FLOPS["grad_accumulate"] * t.elements,
                                                 inplace=(old.id, total.id))
            # A weight whose every consumer has been differentiated gets its update now.
            for t in set(f.inputs):
                if t.kind == "weight" and pending[t.id] == 0 and t.id in grads:
                    new = Tensor(self._unique(f"{t.id}.new"), t.shape, "output")
                    self._emit("elementwise", f"{t.id}.sgd", [t, grads[t.id]], new,
                               ELEMENTWISE_FLOPS["sgd"] * t.elements, inplace=(t.id, new.id))

    # ------------------------------------------------------------------ building
    def build(self, *, hardware=None, outputs: Sequence[Tensor] = ()) -> Problem:
        """The recorded schedule as a problem (capacity unset; see :func:`with_capacity`).

        ``outputs`` are marked ``kind="output"``; weights and inputs get their prefetch
        windows on ``hardware`` (default ``tpuv4i``).
        """
        hw = hardware or PRESETS["tpuv4i"]
        out_ids = {t.id for t in outputs}
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        tensors: dict[str, Tensor] = {}
        for t_idx, step in enumerate(self.steps):
            for t, _ in step.reads + step.writes:
                tensors.setdefault(t.id, t)
                first.setdefault(t.id, t_idx)
                last[t.id] = t_idx
        op_time = np.array([max(s.flops / hw.peak_flops, sum(b for _, b in s.reads + s.writes) / hw.slow_bw)
                            + s.fixed_bytes / hw.slow_bw for s in self.steps])
        elapsed = np.concatenate(([0.0], np.cumsum(op_time)))  # elapsed[t] = time when op t starts
        buffers = []
        for tid, t in tensors.items():
            start = first[tid]
            if t.kind in ("weight", "input") and start > 0:
                # Latest op index s such that ops s..start-1 take at least the copy time.
                need = self.nbytes(t) / hw.copy_bw
                start = int(np.searchsorted(elapsed, elapsed[start] - need, side="right")) - 1
                start = max(0, start)
            kind = "output" if tid in out_ids else t.kind
            buffers.append(Buffer(tid, self.nbytes(t), start, last[tid] + 1, None, ALIGN, kind))
        ops = tuple(Op(s.id, s.kind, s.flops, s.fixed_bytes,
                       tuple(Operand(t.id, "read", b) for t, b in s.reads)
                       + tuple(Operand(t.id, "write", b) for t, b in s.writes)) for s in self.steps)
        inplace = []
        for t_idx, s in enumerate(self.steps):
            if s.inplace and last.get(s.inplace[0]) == t_idx and first.get(s.inplace[1]) == t_idx \
                    and tensors[s.inplace[0]].kind not in ("weight", "input") \
                    and self.nbytes(tensors[s.inplace[0]]) == self.nbytes(tensors[s.inplace[1]]):
                inplace.append(s.inplace)
        return Problem(name=self.name, buffers=tuple(buffers), ops=ops, inplace=tuple(inplace), mode="map",
                       source=f"builtin:{self.name}")


# ---------------------------------------------------------------------------- capacity

def with_capacity(problem: Problem, fraction: float, *, hardware_capacity: int | None = TPU.capacity,
                  align: int = ALIGN) -> Problem:
    """``problem`` with capacity ``fraction`` x its max live bytes (aligned down, at most ``hardware_capacity``)."""
    cap = fraction_capacity(max_live(problem), fraction, align)
    if hardware_capacity is not None:
        cap = max(min(cap, hardware_capacity), align)
    return problem.replace(capacity=cap)


def total_flops(problem: Problem) -> float:
    return float(sum(op.flops for op in problem.ops))


# ---------------------------------------------------------------------------- MLPs

def mlp(widths: Sequence[int], *, batch: int, training: bool = False, act: str = "relu",
        name: str | None = None, hardware=None) -> Problem:
    """A multilayer perceptron ``widths[0] -> ... -> widths[-1]`` on ``batch`` rows."""
    p = Program(name or f"mlp-{'x'.join(map(str, widths))}-b{batch}{'-train' if training else ''}", training)
    x = p.input("x", (batch, widths[0]))
    for i, units in enumerate(widths[1:], start=1):
        last = i == len(widths) - 1
        x = p.dense(x, units, f"fc{i}", act=None if last else act)
    if training:
        p.loss(x, p.input("labels", x.shape))
        return p.build(hardware=hardware)
    return p.build(hardware=hardware, outputs=[x])


# ---------------------------------------------------------------------------- CNNs

def resnet(stages: Sequence[tuple[int, int]], *, batch: int, image: int = 224, classes: int = 1000,
           cifar_stem: bool = False, training: bool = False, name: str | None = None, hardware=None) -> Problem:
    """A ResNet of basic blocks: ``stages`` = ``[(channels, blocks), ...]`` (ResNet-18: 64..512 x 2).

    ImageNet stem: 7x7/2 conv and 3x3/2 max pool; CIFAR stem: one 3x3 conv. Each later
    stage halves the resolution in its first block, with a 1x1/2 projection shortcut.
    """
    p = Program(name or f"resnet-b{batch}", training)
    x = p.input("image", (batch, image, image, 3))
    if cifar_stem:
        x = p.conv(x, stages[0][0], "stem", k=3)
    else:
        x = p.conv(x, stages[0][0], "stem", k=7, stride=2)
        x = p.max_pool(x, "pool")
    for s, (channels, blocks) in enumerate(stages):
        for b in range(blocks):
            stride = 2 if (s > 0 and b == 0) else 1
            tag = f"s{s + 1}b{b + 1}"
            y = p.conv(x, channels, f"{tag}.conv1", stride=stride)
            y = p.conv(y, channels, f"{tag}.conv2", act=None)
            shortcut = x if (stride == 1 and x.shape[-1] == channels) else \
                p.conv(x, channels, f"{tag}.proj", k=1, stride=stride, act=None)
            x = p.add(y, shortcut, f"{tag}.add", relu=True)
    x = p.global_pool(x, "avgpool")
    logits = p.dense(x, classes, "fc")
    if training:
        p.loss(logits, p.input("labels", logits.shape))
        return p.build(hardware=hardware)
    return p.build(hardware=hardware, outputs=[logits])


MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))  # (expansion t, channels c, repeats n, stride s), Sandler et al. 2018


def mobilenet_v2(*, batch: int, image: int = 224, classes: int = 1000, name: str | None = None,
                 hardware=None) -> Problem:
    """MobileNetV2 (inverted residuals with depthwise 3x3 convs; memory-bound layers)."""
    p = Program(name or f"mobilenetv2-b{batch}")
    x = p.conv(p.input("image", (batch, image, image, 3)), 32, "stem", k=3, stride=2, act="relu6")
    for i, (t, c, n, s) in enumerate(MOBILENET_V2):
        for r in range(n):
            tag = f"b{i + 1}.{r + 1}"
            cin = x.shape[-1]
            y = p.conv(x, cin * t, f"{tag}.expand", k=1, act="relu6") if t != 1 else x
            y = p.conv(y, 0, f"{tag}.dw", k=3, stride=s if r == 0 else 1, act="relu6", depthwise=True)
            y = p.conv(y, c, f"{tag}.project", k=1, act=None)
            x = p.add(y, x, f"{tag}.add") if (r > 0 and cin == c) else y
    x = p.conv(x, 1280, "head", k=1, act="relu6")
    x = p.global_pool(x, "avgpool")
    return p.build(hardware=hardware, outputs=[p.dense(x, classes, "fc")])


VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def vgg(config: Sequence = VGG11, *, batch: int, image: int = 224, classes: int = 1000, name: str | None = None,
        hardware=None) -> Problem:
    """A VGG network (3x3 convs, 2x2 max pools, three fully connected layers)."""
    p = Program(name or f"vgg-b{batch}")
    x = p.input("image", (batch, image, image, 3))
    n = 0
    for item in config:
        if item == "M":
            x = p.max_pool(x, f"pool{n}", k=2, stride=2)
        else:
            n += 1
            x = p.conv(x, int(item), f"conv{n}")
    b, h, w_, c = x.shape
    x = Tensor(x.id, (b, h * w_ * c), x.kind)  # flatten: same buffer, new view
    x = p.dense(x, 4096, "fc1", act="relu")
    x = p.dense(x, 4096, "fc2", act="relu")
    return p.build(hardware=hardware, outputs=[p.dense(x, classes, "fc3")])


# ---------------------------------------------------------------------------- transformers

def transformer_encoder(*, layers: int, hidden: int, heads: int, seq: int, batch: int, ffn: int | None = None,
                        vocab: int | None = None, pooler: bool = False, classes: int | None = None,
                        training: bool = False, name: str | None = None, hardware=None) -> Problem:
    """A BERT-style encoder: optional embedding lookup, ``layers`` post-LN blocks, optional pooler.

    Per block: Q, K, V projections (``2*B*S*d*d`` each), scores ``QK^T``
    (``2*B*S*S*d``, output ``[B, heads, S, S]``), softmax, context ``PV``
    (``2*B*S*S*d``), output projection, add+LN, FFN up with GELU (``2*B*S*d*ffn``),
    FFN down, add+LN. BERT-base: 12 layers, hidden 768, 12 heads, ffn 3072, vocab 30522.
    With ``vocab`` the embedding table stays in HBM: the lookup reads ``B*S*d`` of its
    elements as ``fixed_bytes``.
    """
    ffn = ffn or 4 * hidden
    p = Program(name or f"encoder-L{layers}-d{hidden}-s{seq}-b{batch}", training)
    tokens = batch * seq
    if vocab:
        ids = p.input("token_ids", (tokens,))
        pos = p.weight("embed.position", (seq, hidden))
        x = p.op("gather", "embed", [ids, pos], (tokens, hidden),
                 (2 + ELEMENTWISE_FLOPS["layernorm"]) * tokens * hidden,
                 fixed_bytes=tokens * hidden * p.dtype_bytes,
                 grads=(_Grad((1,), ("dy",), tokens * hidden),))
    else:
        x = p.input("x", (tokens, hidden))
    for layer in range(layers):
        x = p.transformer_block(x, heads, ffn, f"l{layer}", batch=batch, seq=seq)
    out = x
    if pooler:
        pw = p.weight("pooler.w", (hidden, hidden))
        out = p.op("matmul", "pooler", [x, pw], (batch, hidden),
                   2 * batch * hidden * hidden + ELEMENTWISE_FLOPS["tanh"] * batch * hidden,
                   read_bytes={x.id: batch * hidden * p.dtype_bytes},  # only the [CLS] rows
                   grads=(_Grad((0,), ("dy", 1), 2 * batch * hidden * hidden, "matmul"),
                          _Grad((1,), (0, "dy"), 2 * batch * hidden * hidden, "matmul")))
    if classes:
        out = p.dense(out, classes, "classifier")
    if training:
        p.loss(out, p.input("labels", out.shape))
        return p.build(hardware=hardware)
    return p.build(hardware=hardware, outputs=[out])


def bert_base(*, batch: int, seq: int = 128, name: str | None = None, hardware=None) -> Problem:
    """BERT-base inference (12 layers, hidden 768, 12 heads, ffn 3072, vocab 30522) with pooler."""
    return transformer_encoder(layers=12, hidden=768, heads=12, seq=seq, batch=batch, ffn=3072, vocab=30522,
                               pooler=True, name=name or f"bert-base-b{batch}", hardware=hardware)


def gpt_decoder(*, layers: int, hidden: int, heads: int, seq: int, batch: int, vocab: int,
                name: str | None = None, hardware=None) -> Problem:
    """A GPT-style decoder forward pass over ``seq`` tokens with a tied LM head (``2*B*S*d*vocab``).

    The causal mask does not change the work of a dense attention kernel, so the FLOPs
    are those of :func:`transformer_encoder`. The LM head reuses the embedding table,
    which is brought in as a weight for it (``[d, vocab]``).
    """
    p = Program(name or f"gpt-L{layers}-d{hidden}-s{seq}-b{batch}")
    tokens = batch * seq
    ids = p.input("token_ids", (tokens,))
    pos = p.weight("embed.position", (seq, hidden))
    x = p.op("gather", "embed", [ids, pos], (tokens, hidden), 2 * tokens * hidden,
             fixed_bytes=tokens * hidden * p.dtype_bytes)
    for layer in range(layers):
        x = p.transformer_block(x, heads, 4 * hidden, f"l{layer}", batch=batch, seq=seq)
    logits = p.dense(x, vocab, "lm_head")
    return p.build(hardware=hardware, outputs=[logits])


def gpt_decode_step(*, layers: int, hidden: int, heads: int, context: int, batch: int,
                    name: str | None = None, hardware=None) -> Problem:
    """One autoregressive decode step: one new token per sequence, attention over a KV cache.

    The per-layer caches (``[B*context, d]`` each for K and V) are program inputs,
    prefetched like weights; scores and context read the whole cache (``2*B*context*d``
    FLOPs each). Weight-bandwidth bound: the case where fast memory helps most.
    """
    p = Program(name or f"gpt-decode-L{layers}-d{hidden}-ctx{context}-b{batch}")
    x = p.input("x", (batch, hidden))
    for layer in range(layers):
        kv = (p.input(f"l{layer}.cache_k", (batch * context, hidden)),
              p.input(f"l{layer}.cache_v", (batch * context, hidden)))
        x = p.transformer_block(x, heads, 4 * hidden, f"l{layer}", batch=batch, seq=1, kv=kv, kv_seq=context)
    return p.build(hardware=hardware, outputs=[x])


# ---------------------------------------------------------------------------- synthetic

SIZE_DISTRIBUTIONS = ("uniform", "lognormal", "bimodal", "heavy-tail")


def sample_sizes(distribution: str, n: int, rng: np.random.Generator, *, median: int = 2**20) -> np.ndarray:
    """``n`` buffer sizes (bytes, multiples of :data:`ALIGN`) from a named distribution, median ~``median``.

    * ``uniform``: uniform on ``[median/2, 3*median/2]`` (all alike);
    * ``lognormal``: ``exp(N(log median, 1))`` (a typical spread);
    * ``bimodal``: 85% small (``median/8``), 15% large (``8*median``), each +-25%;
    * ``heavy-tail``: Pareto with shape 1.5 scaled to the median, clipped at ``64*median``
      (a few huge tensors).
    """
    if distribution == "uniform":
        raw = rng.uniform(0.5, 1.5, n) * median
    elif distribution == "lognormal":
        raw = rng.lognormal(np.log(median), 1.0, n)
    elif distribution == "bimodal":
        big = rng.random(n) < 0.15
        raw = np.where(big, 8 * median, median / 8) * rng.uniform(0.75, 1.25, n)
    elif distribution == "heavy-tail":
        raw = np.minimum((rng.pareto(1.5, n) + 1.0) * median / 2 ** (1 / 1.5), 64 * median)
    else:
        raise ValueError(f"unknown size distribution {distribution!r} (one of {', '.join(SIZE_DISTRIBUTIONS)})")
    return np.maximum(ALIGN, np.round(raw / ALIGN) * ALIGN).astype(np.int64)


def synthetic_program(n_ops: int, *, sizes: str = "lognormal", seed: int = 0, reuse_window: int = 12,
                      name: str | None = None, hardware=None) -> Problem:
    """A random program of ``n_ops`` ops whose tensor sizes follow ``sizes`` (:func:`sample_sizes`).

    Op t reads the previous activation, a weight (prefetched) and with probability 0.3 an
    older activation from the last ``reuse_window`` ops (a skip connection), and writes
    one activation; its arithmetic intensity is log-uniform in [10, 1000] FLOP/byte, so
    some ops are compute-bound and some memory-bound on ``tpuv4i``.
    """
    rng = np.random.default_rng(seed)
    p = Program(name or f"synthetic-{sizes}-{n_ops}-s{seed}")
    drawn = iter(sample_sizes(sizes, 3 * n_ops + 1, rng).tolist())
    acts = [p.tensor("x", (next(drawn) // DTYPE_BYTES,), "input")]
    for t in range(n_ops):
        reads = [acts[-1], p.weight(f"w{t}", (next(drawn) // DTYPE_BYTES,))]
        if len(acts) > 2 and rng.random() < 0.3:
            reads.append(acts[-int(rng.integers(2, min(reuse_window, len(acts)) + 1))])
        out_elems = next(drawn) // DTYPE_BYTES
        nbytes = sum(p.nbytes(r) for r in reads) + out_elems * DTYPE_BYTES
        intensity = float(np.exp(rng.uniform(np.log(10.0), np.log(1000.0))))
        acts.append(p.op("matmul" if intensity > 200 else "elementwise", f"a{t}", reads, (out_elems,),
                         intensity * nbytes))
    return p.build(hardware=hardware, outputs=[acts[-1]])
