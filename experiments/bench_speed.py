"""Speed where it counts (issue 11 item 5): whole commands on 100k buffers, and the game's steps/s.

Writes a ``layered_network(100_000, seed=0)`` workload to a JSON file (map mode, its own
capacity: 40% of max live) and the same buffers as a MiniMalloc CSV (pack mode), then runs the
commands as a user does, each in a fresh process, ``--repeat`` times:

* ``mallocgame solve W.json --solver greedy-xla -o A.csv`` (map mode: read, bound, solve,
  validate, score, write);
* ``mallocgame solve W.csv --solver greedy-xla --minimize-peak -o A.csv`` (pack mode);
* ``mallocgame info W.json`` (map bound), ``mallocgame info W.csv --mode pack`` and
  ``mallocgame info W.json --mode prefetch``.

Reported: the median wall time and the median CPU time (user + sys of the command and its
children: the machine is shared, so wall time varies with other jobs and CPU time does not).
The CLI runs as ``python -m mallocgame.cli.main`` (the same entry point as the ``mallocgame``
script). Then the game: steps/s of both variants and both policies on 500 buffers
(``experiments/bench_game.py``'s measurement). Goals: solve under 2 s wall; >= 20k steps/s.

Usage (from the project root):
    nice python experiments/bench_speed.py [--repeat 3] [--episodes 7] [--out speed.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import Transcript, write_results

CLI = [sys.executable, "-m", "mallocgame.cli.main"]


def run(args: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + sys of the process tree) and the last line printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    res = subprocess.run(CLI + args, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {res.returncode}: {res.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = (res.stdout + res.stderr).strip().splitlines()
    return wall, cpu, text[-1] if text else ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buffers", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=7)
    ap.add_argument("--game-buffers", type=int, default=500)
    ap.add_argument("--out", default="speed.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args(argv)
    from mallocgame.formats.io import atomic_write_text, problem_csv_text, write_workload_json
    from mallocgame.inputs.generate import layered_network

    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cores, "
         f"load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        problem = layered_network(args.buffers, seed=0)
        wl, csv, out = Path(tmp) / "layered.json", Path(tmp) / "layered.csv", str(Path(tmp) / "answer.csv")
        write_workload_json(wl, problem)
        atomic_write_text(csv, problem_csv_text(problem))
        commands = [
            ["solve", str(wl), "--solver", "greedy-xla", "-o", out],
            ["solve", str(csv), "--solver", "greedy-xla", "--minimize-peak", "-o", out],
            ["info", str(wl)],
            ["info", str(csv), "--mode", "pack"],
            ["info", str(wl), "--mode", "prefetch"],
        ]
        show(f"\nInput: layered_network({args.buffers}, seed=0): {problem.n} buffers, {len(problem.ops)} ops; "
             f"JSON {wl.stat().st_size / 1e6:.1f} MB, CSV {csv.stat().st_size / 1e6:.1f} MB. "
             f"Median of {args.repeat} fresh processes.\n")
        show("| command | wall s (median) | CPU s (median) | wall s (all runs) | last line printed |")
        show("|---|---:|---:|---|---|")
        for cmd in commands:
            runs = [run(cmd) for _ in range(args.repeat)]
            walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
            shown = " ".join("W.json" if c == str(wl) else "W.csv" if c == str(csv) else "A.csv" if c == out else c
                             for c in cmd)
            last = runs[-1][2].replace("|", "/")
            show(f"| `mallocgame {shown}` | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} | "
                 f"{', '.join(f'{w:.2f}' for w in walls)} | {last[:110]} |")
    from bench_game import bench

    show(f"\nThe game on layered_network({args.game_buffers}, seed=1), tpuv4i, default GameConfig; "
         f"steps/s per episode, {args.episodes} episodes (the first is cold).\n")
    show("| variant | policy | steps/episode | steps/s cold | steps/s warm (median) |")
    show("|---|---|---:|---:|---:|")
    for variant in ("order", "address"):
        for policy in ("random", "greedy"):
            r = bench(args.game_buffers, variant, policy, args.episodes, 1)
            show(f"| {variant} | {policy} | {r['steps']} | {r['cold']:,.0f} | {r['warm']:,.0f} |")
    write_results(args.out, "# Speed where it counts (issue 11 item 5)\n\nOutput as printed:\n\n" + show.text, argv=argv)


if __name__ == "__main__":
    main()
