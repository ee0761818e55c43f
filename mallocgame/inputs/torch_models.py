"""PyTorch models of ML programs (plain ``torch.nn``; torchvision does not import beside the pinned torch):
the ExecuTorch benchmark's models (``experiments/bench_executorch.py``), the held-out ``torch`` family
(``experiments/heldout.py``) and the curriculum's torch-exported programs of random architecture
(:func:`mallocgame.search.muzero.problems.torch_workload`) are built from them.

:func:`build` gives ``(module, example_inputs)`` for a model name and its arguments; every argument has a
default, and the defaults are the benchmark's models (ResNet-18/50 at base 64, VGG-11, U-Net with 32
channels and depth 4, MLP-Mixer-S/16, a BERT-base-wide encoder and a GPT-2-small-wide decoder of 4
layers, MobileNetV2 at width 1). ``torch.export`` of the module at the example inputs, imported by
:func:`mallocgame.importers.torch_export.import_exported` (the ``import torch`` door), is the program.
Importing this module imports torch (heavy: import it inside the function that needs it).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def _conv_bn(cin, cout, k=3, s=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU6(inplace=True)) if act else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = [_conv_bn(cin, hidden, 1)] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), _conv_bn(hidden, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


#: MobileNetV2's stages: (expansion, channels, repeats, stride).
MOBILENET_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                    (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    """MobileNetV2 with its channels times ``width`` (rounded to 8) and its first ``stages`` stages."""

    def __init__(self, classes=1000, width=1.0, stages=len(MOBILENET_STAGES)):
        super().__init__()

        def ch(c):
            return max(8, int(round(c * width / 8)) * 8)

        layers, cin = [_conv_bn(3, ch(32), 3, 2)], ch(32)
        for t, c, n, s in MOBILENET_STAGES[:stages]:
            for i in range(n):
                layers.append(InvertedResidual(cin, ch(c), s if i == 0 else 1, t))
                cin = ch(c)
        last = 1280 if width <= 1.0 else ch(1280)
        layers.append(_conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(last, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, c, stride):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                               nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))
        self.skip = (nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))
                     if stride != 1 or cin != c else nn.Identity())

    def forward(self, x):
        return F.relu(self.a(x) + self.skip(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, c, stride):
        super().__init__()
        out = c * 4
        self.a = nn.Sequential(nn.Conv2d(cin, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                               nn.Conv2d(c, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                               nn.Conv2d(c, out, 1, bias=False), nn.BatchNorm2d(out))
        self.skip = (nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                     if stride != 1 or cin != out else nn.Identity())

    def forward(self, x):
        return F.relu(self.a(x) + self.skip(x))


class ResNet(nn.Module):
    """A ResNet of ``block`` with ``counts`` blocks per stage, stage ``i`` of ``base * 2**i`` channels."""

    def __init__(self, block, counts, classes=1000, base=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], base
        for i, n in enumerate(counts):
            c = base * 2 ** i
            for j in range(n):
                layers.append(block(cin, c, 2 if j == 0 and i > 0 else 1))
                cin = c * block.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))


class Attention(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.h, self.causal = heads, causal
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
        if self.causal:
            att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att = Attention(d, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.att(self.n1(x))
        return x + self.mlp(self.n2(x))


class Encoder(nn.Module):
    """A transformer encoder (input: embeddings); by default BERT-base-wide, 4 layers."""

    def __init__(self, d=768, heads=12, layers=4):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d, heads, False) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(self.blocks(x))


class GPT(nn.Module):
    """A causal decoder with its embeddings and head (input: token ids); by default GPT-2-small-wide, 4 layers,
    vocabulary 8192, 128 tokens."""

    def __init__(self, vocab=8192, d=768, heads=12, layers=4, ctx=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads, True) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(self.norm(self.blocks(x)))


class UNet(nn.Module):
    """A U-Net of ``depth`` levels, ``c * 2**i`` channels at level ``i`` (input size a multiple of ``2**depth``)."""

    def __init__(self, c=32, depth=4):
        super().__init__()

        def double(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, 1, 1), nn.ReLU(), nn.Conv2d(o, o, 3, 1, 1), nn.ReLU())

        chans = [c * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList([double(3 if i == 0 else chans[i - 1], chans[i]) for i in range(depth)])
        self.mid = double(chans[depth - 1], chans[depth])
        self.up = nn.ModuleList([nn.ConvTranspose2d(chans[i + 1], chans[i], 2, 2) for i in reversed(range(depth))])
        self.dec = nn.ModuleList([double(2 * chans[i], chans[i]) for i in reversed(range(depth))])
        self.out = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.out(x)


#: VGG-11's stages: convolutions per stage (channels base, 2 base, 4 base, 8 base, 8 base), each stage pooled.
VGG11_CONVS = (1, 1, 2, 2, 2)


class VGG(nn.Module):
    """A VGG of ``convs[i]`` 3x3 convolutions at stage ``i`` (``base * 2**min(i, 3)`` channels), each stage
    max-pooled, and two dense layers; by default VGG-11 on 224x224 inputs."""

    def __init__(self, base=64, convs=VGG11_CONVS, image=224, hidden=1024, classes=1000):
        super().__init__()
        layers, cin = [], 3
        for i, n in enumerate(convs):
            for _ in range(n):
                layers += [nn.Conv2d(cin, base * 2 ** min(i, 3), 3, 1, 1), nn.ReLU()]
                cin = base * 2 ** min(i, 3)
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        side = image // 2 ** len(convs)
        self.fc = nn.Sequential(nn.Linear(cin * side * side, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Mixer(nn.Module):
    """An MLP-Mixer; by default MLP-Mixer-S/16-like on 224x224 (196 patches, width 512, 8 layers)."""

    def __init__(self, d=512, layers=8, patches=196, tokens_hidden=256, channels_hidden=2048, patch=16):
        super().__init__()
        self.stem = nn.Conv2d(3, d, patch, patch)
        self.blocks = nn.ModuleList([nn.ModuleDict(dict(
            n1=nn.LayerNorm(d), tok=nn.Sequential(nn.Linear(patches, tokens_hidden), nn.GELU(),
                                                  nn.Linear(tokens_hidden, patches)),
            n2=nn.LayerNorm(d), ch=nn.Sequential(nn.Linear(d, channels_hidden), nn.GELU(),
                                                 nn.Linear(channels_hidden, d)))) for _ in range(layers)])
        self.head = nn.Linear(d, 1000)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = x + b["tok"](b["n1"](x).transpose(1, 2)).transpose(1, 2)
            x = x + b["ch"](b["n2"](x))
        return self.head(x.mean(1))


def image(batch, size=224):
    """Example input of an image model: ``(batch, 3, size, size)``."""
    return (torch.randn(batch, 3, size, size),)


#: The models :func:`build` knows, with the argument names each takes (every one has a default).
MODELS = {
    "mobilenet": ("width", "stages", "batch", "image"),
    "resnet": ("base", "blocks", "stages", "bottleneck", "batch", "image"),
    "vgg": ("base", "convs", "stages", "batch", "image"),
    "unet": ("c", "depth", "batch", "image"),
    "mixer": ("d", "layers", "tokens_hidden", "channels_hidden", "patch", "batch", "image"),
    "encoder": ("d", "heads", "layers", "seq", "batch"),
    "gpt": ("vocab", "d", "heads", "layers", "seq", "batch"),
}


#: The ExecuTorch benchmark's models (``experiments/bench_executorch.py``), also the held-out ``torch`` family
#: (``experiments/heldout.py``): name -> (model, arguments) of :func:`build`, each width argument written out.
BENCHMARK_MODELS = {
    "mobilenet_v2": ("mobilenet", {"width": 1.0}),
    "resnet18": ("resnet", {"base": 64, "counts": (2, 2, 2, 2)}),
    "resnet50": ("resnet", {"base": 64, "counts": (3, 4, 6, 3), "bottleneck": True}),
    "vgg11": ("vgg", {"base": 64}),
    "unet": ("unet", {"c": 32}),
    "mixer_s16": ("mixer", {"d": 512}),
    "transformer_encoder": ("encoder", {"d": 768}),
    "gpt_decoder": ("gpt", {"d": 768}),
}


def build(model: str, args: dict | None = None) -> tuple[nn.Module, tuple]:
    """``(module, example_inputs)`` of ``model`` (:data:`MODELS`) with ``args`` (missing ones at their defaults:
    the benchmark's models at batch 1). ``resnet`` with ``blocks`` per stage over ``stages`` stages, or with
    ``counts`` (a tuple) given; ``vgg`` with ``convs`` per stage over ``stages`` stages, or with the tuple
    ``convs`` (VGG-11's by default). Weights are drawn from torch's global generator (seed it for the same
    weights; the program does not depend on them).

    >>> module, inputs = build("resnet", {"base": 8, "blocks": 1, "stages": 2, "image": 32})
    >>> tuple(module(*inputs).shape)
    (1, 1000)
    """
    a = dict(args or {})
    unknown = set(a) - set(MODELS.get(model, ())) - {"counts"}
    if model not in MODELS or unknown:
        raise ValueError(f"unknown torch model {model!r} or arguments {sorted(unknown)} (known: {MODELS})")
    batch = a.get("batch", 1)
    if model == "mobilenet":
        return MobileNetV2(width=a.get("width", 1.0), stages=a.get("stages", len(MOBILENET_STAGES))), \
            image(batch, a.get("image", 224))
    if model == "resnet":
        block = Bottleneck if a.get("bottleneck", False) else Basic
        counts = a.get("counts") or (a.get("blocks", 2),) * a.get("stages", 4)
        return ResNet(block, tuple(counts), base=a.get("base", 64)), image(batch, a.get("image", 224))
    if model == "vgg":
        convs = a.get("convs", VGG11_CONVS)
        if isinstance(convs, int):
            convs = (convs,) * a.get("stages", 5)
        size = a.get("image", 224)
        return VGG(base=a.get("base", 64), convs=tuple(convs), image=size), image(batch, size)
    if model == "unet":
        return UNet(c=a.get("c", 32), depth=a.get("depth", 4)), image(batch, a.get("image", 128))
    if model == "mixer":
        size, patch = a.get("image", 224), a.get("patch", 16)
        return Mixer(d=a.get("d", 512), layers=a.get("layers", 8), patches=(size // patch) ** 2,
                     tokens_hidden=a.get("tokens_hidden", 256), channels_hidden=a.get("channels_hidden", 2048),
                     patch=patch), image(batch, size)
    d, heads, layers, seq = a.get("d", 768), a.get("heads", 12), a.get("layers", 4), a.get("seq", 128)
    if model == "encoder":
        return Encoder(d=d, heads=heads, layers=layers), (torch.randn(batch, seq, d),)
    vocab = a.get("vocab", 8192)
    return GPT(vocab=vocab, d=d, heads=heads, layers=layers, ctx=seq), (torch.randint(0, vocab, (batch, seq)),)
