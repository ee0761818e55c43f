"""Pack mode with --minimize-peak on the real compiler traces: peak against the max-live bound (and IREE's own packing).

Traces: ``idealloc-iree``, ``idealloc-somas``, ``idealloc-iopddl`` and ``iopddl`` under the
shared benchmarks folder (56 to 59,063 buffers). For every trace and solver (default:
best-fit, cpsat, lns, portfolio) one run through :func:`mallocgame.runner.run_solver` with
``minimize_peak``; the table gives the peak's excess over the max-live lower bound
(``(peak - bound) / bound``). For the IREE traces, IREE's own packing from
``reference/*.offsets.csv`` is shown too. Writes ``experiments/results/cpsat_traces_peak.md``.

Usage (from the project root):
    nice python experiments/bench_traces_peak.py [--time-limit 20] [--solvers best-fit,cpsat,lns,portfolio]
        [--only NAME,...] [--out cpsat_traces_peak.md] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hardware.validator import peak, validate  # noqa: E402
from mallocgame.bounds import pack_lower_bound  # noqa: E402
from mallocgame.inputs.load import prepare  # noqa: E402
from mallocgame.io import load_problem, read_solution_csv  # noqa: E402
from mallocgame.runner import run_solver  # noqa: E402

SHARED = Path(os.environ.get("MALLOCGAME_BENCHMARKS", ROOT.parent / "shared" / "benchmarks"))
FOLDERS = ("idealloc-iree", "idealloc-somas", "idealloc-iopddl", "iopddl")


def traces() -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((SHARED / folder).glob("*.csv"))]


def iree_reference(path: Path, problem) -> int | None:
    ref = path.parent / "reference" / (path.stem + ".offsets.csv")
    if not ref.exists():
        return None
    offsets = read_solution_csv(str(ref), problem)
    return peak(problem, offsets) if validate(problem, offsets) is None else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--solvers", default="best-fit,cpsat,lns,portfolio")
    ap.add_argument("--only", default="", help="comma-separated file stems")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="cpsat_traces_peak.md", help="file name under experiments/results/")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    solvers = [s for s in args.solvers.split(",") if s]
    paths = [p for p in traces() if not args.only or p.stem in args.only.split(",")]
    header = ("| trace | buffers | max live | IREE's own | "
              + " | ".join(f"{s} excess | {s} s" for s in solvers) + " |")
    rule = "|---|---:|---:|---:|" + "---:|---:|" * len(solvers)
    print(header)
    print(rule)
    rows = []
    for path in paths:
        problem, hw = prepare(load_problem(str(path)), mode="pack", capacity=None, hardware=None)
        bound = pack_lower_bound(problem)
        ref = iree_reference(path, problem)
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
        cmd = "nice python " + " ".join(shlex.quote(x) for x in
                                        [os.path.relpath(__file__, ROOT)] + (argv if argv is not None else sys.argv[1:]))
        out = ROOT / "experiments" / "results" / args.out
        out.write_text(
            "# Pack mode, minimise the peak, on the real compiler traces\n\n"
            f"Command (from the project root): `{cmd}`\n\n"
            f"Time limit {args.time_limit:g} s per solver and trace, seed {args.seed}. `excess` = "
            "(peak - max live) / max live, the distance to the lower bound, shown to 3 decimals "
            "(exactly 0 would prove the peak optimal). "
            "`IREE's own` is IREE's packing from `reference/` on the same scale. Machine: 2 cores shared "
            "with other jobs.\n\n" + header + "\n" + rule + "\n" + "\n".join(rows) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
