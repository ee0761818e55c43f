"""msa against the lifted greedy-xla answer on every suite and HLO fixture (issue 18 item 2).

For each entry with ops of the built-in suites (quick, realistic, matmul, sizes) and each HLO
fixture (tests/data/*.hlo.txt), in prefetch mode at capacity 10%, 25% and 40% of max live on
tpuv4i: the time saved by ``msa`` (the solver, in-process, no hint) and by greedy-xla's map
answer lifted to prefetch mode (:func:`mallocgame.formats.lift.lift_map_answer`), and their ratio.

    nice python experiments/compare_msa_lifted.py [--time-limit 30] [--options JSON]

Prints one row per case, then how often msa is below, equal to or above the lifted answer and
the geometric mean of the ratio. Results: experiments/results/msa_scale.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from mallocgame.engine.runner import run_solver
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.importers.hlo import load_hlo
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.solvers.msa import MemorySpaceAssignment

TPU = PRESETS["tpuv4i"]
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
FRACTIONS = (0.1, 0.25, 0.4)


def problems():
    for suite in ("quick", "realistic", "matmul", "sizes"):
        for entry in suite_entries(suite):
            yield f"{suite}/{entry.name}", entry.build
    for path in sorted(DATA.glob("*.hlo.txt")):
        yield f"hlo/{path.name[:-len('.hlo.txt')]}", lambda path=path: load_hlo(path).problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--options", default="{}", help="msa options as JSON, e.g. '{\"max_overlap\": \"memory\"}'")
    args = ap.parse_args()
    options = json.loads(args.options)
    print(f"# load average at start: {os.getloadavg()[0]:.2f} (2 cores); msa options {options}")
    print(f"{'case':48s} {'buffers':>7} {'msa':>12} {'lifted':>12} {'ratio':>7} {'cut':>5}")
    below = equal = above = 0
    logs = []
    seen = set()
    for name, build in problems():
        if name.split("/", 1)[1] in seen:  # an entry in two suites is one program
            continue
        seen.add(name.split("/", 1)[1])
        base = build()
        if not base.has_ops:
            continue
        for f in FRACTIONS:
            problem = prepare(base, mode="prefetch", capacity_fraction=f, hardware=TPU)[0]
            ev = PrefetchEvaluator.of(problem, TPU)
            sol = MemorySpaceAssignment().solve(
                MemorySpaceAssignment.request(problem, TPU, time_limit=args.time_limit, seed=0, **options))
            assert validate_intervals(problem, sol.intervals) is None
            report = run_solver("greedy-xla", problem.replace(mode="map"), TPU, time_limit=args.time_limit, seed=0)
            lifted = lift_map_answer(problem, report.offsets)
            lv = max(ev.value(lifted), 0.0) if validate_intervals(problem, lifted) is None else 0.0
            ratio = sol.objective / lv if lv > 0 else math.inf if sol.objective > 0 else 1.0
            if sol.objective < lv * (1 - 1e-9):
                below += 1
            elif sol.objective > lv * (1 + 1e-9):
                above += 1
            else:
                equal += 1
            if math.isfinite(ratio) and ratio > 0:
                logs.append(math.log(ratio))
            print(f"{name + '@' + str(f):48s} {problem.n:>7} {sol.objective:>12.5g} {lv:>12.5g} {ratio:>7.3f} "
                  f"{str(bool(sol.stats.get('cut_short'))):>5}", flush=True)
    gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    print(f"msa below lifted greedy-xla: {below}, equal: {equal}, above: {above}; geometric mean ratio {gm:.3f}")
    print(f"# load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
