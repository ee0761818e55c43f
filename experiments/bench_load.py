"""Loading and describing big inputs (issue 41, item 3): wall, CPU and max RSS of `load` and `info` at 20k, 200k and 2M buffers.

Inputs, written once to ``--dir`` (default ``/tmp``): ``layered_network(N, seed=0)`` for N of 200k or
less as a workload JSON (with ops, map mode) and as a MiniMalloc CSV (no ops, pack mode); the 2M-buffer
pair is the 200k workload repeated 10 times one after the other in time (ids ``cK_...``), streamed to
the files, since generating 2M buffers in one process takes minutes and ~9 GB.

Each measurement is one process started from a small wrapper (``--one``), which reports the
command's wall seconds, its CPU seconds (user + sys) and its peak resident memory (``RUSAGE_CHILDREN``):

* ``load``: ``load_prepared(FILE)`` as ``mallocgame info`` calls it (read, check, mode, hardware);
* ``info (cold)``: ``mallocgame info FILE`` with an empty bound cache (``MALLOCGAME_CACHE_DIR``, one fresh
  folder per checkout), so map mode computes its no-fragmentation bound (up to ``MAP_BOUND_SECONDS``);
* ``info (cached)``: the same command again: the bound is read from the cache.

``--roots DIR,DIR`` measures checkouts of the project (``PYTHONPATH=DIR``) one after the other, each
command of each checkout in turn, side by side in one table.
Goal: at 2M buffers, load and info each within 10 s and 2 GB.

    nice python experiments/bench_load.py [--roots DIR,DIR] [--sizes 20000,200000,2000000] [--out load.md]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = 200_000
GOAL_SECONDS, GOAL_MB = 10.0, 2048

LOAD = ("import sys; from mallocgame.cli.common import load_prepared; "
        "p, s = load_prepared(sys.argv[1], mode=None, capacity=None, capacity_fraction=None, hardware=None, "
        "oversized_ok=True); print(p.n, p.mode)")


def one(argv: list[str], root: str, cache: str) -> dict:
    """Run ``argv`` with ``PYTHONPATH=root`` and the bound cache ``cache``: exit code, wall and CPU seconds, the
    process tree's peak RSS (MB)."""
    env = {**os.environ, "PYTHONPATH": root, "MALLOCGAME_CACHE_DIR": cache}
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root)
    wall = time.monotonic() - t0
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = proc.stdout if proc.returncode == 0 else proc.stderr
    return {"code": proc.returncode, "wall": wall, "cpu": use.ru_utime + use.ru_stime,
            "rss_mb": use.ru_maxrss / 1024, "tail": (out.strip().splitlines() or [""])[-1][:120]}


def measure(argv: list[str], root: str, cache: str) -> dict:
    """:func:`one` in a fresh wrapper process, so ``RUSAGE_CHILDREN`` holds this command's tree only."""
    res = subprocess.run([sys.executable, __file__, "--one", json.dumps([argv, root, cache])], capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def write_base(folder: Path, size: int = BASE) -> tuple[Path, Path]:
    """The ``size``-buffer workload JSON and CSV (made once)."""
    from mallocgame.formats.io import atomic_write_text, problem_csv_text, write_workload_json
    from mallocgame.inputs.generate import layered_network

    js, cs = folder / f"bigload_{size}.json", folder / f"bigload_{size}.csv"
    if not (js.exists() and cs.exists()):
        problem = layered_network(size, seed=0)
        write_workload_json(js, problem)
        atomic_write_text(cs, problem_csv_text(problem))
    return js, cs


def write_tiled(base_json: Path, copies: int, folder: Path) -> tuple[Path, Path]:
    """``copies`` of the base workload one after the other in time, as JSON and CSV (made once, streamed)."""
    doc = json.loads(base_json.read_text())
    n = len(doc["buffers"]) * copies
    js, cs = folder / f"bigload_{n}.json", folder / f"bigload_{n}.csv"
    if js.exists() and cs.exists():
        return js, cs
    shift = len(doc["ops"])
    assert max(b["end"] for b in doc["buffers"]) <= shift
    with open(f"{js}.tmp", "w") as out, open(f"{cs}.tmp", "w") as csv_out:
        out.write('{\n "format": %s,\n "name": "layered-tiled-%d",\n "ops": [\n' % (json.dumps(doc["format"]), n))
        sep = ""
        for k in range(copies):
            for op in doc["ops"]:
                o = dict(op, id=f"c{k}_{op['id']}", operands=[dict(x, buffer=f"c{k}_{x['buffer']}") for x in op["operands"]])
                if "control_deps" in o:
                    o["control_deps"] = [f"c{k}_{c}" for c in o["control_deps"]]
                out.write(sep + json.dumps(o))
                sep = ",\n"
        out.write('\n ],\n "buffers": [\n')
        csv_out.write("id,lower,upper,size,alignment\n")
        sep = ""
        for k in range(copies):
            for b in doc["buffers"]:
                c = dict(b, id=f"c{k}_{b['id']}", start=b["start"] + k * shift, end=b["end"] + k * shift)
                out.write(sep + json.dumps(c))
                csv_out.write(f"{c['id']},{c['start']},{c['end']},{c['size']},{c['alignment']}\n")
                sep = ",\n"
        pairs = [[f"c{k}_{a}", f"c{k}_{b}"] for k in range(copies) for a, b in doc.get("inplace", [])]
        out.write('\n ],\n "inplace": %s' % json.dumps(pairs))
        if "capacity" in doc:
            out.write(',\n "capacity": %d' % doc["capacity"])
        out.write("\n}\n")
    os.replace(f"{js}.tmp", js)
    os.replace(f"{cs}.tmp", cs)
    return js, cs


def main(argv: list[str] | None = None) -> None:
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", default=str(ROOT), help="the checkouts to measure, comma-separated (default: this one)")
    ap.add_argument("--sizes", default=f"{BASE},{BASE * 10}", help="buffers: up to 200000 (generated) or 2000000 (tiled)")
    ap.add_argument("--dir", default="/tmp", help="where the input files are written (once)")
    ap.add_argument("--out", default="load.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args(argv)
    import tempfile

    folder = Path(args.dir)
    roots = args.roots.split(",")
    caches = {root: tempfile.mkdtemp(prefix="bench_load_cache_") for root in roots}
    base_json, base_csv = write_base(folder)
    lines = [f"# Loading and describing big inputs: {', '.join(roots)}", "",
             "layered_network(N, seed=0) (JSON with ops: map mode; CSV: pack mode); 2M = 10 copies in time of N = 200000. "
             f"Goal at 2M: <= {GOAL_SECONDS:g} s and <= {GOAL_MB} MB.", "",
             "| input | buffers | checkout | command | wall s | CPU s | max RSS MB | exit | last line |",
             "|---|---:|---|---|---:|---:|---:|---:|---|"]
    for size in (int(s) for s in args.sizes.split(",")):
        files = write_base(folder, size) if size <= BASE else write_tiled(base_json, size // BASE, folder)
        for path in files:
            info = [sys.executable, "-m", "mallocgame.cli.main", "info", str(path)]
            for command, cmd in (("load", [sys.executable, "-c", LOAD, str(path)]),
                                 ("info (cold)", info), ("info (cached)", info)):
                for root in roots:
                    r = measure(cmd, root, caches[root])
                    line = (f"| {path.name} | {size} | {root} | {command} | {r['wall']:.2f} | {r['cpu']:.2f} | "
                            f"{r['rss_mb']:.0f} | {r['code']} | {r['tail'].replace('|', '/')} |")
                    print(line, flush=True)
                    lines.append(line)
    lines += ["", f"Machine: {os.cpu_count()} cores shared with other engineers' jobs (run under nice): wall seconds "
              "are noisy, CPU seconds less so."]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(args.out, text, argv=argv)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(one(*json.loads(sys.argv[2]))))
    else:
        main()
