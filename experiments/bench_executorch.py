"""ExecuTorch's arena: its own ``greedy`` against mallocgame's planner, on 8+ models at batch 1 and 8.

Every model comes from :mod:`mallocgame.inputs.torch_models` (torchvision does not import beside the
pinned torch). Each (model, batch) is exported once (``torch.export`` -> ``to_edge`` -> ``to_executorch``) with one
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

from mallocgame.inputs.torch_models import BENCHMARK_MODELS, build

# --------------------------------------------------------------------------- models

MODELS = BENCHMARK_MODELS


# --------------------------------------------------------------------------- the measurement

def measure(name: str, batch: int, time_limit: float, seed: int) -> dict:
    from executorch.exir.memory_planning import MemoryAlgoResult, greedy

    from mallocgame.integrations.executorch import arena_sizes, planner, to_executorch

    model_name, model_args = MODELS[name]
    torch.manual_seed(seed)
    model, example = build(model_name, {**model_args, "batch": batch})
    model = model.eval()
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
