"""Plain MCTS (``mcts``) against ``greedy-xla`` on generated layered networks of 100-500 buffers (issue 4).

For each size and seed: the no-fragmentation bound (``map_upper_bound``), then each
solver through the runner (validated and scored by the evaluator): value (time saved,
seconds), gap to the bound, wall seconds, and for mcts the ratio to greedy-xla's value
and search statistics. Prints a markdown table and a mean row.

With ``--pack FILE...``: pack mode on MiniMalloc CSVs instead, the fraction of bytes that
``best-fit`` (its map-mode run: within the capacity, the rest left out) and ``mcts`` place.

Usage: nice python experiments/compare_mcts.py [--sizes 100 200 300 500] [--seeds 1 2 3]
       [--time-limit 30] [--simulations 16] [--variant order|address] [--order xla] [--rollout-depth 48] [--out PATH]

Writes what it printed to ``--out`` (default ``experiments/results/compare_mcts.md``; the write-up
``mcts_vs_greedy.md`` quotes several runs of this script and is kept by hand).
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import Transcript, write_results

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 300, 500])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--simulations", type=int, default=None)
    ap.add_argument("--variant", default=None, choices=["order", "address"])
    ap.add_argument("--order", default=None, choices=["start", "xla", "size"])
    ap.add_argument("--rollout-depth", type=int, default=None, help="steps per rollout (default: to the end)")
    ap.add_argument("--pack", nargs="+", default=None, metavar="CSV",
                    help="instead: pack mode on these MiniMalloc CSVs (capacity from the file name), mcts vs best-fit")
    ap.add_argument("--out", default="compare_mcts.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    show = Transcript()
    if args.pack:
        compare_pack(args, show)
        write_results(args.out, "# Plain MCTS (`mcts`) vs `best-fit`, pack mode\n\n" + show.text)
        return
    hw = PRESETS["tpuv4i"]
    # Only what was asked for; everything else keeps the solver's defaults.
    given = {"variant": args.variant, "order": args.order, "simulations": args.simulations,
             "rollout_depth": args.rollout_depth}
    options = {k: v for k, v in given.items() if v is not None}
    show(f"# mcts options: {options or 'solver defaults'}, time limit {args.time_limit}s, hardware tpuv4i")
    show("| instance | buffers | greedy-xla gap | greedy-xla s | mcts gap | mcts s | mcts / greedy-xla "
         "| simulations | searched moves | answer from |")
    show("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    ratios, gaps_g, gaps_m = [], [], []
    for n in args.sizes:
        for seed in args.seeds:
            problem = layered_network(n, seed=seed)
            bound = problem_bound(problem, hw)
            g = run_solver("greedy-xla", problem, hw, time_limit=args.time_limit, seed=0, bound=bound)
            m = run_solver("mcts", problem, hw, time_limit=args.time_limit, seed=0, bound=bound, options=options)
            assert g.valid and m.valid, (g.violation, m.violation)
            ratio = m.objective / g.objective
            ratios.append(ratio)
            gaps_g.append(g.gap)
            gaps_m.append(m.gap)
            s = m.stats
            show(f"| {problem.name} | {problem.n} | {g.gap:.2%} | {g.seconds:.3f} | {m.gap:.2%} | {m.seconds:.1f} "
                 f"| {ratio:.4f} | {s['simulations']} | {s['searched_moves']}/{s['moves']} | {s['answer_from']} |")
    show(f"| mean | | {np.mean(gaps_g):.2%} | | {np.mean(gaps_m):.2%} | | {np.mean(ratios):.4f} | | | |")
    show(f"# mcts better than greedy-xla on {sum(r > 1 + 1e-9 for r in ratios)}/{len(ratios)}, "
         f"equal on {sum(abs(r - 1) <= 1e-9 for r in ratios)}, worse on {sum(r < 1 - 1e-9 for r in ratios)}")
    write_results(args.out, (
        "# Plain MCTS (`mcts`) vs `greedy-xla` on layered networks\n\n"
        "Inputs: `layered_network(n, seed)` (tpuv4i, capacity 40% of max live); every answer validated and scored "
        "by the runner; gap = (no-fragmentation bound - value) / bound.\n\n" + show.text))


def compare_pack(args, show: Transcript) -> None:
    """Pack mode: fraction of bytes each solver's answer places within the capacity (1 = a packing)."""
    from mallocgame.formats.io import load_problem
    from mallocgame.search.game_data import GameData
    from mallocgame.search.uct import episode_value

    hw = PRESETS["unit"]
    options = {k: v for k, v in {"variant": args.variant, "simulations": args.simulations}.items() if v is not None}
    show(f"# pack mode, mcts options: {options or 'solver defaults'}, time limit {args.time_limit}s")
    show("| instance | buffers | best-fit placed bytes | mcts placed bytes | mcts valid | mcts s | simulations |")
    show("|---|---:|---:|---:|---|---:|---:|")
    for path in args.pack:
        problem = load_problem(path).replace(mode="pack")
        data = GameData(problem, hw)
        b = run_solver("best-fit", problem.replace(mode="map"), hw, time_limit=args.time_limit, seed=0)
        m = run_solver("mcts", problem, hw, time_limit=args.time_limit, seed=0, options=options)
        best_fit = episode_value(data, np.array([-1 if o is None else o for o in b.offsets], np.int64))
        show(f"| {problem.name} | {problem.n} | {best_fit:.4f} | {m.stats['value_normalised']:.4f} | {m.valid} "
             f"| {m.seconds:.1f} | {m.stats['simulations']} |")


if __name__ == "__main__":
    main()
