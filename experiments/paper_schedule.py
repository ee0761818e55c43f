"""Schedule + placement (issue 11 item 6): peak and estimated time before and after re-scheduling.

For every workload of the realistic suite and every HLO program in tests/data (imported with
``mallocgame.importers.hlo``, the BERT-style fixture whose XLA:CPU schedule front-loads the
weight conversions included), against the original order:

* **pack** (minimise the peak, no capacity): the max live bytes of the original order and of
  the re-scheduled one (``mallocgame.algorithms.scheduling.schedule``, objective ``peak``), and the peak
  of a validated pack-search placement of each (``solve --reschedule`` logic,
  :func:`mallocgame.hybrid.reschedule.solve_with_reschedule`: round 0 is the original order);
* **map** (capacity 40% of the original order's max live bytes, tpuv4i, fixed for both orders):
  the estimated time of the validated greedy-xla placement of the original order and of the
  best (order, placement) pair found by ``solve --reschedule``'s alternation (objective
  ``time``).

Every number comes from a validated answer (``mallocgame.engine.runner``). Pictures of the live bytes
over time of both orders go to ``--plots`` (default ``experiments/results/schedule/``).

Run from the project root:
``nice python experiments/paper_schedule.py [--time-limit 4] [--out schedule.md]``
(about 31 inputs x 2 modes x the time limit).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from _common import ROOT, Transcript, fenced, shown_path, write_results

sys.path.insert(0, ROOT)

show = Transcript()


def inputs(suite: str, hlo: bool):
    from mallocgame.importers.hlo import load_hlo
    from mallocgame.inputs.suites import suite_entries
    from mallocgame.problem.aliasing import merge_inplace

    out = []
    for name in suite.split(","):
        out += [(e.name, e.build) for e in suite_entries(name) if not e.pending]
    if hlo:
        for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.hlo.txt"))):
            name = "hlo:" + os.path.basename(path)[: -len(".hlo.txt")]
            out.append((name, lambda path=path: merge_inplace(load_hlo(path).problem)))
    return out


def mib(x) -> str:
    return f"{x / 2**20:.2f}"


def pinned_bytes(problem) -> int:
    from mallocgame.algorithms.scheduling.base import Lifetimes

    lt = Lifetimes(problem)
    return int(lt.size[lt.pin_start & lt.pin_end].sum())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=4.0, help="seconds per input and mode")
    ap.add_argument("--suite", default="realistic", help="built-in suites, comma-separated")
    ap.add_argument("--no-hlo", action="store_true", help="skip the HLO fixtures")
    ap.add_argument("--only", default=None, help="only inputs whose name contains this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="schedule.md")
    ap.add_argument("--plots", default=os.path.join(ROOT, "experiments", "results", "schedule"))
    args = ap.parse_args()

    from mallocgame.algorithms.scheduling import schedule
    from mallocgame.algorithms.scheduling.base import Lifetimes
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.hybrid.reschedule import solve_with_reschedule
    from mallocgame.inputs.load import fraction_capacity, prepare
    from mallocgame.plots import plot_live_orders, safe_name
    from mallocgame.problem.intervals import max_live

    spec = PRESETS["tpuv4i"]
    os.makedirs(args.plots, exist_ok=True)
    pack_rows, map_rows, pictures = [], [], []
    t_start = time.monotonic()
    for name, build in inputs(args.suite, not args.no_hlo):
        if args.only and args.only not in name:
            continue
        raw = build()
        # ---- pack: the peak
        pack, _ = prepare(raw, mode="pack", hardware=spec, minimize_peak=True)
        sched = schedule(pack, objective="peak", time_limit=args.time_limit / 2, seed=args.seed)
        placed = solve_with_reschedule("pack-search", pack, spec, time_limit=args.time_limit / 2, seed=args.seed)
        floor = pinned_bytes(pack)
        live0, live1 = max_live(pack), int(sched.value)
        row = {"input": name, "ops": len(pack.ops), "buffers": pack.n, "params": floor,
               "live0": live0, "live1": live1, "by": sched.scheduler,
               "peak0": placed.original.peak if placed.original.valid else None,
               "peak1": placed.report.peak if placed.report.valid else None,
               "valid": placed.original.valid and placed.report.valid, "sched_s": sched.wall_time}
        pack_rows.append(row)
        show(f"pack {name}: max live {mib(live0)} -> {mib(live1)} MiB ({(live1 - live0) / live0:+.1%}) by "
             f"{sched.scheduler}; pack-search peak {row['peak0']} -> {row['peak1']}")
        if live1 < live0 and (name.startswith("hlo:") or (live0 - live1) / live0 > 0.03):
            lt = Lifetimes(pack)
            path = os.path.join(args.plots, f"{safe_name(name)}.live.png")
            plot_live_orders([("original order", lt.profile(list(range(len(pack.ops))))),
                              (f"re-scheduled ({sched.scheduler})", lt.profile(sched.order))], path,
                             title=f"{name}: live bytes over time", floor=floor or None)
            pictures.append(path)
        # ---- map: the estimated time at 40% of the original max live
        cap = fraction_capacity(live0, 0.4, spec.alignment)
        mp, _ = prepare(raw, mode="map", capacity=cap, hardware=spec)
        both = solve_with_reschedule("greedy-xla", mp, spec, time_limit=args.time_limit, seed=args.seed)
        t0 = both.original.estimated_time if both.original.valid else None
        t1 = both.report.estimated_time if both.report.valid else None
        map_rows.append({"input": name, "capacity": cap, "time0": t0, "time1": t1,
                         "valid": both.original.valid and both.report.valid,
                         "reordered": both.order != list(range(len(mp.ops))),
                         "slow": both.original.time_all_slow})
        show(f"map  {name}: capacity {mib(cap)} MiB, greedy-xla est. time {t0:.6g} -> {t1:.6g} s "
             f"({(t1 - t0) / t0:+.1%})" if t0 and t1 else f"map  {name}: no valid answer")
    elapsed = time.monotonic() - t_start

    lines = ["# Re-scheduling: peak and estimated time before and after (issue 11)", "",
             f"Command: `nice python experiments/paper_schedule.py --time-limit {args.time_limit:g}"
             + (f" --only {args.only}" if args.only else "") + (f" --suite {args.suite}" if args.suite != "realistic" else "")
             + (" --no-hlo" if args.no_hlo else "") + (f" --out {args.out}" if args.out != "schedule.md" else "") + "` "
             f"(suite `{args.suite}`" + ("" if args.no_hlo else " + tests/data/*.hlo.txt") + f"; {elapsed:.0f} s).",
             "", "## Pack mode: peak live bytes (MiB)", "",
             "Max live of the original order and of the re-scheduled order (objective `peak`, "
             f"{args.time_limit / 2:g} s), the bytes live for the whole program (parameters, a floor no order "
             "changes), and the peak of a validated pack-search placement of each order "
             "(`solve --solver pack-search --reschedule --minimize-peak` logic).", "",
             "| input | ops | live for the whole program | max live original | re-scheduled | change | "
             "change above the floor | by | placed peak original | placed peak after |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in pack_rows:
        above0, above1 = r["live0"] - r["params"], r["live1"] - r["params"]
        lines.append(f"| {r['input']} | {r['ops']} | {mib(r['params'])} | {mib(r['live0'])} | {mib(r['live1'])} | "
                     f"{(r['live1'] - r['live0']) / r['live0']:+.1%} | "
                     f"{((above1 - above0) / above0 if above0 else 0):+.1%} | {r['by']} | "
                     f"{mib(r['peak0']) if r['peak0'] is not None else '-'} | "
                     f"{mib(r['peak1']) if r['peak1'] is not None else '-'} |")
    better = sum(r["live1"] < r["live0"] for r in pack_rows)
    lines += ["", f"Max live lower after re-scheduling on {better} of {len(pack_rows)} inputs; never higher "
              f"(the original order is always a candidate). All placements valid: "
              f"{all(r['valid'] for r in pack_rows)}.", "",
              "## Map mode: estimated time (tpuv4i, capacity 40% of the original max live)", "",
              "greedy-xla on the original order vs the best (order, placement) pair of `solve --solver greedy-xla "
              f"--reschedule` ({args.time_limit:g} s: round 0 the original order, then schedule (objective `time`) "
              "and placement alternated, each placement validated).", "",
              "| input | capacity MiB | all slow (s) | original order (s) | re-scheduled (s) | change | new order |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for r in map_rows:
        if r["time0"] and r["time1"]:
            lines.append(f"| {r['input']} | {mib(r['capacity'])} | {r['slow']:.4g} | {r['time0']:.4g} | "
                         f"{r['time1']:.4g} | {(r['time1'] - r['time0']) / r['time0']:+.1%} | "
                         f"{'yes' if r['reordered'] else 'no'} |")
        else:
            lines.append(f"| {r['input']} | {mib(r['capacity'])} | - | - | - | - | - |")
    faster = sum(1 for r in map_rows if r["time0"] and r["time1"] and r["time1"] < r["time0"])
    lines += ["", f"Estimated time lower on {faster} of {len(map_rows)} inputs; all answers valid: "
              f"{all(r['valid'] for r in map_rows)}.", "", "## Pictures", ""]
    lines += [f"- `{shown_path(p)}`" for p in pictures]
    lines += ["", "## Transcript", "", fenced("\n".join(show.lines))]
    write_results(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
