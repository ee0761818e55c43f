"""A prefetch value head (issue 40 item 5) in the default muzero against the same search with ``y = 0`` leaves, and mcts,
on the prefetch tuning recipes at equal wall time.

    OMP_NUM_THREADS=1 nice python experiments/tune_prefetch_value.py --head runs/pfhead.pt --seconds 10 \
        [--count 8] [--max-n N] [--out tune_prefetch_value.md]

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` prefetch curriculum (fixed seeds from
1,970,000 that no training stream draws; never a held-out program: this is where a head is chosen or not), in
prefetch mode. Contestants, each on its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` per
problem, through :func:`mallocgame.engine.runner.run_solver` (validated): ``head`` (solver ``muzero``, its defaults,
``value_checkpoint=`` the head), ``reference`` (``muzero`` with ``leaf_value=reference``: the leaves' ``y = 0``, the
default without a shipped head) and ``mcts``. Lower program time wins; per problem the values, simulations and the
leaf played, and head's wins/ties/losses against each. Writes ``--out`` (under experiments/results/).
"""

from __future__ import annotations

import argparse

from _common import write_results
from heldout_muzero_mcts import own_copy

from mallocgame.engine.runner import run_solver
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--head", required=True, help="a prefetch value head (value.train_prefetch_head)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=8, help="tuning recipes (tuning_recipes' count)")
    ap.add_argument("--max-n", type=int, default=None, help="skip tuning recipes of more buffers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="tune_prefetch_value.md")
    args = ap.parse_args()
    contestants = {"head": ("muzero", {"value_checkpoint": args.head}),
                   "reference": ("muzero", {"leaf_value": "reference"}), "mcts": ("mcts", {})}
    recipes = [r for r in tuning_recipes(named_curriculum("real", "prefetch"), args.count)
               if args.max_n is None or r.n <= args.max_n]
    lines = [f"# prefetch value head on the prefetch tuning recipes, {args.seconds:g} s each\n",
             f"head `{args.head}`, seed {args.seed}\n",
             "| problem | buffers | " + " | ".join(f"{c} (time, sims, leaf)" for c in contestants) + " |",
             "|---|---|" + "---|" * len(contestants)]
    tally = {other: [0, 0, 0] for other in contestants if other != "head"}
    for r in recipes:
        problem, hardware = build(r)
        problem = problem.replace(mode="prefetch")
        values = {}
        for name, (solver, options) in contestants.items():
            rep = run_solver(solver, own_copy(problem, hardware), hardware, time_limit=args.seconds, seed=args.seed,
                             options=options)
            if not rep.valid:
                raise SystemExit(f"{name} on {r}: invalid answer: {rep.violation}")
            values[name] = (rep.objective, rep.stats.get("simulations", 0),
                            f"{rep.stats.get('leaf_played', '-')}/{rep.stats.get('leaf_value', '-')}")
            print(f"{r.kind}-{r.n}-s{r.seed} {name}: {rep.objective:.6g} sims={values[name][1]} "
                  f"leaf={values[name][2]}", flush=True)
        for other in tally:
            a, b = values["head"][0], values[other][0]
            tally[other][0 if a < b - 1e-9 * abs(b) else 2 if a > b + 1e-9 * abs(b) else 1] += 1
        lines.append(f"| {r.kind}-{r.n}-s{r.seed} | {problem.n} | "
                     + " | ".join(f"{v[0]:.6g}, {v[1]}, {v[2]}" for v in values.values()) + " |")
    lines.append("")
    lines += [f"head against {other}: {w} wins / {t} ties / {lo} losses" for other, (w, t, lo) in tally.items()]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
