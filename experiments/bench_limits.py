"""Limits at every size: wall time past the time limit, load time and peak memory of ``mallocgame solve``.

For every registered solver in every mode it supports (map, pack, prefetch), on generated workloads of
20k, 200k and 2M buffers (``layered_network(n, seed=0)``: ops, capacity 40% of max live; pack mode runs
with ``--minimize-peak``, since a layered network's largest weight is above that capacity) and on the
one-op workload (``one-op-N``: one op writing N buffers, one reading them, so every buffer overlaps
every other), it runs the command a user would::

    mallocgame solve FILE --solver S --mode M --time-limit T [--minimize-peak] --report R.json

from a small wrapper process (``--one``) that reports the command's wall time, CPU seconds and the peak
resident memory of its process tree (``RUSAGE_CHILDREN``: the largest of the command and the solver's forked
child). ``load s`` is the time of reading and preparing the same file in the same mode (``--load``,
a process of its own); ``overrun s = wall - limit - load`` (the issue's promise: at most 1 s). A
command still running at ``--timeout`` seconds (default: 3 x limit + 2 x load + 60) has its process
group killed and is reported as ``timeout``. The table is rewritten after every row, so a long run
that is stopped keeps what it measured.

    nice python experiments/bench_limits.py --sizes 20000 [--one-op 500000] [--solvers a,b] [--modes map,pack]
        [--time-limit 10] [--workload FILE.json] [--root CHECKOUT] [--out limits_20k.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the checkout whose mallocgame runs (--root: another, e.g. a copy of the code before a change)
ROOT = Path(os.environ.get("BENCH_LIMITS_ROOT") or Path(__file__).resolve().parents[1])
MODES = ("map", "pack", "prefetch")


# ---------------------------------------------------------------------------- one measurement

def one(args: list[str], timeout: float) -> dict:
    """Run ``mallocgame ARGS`` (killed with its process group at ``timeout``); its exit code, wall seconds,
    the tree's CPU seconds (user + system) and peak RSS (MB), and its last line."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mallocgame.cli.main", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = "timeout"
    wall = time.monotonic() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
    summary = (out.strip().splitlines() or [""])[-1]  # solve's summary line (also when it exits 1: no valid answer)
    summary = summary.split(" capacity=none")[0]  # --minimize-peak's note, the same on every pack row
    if code != 0:
        summary = " ".join(filter(None, [summary, (err.strip().splitlines() or [""])[-1]]))
    return {"code": code, "wall": wall, "cpu": cpu, "rss_mb": rss, "tail": summary[:400]}


def load_only(path: str, mode: str, minimize_peak: bool) -> dict:
    """Read and prepare ``path`` in ``mode`` as ``solve`` does: seconds and this process's peak RSS (MB)."""
    t0 = time.monotonic()
    from mallocgame.inputs.load import prepare, read_problem

    problem, _ = prepare(read_problem(path), mode=mode, minimize_peak=minimize_peak)
    return {"load": time.monotonic() - t0, "n": problem.n,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def in_wrapper(flag: str, payload: list) -> dict:
    """``--one`` / ``--load`` in a fresh wrapper process, so ``RUSAGE_CHILDREN`` holds one command's tree."""
    res = subprocess.run([sys.executable, __file__, flag, json.dumps(payload)], capture_output=True, text=True,
                         check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- workloads

def write_one_op(path: Path, n: int) -> None:
    """The one-op workload: op ``w`` writes buffers ``b0..b{n-1}`` (256 B to 1.75 KiB), op ``r`` reads them."""
    sizes = [256 * (1 + i % 7) for i in range(n)]
    doc = {"format": "mallocgame.workload/1", "name": f"one-op-{n}",
           "buffers": [{"id": f"b{i}", "size": sizes[i], "start": 0, "end": 2, "alignment": 256}
                       for i in range(n)],
           "ops": [{"id": op, "kind": "op", "flops": 1e9,
                    "operands": [{"buffer": f"b{i}", "access": access, "bytes": sizes[i]} for i in range(n)]}
                   for op, access in (("w", "write"), ("r", "read"))]}
    path.write_text(json.dumps(doc))


def write_layered(path: Path, n: int) -> None:
    from mallocgame.formats.io import write_workload_json
    from mallocgame.inputs.generate import layered_network

    write_workload_json(path, layered_network(n, seed=0))


def solver_modes() -> dict[str, tuple[str, ...]]:
    from mallocgame.engine.registry import solver_entries
    from mallocgame.engine.registry import solver_modes as modes_of

    return {name: tuple(m for m in MODES if m in modes_of(entry)) for name, entry in solver_entries().items()}


# ---------------------------------------------------------------------------- the table

HEADER = ["| workload | buffers | mode | solver | limit s | load s | wall s | overrun s | solver s | CPU s | max RSS MB "
          "| exit | last line |",
          "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]


def row(workload: str, n: int, mode: str, solver: str, limit: float, load: float, r: dict) -> str:
    s = r.get("solver_s")
    over = r["wall"] - limit - load
    tail = r["tail"].replace("|", "/")
    return (f"| {workload} | {n} | {mode} | {solver} | {limit:g} | {load:.2f} | {r['wall']:.2f} | {over:+.2f} | "
            f"{'-' if s is None else f'{s:.2f}'} | {r.get('cpu', float('nan')):.2f} | {r['rss_mb']:.0f} | {r['code']} | "
            f"{tail[:400]} |")


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,200000,2000000", help="generated layered networks (buffers); '' none")
    ap.add_argument("--one-op", default="500000", help="one-op workloads (operands); '' none")
    ap.add_argument("--solvers", default="", help="comma-separated (default: every registered solver)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a command is killed")
    ap.add_argument("--root", default=None, help="the checkout to run (default: this script's own)")
    ap.add_argument("--workload", action="append", default=[], metavar="PATH",
                    help="a workload file written already (e.g. layered-2000000.json), measured as it is (repeatable)")
    ap.add_argument("--out", default=None, help="results file under experiments/results/ (default limits_SIZES.md)")
    args = ap.parse_args(argv)
    if args.root:
        global ROOT
        ROOT = Path(args.root).resolve()
        os.environ["BENCH_LIMITS_ROOT"] = str(ROOT)  # the wrappers (this script again) run it too

    sizes = [int(x) for x in args.sizes.split(",") if x]
    one_ops = [int(x) for x in args.one_op.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    available = solver_modes()
    solvers = [s for s in args.solvers.split(",") if s] or sorted(available)
    unknown = [s for s in solvers if s not in available]
    if unknown:
        ap.error(f"unknown solvers: {', '.join(unknown)} (registered: {', '.join(sorted(available))})")
    limit = args.time_limit
    out_name = args.out or "limits_" + "_".join([f"{n // 1000}k" for n in sizes] +
                                                [f"oneop{n // 1000}k" for n in one_ops]) + ".md"
    lines = [f"# Limits at every size: overrun past --time-limit {limit:g}, load time and peak RSS", "",
             "`mallocgame solve FILE --solver S --mode M --time-limit T` (pack: `--minimize-peak`) per row; "
             "load s = reading and preparing the file alone; overrun = wall - limit - load (the promise: "
             "<= 1 s); max RSS = the command's process tree. Workloads: `layered-N` = "
             "`layered_network(N, seed=0)`, `one-op-N` = one op writing N buffers and one reading them.",
             f"Machine: {os.cpu_count()} cores shared with other jobs, run under nice: seconds are noisy.", "",
             *HEADER]
    over_count = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        workloads = [(f"layered-{n}", n, write_layered) for n in sizes] + \
                    [(f"one-op-{n}", n, write_one_op) for n in one_ops] + \
                    [(Path(w).name.split(".")[0], 0, None) for w in args.workload]
        for name, n, write in workloads:
            path = tmp / f"{name}.json"
            if write is None:  # --workload: the given file, read where it is (not deleted)
                path = Path(next(w for w in args.workload if Path(w).name.split(".")[0] == name)).resolve()
            else:
                t = time.monotonic()
                write(path, n)
                print(f"{name}: written in {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
            for mode in modes:
                pack = mode == "pack"
                todo = [s for s in solvers if mode in available[s]]
                if not todo:
                    continue
                try:
                    loaded = in_wrapper("--load", [str(path), mode, pack])
                except subprocess.CalledProcessError as exc:  # the input refused in this mode
                    lines.append(f"| {name} | {n} | {mode} | - | {limit:g} | - | - | - | - | - | - | - | "
                                 f"refused: {(exc.stderr.strip().splitlines() or [''])[-1][:120]} |")
                    continue
                load = loaded["load"]
                timeout = args.timeout or 3 * limit + 2 * load + 60
                for solver in todo:
                    report = tmp / "report.json"
                    cmd = ["solve", str(path), "--solver", solver, "--mode", mode, "--time-limit", f"{limit:g}",
                           "--report", str(report), *(["--minimize-peak"] if pack else [])]
                    r = in_wrapper("--one", [cmd, timeout])
                    r["solver_s"] = None
                    if report.exists():
                        r["solver_s"] = json.loads(report.read_text()).get("seconds")
                        report.unlink()
                    over_count += r["wall"] - limit - load > 1.0 or r["code"] == "timeout"
                    line = row(name, loaded["n"], mode, solver, limit, load, r)
                    print(line, flush=True)
                    lines.append(line)
                    write_results(out_name, "\n".join(lines) + "\n", argv=argv, quiet=True)
            if write is not None:
                path.unlink()
    lines += ["", f"Rows over limit + load + 1 s (or killed at the timeout): {over_count}"]
    write_results(out_name, "\n".join(lines) + "\n", argv=argv)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        cmd, timeout = json.loads(sys.argv[2])
        print(json.dumps(one(cmd, timeout)))
    elif len(sys.argv) == 3 and sys.argv[1] == "--load":
        print(json.dumps(load_only(*json.loads(sys.argv[2]))))
    else:
        sys.exit(main())
