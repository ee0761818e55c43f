"""ExecuTorch's arena: its own ``greedy`` against mallocgame's planner, on 8+ models at batch 1 and 8.

Every model is defined here (torchvision does not import beside the pinned torch). Each
(model, batch) is exported once (``torch.export`` -> ``to_edge`` -> ``to_executorch``) with one
memory-planning algorithm that, on the same specs, runs ExecuTorch's ``greedy``, mallocgame's
planner without a warm start ("cold") and with greedy's plan as its warm start (the default of
:func:`mallocgame.integrations.executorch.planner`), and hands ExecuTorch the warm one; the table
reads the program's ``non_const_buffer_sizes`` back to check it is the planned one. Max live is
the lower bound on any arena. Times are the planning alone (the export aside), on a shared
2-core machine.

    nice python experiments/bench_executorch.py [--time-limit 10] [--seed 0] [--models resnet18,...] [--out PATH]
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
from _common import RESULTS, Transcript, write_results
from torch import nn
from torch.nn import functional as F

# --------------------------------------------------------------------------- models

def conv_bn(cin, cout, k=3, s=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU6(inplace=True)) if act else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = [conv_bn(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, cout, 1, act=False)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers, cin = [conv_bn(3, 32, 3, 2)], 32
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

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
    def __init__(self, block, counts, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for i, n in enumerate(counts):
            c = 64 * 2 ** i
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
    """BERT-base-like width, 4 layers, 128 tokens (input: embeddings)."""

    def __init__(self, d=768, heads=12, layers=4):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d, heads, False) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(self.blocks(x))


class GPT(nn.Module):
    """GPT-2-small-like width, 4 layers, vocabulary 8192, 128 tokens (input: token ids)."""

    def __init__(self, vocab=8192, d=768, heads=12, layers=4, ctx=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads, True) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(self.norm(self.blocks(x)))


class UNet(nn.Module):
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


class VGG11(nn.Module):
    def __init__(self):
        super().__init__()
        cfg, layers, cin = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"], [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(cin, v, 3, 1, 1), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Linear(512 * 7 * 7, 1024), nn.ReLU(), nn.Linear(1024, 1000))

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Mixer(nn.Module):
    """MLP-Mixer-S/16-like on 224x224 (196 patches, width 512, 8 layers)."""

    def __init__(self, d=512, layers=8, patches=196, tokens_hidden=256, channels_hidden=2048):
        super().__init__()
        self.stem = nn.Conv2d(3, d, 16, 16)
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
    return (torch.randn(batch, 3, size, size),)


MODELS = {
    "mobilenet_v2": (MobileNetV2, image),
    "resnet18": (lambda: ResNet(Basic, [2, 2, 2, 2]), image),
    "resnet50": (lambda: ResNet(Bottleneck, [3, 4, 6, 3]), image),
    "vgg11": (VGG11, image),
    "unet": (UNet, lambda b: image(b, 128)),
    "mixer_s16": (Mixer, image),
    "transformer_encoder": (Encoder, lambda b: (torch.randn(b, 128, 768),)),
    "gpt_decoder": (GPT, lambda b: (torch.randint(0, 8192, (b, 128)),)),
}


# --------------------------------------------------------------------------- the measurement

def measure(name: str, batch: int, time_limit: float, seed: int) -> dict:
    from executorch.exir.memory_planning import MemoryAlgoResult, greedy

    from mallocgame.integrations.executorch import arena_sizes, planner, to_executorch

    build, inputs = MODELS[name]
    torch.manual_seed(seed)
    model = build().eval()
    example = inputs(batch)
    warm = planner("pack-search", time_limit=time_limit, seed=seed)
    cold = planner("pack-search", time_limit=time_limit, seed=seed, warm_start_greedy=False)
    row: dict = {"model": name, "batch": batch}

    def algo(alignment, specs, graph_module, graph_signature, extra_padding=0, **kw) -> MemoryAlgoResult:
        specs = list(specs)
        t = time.perf_counter()
        g = greedy(alignment, specs, graph_module, graph_signature, extra_padding)
        row["greedy_s"] = time.perf_counter() - t
        row["greedy"] = sum(g.bufsizes)
        t = time.perf_counter()
        c = cold(alignment, specs, graph_module, graph_signature, extra_padding)
        row["cold_s"] = time.perf_counter() - t
        row["cold"] = sum(c.bufsizes)
        t = time.perf_counter()
        w = warm(alignment, specs, graph_module, graph_signature, extra_padding)
        row["ours_s"] = time.perf_counter() - t
        row["ours"] = sum(w.bufsizes)
        row["tensors"] = len(specs)
        row["max_live"] = sum(r.max_live for r in warm.records[-(len(w.bufsizes) - 1):]) if warm.records else 0
        row["status"] = ",".join(r.status for r in warm.records)
        return w

    algo.__name__ = "bench"
    with torch.no_grad():
        ep = torch.export.export(model, example)
    t = time.perf_counter()
    program = to_executorch(ep, [algo])
    row["export_s"] = time.perf_counter() - t
    row["program_arena"] = sum(arena_sizes(program))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=str(RESULTS / "executorch_planner.md"))
    args = ap.parse_args()
    out = Transcript()
    mib = 2 ** 20
    header = ("| model | batch | tensors | greedy MiB | ours MiB | ours cold MiB | max live MiB | ours vs greedy | "
              "ours vs max live | greedy s | ours s | cold s | status |")
    out(header)
    out("|" + "---|" * 13)
    rows = []
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            r = measure(name, batch, args.time_limit, args.seed)
            assert r["program_arena"] == r["ours"], (r["program_arena"], r["ours"])
            rows.append(r)
            out(f"| {name} | {batch} | {r['tensors']} | {r['greedy'] / mib:.3f} | {r['ours'] / mib:.3f} | "
                      f"{r['cold'] / mib:.3f} | {r['max_live'] / mib:.3f} | {r['ours'] / r['greedy'] - 1:+.2%} | "
                      f"{r['ours'] / r['max_live'] - 1:+.2%} | {r['greedy_s']:.3f} | {r['ours_s']:.3f} | "
                      f"{r['cold_s']:.3f} | {r['status']} |")
            sys.stdout.flush()
    geo = math.exp(sum(math.log(r["ours"] / r["greedy"]) for r in rows) / len(rows))
    geo_cold = math.exp(sum(math.log(r["cold"] / r["greedy"]) for r in rows) / len(rows))
    out(f"\n{len(rows)} programs: ours/greedy geo-mean {geo:.4f} (cold {geo_cold:.4f}); smaller than greedy on "
              f"{sum(r['ours'] < r['greedy'] for r in rows)}, equal on {sum(r['ours'] == r['greedy'] for r in rows)}, "
              f"larger on {sum(r['ours'] > r['greedy'] for r in rows)}; cold larger than greedy on "
              f"{sum(r['cold'] > r['greedy'] for r in rows)}; at max live on {sum(r['ours'] == r['max_live'] for r in rows)}")
    if args.out:
        write_results(args.out, "# ExecuTorch memory planning: greedy vs mallocgame\n\n" + out.text)


if __name__ == "__main__":
    main()
