"""Limits (issue 12, item 6): how far each solver overshoots its time limit, and peak memory at 10k/100k buffers.

Every measurement is one ``mallocgame solve`` (or ``info``) command run as a user would, from a
small wrapper process (``--one``) that reports the command's wall time and the peak resident
memory (max RSS) of its process tree (``RUSAGE_CHILDREN``: the largest of the command and the
solver's forked child). Inputs are generated layered networks (``layered_network(n, seed=0)``,
map mode, capacity 40% of max live), as in ``bench_foundation.py``; never ``random_intervals`` at
100k buffers, whose ~1e9 overlapping pairs measure the generator, not us.

1. Overshoot: every registered solver, in map mode (``pack-search``: pack, minimising the peak;
   ``msa``: prefetch), on 200 buffers with ``--time-limit 2`` and 10,000 buffers with
   ``--time-limit 5``. ``solver s`` is the report's ``seconds`` (solve + validate + score),
   ``wall s`` the whole command (Python start, reading, bound, solve, writing).
2. Memory: ``info``, ``solve --solver greedy-xla``, ``cpsat``, ``muzero`` at 10,000 and 100,000
   buffers (``--time-limit 10``).

    nice python experiments/bench_limits.py [--out limits.md] [--quick]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL, LARGE, HUGE = 200, 10_000, 100_000


def one(args: list[str]) -> dict:
    """Run ``mallocgame ARGS`` and return its exit code, wall seconds and the tree's peak RSS (MB)."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mallocgame.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT)
    wall = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    tail = (proc.stdout.strip().splitlines() or [""])[-1] if proc.returncode == 0 else \
        (proc.stderr.strip().splitlines() or [""])[-1]
    return {"code": proc.returncode, "wall": wall, "rss_mb": rss, "tail": tail[:200]}


def measure(args: list[str]) -> dict:
    """:func:`one` in a fresh wrapper process, so ``RUSAGE_CHILDREN`` holds this command's tree only."""
    res = subprocess.run([sys.executable, __file__, "--one", json.dumps(args)], capture_output=True, text=True,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def solver_modes() -> dict[str, frozenset]:
    from mallocgame.registry import solver_entries
    from mallocgame.registry import solver_modes as modes_of

    return {name: frozenset(modes_of(entry)) for name, entry in solver_entries().items()}


def mode_args(modes: frozenset) -> tuple[str, list[str]]:
    if "map" in modes:
        return "map", ["--mode", "map"]
    if "pack" in modes:
        return "pack", ["--mode", "pack", "--minimize-peak"]
    return "prefetch", ["--mode", "prefetch"]


def solve(path: Path, solver: str, limit: float, extra: list[str], report: Path) -> dict:
    args = ["solve", str(path), "--solver", solver, "--time-limit", str(limit), "--report", str(report), *extra]
    row = measure(args)
    row["solver_s"] = None
    if report.exists():
        row["solver_s"] = json.loads(report.read_text()).get("seconds")
        report.unlink()
    return row


def main(argv: list[str] | None = None) -> None:
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    from mallocgame.inputs.generate import layered_network
    from mallocgame.io import write_workload_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="limits.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--quick", action="store_true", help="1,000 / 10,000 buffers instead of 10,000 / 100,000")
    args = ap.parse_args(argv)
    large, huge = (1_000, LARGE) if args.quick else (LARGE, HUGE)
    lines = ["# Limits: time-limit overshoot and peak memory (issue 12, item 6)", ""]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = {}
        for n in (SMALL, large, huge):
            paths[n] = tmp / f"layered-{n}.json"
            write_workload_json(paths[n], layered_network(n, seed=0))
        report = tmp / "report.json"

        lines += ["## Overshoot of the time limit", "",
                  f"`solve` on `layered_network(n, seed=0)`; limit 2 s at {SMALL} buffers, 5 s at {large}. "
                  "overshoot = seconds past the limit (negative: finished early).", "",
                  "| solver | mode | buffers | limit s | solver s | solver overshoot s | wall s | wall overshoot s "
                  "| max RSS MB | exit | last line |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for solver, modes in sorted(solver_modes().items()):
            mode, extra = mode_args(modes)
            for n, limit in ((SMALL, 2.0), (large, 5.0)):
                r = solve(paths[n], solver, limit, extra, report)
                s = r["solver_s"]
                line = (f"| {solver} | {mode} | {n} | {limit:g} | {'-' if s is None else f'{s:.2f}'} | "
                        f"{'-' if s is None else f'{s - limit:+.2f}'} | {r['wall']:.2f} | {r['wall'] - limit:+.2f} | "
                        f"{r['rss_mb']:.0f} | {r['code']} | {r['tail'].replace('|', '/')[:90]} |")
                print(line, flush=True)
                lines.append(line)

        lines += ["", "## Peak memory (max RSS of the command's process tree)", "",
                  "Limit 10 s. `info` reads the input and computes the bound; `solve` runs the solver in a forked child.", "",
                  "| command | buffers | wall s | solver s | max RSS MB | exit | last line |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for n in (large, huge):
            r = measure(["info", str(paths[n])])
            line = f"| info | {n} | {r['wall']:.2f} | - | {r['rss_mb']:.0f} | {r['code']} | {r['tail'][:90]} |"
            print(line, flush=True)
            lines.append(line)
            for solver in ("greedy-xla", "cpsat", "muzero"):
                r = solve(paths[n], solver, 10.0, ["--mode", "map"], report)
                s = r["solver_s"]
                line = (f"| solve --solver {solver} | {n} | {r['wall']:.2f} | {'-' if s is None else f'{s:.2f}'} | "
                        f"{r['rss_mb']:.0f} | {r['code']} | {r['tail'].replace('|', '/')[:90]} |")
                print(line, flush=True)
                lines.append(line)
    lines += ["", f"Machine: {os.cpu_count()} cores shared with other jobs; seconds are noisy."]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(args.out, text, argv=argv)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(one(json.loads(sys.argv[2]))))
    else:
        main()
