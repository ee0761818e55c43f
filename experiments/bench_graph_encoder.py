"""The cost of features encoder/3's per-problem embeddings at scale, beside encoder/1's fixed encoding.

    nice python experiments/bench_graph_encoder.py [--sizes 1000,10000,100000] [--checkpoint PT] [--out graph_encoder_scale.md]

Per random-interval program of each size (``mallocgame.inputs.generate.random_intervals``, seed 1): its interference
graph's edge count, the seconds of :meth:`NumpyGraphEncoder.embed` (two rounds of message passing with the
checkpoint's weights, neighbour sums from the clique path: no edge list) and of encoder/1's
:func:`~mallocgame.search.muzero.encoder.encoding` (neighbour lists, one per buffer) on the same program, each on a
fresh :class:`GameData`, in this process. ``--checkpoint``: an encoder/3 network (default: the shipped encoder/2
network started as encoder/3, :func:`mallocgame.search.muzero.expert.graph_network_from`, the same cost).
"""

from __future__ import annotations

import argparse
import time

from _common import Transcript, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--skip-fixed-above", type=int, default=20000,
                    help="encoder/1's Python neighbour lists are not timed above this many buffers")
    ap.add_argument("--out", default="graph_encoder_scale.md")
    args = ap.parse_args()
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import random_intervals
    from mallocgame.problem.intervals import count_overlapping_pairs, max_live
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.expert import graph_network_from
    from mallocgame.search.muzero.inference import NumpyNet
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    if args.checkpoint:
        net, _ = load_inference(args.checkpoint)
    else:
        net = NumpyNet.from_torch(graph_network_from(ckpt.load(str(DEFAULT_CHECKPOINT)), aux=True, seed=0),
                                  encoder.NAME_GRAPH)
    if net.graph is None:
        raise SystemExit(f"{args.checkpoint}: not an encoder/3 network (no graph encoder)")
    show = Transcript()
    show(f"network: {args.checkpoint or 'default.pt started as encoder/3'}; random intervals, seed 1")
    show("| buffers | edges | encoder/3 embed (s) | encoder/1 encoding (s) |")
    show("|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        p = random_intervals(n, seed=1, with_benefit=True)
        problem = p.replace(capacity=int(max_live(p) * 0.4), mode="map")
        edges = count_overlapping_pairs(problem.arrays.start, problem.arrays.end)
        data = GameData(problem, PRESETS["unit"])
        t0 = time.perf_counter()
        net.graph.embed(data)
        learned = time.perf_counter() - t0
        fixed = "not timed"
        if n <= args.skip_fixed_above:
            data = GameData(problem, PRESETS["unit"])
            t0 = time.perf_counter()
            encoder.encoding(data)
            fixed = f"{time.perf_counter() - t0:.3f}"
        show(f"| {n} | {edges} | {learned:.3f} | {fixed} |")
    write_results(args.out, "# The graph encoder's per-problem cost (features encoder/3)\n\n" + show.text + "\n")


if __name__ == "__main__":
    main()
