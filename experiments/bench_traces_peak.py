"""Pack mode with --minimize-peak on the real compiler traces: peak against the max-live bound (and IREE's own packing).

Traces: ``idealloc-iree``, ``idealloc-somas``, ``idealloc-iopddl`` and ``iopddl`` under the
shared benchmarks folder (56 to 59,063 buffers). For every trace and solver (default:
best-fit, cpsat, lns, portfolio) one run through :func:`mallocgame.engine.runner.run_solver` with
``minimize_peak``; the table gives the peak's excess over the max-live lower bound
(``(peak - bound) / bound``). For the IREE traces, IREE's own packing from
``reference/*.offsets.csv`` is shown too (checked by ``mallocgame validate``). Writes ``--out``
(default ``experiments/results/cpsat_traces_peak.md``).

Usage (from the project root):
    nice python experiments/bench_traces_peak.py [--time-limit 20] [--solvers best-fit,cpsat,lns,portfolio]
        [--only NAME,...] [--benchmarks DIR] [--out PATH] [--no-write]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import benchmarks_dir, parse_peak, run_mallocgame, write_results

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.formats.io import load_problem
from mallocgame.inputs.load import prepare

FOLDERS = ("idealloc-iree", "idealloc-somas", "idealloc-iopddl", "iopddl")


def traces(shared: Path) -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((shared / folder).glob("*.csv"))]


def iree_reference(path: Path) -> int | None:
    """Peak of IREE's own packing (``reference/NAME.offsets.csv``) as ``mallocgame validate`` checks it; None if absent
    or invalid."""
    ref = path.parent / "reference" / (path.stem + ".offsets.csv")
    if not ref.exists():
        return None
    _, printed, _ = run_mallocgame(["validate", str(path), str(ref), "--mode", "pack"], echo=False)
    return parse_peak(printed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--solvers", default="best-fit,cpsat,lns,portfolio")
    ap.add_argument("--only", default="", help="comma-separated file stems")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--benchmarks", default=None, metavar="DIR",
                    help="shared benchmark folder (default: $MALLOCGAME_BENCHMARKS, then ../shared/benchmarks)")
    ap.add_argument("--out", default="cpsat_traces_peak.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    solvers = [s for s in args.solvers.split(",") if s]
    shared = benchmarks_dir(explicit=args.benchmarks)
    paths = [p for p in traces(shared) if not args.only or p.stem in args.only.split(",")]
    header = ("| trace | buffers | max live | IREE's own | "
              + " | ".join(f"{s} excess | {s} s" for s in solvers) + " |")
    rule = "|---|---:|---:|---:|" + "---:|---:|" * len(solvers)
    print(header)
    print(rule)
    rows = []
    for path in paths:
        problem, hw = prepare(load_problem(str(path)), mode="pack", capacity=None, hardware=None)
        bound = problem_bound(problem, hw)  # pack mode: the max-live lower bound
        ref = iree_reference(path)
        cells = [f"{path.parent.name}/{path.stem}", str(problem.n), str(int(bound.value)),
                 "-" if ref is None else f"{(ref - bound.value) / bound.value:+.2%}"]
        for name in solvers:
            t = time.monotonic()
            r = run_solver(name, problem, hw, time_limit=args.time_limit, seed=args.seed,
                           options={"minimize_peak": True}, bound=bound)
            seconds = time.monotonic() - t
            cells += [f"{r.gap:+.3%}" if r.valid else f"{r.status} (invalid)", f"{seconds:.1f}"]
        row = "| " + " | ".join(cells) + " |"
        print(row, flush=True)
        rows.append(row)
    if not args.no_write:
        write_results(args.out, (
            "# Pack mode, minimise the peak, on the real compiler traces\n\n"
            f"Time limit {args.time_limit:g} s per solver and trace, seed {args.seed}. `excess` = "
            "(peak - max live) / max live, the distance to the lower bound, shown to 3 decimals "
            "(exactly 0 would prove the peak optimal). "
            "`IREE's own` is IREE's packing from `reference/` on the same scale. Machine: 2 cores shared "
            "with other jobs.\n\n" + header + "\n" + rule + "\n" + "\n".join(rows) + "\n"), argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
