"""compare's runs at a big input: each run's wall time from its start to its row, against the time limit.

A run stopped at its limit is reported with the best answer it sent, validated and scored; on a big input the
pool judges that answer while the run goes (`mallocgame.engine.solving.StopJudge`), so the stop leaves only the row
to make. This script runs ``compare`` (:func:`mallocgame.engine.comparison.run_comparison`, what the command runs) of
the given solvers on ``layered_network(N, seed=0)`` in ``--mode`` (map by default), once per checkout (``--roots``,
alternately, each in a process of its own with that checkout on ``PYTHONPATH``), and prints per run: the wall seconds
from the pool's start of the run to its row (``run s``), that less the limit (``past limit s``), whether it was
stopped at the limit, and the whole comparison's wall seconds. With ``--hang-after-answer`` every run sends its
solver's answer and then never returns, so each is stopped at its limit with a real answer to judge.

    nice python experiments/bench_compare_judging.py [--roots /work/main,.] [--size 200000]
        [--solvers muzero,mcts] [--time-limit 5] [--mode map] [--hang-after-answer] [--repeats 1] [--out compare_judging_200k.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def hang_after_answer(pools) -> None:
    """Every run of ``pools`` (the module) sends its solver's validated answer as its incumbent and then never returns:
    a solver that ignores its clock, stopped at its limit with a real answer to judge."""
    import numpy as np

    from mallocgame.runtime.incumbents import offer

    solve = pools.run_one

    def run_one(name, problem, hardware, *args, **kwargs):
        kind, report = solve(name, problem, hardware, *args, **kwargs)
        if kind == "ok" and report.valid:
            if problem.mode == "prefetch":
                offer(value=report.objective, source=f"{name}, then hangs", problem=problem,
                      intervals=tuple(report.intervals))
            else:
                offer(value=report.objective, source=f"{name}, then hangs", problem=problem,
                      offsets=np.array([-1 if o is None else o for o in report.offsets], np.int64))
        while True:
            time.sleep(0.05)

    pools.run_one = run_one


def one(path: str, solvers: list[str], limit: float, mode: str, hang: bool) -> dict:
    """In this process (its checkout on ``PYTHONPATH``): the comparison, each run timed from the pool's start."""
    from mallocgame.engine import comparison, pools
    from mallocgame.engine.pools import ProcessPool

    if hang:
        hang_after_answer(pools)

    class TimedPool(ProcessPool):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.started, self.walls = {}, {}

        def start(self, key, *args, **kwargs):
            self.started[key] = time.monotonic()
            super().start(key, *args, **kwargs)

        def wait(self, timeout):
            done = super().wait(timeout)
            now = time.monotonic()
            for key, _, _ in done:
                self.walls[key] = now - self.started[key]
            return done

    pools = []

    def open_pool(executor, jobs, *, address=None, on_incumbent=None):
        pools.append(TimedPool(jobs, on_incumbent=on_incumbent))
        return pools[-1]

    comparison.open_pool = open_pool
    t0 = time.monotonic()
    result = comparison.run_comparison([path], solvers, time_limit=limit, mode=mode, progress=False)
    whole = time.monotonic() - t0
    runs = []
    for row in result.rows:
        report = row.report
        runs.append({"solver": row.solver, "run": pools[0].walls[(0, row.solver)],
                     "stopped": bool(report is not None and "stopped_at_limit" in report.stats),
                     "objective": None if report is None else report.objective, "error": row.error})
    return {"whole": whole, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE.parent))
    from _common import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", default=f"/work/main,{HERE.parents[1]}", help="checkouts to compare, in turn")
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--solvers", default="muzero,mcts")
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--mode", default="map", choices=("map", "pack", "prefetch"))
    ap.add_argument("--hang-after-answer", action="store_true",
                    help="every run sends its solver's answer and never returns (stopped at its limit)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=None, help="results file under experiments/results/")
    ap.add_argument("--one", nargs=5, metavar=("FILE", "SOLVERS", "LIMIT", "MODE", "HANG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        file, solvers, limit, mode, hang = args.one
        print(json.dumps(one(file, solvers.split(","), float(limit), mode, hang == "hang")))
        return 0

    roots = [str(Path(r).resolve()) for r in args.roots.split(",") if r]
    lines = [f"# compare at {args.size} {args.mode} buffers, --time-limit {args.time_limit:g}: each run's wall against the "
             "limit", "",
             f"`run_comparison([layered-{args.size}.json], {args.solvers!r}, mode={args.mode!r})` per checkout, one process "
             "each, in turn; `run s`: from the pool's start of the run to its row."
             + (" Every run sends its solver's answer and then never returns (`--hang-after-answer`): stopped at its "
                "limit with that answer to judge." if args.hang_after_answer else ""), "",
             "| repeat | checkout | solver | run s | past limit s | stopped at limit | objective | compare wall s |",
             "|---:|---|---|---:|---:|---|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"layered-{args.size}.json"
        from mallocgame.formats.io import write_workload_json
        from mallocgame.inputs.generate import layered_network

        write_workload_json(path, layered_network(args.size, seed=0))
        for repeat in range(args.repeats):
            for root in roots:
                out = subprocess.run([sys.executable, str(HERE), "--one", str(path), args.solvers,
                                      str(args.time_limit), args.mode,
                                      "hang" if args.hang_after_answer else "-"], capture_output=True, text=True, cwd=root,
                                     env=os.environ | {"PYTHONPATH": root})
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return 1
                got = json.loads(out.stdout.strip().splitlines()[-1])
                for run in got["runs"]:
                    line = (f"| {repeat} | {root} | {run['solver']} | {run['run']:.2f} | "
                            f"{run['run'] - args.time_limit:+.2f} | {'yes' if run['stopped'] else 'no'} | "
                            f"{run['objective']} | {got['whole']:.2f} |")
                    print(line, flush=True)
                    lines.append(line)
    if args.out:
        write_results(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
