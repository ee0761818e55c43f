"""The network's relaxation features at real size: the relaxation as a MIP and as its LP rounded down, side by side.

    nice python experiments/relaxation_lp_vs_mip.py [--count 12] [--recipes 0,1,2,3] [--time-limit 60]

The map-mode networks read the fast set of the no-fragmentation relaxation (``search/muzero/encoder.py``,
``relaxation_set``), solved once per problem within a share of the solver's limit (``RELAX_SHARE`` of the limit, at
most ``RELAX_SECONDS``); past ``RELAX_MIP_NONZEROS`` constraint nonzeros it is solved as its LP, rounded down. Per
real-size tuning recipe (:func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` map curriculum;
never a held-out program): the model's nonzeros, the wall seconds of the LP and of the MIP (gap ``RELAX_GAP``; the
MIP only up to the bound's own ``MIP_NONZEROS``, past which the bound too solves the LP), the sets' sizes and the share
of buffers on which the two sets agree. One process, one solve after another.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, fenced, write_results

from mallocgame.bounds import bounds
from mallocgame.search.game_data import GameData
from mallocgame.search.muzero.encoder import RELAX_GAP, RELAX_MIP_NONZEROS
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--recipes", default="0,1,2,3", help="comma-separated indices into the tuning recipes")
    ap.add_argument("--time-limit", type=float, default=60.0, help="HiGHS's limit per solve (seconds)")
    ap.add_argument("--out", default="relaxation_lp_vs_mip.md")
    args = ap.parse_args()
    recipes = tuning_recipes(named_curriculum("real", "map"), count=args.count)
    show = Transcript()
    show(f"RELAX_MIP_NONZEROS {RELAX_MIP_NONZEROS:,}; MIP gap {RELAX_GAP}; HiGHS limit {args.time_limit:g} s")
    show("| recipe | buffers | nonzeros | LP s | LP set | MIP s | MIP kind | MIP set | agree |")
    show("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for i in (int(x) for x in args.recipes.split(",") if x):
        r = recipes[i]
        problem, hw = build(r)
        data = GameData(problem, hw)
        cand = data.benefit > 0
        if data.capacity is not None:
            cand &= data.size <= data.capacity
        _, row_len, binding = bounds._clique_rows(problem, np.flatnonzero(cand))
        nnz = int(row_len[binding].sum())
        t = time.perf_counter()
        lp = bounds.no_fragmentation_relaxation(problem, data.evaluator, cand, time_limit=args.time_limit,
                                                mip_nonzeros=0)
        lp_s = time.perf_counter() - t
        if nnz <= bounds.MIP_NONZEROS:
            t = time.perf_counter()
            mip = bounds.no_fragmentation_relaxation(problem, data.evaluator, cand, time_limit=args.time_limit,
                                                     rel_gap=RELAX_GAP)
            mip_s = f"{time.perf_counter() - t:.2f}"
            mip_cells = f"{mip_s} | {mip.kind} | {int(mip.chosen.sum())} | {float((mip.chosen == lp.chosen).mean()):.4f}"
        else:
            mip_cells = "- | (past MIP_NONZEROS) | - | -"
        show(f"| {r.kind}-{r.n}-s{r.seed} | {problem.n} | {nnz:,} | {lp_s:.2f} | {int(lp.chosen.sum())} "
             f"({lp.kind}) | {mip_cells} |")
    write_results(args.out, (
        "# The relaxation behind the network's features: MIP and LP side by side on real-size tuning programs\n\n"
        "Made by `experiments/relaxation_lp_vs_mip.py` (its docstring says what is measured). Output as printed:\n\n"
        + fenced(show.text)))


if __name__ == "__main__":
    main()
