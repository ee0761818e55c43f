"""Every registered solver vs the XLA-style greedy on the ``realistic`` suite (paper claim 1).

The paper (arXiv 2305.07440) reports mallocMuZero beating XLA's default memory-space
assignment on most workloads. Here: every solver `mallocgame solvers` lists (the agent
``muzero`` included when registered) on every workload of the ``realistic`` suite
(tpuv4i cost model, fast memory = 40% of each workload's max live bytes), through
``mallocgame compare``; per solver, the share of workloads improved over ``greedy-xla``
and the mean / max speed-up over it (estimated program time of greedy-xla / solver's).

Usage: nice python experiments/paper_vs_greedy.py [--time-limit 4] [--jobs 2] [--solvers a,b,c] [--out PATH.md]
Writes experiments/results/paper_vs_greedy.{csv,json,md} (with --out: PATH.md and PATH.{csv,json} beside it).
"""

from __future__ import annotations

import argparse

from _common import (
    fenced,
    machine_note,
    per_input_table,
    read_rows,
    registered_solvers,
    results_path,
    run_mallocgame,
    shown_path,
    stats_table,
    write_results,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=4.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--solvers", default=None, help="default: every registered solver")
    ap.add_argument("--suite", default="realistic")
    ap.add_argument("--out", default="paper_vs_greedy.md",
                    help="results file (a bare name: under experiments/results/); compare's CSV/JSON go beside it")
    args = ap.parse_args()
    solvers = args.solvers.split(",") if args.solvers else registered_solvers()
    md = results_path(args.out)
    out = md.with_suffix(".csv")
    cmd, printed, seconds = run_mallocgame(["compare", args.suite, "--solvers", ",".join(solvers), "--time-limit",
                                            str(args.time_limit), "--jobs", str(args.jobs), "--out", shown_path(out),
                                            "--no-progress"])
    rows = read_rows(out)
    summary = stats_table(rows, solvers)
    print(summary)
    write_results(md, (
        "# Every solver vs greedy-xla on the realistic suite\n\n"
        f"Command (from the project root, {seconds:.0f} s):\n\n" + fenced(cmd) +
        f"\n{machine_note()}\n\n## Summary (computed from `{out.name}`)\n\n"
        "Speed-up = estimated time of greedy-xla's answer / estimated time of the solver's answer "
        "(tpuv4i roofline model). *Share improved* counts all inputs (a failed run is not an improvement); "
        "mean/max/min/geo-mean are over the valid answers.\n\n" + summary +
        "\n## Per input: how far greedy-xla and the best answer are from the no-fragmentation bound\n\n"
        + per_input_table(rows) +
        "\n## What compare printed\n\n" + fenced(printed)))


if __name__ == "__main__":
    main()
