"""Never below the greedy (issue 12, item 3): every search solver against the greedy baseline of its mode.

For each workload of a suite (default ``realistic``, capacity 40% of max live, ``tpuv4i``), in
map mode (baseline ``greedy-xla``) and prefetch mode (baseline ``msa``), each search solver runs
with the same time limit as the baseline; every answer is validated and scored by the runner.
The table gives, per solver and mode, how often it ends below the baseline (should be never),
its worst and geometric-mean ratio of saving to the baseline's. Also: ``best-fit`` against
``greedy-xla`` in map mode (a different heuristic, which may end below it by design).

    nice python experiments/never_below_greedy.py [--suite realistic] [--time-limit 1] [--solvers a,b]
"""

from __future__ import annotations

import argparse
import math
import sys

from _common import Transcript, fenced, write_results

from mallocgame.engine.session import BASELINE_SOLVER

BASELINE = {mode: BASELINE_SOLVER[mode] for mode in ("map", "prefetch")}  # the one table, in the core
SEARCHES = {"map": ["cpsat", "mcts", "muzero", "lns", "select-pack", "portfolio"],
            "prefetch": ["cpsat", "mcts", "muzero", "lns", "portfolio"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="realistic")
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--solvers", default=None, help="comma-separated (default: every search of the mode)")
    ap.add_argument("--out", default="never_below_greedy.md")
    args = ap.parse_args(argv)

    from mallocgame.engine.runner import run_solver
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.suites import suite_entries

    hw = PRESETS["tpuv4i"]
    out = Transcript()
    entries = [e for e in suite_entries(args.suite) if not e.pending]
    problems = [e.build() for e in entries]
    chosen = None if args.solvers is None else args.solvers.split(",")
    ratios: dict[tuple[str, str], list[float]] = {}
    below: dict[tuple[str, str], list[str]] = {}
    for mode in ("map", "prefetch"):
        solvers = [s for s in SEARCHES[mode] if chosen is None or s in chosen]
        if mode == "map":
            solvers = ["best-fit", *solvers]
        for p in problems:
            p = p.replace(mode=mode)
            base = run_solver(BASELINE[mode], p, hw, time_limit=args.time_limit, seed=0)
            if not base.valid or not base.objective:
                continue
            for s in solvers:
                r = run_solver(s, p, hw, time_limit=args.time_limit, seed=0)
                ratio = (r.objective / base.objective) if r.valid else 0.0
                ratios.setdefault((s, mode), []).append(ratio)
                if ratio < 1 - 1e-9:
                    below.setdefault((s, mode), []).append(f"{p.name} ({ratio:.4f})")
            print(f"[{mode}] {p.name}: done", file=sys.stderr, flush=True)
    out(f"# Never below the greedy ({args.suite} suite, {len(problems)} workloads, tpuv4i, "
        f"{args.time_limit:g} s per run)")
    out()
    out("Ratio = the solver's saving (time all-slow - its time) / the baseline's saving, same time limit;")
    out("map baseline greedy-xla, prefetch baseline msa. best-fit is a greedy itself (not held to the rule).")
    out()
    out("| solver | mode | runs | below baseline | worst ratio | geo-mean ratio |")
    out("|---|---|---|---|---|---|")
    for (s, mode), rs in ratios.items():
        geo = math.exp(sum(math.log(max(r, 1e-12)) for r in rs) / len(rs))
        out(f"| {s} | {mode} | {len(rs)} | {len(below.get((s, mode), []))} | {min(rs):.4f} | {geo:.4f} |")
    out()
    if below:
        out("Below the baseline:")
        out()
        body = "\n".join(f"{s} ({mode}): {', '.join(names)}" for (s, mode), names in below.items())
        out(fenced(body).rstrip("\n"))
    write_results(args.out, out.text, argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
