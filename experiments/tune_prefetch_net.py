"""A prefetch network from ``mallocgame train --mode prefetch`` against the shipped one and mcts, on the tuning recipes.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/tune_prefetch_net.py --candidate RUN.best.pt --seconds 10

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` prefetch curriculum (fixed seeds
from 1,970,000 that no training stream draws; XLA-compiled, torch-exported and layered programs, sizes spread over
1,000-15,000 buffers), in prefetch mode; ``--max-n`` skips the larger ones. Never a held-out program: this is where a
checkpoint is chosen. Contestants, each on its own copy of the problem (``heldout_muzero_mcts.own_copy``), at equal
wall time (``--seconds`` per problem), through :func:`mallocgame.engine.runner.run_solver` (validated): ``candidate``
(solver ``muzero``, ``checkpoint=`` the candidate), ``shipped`` (``checkpoint=`` ``search/muzero/checkpoints/prefetch.pt``)
and ``mcts``. Lower program time wins; per problem the values, and candidate's wins/ties/losses against each.
Writes ``--out`` (under experiments/results/).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import preload_solvers, write_results
from heldout_muzero_mcts import own_copy

from mallocgame.engine.runner import run_solver
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

SHIPPED = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "prefetch.pt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidate", required=True, help="model-only checkpoint of the prefetch game")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=4, help="tuning recipes (tuning_recipes' count)")
    ap.add_argument("--max-n", type=int, default=None, help="skip tuning recipes of more buffers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="train_real_prefetch_tuning.md")
    args = ap.parse_args()

    contestants = {"candidate": ("muzero", {"checkpoint": args.candidate}),
                   "shipped": ("muzero", {"checkpoint": str(SHIPPED)}), "mcts": ("mcts", {})}
    recipes = [r for r in tuning_recipes(named_curriculum("real", "prefetch"), args.count)
               if args.max_n is None or r.n <= args.max_n]
    lines = ["| problem | buffers | " + " | ".join(f"{c} (time, sims)" for c in contestants) + " |",
             "|---|---|" + "---|" * len(contestants)]
    tally = {other: [0, 0, 0] for other in contestants if other != "candidate"}
    preload_solvers(solver for solver, _ in contestants.values())  # the first run's seconds hold no first import
    for r in recipes:
        problem, hardware = build(r)
        problem = problem.replace(mode="prefetch")
        values = {}
        for name, (solver, options) in contestants.items():
            rep = run_solver(solver, own_copy(problem, hardware), hardware, time_limit=args.seconds, seed=args.seed,
                             options=options)
            if not rep.valid:
                raise SystemExit(f"{name} on {r}: invalid answer: {rep.violation}")
            values[name] = (rep.objective, rep.stats.get("simulations", 0), rep.stats.get("prior", ""))
            print(f"{r.kind}-{r.n}-s{r.seed} {name}: {rep.objective:.6g} sims={values[name][1]} "
                  f"prior={values[name][2]}", flush=True)
        for other in tally:
            a, b = values["candidate"][0], values[other][0]
            tally[other][0 if a < b - 1e-9 * abs(b) else 2 if a > b + 1e-9 * abs(b) else 1] += 1
        lines.append(f"| {r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed} | {problem.n} | "
                     + " | ".join(f"{v:.6g}, {s}" for v, s, _ in values.values()) + " |")
    summary = [f"- candidate vs {other}: {w} wins / {t} ties / {lo} losses" for other, (w, t, lo) in tally.items()]
    text = "\n".join([f"# {Path(args.candidate).name} on the prefetch tuning recipes at {args.seconds:g} s", "",
                      *lines, "", *summary, ""])
    print("\n".join(summary))
    write_results(args.out, text)


if __name__ == "__main__":
    main()
