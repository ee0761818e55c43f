"""Which leaf muzero's ``leaf=auto`` plays at map mode's answer start, and whether known greedy returns enter, on the
real-size tuning problems of ``tune_map_start.py``.

    nice python experiments/map_auto_leaf_played.py --seconds 10 [--count 12] [--setting auto] [--out NAME.md]

Problems: ``tune_map_start.recipes(--count)`` of at least ``--min-n`` buffers (never the held-out sets). Each gets one
run of the ``--setting`` candidate of ``tune_map_start.CANDIDATES`` through
:func:`mallocgame.engine.runner.run_solver` on its own copy (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time
limit, no cap on simulations, seed ``--seed``. Printed per problem, from the answer's statistics: where the search
started, its prior, the leaf ``auto`` played (``leaf_played``), the greedy moves entered with their known returns
(``known_greedy_moves``), the measured cost of a value leaf and of a rollout (microseconds), the simulations, the
searched and played moves and the objective.
"""

from __future__ import annotations

import argparse

from _common import Transcript, fenced, write_results
from heldout_muzero_mcts import budget_of, own_copy
from tune_map_start import CANDIDATES, label_of, recipes

from mallocgame.engine.runner import run_solver
from mallocgame.search.muzero.problems import build

SHOWN = ("start", "prior", "leaf_played", "known_greedy_moves", "leaf_cost_us", "rollout_cost_us", "simulations",
         "searched_moves", "moves")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--setting", default="auto", choices=list(CANDIDATES))
    ap.add_argument("--out", default=None, help="results file (default map_auto_leaf_played_tS.md)")
    args = ap.parse_args()
    name, solver, opts = CANDIDATES[args.setting]
    sims, limit = budget_of(f"t{args.seconds:g}", args.seconds)
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; {name}; {limit:g} s per run, "
         f"no cap on simulations; seed {args.seed}")
    for r in recipes(args.count, None):
        problem, hw = build(r)
        if problem.n < args.min_n:
            continue
        rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=limit, seed=args.seed,
                         options={**opts, "simulations": sims})
        if not rep.valid:
            raise SystemExit(f"{name} on {label_of(r)}: invalid answer: {rep.violation}")
        cells = "; ".join(f"{key} {rep.stats.get(key, '-')}" for key in SHOWN)
        show(f"{label_of(r)} n={problem.n}: {cells}; objective {rep.objective:.6g}")
    out = args.out or f"map_auto_leaf_played_t{args.seconds:g}.md"
    write_results(out, (f"# The leaf muzero's {name} plays, at {limit:g} s on real-size tuning problems\n\n"
                        "Made by `experiments/map_auto_leaf_played.py` (its docstring says what is printed). "
                        "Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
