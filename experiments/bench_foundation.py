"""Benchmark of the foundation (issue 2): `info`, `greedy-xla` and `best-fit` on generated and real inputs.

Each measurement runs in its own process, so the reported peak memory (max RSS) is that of
loading the input and running one task. Records wall time of the task, the whole process's
peak RSS, and for `best-fit` the peak address against the max-live lower bound.

    python experiments/bench_foundation.py [--benchmarks DIR] [--out experiments/results/foundation_bench.md]

The real traces come from the shared benchmark folder (``--benchmarks``, then
``$MALLOCGAME_BENCHMARKS``, then ``../shared/benchmarks``); missing ones are skipped.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACES = ["idealloc-iree/iree_mobilebert.csv", "idealloc-iree/iree_mobilenet.csv", "idealloc-somas/resnet50.csv",
          "idealloc-somas/bert_base.csv", "idealloc-somas/pangu_13B.csv", "idealloc-somas/pangu_2.6B.csv",
          "iopddl/asplos-2025-iopddl-G.csv", "iopddl/asplos-2025-iopddl-S.csv", "iopddl/asplos-2025-iopddl-A.csv",
          "iopddl/asplos-2025-iopddl-P.csv"]


def one(task: str, path: str) -> dict:
    """Run one task on one input in this process and return its measurements."""
    from mallocgame.engine.runner import run_solver
    from mallocgame.formats.io import load_problem
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.problem.intervals import components, max_live

    t0 = time.monotonic()
    problem = load_problem(path)
    load_s = time.monotonic() - t0
    if not problem.has_ops:
        problem = problem.replace(mode="pack", capacity=None)
    hw = PRESETS["tpuv4i"] if problem.has_ops else PRESETS["unit"]
    t0 = time.monotonic()
    row = {"task": task, "input": Path(path).name, "buffers": problem.n, "load_s": load_s}
    if task == "info":
        row["components"] = len(components(problem))
        row["max_live"] = max_live(problem)
    else:
        report = run_solver(task, problem, hw, time_limit=600, seed=0)
        row["valid"] = report.valid
        row["peak"] = report.peak
        row["placed"] = report.placed
        if problem.mode == "pack":
            row["max_live"] = max_live(problem)
    row["seconds"] = time.monotonic() - t0
    row["max_rss_mb"] = peak_rss_mb()
    return row


def peak_rss_mb() -> float:
    """This process's peak resident memory. ``ru_maxrss`` would carry the parent's over exec."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generated_inputs(folder: Path) -> list[Path]:
    from mallocgame.formats.io import write_workload_json
    from mallocgame.inputs.generate import layered_network

    paths = []
    for n in (1_000, 10_000, 100_000):
        path = folder / f"layered-{n}.json"
        write_workload_json(path, layered_network(n, seed=0))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    # Imported here, not at the top: a child (``--one``) loads only what it measures.
    import argparse

    from _common import benchmarks_dir, write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default=None, metavar="DIR", help="shared benchmark folder")
    ap.add_argument("--out", default="foundation_bench.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args(argv)
    try:
        bench = benchmarks_dir(explicit=args.benchmarks)
    except SystemExit as exc:
        print(f"{exc}: generated inputs only", file=sys.stderr)
        bench = None
    with tempfile.TemporaryDirectory() as tmp:
        inputs = generated_inputs(Path(tmp)) + [bench / t for t in TRACES if bench and (bench / t).exists()]
        rows = []
        for path in inputs:
            for task in ("info", "greedy-xla", "best-fit"):
                res = subprocess.run([sys.executable, __file__, "--one", task, str(path)], capture_output=True,
                                     text=True, check=True)
                row = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(json.dumps(row), flush=True)
    lines = ["# Foundation benchmark (issue 2)", "",
             "Each row is one fresh process: load the input, run the task. `seconds` is the task alone "
             "(for solvers: solve + validate + score), `load s` the reader, `max RSS` the process's peak memory. "
             "Generated inputs are `layered_network(n, seed=0)` workloads (map mode, capacity 40% of max live); "
             "real traces are solved in pack mode minimising the peak.", "",
             "| input | buffers | task | seconds | load s | max RSS MB | result |", "|---|---:|---|---:|---:|---:|---|"]
    for r in rows:
        if r["task"] == "info":
            result = f"{r['components']} components, max live {r['max_live']}"
        elif "max_live" in r:
            result = f"peak {r['peak']} = {r['peak'] / r['max_live']:.4f} x max live" + ("" if r["valid"] else " INVALID")
        else:
            result = f"placed {r['placed']}/{r['buffers']}" + ("" if r["valid"] else " INVALID")
        lines.append(f"| {r['input']} | {r['buffers']} | {r['task']} | {r['seconds']:.3f} | {r['load_s']:.2f} | "
                     f"{r['max_rss_mb']:.0f} | {result} |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(args.out, text, argv=argv)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":  # a child: one task on one input
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
    else:
        main()
