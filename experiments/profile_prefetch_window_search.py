"""Where the prefetch portfolio's window search spends its time on an xla-suite program (issue 39 item 4), in-process.

The portfolio's ``cpsat`` member as the portfolio runs it (one worker, ``build_baselines=False``, the best of the
session's baselines ``--baselines`` as its hint), under :mod:`cProfile` with CPU time as its clock (the machine is
shared: wall time there is mostly other jobs'), for ``--time-limit`` seconds after its heavy imports. Prints each
baseline's value and CPU seconds, the search's answer and statistics (candidate stays, windows solved and improved),
and the functions that took the most CPU time of their own::

    nice python experiments/profile_prefetch_window_search.py --entry resnet20-cifar-train --time-limit 40 \\
        --out profile_prefetch_window_search_resnet20.md
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

from _common import Transcript, fenced, prefetch_programs, write_results

from mallocgame.engine.registry import load_solver
from mallocgame.engine.runner import preload, run_solver
from mallocgame.engine.session import session_for
from mallocgame.runtime.budget import Budget

ROOT = Path(__file__).resolve().parent.parent
SITE = str(Path(pstats.__file__).parent) + "/site-packages/"  # ortools' and numpy's paths shortened
STATS = ("start", "stays", "buffers_with_candidates", "windows_solved", "windows_improved", "rounds", "window_size",
         "repeated")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="xla")
    ap.add_argument("--entry", required=True)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--baselines", default="greedy-xla,msa,msa+overlap-100,msa+greedy-xla",
                    help="the session's baselines built first (the best is the hint)")
    ap.add_argument("--top", type=int, default=25, help="functions listed")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    out = Transcript()
    found = list(prefetch_programs(args.suite, args.entry))
    if not found:
        raise SystemExit(f"--entry: no entry {args.entry!r} in suite {args.suite!r}")
    (entry, problem), = found
    hw = problem.hardware
    preload(load_solver("cpsat"))
    session = session_for(problem, hw)
    names = tuple(filter(None, args.baselines.split(",")))
    out(f"{entry.name}: {problem.n} buffers, {len(problem.ops)} ops, capacity {problem.capacity} B, "
        f"time limit {args.time_limit:g} s")
    for name in names:
        cpu = time.process_time()
        b = session.baseline(name, None)
        out(f"  baseline {name}: {'-' if b is None else f'{b.objective:.6g}'} ({time.process_time() - cpu:.2f} s CPU)")
    best = session.best_baseline(None, names=names)
    profile = cProfile.Profile(time.process_time)
    wall, cpu = time.monotonic(), time.process_time()
    profile.enable()
    report = run_solver("cpsat", problem, hw, seed=0, budget=Budget.start(args.time_limit), hint=best.solution(problem),
                        options={"workers": 1, "build_baselines": False}, facts=session)
    profile.disable()
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    stats = report.stats or {}
    out(f"  cpsat from {best.name} ({best.objective:.6g}): {report.objective:.6g} "
        f"(x {report.objective / best.objective:.4f}), {wall:.1f} s wall, {cpu:.1f} s CPU")
    out("  " + ", ".join(f"{k} {stats.get(k)}" for k in STATS))
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
    lines = [line for line in text.getvalue().splitlines() if line.strip()]
    start = next((k for k, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    out("  CPU seconds by function (own time):")
    for line in lines[start:]:
        out("    " + line.strip().replace(str(ROOT) + "/", "").replace(SITE, ""))
    if args.out:
        write_results(args.out, f"# Where the prefetch window search's time goes: {entry.name}\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
