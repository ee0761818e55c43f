"""cpsat on example:pack40 in a fresh process at a short limit, on a quiet machine and beside busy processes.

Runs ``mallocgame solve example:pack40 --solver cpsat --time-limit LIMIT`` ``--runs`` times with no busy process and
``--runs`` times beside ``--busy`` busy loops (``stress_short_limits.BusyLoops``), one after another, and prints per run
the command's answer line (status, placed, its wall) and the seconds the whole process took; then how many runs
packed all 40 buffers in each setting. A command's limit counts the interpreter's start and its imports (OR-Tools'
among them), so what a loaded machine spends on them is gone from the solver's second::

    nice python experiments/pack40_fresh_process.py [--runs 8] [--busy 3] [--limit 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from _common import ROOT, Transcript, fenced, write_results
from stress_short_limits import BusyLoops


def solve_once(limit: float) -> tuple[bool, str, float]:
    """``(packed, the command's answer line, seconds of the whole process)``."""
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mallocgame.cli.main", "solve", "example:pack40", "--solver", "cpsat",
                        "--time-limit", str(limit), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    seconds = time.monotonic() - t
    line = next((s for s in r.stdout.splitlines() if s.startswith("cpsat:")), r.stdout.strip() or r.stderr.strip())
    return "placed=40/40" in line and "peak=64" in line, line, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--busy", type=int, default=3)
    ap.add_argument("--limit", type=float, default=1.0)
    ap.add_argument("--out", default="pack40_fresh_process.md")
    args = ap.parse_args()
    out = Transcript()
    packed = {}
    for busy in (0, args.busy):
        with BusyLoops(busy):
            time.sleep(0.5 if busy else 0.0)
            count = 0
            for i in range(args.runs):
                ok, line, seconds = solve_once(args.limit)
                count += ok
                out(f"busy {busy} run {i + 1}: {seconds:5.2f} s in all  {line[:110]}")
        packed[busy] = count
    out()
    for busy, count in packed.items():
        out(f"--time-limit {args.limit:g}, {busy} busy loops: packed {count}/{args.runs}")
    write_results(args.out, "# cpsat on example:pack40 in a fresh process at a short limit\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
