"""The CPU seconds of each baseline per unit of work: what ``mallocgame.engine.session.BASELINE_COST`` is set from.

For each input (generated layered networks, capacity 25% of max live, and programs of the xla suite), every
baseline of the mode (:data:`mallocgame.engine.session.BASELINES`) is built once to its end in a fresh solve session,
timed on the thread's CPU clock (``time.thread_time``: what a busy machine does not change much), and divided by
the input's :func:`mallocgame.engine.session.work_units` (buffers + overlapping pairs + touches). The table shows the
measured microseconds per unit beside the estimate (BASELINE_COST), which should stay above it.

    nice python experiments/held_baseline_costs.py [--sizes 150,600,2000,5000] [--xla resnet20-cifar-train,...]
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import Transcript, write_results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="150,600,2000,5000")
    ap.add_argument("--xla", default="mixer-s16-b8,gpt2-tiny-train-adam,resnet20-cifar-train,lstm2-scan128-train")
    ap.add_argument("--out", default="held_baselines.md")
    args = ap.parse_args(argv)

    from mallocgame.engine.session import BASELINE_COST, BASELINES, Session, work_units
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries

    hw = PRESETS["tpuv4i"]
    inputs = []
    for n in [int(x) for x in args.sizes.split(",") if x]:
        base = layered_network(n, seed=2, capacity_fraction=0.25)
        for mode in ("map", "pack", "prefetch"):
            inputs.append((base.replace(name=f"layered-{n}", mode=mode, capacity=None if mode == "pack" else
                                        base.capacity), hw))
    wanted = [x for x in args.xla.split(",") if x]
    for entry in suite_entries("xla"):
        if entry.name in wanted:
            problem = prepare(entry.build(), mode="prefetch")[0]
            inputs.append((problem, problem.hardware or hw))

    out = Transcript()
    out("# CPU seconds per unit of work of each baseline (session.BASELINE_COST)")
    out()
    out("units = buffers + overlapping pairs + touches (`mallocgame.engine.session.work_units`); each cell: the baseline's "
        "CPU ms (thread clock) and µs per unit; `est` is BASELINE_COST in µs per unit. Machine: 2 cores shared with "
        "other engineers' jobs, run under nice.")
    out()
    worst: dict[str, float] = {}
    for mode in ("map", "pack", "prefetch"):
        names = BASELINES[mode]
        rows = [(p, h) for p, h in inputs if p.mode == mode]
        if not rows:
            continue
        out(f"## {mode} mode")
        out()
        out("| input | buffers | units | " + " | ".join(names) + " |")
        out("|---|---|---|" + "---|" * len(names))
        out("| est µs/unit | | | " + " | ".join(f"{BASELINE_COST[n] * 1e6:.0f}" for n in names) + " |")
        for problem, hardware in rows:
            session = Session(problem, hardware)
            session.warm()
            units = work_units(problem)
            cells = []
            for name in names:
                before = time.thread_time()
                built = session.baseline(name)
                cpu = time.thread_time() - before
                per_unit = cpu / max(units, 1)
                worst[name] = max(worst.get(name, 0.0), per_unit)
                cells.append("-" if built is None else f"{cpu * 1e3:.1f} ms, {per_unit * 1e6:.2f}")
            out(f"| {problem.name} | {problem.n} | {units} | " + " | ".join(cells) + " |")
        out()
    out("## Most measured against the estimate")
    out()
    out("| baseline | most µs/unit | est µs/unit | est / most |")
    out("|---|---|---|---|")
    for name, per_unit in worst.items():
        out(f"| {name} | {per_unit * 1e6:.2f} | {BASELINE_COST[name] * 1e6:.0f} | "
            f"{BASELINE_COST[name] / per_unit if per_unit else float('inf'):.2f} |")
    write_results(args.out, out.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
