"""The parent keeps the time limit: ``solve --time-limit L`` on one op writing N buffers and one reading them.

Each run is one ``mallocgame solve WORKLOAD --solver S --time-limit L --json`` as a user runs it, from a
small wrapper (``--one``) that reports the command's wall time and the peak RSS of its process tree.
``solver s`` is the report's ``seconds`` (from the solving child's fork to its answer, or to the moment
the parent stopped it: at most L + LIMIT_GRACE plus the time its answers spent in the validator);
``stopped`` says whether the parent stopped it ("stopped at the limit"). ``load s`` is ``info``'s
wall time on the same file (reading and describing it), the rest of the command's time is the bound.

    nice python experiments/limit_kept.py [--n 500000] [--time-limit 10] [--solvers cpsat,lns] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_op_workload(n: int, path: Path) -> None:
    """One op writing ``n`` 1 KiB buffers and one reading them; capacity a quarter of them."""
    operands = [{"buffer": f"b{i}", "access": "write", "bytes": 1024} for i in range(n)]
    doc = {"format": "mallocgame.workload/1", "name": f"one-op-{n}",
           "ops": [{"id": "w", "kind": "elementwise", "flops": 1e9, "operands": operands},
                   {"id": "r", "kind": "elementwise", "flops": 1e9,
                    "operands": [dict(o, access="read") for o in operands]}],
           "buffers": [{"id": f"b{i}", "size": 1024, "start": 0, "end": 2} for i in range(n)],
           "capacity": n * 1024 // 4}
    path.write_text(json.dumps(doc))


def one(args: list[str]) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mallocgame.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT)
    wall = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"code": proc.returncode, "wall": wall, "rss_mb": rss, "stdout": proc.stdout[-100_000:],
            "stderr": proc.stderr[-2000:]}


def measure(args: list[str]) -> dict:
    """:func:`one` in a fresh wrapper process, so ``RUSAGE_CHILDREN`` holds this command's tree only."""
    res = subprocess.run([sys.executable, __file__, "--one", json.dumps(args)], capture_output=True, text=True,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--solvers", default="cpsat,lns")
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", default=None)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(json.loads(a.one))))
        return
    lines = [f"# The parent keeps the limit: one op writing {a.n} buffers, --time-limit {a.time_limit:g}", "",
             "| command | exit | wall s | solver s | stopped | status | peak RSS MB |", "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"one_op_{a.n}.json"
        one_op_workload(a.n, path)
        info = measure(["info", str(path)])
        lines.append(f"| info | {info['code']} | {info['wall']:.1f} | - | - | - | {info['rss_mb']:.0f} |")
        print(lines[-1], flush=True)
        for solver in a.solvers.split(","):
            r = measure(["solve", str(path), "--solver", solver, "--time-limit", str(a.time_limit), "--json"])
            try:
                report = json.loads(r["stdout"])
                seconds, status = f"{report['seconds']:.1f}", report["status"]
                stopped = "yes" if report["stats"].get("stopped_at_limit") else "no"
            except (ValueError, KeyError):
                seconds, status, stopped = "-", (r["stderr"].strip().splitlines() or ["?"])[-1][:80], "-"
            lines.append(f"| solve --solver {solver} | {r['code']} | {r['wall']:.1f} | {seconds} | {stopped} | "
                         f"{status} | {r['rss_mb']:.0f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
