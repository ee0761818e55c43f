"""The whole ``mallocgame solve`` process on a big workload, two checkouts side by side, and where its CPU goes.

For each solver (default greedy-xla and best-fit) and each checkout in ``--roots`` (alternated, so both see the
same load), it runs ``mallocgame solve FILE --solver S --time-limit 600 [-o SOLUTION.csv]`` with that checkout
first on ``PYTHONPATH`` and reports its wall seconds, CPU seconds (user + system of the command and its forked
solver, from ``wait4``), peak RSS and summary line; with ``-o`` the solution files of the checkouts are compared
byte for byte. Then, for the first root, the CPU seconds of each phase of the same command done in-process in
order (imports, reading, the shared caches, the bound, the solver with its scoring, the solution CSV).

    nice python experiments/bench_whole_process.py FILE --roots /tmp/base,. [--solvers greedy-xla,best-fit]
        [--write-csv] [--out whole_process_1m.md]

``FILE``: e.g. ``write_workload_json(path, layered_network(1000000, seed=1))`` (what
``bench_engine.py --placement-1m`` writes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PHASES = r'''
import json, sys, time, resource
t0 = time.process_time()
marks = []
def mark(name):
    global t0
    t = time.process_time(); marks.append((name, t - t0)); t0 = t
import mallocgame.cli.main  # noqa: F401 (the CLI's own imports)
from mallocgame.cli.common import load_prepared
from mallocgame.formats.io import problem_csv_text
from mallocgame.engine.registry import load_solver
from mallocgame.engine.runner import preload, problem_bound, shared_caches
from mallocgame.engine.solving import solve_with_warm_start
mark("imports")
path, solver = sys.argv[1], sys.argv[2]
p, spec = load_prepared(path, mode=None, capacity=None, capacity_fraction=None, hardware=None)
mark("read")
shared_caches(p, spec); mark("shared caches")
problem_bound(p, spec); mark("bound")
preload(load_solver(solver)); mark("preload")
r = solve_with_warm_start(solver, p, spec, time_limit=600, seed=0, compute_bound=False); mark("solver + scoring")
problem_csv_text(p, r.offsets); mark("solution CSV")
print(json.dumps({"marks": marks, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "summary": r.summary(has_ops=p.has_ops)}))
'''


def timed(root: str, args: list[str]) -> dict:
    """``args`` run with ``root`` first on PYTHONPATH, in a wrapper process of its own: wall seconds, CPU seconds
    (user + system of the command and the solver it forked) and peak RSS of the tree, exit code, output."""
    wrapper = ("import json, resource, subprocess, sys, time; t = time.monotonic(); "
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(json.dumps({'wall': time.monotonic() - t, 'cpu': u.ru_utime + u.ru_stime, "
               "'rss_mb': u.ru_maxrss / 1024, 'code': r.returncode, 'out': r.stdout, 'err': r.stderr}))")
    res = subprocess.run([sys.executable, "-c", wrapper, sys.executable, *args], capture_output=True, text=True,
                         env=os.environ | {"PYTHONPATH": root}, cwd=root, check=True)  # cwd: -m imports from it
    return json.loads(res.stdout)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=lambda f: str(Path(f).resolve()))
    ap.add_argument("--roots", required=True, help="comma-separated checkouts (the first: the phases)")
    ap.add_argument("--solvers", default="greedy-xla,best-fit")
    ap.add_argument("--write-csv", action="store_true", help="also -o SOLUTION.csv (compared across roots)")
    ap.add_argument("--out", default="whole_process.md")
    args = ap.parse_args(argv)
    roots = [str(Path(r).resolve()) for r in args.roots.split(",") if r]
    lines = [f"# `mallocgame solve {Path(args.file).name} --solver S --time-limit 600"
             f"{' -o SOLUTION.csv' if args.write_csv else ''}`, checkouts side by side", "",
             f"Load average at the start: {os.getloadavg()[0]:.1f} (2 cores shared; CPU seconds are the steadier "
             "figure).", "",
             "| solver | checkout | wall s | CPU s | max RSS MB | exit | same CSV | summary line |",
             "|---|---|---:|---:|---:|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for solver in [s for s in args.solvers.split(",") if s]:
            csvs = []
            for k, root in enumerate(roots):
                out = Path(tmp) / f"{solver}-{k}.csv"
                cmd = ["-m", "mallocgame.cli.main", "solve", args.file, "--solver", solver, "--time-limit", "600",
                       *(["-o", str(out)] if args.write_csv else [])]
                r = timed(root, cmd)
                same = "-"
                if args.write_csv and out.exists():
                    csvs.append(out.read_bytes())
                    same = "yes" if csvs[0] == csvs[-1] else "NO"
                line = (r["out"].strip() or r["err"].strip()).splitlines()[-1:] or [""]
                row = (f"| {solver} | {root} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mb']:.0f} | {r['code']} "
                       f"| {same} | {line[0]} |")
                print(row, flush=True)
                lines.append(row)
        lines += ["", f"In-process phases, CPU seconds ({roots[0]}):", "",
                  "| solver | imports | read | shared caches | bound | preload | solver + scoring | solution CSV "
                  "| total | max RSS MB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for solver in [s for s in args.solvers.split(",") if s]:
            res = subprocess.run([sys.executable, "-c", PHASES, args.file, solver], capture_output=True, text=True,
                                 env=os.environ | {"PYTHONPATH": roots[0]}, cwd=roots[0], check=True)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            marks = dict(got["marks"])
            row = (f"| {solver} | " + " | ".join(f"{v:.2f}" for v in marks.values())
                   + f" | {sum(marks.values()):.2f} | {got['rss_mb']:.0f} |")
            print(row, flush=True)
            lines.append(row)
    write_results(args.out, "\n".join(lines) + "\n", argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
