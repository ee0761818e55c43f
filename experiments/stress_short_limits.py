"""``check-solver short-limits`` for every registered solver, N rounds, beside two busy processes per core.

Starts the busy loops itself (``python -c 'while True: pass'``, ``--busy`` of them, default two per core), then
runs ``mallocgame check-solver NAME --check short-limits`` for every solver, round after round, and prints one
line per run and a table of passes per solver. The busy loops are killed (by their process ids) however the
script ends: normally, on an error, or on Ctrl-C / SIGTERM. The short-limits check adds its own busy process
per core while each solve runs, so the solver shares the cores with ``--busy`` + cores busy loops then.

    nice python experiments/stress_short_limits.py [--rounds 20] [--busy 4] [--solvers a,b] [--out NAME.md]

The results file (``experiments/results/stress_short_limits.md`` by default) is rewritten after every round, so
a run stopped early still records the rounds it finished.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from _common import ROOT, Transcript, write_results

BUSY_CODE = "while True: pass"


class BusyLoops:
    """``count`` busy processes while the block runs; killed by their ids on the way out, whatever happens."""

    def __init__(self, count: int):
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY_CODE]))
        return self

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()

    def __exit__(self, *exc):
        self.stop()


def _on_term(signum, frame):  # SIGTERM ends the script as Ctrl-C does: the finally blocks kill the busy loops
    raise KeyboardInterrupt


def check_once(name: str, timeout: float) -> tuple[bool, float, str]:
    """One ``mallocgame check-solver NAME --check short-limits`` run: ``(passed, seconds, its check line)``."""
    cmd = [sys.executable, "-m", "mallocgame.cli.main", "check-solver", name, "--check", "short-limits"]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - t0, f"timed out after {timeout:g} s"
    seconds = time.monotonic() - t0
    lines = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
    line = next((x for x in lines if "short-limits" in x), lines[0] if lines else "(no output)")
    return r.returncode == 0, seconds, f"exit {r.returncode}: {line.strip()}"


def table(names: list[str], runs: dict[str, list[bool]]) -> list[str]:
    out = ["| solver | rounds | passed | failed |", "|---|---|---|---|"]
    for name in names:
        got = runs[name]
        out.append(f"| {name} | {len(got)} | {sum(got)} | {len(got) - sum(got)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1), help="busy loops (default 2 per core)")
    ap.add_argument("--solvers", default="", help="comma-separated (default: every registered solver)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per check-solver run")
    ap.add_argument("--out", default="stress_short_limits.md")
    args = ap.parse_args(argv)

    from mallocgame.engine.registry import solver_entries

    names = [s for s in args.solvers.split(",") if s] or sorted(solver_entries())
    runs: dict[str, list[bool]] = {n: [] for n in names}
    failures: list[str] = []
    signal.signal(signal.SIGTERM, _on_term)
    out = Transcript()
    out(f"# check-solver short-limits beside {args.busy} busy loops on {os.cpu_count()} cores, "
        f"{args.rounds} rounds")
    out()
    out(f"Every round runs `mallocgame check-solver NAME --check short-limits` for each of {len(names)} solvers, "
        f"one after another, while {args.busy} busy processes (`python -c '{BUSY_CODE}'`) run throughout; the check "
        f"adds one busy process per core during each solve. The machine is shared with other engineers' jobs.")
    out()
    out("| round | solver | passed | seconds | check line |")
    out("|---|---|---|---|---|")
    started = time.monotonic()
    done = 0
    stopped = ""
    try:
        with BusyLoops(args.busy):
            for rnd in range(1, args.rounds + 1):
                for name in names:
                    passed, seconds, line = check_once(name, args.timeout)
                    runs[name].append(passed)
                    if not passed:
                        failures.append(f"round {rnd} {name}: {line}")
                    out(f"| {rnd} | {name} | {'yes' if passed else 'NO'} | {seconds:.1f} | {line.replace('|', '/')} |")
                done = rnd
                write_results(args.out, _summary(out, names, runs, done, args, failures, started, ""), quiet=True)
    except KeyboardInterrupt:
        stopped = f"stopped after {done} complete rounds (interrupted)"
    out()
    text = _summary(out, names, runs, done, args, failures, started, stopped)
    print("\n".join(text.splitlines()[len(out.lines):]))
    write_results(args.out, text)
    return 0 if not failures and done == args.rounds else 1


def _summary(out: Transcript, names, runs, done: int, args, failures, started: float, stopped: str) -> str:
    lines = list(out.lines) + ["", f"## Passes after {done} of {args.rounds} rounds "
                                   f"({time.monotonic() - started:.0f} s)", ""]
    lines += table(names, runs)
    lines += ["", f"{sum(map(sum, runs.values()))} of {sum(map(len, runs.values()))} runs passed."]
    if stopped:
        lines.append(stopped + ".")
    if failures:
        lines += ["", "Failures:", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
