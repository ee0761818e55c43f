"""mcts and muzero in map mode at 200k buffers, in-process: their default ``start`` (the best fallback answer's order).

    nice python experiments/map_start_scale.py [--size 200000] [--limits 10,60] [--solvers mcts,muzero]
        [--hint lns:15] [--out map_start_scale_200k.md]

The problem: ``layered_network(N, seed=0)`` (capacity 40% of the max live bytes, the workload of
``bench_limits.py``) in map mode on its default hardware (``mallocgame.inputs.load.prepare``). Each run is a process of
its own (this script again, ``--one``), so its peak RSS is its own: it builds the problem, warms it as
``mallocgame solve`` does before the fork (``heldout_muzero_mcts.own_copy``), computes the instant bound, imports the
solver's ``preload`` (``_common.preload_solvers``), then times :func:`mallocgame.engine.runner.run_solver` with
``time_limit`` = the limit, seed 0, the solver's defaults. Printed per run: whether the answer is valid, its gap to the
bound, the wall seconds of the ``run_solver`` call (the solve and the scoring) and the report's ``seconds`` (the
solve), the peak RSS (MB) before the call and at the end, and the report's ``stats``: ``start``, ``answer_from``,
``simulations``, ``searched_moves``. The load average (``os.getloadavg``) is printed before each run.

``--hint SOLVER:SECONDS``: each run is handed a hint, the answer of ``SOLVER`` run in the same process before it
(``run_solver`` with that time limit, untimed here: in ``setup s``; lns with one worker), so that a hint better than
greedy-xla's answer makes ``start`` the hint's order (the answer-order game) rather than the game's own order.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(size: int, solver: str, limit: float, hint: str = "") -> dict:
    """One run in this process (module docstring); its row as a dict."""
    sys.path.insert(0, str(HERE.parent))
    from _common import preload_solvers
    from heldout_muzero_mcts import own_copy

    from mallocgame.engine.report import answer
    from mallocgame.engine.runner import problem_bound, run_solver
    from mallocgame.inputs.generate import layered_network
    from mallocgame.inputs.load import prepare

    t = time.monotonic()
    problem, hardware = prepare(layered_network(size, seed=0), mode="map")
    own = own_copy(problem, hardware)
    bound = problem_bound(own, hardware)
    given, hint_gap = None, None
    if hint:
        name, seconds = hint.split(":")
        helper = run_solver(name, own_copy(problem, hardware), hardware, time_limit=float(seconds), seed=0,
                            bound=bound, options={"workers": 1} if name == "lns" else {})
        given, hint_gap = answer(helper, problem), helper.gap
    preload_solvers([solver])
    setup, before = time.monotonic() - t, rss_mb()
    t = time.monotonic()
    rep = run_solver(solver, own, hardware, time_limit=limit, seed=0, bound=bound, hint=given)
    wall = time.monotonic() - t
    st = rep.stats
    return {"n": problem.n, "solver": solver, "limit": limit, "setup": setup, "valid": rep.valid,
            "violation": rep.violation, "gap": rep.gap, "wall": wall, "seconds": rep.seconds,
            "hint_gap": hint_gap, "rss_before": before, "rss_peak": rss_mb(), "start": st.get("start", ""),
            "answer_from": st.get("answer_from", ""), "simulations": st.get("simulations", ""),
            "searched_moves": st.get("searched_moves", "")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--limits", default="10,60")
    ap.add_argument("--solvers", default="mcts,muzero")
    ap.add_argument("--hint", default="", metavar="SOLVER:SECONDS", help="a hint for every run, this solver's answer")
    ap.add_argument("--out", default="map_start_scale_200k.md")
    ap.add_argument("--one", nargs=4, metavar=("SIZE", "SOLVER", "LIMIT", "HINT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1], float(args.one[2]), args.one[3])))
        return
    sys.path.insert(0, str(HERE.parent))
    from _common import Transcript, fenced, write_results

    show = Transcript()
    show(f"layered_network({args.size}, seed=0), map mode; solvers {args.solvers}; limits {args.limits} s; "
         f"{os.cpu_count()} cores; hint {args.hint or 'none'}")
    show("| solver | limit s | load before | buffers | hint's gap | valid | gap | run_solver wall s | report seconds | setup s "
         "| RSS MB before | peak RSS MB | simulations | searched moves | answer_from | start |")
    show("|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for limit in (float(x) for x in args.limits.split(",")):
        for solver in args.solvers.split(","):
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            res = subprocess.run([sys.executable, str(HERE), "--one", str(args.size), solver, f"{limit:g}", args.hint],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                tail = (res.stderr.strip().splitlines() or [""])[-1][:200]
                show(f"| {solver} | {limit:g} | {load} | - | exit {res.returncode}: {tail} |")
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            valid = "yes" if r["valid"] else f"no: {r['violation']}"
            hint_gap = "-" if r["hint_gap"] is None else f"{r['hint_gap']:.3%}"
            show(f"| {solver} | {limit:g} | {load} | {r['n']} | {hint_gap} | {valid} | {r['gap']:.3%} | {r['wall']:.2f} | "
                 f"{r['seconds']:.2f} | {r['setup']:.1f} | {r['rss_before']:.0f} | {r['rss_peak']:.0f} | "
                 f"{r['simulations']} | {r['searched_moves']} | {r['answer_from']} | {r['start']} |")
    write_results(args.out, (
        f"# mcts and muzero in map mode at {args.size} buffers, in-process, their default start\n\n"
        "Made by `experiments/map_start_scale.py` (its docstring says what is measured). Output as printed:\n\n"
        + fenced(show.text)))


if __name__ == "__main__":
    main()
