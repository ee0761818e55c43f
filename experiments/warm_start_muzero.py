"""CP-SAT warm-started by the agent vs by the greedy, where CP-SAT alone stalls (issue 10, item 7).

The hybrid users run: ``mallocgame solve W --solver cpsat --warm-start muzero`` against
``--warm-start greedy-xla``, ``--warm-start mcts`` (the same tree search without the network:
the control) and plain ``cpsat``, on map-mode programs of 1,000 buffers and more
(generated layered networks and Strassen programs of depth 3, imported with ``mallocgame import
matmul``), tpuv4i, fast memory 40% of max live. Every arm is one ``mallocgame solve`` process,
so the warm-start solver's time (20% of the limit) counts against the whole limit. Reported: the
time saved (objective), the gap to the no-fragmentation bound, and which arm is best per input.

Usage (from the project root):
    nice python experiments/warm_start_muzero.py [--time-limit 20] [--out warm_start_muzero.md]
    nice python experiments/warm_start_muzero.py --arms "cpsat+muzero,muzero" --out warm_start_muzero_g131.md
``--arms`` runs only some arms (``solver`` or ``solver+warm-start``), e.g. only those a new network changes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import Transcript, run_mallocgame, write_results

ARMS = [("cpsat", None), ("cpsat", "greedy-xla"), ("cpsat", "muzero"), ("cpsat", "mcts"), ("muzero", None), ("mcts", None),
        ("greedy-xla", None)]


def make_inputs(folder: Path) -> list[Path]:
    from mallocgame.formats.io import write_workload_json
    from mallocgame.inputs.generate import layered_network

    paths = []
    for n, seed in ((1000, 7), (1500, 10), (2000, 8), (4000, 9)):
        path = folder / f"layered{n}_s{seed}.json"
        write_workload_json(path, layered_network(n, seed=seed))
        paths.append(path)
    for depth, n in ((3, 2048),):
        path = folder / f"strassen_d{depth}.json"
        run_mallocgame(["import", "matmul", "--depth", str(depth), "--n", str(n), "-o", str(path)], echo=False)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--out", default="warm_start_muzero.md")
    ap.add_argument("--arms", default=None, help="comma-separated arms to run (solver or solver+warm): default all")
    args = ap.parse_args(argv)
    arms = ARMS
    if args.arms:
        names = {f"{s}+{w}" if w else s: (s, w) for s, w in ARMS}
        unknown = [a for a in args.arms.split(",") if a not in names]
        if unknown:
            raise SystemExit(f"unknown arm(s) {', '.join(unknown)} (known: {', '.join(names)})")
        arms = [names[a] for a in args.arms.split(",")]
    show = Transcript()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        inputs = make_inputs(folder)
        show(f"time limit {args.time_limit:g} s per solve (warm start included), tpuv4i, capacity 40% of max live\n")
        show("| input | buffers | arm | objective (s saved) | gap to bound | solver seconds |")
        show("|---|---:|---|---:|---:|---:|")
        wins: dict[str, int] = {}
        for path in inputs:
            best_arm, best_value = None, -1.0
            for solver, warm in arms:
                report = folder / "r.json"
                cmd = ["solve", str(path), "--solver", solver, "--hardware", "tpuv4i", "--capacity-fraction", "0.4",
                       "--time-limit", str(args.time_limit), "--report", str(report)]
                if warm:
                    cmd += ["--warm-start", warm]
                run_mallocgame(cmd, echo=False)
                doc = json.loads(report.read_text())
                arm = solver + (f" --warm-start {warm}" if warm else "")
                show(f"| {path.stem} | {doc['total']} | `{arm}` | {doc['objective']:.6g} | {doc['gap']:.3%} | "
                     f"{doc['seconds']:.1f} |")
                if solver == "cpsat" and doc["objective"] > best_value * (1 + 1e-9):
                    best_arm, best_value = arm, doc["objective"]
            if best_arm is not None:
                wins[best_arm] = wins.get(best_arm, 0) + 1
        show("\nBest cpsat arm per input (a tie goes to the arm listed first): "
             + ", ".join(f"`{a}` {k}" for a, k in sorted(wins.items())))
    write_results(args.out, "# CP-SAT warm-started by muzero vs by greedy-xla (issue 10, item 7)\n\n"
                  "Output as printed:\n\n" + show.text, argv=argv)


if __name__ == "__main__":
    main()
