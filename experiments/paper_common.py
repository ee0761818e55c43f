"""Shared helpers of the ``experiments/paper_*.py`` scripts (issue 5 item 8).

Every experiment calls ``mallocgame compare`` exactly as a user would (a subprocess, so
the recorded command is the real one), keeps what it printed verbatim, reads the CSV it
wrote, and writes a markdown results file with the command, the output and a summary.
"""

from __future__ import annotations

import csv
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
IMPROVED = 1 + 1e-6  # same threshold as `compare`: above it a speed-up over greedy is an improvement


def registered_solvers(mode: str | None = "map") -> list[str]:
    """Every registered solver that loads and supports ``mode`` (``None``: any mode)."""
    from mallocgame.registry import SolverLoadError, load_solver, solver_entries

    names = []
    for name in solver_entries():
        try:
            solver = load_solver(name)
        except SolverLoadError as exc:
            print(f"skipping {name}: {exc}")
            continue
        if mode is None or mode in getattr(solver, "modes", {"map", "pack"}):
            names.append(name)
        else:
            print(f"skipping {name}: no {mode} mode")
    return names


def run_compare(args: list[str]) -> tuple[str, str, float]:
    """Run ``mallocgame compare ARGS`` from the project root; returns (command, stdout, seconds).

    The output streams to this terminal as it comes and is also returned. Exits if compare
    rejects its input (exit 2).
    """
    cmd = ["mallocgame", "compare", *args]
    shown = " ".join(shlex.quote(c) for c in cmd)
    print(f"$ {shown}", flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mallocgame.cli.main", "compare", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    code = proc.wait()
    if code == 2:
        sys.exit(f"compare rejected its input: {shown}")
    return shown, "".join(lines), time.monotonic() - t0


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _f(x: str) -> float | None:
    return float(x) if x not in ("", None) else None


def speedup_stats(rows: list[dict[str, str]], solver: str) -> dict[str, float | int | None]:
    """Over the inputs of ``rows``: valid answers, improved / equal / worse vs greedy-xla, speed-up stats.

    ``share_improved`` counts every input (an invalid answer is not an improvement);
    ``mean``/``max``/``geo`` are over the inputs with a valid answer.
    """
    mine = [r for r in rows if r["solver"] == solver]
    vs = [v for r in mine if r["valid"] == "true" and (v := _f(r["speedup_vs_greedy"])) is not None]
    slow = [v for r in mine if r["valid"] == "true" and (v := _f(r["speedup_vs_slow"])) is not None]
    improved = sum(v > IMPROVED for v in vs)
    worse = sum(v < 1 / IMPROVED for v in vs)
    return {
        "inputs": len(mine), "valid": len(vs), "improved": improved, "equal": len(vs) - improved - worse,
        "worse": worse, "share_improved": improved / len(mine) if mine else None,
        "mean": sum(vs) / len(vs) if vs else None, "max": max(vs) if vs else None, "min": min(vs) if vs else None,
        "geo": math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None,
        "mean_vs_slow": sum(slow) / len(slow) if slow else None,
    }


def fmt(x, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def stats_table(rows: list[dict[str, str]], solvers: list[str]) -> str:
    """Markdown: one line per solver with the share improved and the speed-ups over greedy-xla."""
    lines = ["| solver | valid | improved / equal / worse vs greedy-xla | share improved | mean speed-up "
             "| max | min | geo-mean | mean speed-up over all-slow |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for s in solvers:
        st = speedup_stats(rows, s)
        lines.append(f"| {s} | {st['valid']}/{st['inputs']} | {st['improved']} / {st['equal']} / {st['worse']} | "
                     f"{fmt(st['share_improved'], '.0%')} | {fmt(st['mean'])} | {fmt(st['max'])} | "
                     f"{fmt(st['min'])} | {fmt(st['geo'])} | {fmt(st['mean_vs_slow'], '.3f')} |")
    return "\n".join(lines) + "\n"


def machine_note() -> str:
    load = os.getloadavg()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        commit += " (with uncommitted changes in the tree)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return (f"Code: commit {commit}. Machine: {os.cpu_count()} cores shared with other engineers' jobs "
            f"(load average at the end {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}); run under `nice`.")


def write_markdown(path: Path, text: str) -> None:
    from mallocgame.io import atomic_write_text

    atomic_write_text(path, text)
    print(f"wrote {path.relative_to(ROOT)}")


def fenced(text: str) -> str:
    return "```\n" + text.rstrip("\n") + "\n```\n"


def per_input_table(rows: list[dict[str, str]]) -> str:
    """Markdown: per input, greedy-xla's gap to the bound and the best solver's (ties listed together)."""
    lines = ["| input | buffers | greedy-xla gap to bound | best solver(s) | best gap | best speed-up over greedy-xla |",
             "|---|---:|---:|---|---:|---:|"]
    for name in dict.fromkeys(r["input"] for r in rows):
        mine = [r for r in rows if r["input"] == name and r["valid"] == "true" and r["value"]]
        if not mine:
            lines.append(f"| {name} | - | - | (no valid answer) | - | - |")
            continue
        greedy = next((r for r in mine if r["solver"] == "greedy-xla"), None)
        top = max(float(r["value"]) for r in mine)
        best = [r["solver"] for r in mine if float(r["value"]) >= top * (1 - 1e-9)]
        gap = min(float(r["gap"]) for r in mine if r["gap"])  if any(r["gap"] for r in mine) else None
        vs = max(_f(r["speedup_vs_greedy"]) or 0.0 for r in mine)
        lines.append(f"| {name} | {mine[0]['total']} | {fmt(_f(greedy['gap']) if greedy else None, '.2%')} | "
                     f"{', '.join(best)} | {fmt(gap, '.2%')} | {vs:.4f} |")
    return "\n".join(lines) + "\n"
