"""The placement section of the engine benchmark: greedy_place and the greedy-xla / best-fit solvers, native
engine against the Python reference, side by side in one run (MALLOCGAME_ENGINE).

On ``layered_network(N, seed=1)`` (map mode, its capacity) for each N of ``--sizes``, for each engine:

* ``greedy_place``: CPU seconds (``time.process_time``) of one ``greedy_place`` in the spatial heap order with
  the problem's overlap index already built (what a solver session shares), and CPU microseconds per placement
  (per buffer of the order); the two engines' offsets are compared (``==``) and the script stops on a difference;
* ``greedy-xla`` and ``best-fit``: the whole solver in-process (``load_solver(name).solve``, time limit 600 s, on
  a freshly built problem so that nothing is cached: the session, the evaluator, the overlap index and the
  orders are part of the time), CPU seconds; the two engines' answers are compared;
* with ``--whole-process``: ``mallocgame solve FILE --solver S --time-limit 600`` in a child process on the
  problem written as workload JSON, wall and CPU seconds (the child's ``getrusage``): start-up and reading
  the file included.

Issue 39's goals: greedy-xla and best-fit on 1M buffers <= 3 s whole process, <= 1.5 us per placement; the
table says met or missed by how much.

Usage: nice python experiments/bench_engine_placement.py [--sizes 100000 1000000] [--whole-process] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import Transcript, write_results

from mallocgame.algorithms.placement import greedy_place, heap_orders
from mallocgame.engine.registry import load_solver
from mallocgame.formats.io import write_workload_json
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.intervals import overlap_index

HW = PRESETS["tpuv4i"]
ENGINES = ("python", "native")
SOLVERS = ("greedy-xla", "best-fit")
PLACEMENT_GOAL_US, WHOLE_PROCESS_GOAL_S = 1.5, 3.0


def with_engine(engine: str, fn, *args, **kwargs):
    os.environ["MALLOCGAME_ENGINE"] = engine
    try:
        return fn(*args, **kwargs)
    finally:
        os.environ.pop("MALLOCGAME_ENGINE", None)


def timed(fn, *args, **kwargs):
    t = time.process_time()
    out = fn(*args, **kwargs)
    return out, time.process_time() - t


def solver_run(name: str, n: int, seed: int):
    problem = layered_network(n, seed=seed)
    t = time.process_time()
    solver = load_solver(name)
    answer = solver.solve(solver.request(problem, HW, time_limit=600, seed=0))
    return answer, time.process_time() - t


def whole_process(path: Path, solver: str, engine: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    cli = [sys.executable, "-c", "from mallocgame.cli.main import main; main()"]
    r = subprocess.run(cli + ["solve", str(path), "--solver", solver, "--time-limit", "600"], capture_output=True, text=True,
                       env=dict(os.environ, MALLOCGAME_ENGINE=engine))
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{solver} ({engine}) failed: {r.stderr.strip()[-400:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, r.stdout.strip().splitlines()[0]


def goal_text(value: float, goal: float, unit: str) -> str:
    if value <= goal:
        return f"met ({value:.3g} {unit} <= {goal:g})"
    return f"missed x{value / goal:.2f} ({value:.3g} {unit} > {goal:g})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--whole-process", action="store_true", help="also run `mallocgame solve` in a child process")
    ap.add_argument("--out", default="bench_engine_placement.md",
                    help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; CPU seconds; "
         f"load average {os.getloadavg()[0]:.1f} at the start")
    show()
    show("## greedy_place (spatial order, overlap index built beforehand)")
    show()
    show("| problem | buffers | placed | CPU s py / nat | ratio | us per placement py / nat | goal <= 1.5 us (native) "
         "| same offsets |")
    show("|---|---:|---:|---:|---:|---:|---|---|")
    goals = []
    for n in args.sizes:
        problem = layered_network(n, seed=args.seed)
        index = overlap_index(problem)
        order = heap_orders(problem)["spatial"]
        r = {e: with_engine(e, timed, greedy_place, problem, order, problem.capacity, index=index) for e in ENGINES}
        (py, py_s), (nat, nat_s) = r["python"], r["native"]
        if not np.array_equal(py, nat):
            raise SystemExit(f"layered_network({n}): the engines place differently")
        us_py, us_nat = py_s / len(order) * 1e6, nat_s / len(order) * 1e6
        show(f"| layered_network({n}) | {problem.n} | {(nat >= 0).sum()} | {py_s:.2f} / {nat_s:.3f} "
             f"| {py_s / max(nat_s, 1e-9):.0f}x | {us_py:.2f} / {us_nat:.3f} | {goal_text(us_nat, PLACEMENT_GOAL_US, 'us')} "
             f"| yes |")
        goals.append((n, us_nat))
        del problem, index
    show()
    show("## greedy-xla and best-fit, whole solver in-process (problem built fresh: session, evaluator, index, orders "
         "included; generating the problem is not)")
    show()
    show("| solver | problem | CPU s py / nat | ratio | same answer |")
    show("|---|---|---:|---:|---|")
    for n in args.sizes:
        for solver in SOLVERS:
            r = {e: with_engine(e, solver_run, solver, n, args.seed) for e in ENGINES}
            (py, py_s), (nat, nat_s) = r["python"], r["native"]
            if py.offsets != nat.offsets or dict(py.stats) != dict(nat.stats):
                raise SystemExit(f"{solver} on layered_network({n}): the engines answer differently")
            show(f"| {solver} | layered_network({n}) | {py_s:.2f} / {nat_s:.2f} | {py_s / max(nat_s, 1e-9):.1f}x | yes |")
    if args.whole_process:
        show()
        show("## whole process: `mallocgame solve FILE --solver S --time-limit 600` (start-up and reading the file included)")
        show()
        show("| solver | problem | wall s py / nat | CPU s py / nat | goal <= 3 s (native, wall) | summary line (native) |")
        show("|---|---|---:|---:|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.sizes:
                path = Path(tmp) / f"layered{n}.json"
                write_workload_json(path, layered_network(n, seed=args.seed))
                for solver in SOLVERS:
                    (py_w, py_c, _), (nat_w, nat_c, line) = (whole_process(path, solver, e) for e in ENGINES)
                    show(f"| {solver} | layered_network({n}) | {py_w:.2f} / {nat_w:.2f} | {py_c:.2f} / {nat_c:.2f} "
                         f"| {goal_text(nat_w, WHOLE_PROCESS_GOAL_S, 's') if n >= 1_000_000 else '-'} | {line} |")
    show()
    for n, us in goals:
        show(f"Placement goal at {n} buffers: {goal_text(us, PLACEMENT_GOAL_US, 'us per placement')}")
    write_results(args.out, (
        "# The native engine against the Python reference: greedy_place, greedy-xla and best-fit\n\n"
        "Output of `experiments/bench_engine_placement.py` as printed (both engines in one run, see the script's "
        "docstring for the columns):\n\n" + show.text))


if __name__ == "__main__":
    main()
