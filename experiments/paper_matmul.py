"""AlphaTensor-style matmul programs: speed-up of every solver over greedy-xla (paper claim 2).

The paper maps the programs of AlphaTensor's fast matrix-multiplication algorithms and
reports gains over XLA's heuristic. Here the ``matmul`` suite: Strassen (2x2, rank 7)
applied recursively at depth 1 and 2, and the schoolbook 2x2 (rank 8) programs of the same
sizes as baselines, built by ``mallocgame.importers.matmul`` (bf16 blocks; tpuv4i cost model;
fast memory = 40% of max live bytes). Besides the speed-ups over greedy-xla, the table of
estimated program times shows whether Strassen's program is faster than the schoolbook one
once each is mapped by its best solver.

Usage: nice python experiments/paper_matmul.py [--time-limit 4] [--jobs 2] [--solvers a,b,c] [--out PATH.md]
Writes experiments/results/paper_matmul.{csv,json,md} (with --out: PATH.md and PATH.{csv,json} beside it).
"""

from __future__ import annotations

import argparse

from _common import (
    fenced,
    fmt,
    machine_note,
    read_rows,
    registered_solvers,
    results_path,
    run_mallocgame,
    shown_path,
    stats_table,
    write_results,
)


def time_table(rows: list[dict[str, str]], solvers: list[str]) -> str:
    """Per program: estimated time all-slow, with greedy-xla, with the best solver (which), speed-up."""
    lines = ["| program | all-slow (us) | greedy-xla (us) | best (us) | best solver | best / greedy-xla speed-up |",
             "|---|---:|---:|---:|---|---:|"]
    for name in dict.fromkeys(r["input"] for r in rows):
        mine = [r for r in rows if r["input"] == name and r["valid"] == "true"]
        if not mine:
            lines.append(f"| {name} | - | - | - | (no valid answer) | - |")
            continue
        slow = float(mine[0]["time_all_slow"]) * 1e6
        greedy = next((float(r["estimated_time"]) * 1e6 for r in mine if r["solver"] == "greedy-xla"), None)
        best = min(mine, key=lambda r: float(r["estimated_time"]))
        bt = float(best["estimated_time"]) * 1e6
        lines.append(f"| {name} | {slow:.2f} | {fmt(greedy, '.2f')} | {bt:.2f} | {best['solver']} | "
                     f"{fmt(greedy / bt if greedy else None)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=4.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--solvers", default=None, help="default: every registered solver")
    ap.add_argument("--out", default="paper_matmul.md",
                    help="results file (a bare name: under experiments/results/); compare's CSV/JSON go beside it")
    args = ap.parse_args()
    solvers = args.solvers.split(",") if args.solvers else registered_solvers()
    md = results_path(args.out)
    out = md.with_suffix(".csv")
    cmd, printed, seconds = run_mallocgame(["compare", "matmul", "--solvers", ",".join(solvers), "--time-limit",
                                            str(args.time_limit), "--jobs", str(args.jobs), "--out", shown_path(out),
                                            "--no-progress"])
    rows = read_rows(out)
    strassen = [r for r in rows if r["input"].startswith("strassen")]
    summary = stats_table(strassen, solvers)
    times = time_table(rows, solvers)
    print(summary)
    print(times)
    write_results(md, (
        "# Strassen / AlphaTensor-style matmul programs vs greedy-xla\n\n"
        f"Command (from the project root, {seconds:.0f} s):\n\n" + fenced(cmd) +
        f"\n{machine_note()}\n\n## Speed-up over greedy-xla on the Strassen programs\n\n" + summary +
        "\n## Estimated program times (all programs, best valid answer per program)\n\n" + times +
        "\n## What compare printed\n\n" + fenced(printed)))


if __name__ == "__main__":
    main()
