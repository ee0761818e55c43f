"""Effect of fast-memory size and of the buffer-size distribution on every solver (paper claim 4).

1. Capacity: six workloads of the ``realistic`` suite (a training MLP, a training ResNet,
   MobileNetV2, a small transformer, BERT-base, Strassen) with the fast memory set to
   10%, 20%, 40%, 60%, 80% and 100% of each workload's max live bytes
   (``compare --capacity-fraction F``).
2. Sizes: the ``sizes`` suite -- synthetic 150-op programs whose tensor sizes are uniform,
   lognormal, bimodal or heavy-tailed (two seeds each), fast memory = 40% of max live.

For each setting and solver: the share of inputs improved over greedy-xla, the mean and
max speed-up over it, and the mean speed-up over all-slow.

Usage: nice python experiments/paper_capacity_sizes.py [--time-limit 3] [--jobs 2] [--solvers a,b,c]
       [--fractions 0.1 0.2 0.4 0.6 0.8 1.0] [--skip-capacity] [--skip-sizes] [--out PATH.md] [--sizes-out PATH.md]
Writes experiments/results/paper_capacity_F.{csv,json}, paper_sizes.{csv,json}, paper_capacity.md, paper_sizes.md
(with --out / --sizes-out: those files, and compare's CSV/JSON beside each, named after it).
"""

from __future__ import annotations

import argparse

from _common import (
    fenced,
    fmt,
    machine_note,
    per_input_table,
    read_rows,
    registered_solvers,
    results_path,
    run_mallocgame,
    shown_path,
    speedup_stats,
    stats_table,
    write_results,
)

WORKLOADS = ("mlp-train-3x1024-b128", "resnet8-cifar-train-b64", "mobilenetv2-b1", "encoder-small-b4", "bert-base-b1",
             "strassen-d1-n2048")


def sweep_table(results: dict[str, list[dict[str, str]]], solvers: list[str], label: str) -> str:
    """Two markdown tables, one row per setting: speed-up over greedy-xla, then over all-slow."""
    out = []
    for title, cell in (
        ("Mean speed-up over greedy-xla (max; share of inputs improved)",
         lambda st: f"{fmt(st['mean'], '.3f')} ({fmt(st['max'], '.3f')}; {fmt(st['share_improved'], '.0%')})"),
        ("Mean speed-up over all-slow (valid answers)",
         lambda st: f"{fmt(st['mean_vs_slow'], '.3f')} ({st['valid']}/{st['inputs']})"),
    ):
        out.append(f"{title}:\n\n| {label} | " + " | ".join(solvers) + " |")
        out.append("|---|" + "---:|" * len(solvers))
        for setting, rows in results.items():
            out.append(f"| {setting} | " + " | ".join(cell(speedup_stats(rows, s)) for s in solvers) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=3.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--solvers", default=None, help="default: every registered solver")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.2, 0.4, 0.6, 0.8, 1.0])
    ap.add_argument("--skip-capacity", action="store_true")
    ap.add_argument("--skip-sizes", action="store_true")
    ap.add_argument("--out", default="paper_capacity.md", help="capacity results file (a bare name: under "
                    "experiments/results/); compare's CSV/JSON go beside it as NAME_F.csv")
    ap.add_argument("--sizes-out", default="paper_sizes.md", help="sizes results file; compare's CSV/JSON go beside it")
    args = ap.parse_args()
    solvers = args.solvers.split(",") if args.solvers else registered_solvers()
    common = ["--solvers", ",".join(solvers), "--time-limit", str(args.time_limit), "--jobs", str(args.jobs),
              "--no-progress"]
    legend = ("Speed-up = estimated time of the reference (greedy-xla's answer, or all buffers in slow memory) / "
              "estimated time of the solver's answer; means over the valid answers.\n\n")
    if not args.skip_capacity:
        md = results_path(args.out)
        results, outputs, total = {}, [], 0.0
        for f in args.fractions:
            out = md.with_name(f"{md.stem}_{f:g}.csv")
            cmd, printed, seconds = run_mallocgame(["compare", "realistic:" + ",".join(WORKLOADS), "--capacity-fraction",
                                                    str(f), *common, "--out", shown_path(out)])
            results[f"{f:.0%} of max live"] = read_rows(out)
            outputs.append(f"### capacity {f:.0%} of max live ({seconds:.0f} s)\n\n" + fenced(cmd) + "\n"
                           + fenced(printed))
            total += seconds
        table = sweep_table(results, solvers, "fast memory")
        print(table)
        write_results(md, (
            "# Effect of the fast-memory size\n\n"
            f"Workloads: {', '.join(WORKLOADS)} (suite `realistic`); {total:.0f} s in all.\n"
            f"{machine_note()}\n\n## Summary\n\n" + legend + table +
            "\n## What compare printed\n\n" + "\n".join(outputs)))
    if not args.skip_sizes:
        md = results_path(args.sizes_out)
        out = md.with_suffix(".csv")
        cmd, printed, seconds = run_mallocgame(["compare", "sizes", *common, "--out", shown_path(out)])
        rows = read_rows(out)
        by_dist = {}
        for dist in ("uniform", "lognormal", "bimodal", "heavy-tail"):
            by_dist[dist] = [r for r in rows if r["input"].startswith(f"synthetic-{dist}-")]
        table = sweep_table(by_dist, solvers, "tensor sizes")
        print(table)
        write_results(md, (
            "# Effect of the buffer-size distribution\n\n"
            f"Command (from the project root, {seconds:.0f} s):\n\n" + fenced(cmd) + f"\n{machine_note()}\n\n"
            "## Summary per distribution (two seeds each)\n\n" + legend + table +
            "\n## All inputs\n\n" + stats_table(rows, solvers) + "\n## Per input\n\n" + per_input_table(rows)
            + "\n## What compare printed\n\n" + fenced(printed)))


if __name__ == "__main__":
    main()
