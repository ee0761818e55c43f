"""Start-up and the bound's wait: whole-process times of the commands a user types first.

1. Start-up: ``mallocgame solve example:layered150 --solver greedy-xla`` (goal: 0.4 s),
   ``mallocgame suites xla`` (goal: 1 s) and ``mallocgame suites``, beside ``python -c pass`` and
   ``python -c "import numpy, click"`` (the floor every command stands on). Each command runs
   ``--runs`` times after one warm-up run; the table gives the median and the least wall seconds
   and the median CPU seconds (user + system, the command and its forked solver): on a busy
   machine the wall time measures the load as much as the command, the CPU time much less.
   Python's bytecode cache is on (``PYTHONDONTWRITEBYTECODE`` is removed from the commands'
   environment; the cache goes to a temp folder), as for an installed package. The commands import
   ``mallocgame`` as this process would (``PYTHONPATH=CHECKOUT`` measures another checkout).
2. No waiting for a bound: generated layered programs (``layered_network(n, seed=0)``, 1,000 and
   10,000 buffers) in prefetch mode with an empty bound cache: ``solve --solver msa`` (the solve
   ends when msa does, with the instant per-op bound), ``info`` (computes the residency bound and
   stores it), then ``solve`` again (it reports the cached residency bound at once).

    nice python experiments/bench_startup.py [--runs 5] [--out startup.md] [--sizes 1000,10000] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, Transcript, fenced, machine, write_results

CLI = [sys.executable, "-m", "mallocgame.cli.main"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``argv`` from the checkout of ``env`` (``python -m`` puts the folder it runs in first on the path);
    ``(wall seconds, CPU seconds of it and of the children it waited for, the process)``."""
    c0, t0 = os.times(), time.perf_counter()
    proc = subprocess.run(argv, cwd=env.get("PYTHONPATH") or ROOT, env=env, capture_output=True, text=True)
    wall, c1 = time.perf_counter() - t0, os.times()
    return wall, c1.children_user - c0.children_user + c1.children_system - c0.children_system, proc


def repeat(argv: list[str], envs: list[dict[str, str]], runs: int) -> list[dict]:
    """:func:`timed` ``runs`` times per environment after a warm-up each (the bytecode and file caches), the
    environments in turn run after run (so the load falls on them alike): medians and the least wall."""
    for env in envs:
        timed(argv, env)
    walls, cpus, last = [[] for _ in envs], [[] for _ in envs], [None] * len(envs)
    for _ in range(runs):
        for k, env in enumerate(envs):
            wall, cpu, last[k] = timed(argv, env)
            if last[k].returncode != 0:
                raise SystemExit(f"{' '.join(argv)}: exit {last[k].returncode}\n{last[k].stderr}")
            walls[k].append(wall)
            cpus[k].append(cpu)
    return [{"median": statistics.median(w), "min": min(w), "cpu": statistics.median(c),
             "out": (p.stdout.strip().splitlines() or [""])[0]} for w, c, p in zip(walls, cpus, last)]


def startup(out: Transcript, env: dict[str, str], runs: int, baseline: str | None) -> None:
    cases = [
        ("python -c pass", [sys.executable, "-c", "pass"], None),
        ('python -c "import numpy, click"', [sys.executable, "-c", "import numpy, click"], None),
        ("mallocgame solve example:layered150 --solver greedy-xla",
         CLI + ["solve", "example:layered150", "--solver", "greedy-xla"], 0.4),
        ("mallocgame suites xla", CLI + ["suites", "xla"], 1.0),
        ("mallocgame suites", CLI + ["suites"], 1.0),
    ]
    envs = [env] + ([dict(env, PYTHONPATH=baseline)] if baseline else [])
    names = ["this checkout"] + ([f"baseline {baseline}"] if baseline else [])
    out(f"## 1. Start-up (whole process, {runs} runs after a warm-up)")
    out()
    out("| command | code | median wall s | least wall s | median CPU s | goal s |")
    out("|---|---|---:|---:|---:|---:|")
    firsts = []
    for label, argv, goal in cases:
        for name, r in zip(names, repeat(argv, envs if argv[:len(CLI)] == CLI else envs[:1], runs)):
            out(f"| `{label}` | {name} | {r['median']:.3f} | {r['min']:.3f} | {r['cpu']:.3f} | "
                f"{'' if goal is None else goal} |")
            if r["out"] and name == names[0]:
                firsts.append(f"{label}\n  {r['out'][:160]}")
    out()
    out("First line printed (this checkout):")
    out()
    out(fenced("\n".join(firsts)))


def bound_wait(out: Transcript, env: dict[str, str], sizes: list[int], baseline: str | None) -> None:
    from mallocgame.formats.io import write_workload_json
    from mallocgame.inputs.generate import layered_network

    out("## 2. No waiting for the residency bound (prefetch mode, msa, --time-limit 30, empty cache)")
    out()
    out("| buffers | command | wall s | solver s | bound kind | bound | gap |")
    out("|---:|---|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(env, MALLOCGAME_CACHE_DIR=str(Path(tmp) / "cache"))
        for n in sizes:
            path = Path(tmp) / f"layered{n}.json"
            write_workload_json(path, layered_network(n, seed=0), explicit_capacity=True)
            solve = CLI + ["solve", str(path), "--mode", "prefetch", "--solver", "msa", "--time-limit", "30", "--json"]
            steps = [("solve (first)", solve, env), ("info", CLI + ["info", str(path), "--mode", "prefetch", "--json"], env),
                     ("solve (after info)", solve, env)]
            if baseline:
                steps.insert(0, (f"solve, baseline {baseline}", solve, dict(env, PYTHONPATH=baseline)))
            for label, argv, env_of in steps:
                wall, _, proc = timed(argv, env_of)
                if proc.returncode != 0:
                    raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr}")
                doc = json.loads(proc.stdout)
                seconds = f"{doc['seconds']:.2f}" if "seconds" in doc else "-"
                gap = f"{doc['gap']:.2%}" if doc.get("gap") is not None else "-"
                out(f"| {n} | {label} | {wall:.2f} | {seconds} | {doc['bound_kind']} | {doc['bound']:.6g} | {gap} |")
    out()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="1000,10000", help="Buffers of the generated programs of part 2 ('' skips it).")
    ap.add_argument("--out", default="startup.md")
    ap.add_argument("--baseline", default=None, metavar="CHECKOUT",
                    help="Also time the part-1 commands with PYTHONPATH=CHECKOUT, run after run (another checkout).")
    args = ap.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    pycache = tempfile.TemporaryDirectory()  # the bytecode cache, kept out of the source tree
    env["PYTHONPYCACHEPREFIX"] = pycache.name
    env["MALLOCGAME_CACHE_DIR"] = os.path.join(pycache.name, "bound-cache")  # never the user's bound cache
    out = Transcript()
    out("# Start-up and the bound's wait (experiments/bench_startup.py)")
    out()
    out(f"At the start: {machine()}. On a busy machine the wall seconds include the wait for a core; "
        "the CPU seconds do not.")
    out()
    startup(out, env, args.runs, args.baseline)
    if args.sizes:
        bound_wait(out, env, [int(x) for x in args.sizes.split(",")], args.baseline)
    write_results(args.out, out.text)


if __name__ == "__main__":
    main()
