"""The prefetch network against plain MCTS and msa on the held-out protocol in prefetch mode (issue 21, items 3 and 5).

    OMP_NUM_THREADS=1 nice -n 10 python experiments/heldout_prefetch.py --budgets 16 --max-n 250
    OMP_NUM_THREADS=1 nice -n 10 python experiments/heldout_prefetch.py --budgets t10

Problems: :func:`heldout.held_out_prefetch` (fixed in code before any run: the small fresh-seed set
``prefetch_recipes``, 150-250 buffers; the generated held-out problems with ops, 150-2,000 buffers; the
realistic suite, the HLO fixtures and the ``xla`` suite at their held-out capacities), each turned to prefetch
mode; all in one list, smallest first, so a run cut short has every family at the small sizes. ``--max-n`` /
``--min-n`` bound the sizes (16 simulations per move on a prefetch game cost minutes past ~250 buffers).

Contestants (all through :func:`mallocgame.runner.run_solver`: validated, scored against the prefetch bound):
``muzero`` (solver ``muzero`` with ``checkpoint=`` the shipped prefetch network, ``search/muzero/checkpoints/prefetch.pt``;
the run stops if ``stats["prior"]`` says anything but ``network``), ``mcts`` (its defaults), ``uniform`` (solver
``muzero`` with ``prior=uniform``: ``mcts`` by construction) and ``msa`` (XLA's memory-space assignment, deterministic;
no simulations). Budget ``16``: 16 simulations per move under ``--time-limit`` (a run the clock bound is marked
``*``); budget ``tS``: S seconds per problem, no cap on simulations. Seed ``--seed`` for every run.

Every run is appended to ``--csv`` as it ends and a rerun skips what is there, so the script resumes. The
summary (``heldout_muzero_mcts.summary``) counts only problems every listed contestant finished: per family and
overall, mean gaps, wins/ties/losses (a tie: values within 1e-9 of the bound), the one-sided sign test.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from _common import Transcript, fenced, results_path, write_results
from heldout import held_out_prefetch
from heldout_muzero_mcts import FIELDS, budget_of, read_rows, summary

from mallocgame.runner import problem_bound, run_solver

CHECKPOINT = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "prefetch.pt"
CONTESTANTS = {"muzero": ("muzero", {"checkpoint": str(CHECKPOINT)}), "mcts": ("mcts", {}),
               "uniform": ("muzero", {"prior": "uniform"}), "msa": ("msa", {})}
SEARCHES = ("muzero", "mcts", "uniform")  # take a simulation budget
PAIRS = (("muzero", "mcts"), ("muzero", "msa"), ("mcts", "msa"), ("muzero", "uniform"), ("uniform", "mcts"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="16")
    ap.add_argument("--contestants", default="muzero,mcts,msa")
    ap.add_argument("--families", default="small,generated,suite,hlo,xla")
    ap.add_argument("--max-n", type=int, default=None)
    ap.add_argument("--min-n", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default="heldout_prefetch.csv")
    ap.add_argument("--out", default="heldout_prefetch.md")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    budgets, wanted = args.budgets.split(","), args.contestants.split(",")
    unknown = sorted(set(wanted) - set(CONTESTANTS))
    if unknown:
        raise SystemExit(f"--contestants: unknown {', '.join(unknown)} (known: {', '.join(CONTESTANTS)})")
    csv_path = results_path(args.csv)
    rows = read_rows(csv_path)
    show = Transcript()
    if not args.summary_only:
        run(args, budgets, wanted, csv_path, rows, show)
    show(f"summary of {csv_path.name} ({len(rows)} runs); contestants {', '.join(wanted)}")
    summary(rows, budgets, wanted, show, pairs=PAIRS)
    write_results(args.out, (
        "# Held-out protocol in prefetch mode: muzero with the prefetch network vs mcts vs msa (issue 21)\n\n"
        "Made by `experiments/heldout_prefetch.py` (its docstring says what is compared and how). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


def run(args, budgets, wanted, csv_path: Path, rows: list[dict], show) -> None:
    done = {(r["problem"], int(r["n"]), r["budget"], r["contestant"]) for r in rows}
    show(f"prefetch held-out families {args.families}; budgets {args.budgets}; contestants {args.contestants}; "
         f"seed {args.seed}; time limit {args.time_limit:g}s; max n {args.max_n}; min n {args.min_n}; "
         f"resumed {len(done)} runs")
    insts = sorted(held_out_prefetch(tuple(args.families.split(","))), key=lambda h: (h.problem.n, h.label))
    insts = [h for h in insts if (args.max_n is None or h.problem.n <= args.max_n)
             and (args.min_n is None or h.problem.n >= args.min_n)]
    new = not csv_path.exists()
    with open(csv_path, "a", newline="") as fh:
        out = csv.DictWriter(fh, FIELDS)
        if new:
            out.writeheader()
        for h in insts:
            bound = None
            for budget in budgets:
                cells = []
                for name in wanted:
                    if (h.label, h.problem.n, budget, name) in done:
                        continue
                    bound = bound or problem_bound(h.problem, h.hardware)
                    solver, opts = CONTESTANTS[name]
                    sims, limit = budget_of(budget, args.time_limit)
                    options = {**opts, "simulations": sims} if name in SEARCHES else dict(opts)
                    t0 = time.monotonic()
                    rep = run_solver(solver, h.problem, h.hardware, time_limit=limit, seed=args.seed,
                                     options=options, bound=bound)
                    secs = time.monotonic() - t0
                    if not rep.valid:
                        raise SystemExit(f"{name} on {h.label}: invalid answer: {rep.violation}")
                    st = rep.stats
                    if name == "muzero" and st.get("prior") != "network":
                        raise SystemExit(f"muzero on {h.label}: played prior {st.get('prior')!r}, not the network")
                    searched = name in SEARCHES
                    row = {"family": h.family, "problem": h.label, "n": h.problem.n, "budget": budget,
                           "contestant": name, "value": rep.objective, "bound": bound.value, "gap": rep.gap,
                           "seconds": round(secs, 2), "simulations": st.get("simulations", 0),
                           "clock_bound": searched and (st.get("finished_greedily_at") is not None
                                                        or st.get("simulations", 0) < sims * st.get("searched_moves", 0)),
                           "selection": st.get("selection", ""), "exploration": st.get("exploration", ""),
                           "prior": st.get("prior", ""), "answer_from": st.get("answer_from", "")}
                    out.writerow(row)
                    fh.flush()
                    rows.append(row)
                    cells.append(row)
                if cells:
                    show(f"{h.family:<9} {h.label:<40}{h.problem.n:>6} {budget:>3} " + " ".join(
                        f"{r['contestant']} {r['gap']:7.3%}{'*' if r['clock_bound'] else ' '}"
                        f"({r['seconds']:.0f}s {r['simulations']} sim)" for r in cells))
    show()


if __name__ == "__main__":
    main()
