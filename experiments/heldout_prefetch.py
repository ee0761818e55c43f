"""The prefetch network against plain MCTS and msa on the held-out protocol in prefetch mode (issue 21, items 3 and 5).

    OMP_NUM_THREADS=1 nice -n 10 python experiments/heldout_prefetch.py --budgets 16 --max-n 250
    OMP_NUM_THREADS=1 nice -n 10 python experiments/heldout_prefetch.py --budgets t10

Problems: :func:`heldout.held_out_prefetch` (fixed in code before any run: the small fresh-seed set
``prefetch_recipes``, 150-250 buffers; the generated held-out problems with ops, 150-2,000 buffers; the
realistic suite, the HLO fixtures and the ``xla`` suite at their held-out capacities), each turned to prefetch
mode; all in one list, smallest first, so a run cut short has every family at the small sizes. ``--max-n`` /
``--min-n`` bound the sizes (16 simulations per move on a prefetch game cost minutes past ~250 buffers).
``--confirmation SHA256`` runs the confirmation set instead: :func:`heldout.confirmation` drawn from the prefetch
network's hash (refused for any other), its problems with ops turned to prefetch mode; reported as it comes out.

Contestants (all through :func:`mallocgame.engine.runner.run_solver`: validated, scored against the prefetch bound):
``muzero`` (solver ``muzero`` with ``checkpoint=`` the shipped prefetch network, ``search/muzero/checkpoints/prefetch.pt``;
the run stops if ``stats["prior"]`` says anything but ``network``), ``mcts`` (its defaults), ``uniform`` (solver
``muzero`` with ``prior=uniform``: ``mcts`` by construction until prefetch mode's default leaf became ``auto``),
``default`` (solver ``muzero`` as shipped, no option) and ``msa`` (XLA's memory-space assignment, deterministic;
no simulations). Budget ``16``: 16 simulations per move under ``--time-limit`` (a run the clock bound is marked
``*``); budget ``tS``: S seconds per problem, no cap on simulations. Seed ``--seed`` for every run.

Every run is appended to ``--csv`` as it ends and a rerun skips what is there, so the script resumes (the loop is
``heldout_muzero_mcts.run_heldout``, shared with the map-mode script). The
summary (``heldout_muzero_mcts.summary``) counts only problems every listed contestant finished: per family and
overall, mean gaps, wins/ties/losses (a tie: values within 1e-9 of the bound), the one-sided sign test.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import Transcript, fenced, write_results
from heldout import confirmation_for, held_out_prefetch, in_prefetch_mode, with_candidate
from heldout_muzero_mcts import read_csvs, run_heldout, summary

CHECKPOINT = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "prefetch.pt"
# "muzero": the prefetch network's search; "default": the muzero solver as shipped, no option (in prefetch mode the
# uniform prior and leaf=auto since that default was chosen; "uniform" then plays auto leaves too, before it was mcts)
CONTESTANTS = {"muzero": ("muzero", {"checkpoint": str(CHECKPOINT)}), "mcts": ("mcts", {}),
               "uniform": ("muzero", {"prior": "uniform"}), "msa": ("msa", {}), "default": ("muzero", {})}
SEARCHES = ("muzero", "mcts", "uniform", "default")  # take a simulation budget
PAIRS = (("muzero", "mcts"), ("muzero", "msa"), ("mcts", "msa"), ("muzero", "uniform"), ("uniform", "mcts"),
         ("default", "mcts"), ("default", "msa"), ("default", "muzero"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="16")
    ap.add_argument("--contestants", default="muzero,mcts,msa")
    ap.add_argument("--families", default="small,generated,suite,hlo,xla,torch")
    ap.add_argument("--max-n", type=int, default=None)
    ap.add_argument("--min-n", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default="heldout_prefetch.csv",
                    help="runs are appended here; with --summary-only several CSVs, comma-separated (runs split over processes)")
    ap.add_argument("--out", default="heldout_prefetch.md")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--candidate", metavar="NAME=CHECKPOINT", default=None,
                    help="also a contestant NAME: the muzero solver with CHECKPOINT (a network not yet shipped)")
    ap.add_argument("--confirmation", metavar="SHA256", default=None,
                    help="run the confirmation set drawn from prefetch.pt's SHA-256 (not the held-out set)")
    args = ap.parse_args()
    budgets, wanted = args.budgets.split(","), args.contestants.split(",")
    contestants, pairs = with_candidate(CONTESTANTS, PAIRS, args.candidate, ("mcts", "muzero", "msa"))
    unknown = sorted(set(wanted) - set(contestants))
    if unknown:
        raise SystemExit(f"--contestants: unknown {', '.join(unknown)} (known: {', '.join(contestants)})")
    csv_path, names, rows = read_csvs(args.csv, args.summary_only)
    show = Transcript()
    if not args.summary_only:
        run(args, budgets, wanted, csv_path, rows, show, contestants)
    show(f"summary of {names} ({len(rows)} runs); contestants {', '.join(wanted)}")
    summary(rows, budgets, wanted, show, pairs=pairs)
    write_results(args.out, (
        "# Held-out protocol in prefetch mode: muzero with the prefetch network vs mcts vs msa (issue 21)\n\n"
        "Made by `experiments/heldout_prefetch.py` (its docstring says what is compared and how). "
        f"Every run is in `{names}`. Output as printed:\n\n" + fenced(show.text)))


def run(args, budgets, wanted, csv_path: Path, rows: list[dict], show, contestants=CONTESTANTS) -> None:
    held, title = held_out_prefetch, "prefetch held-out"
    if args.confirmation is not None:
        drawn = confirmation_for(args, CHECKPOINT, in_prefetch_mode)
        held, title = (lambda families: drawn), f"prefetch confirmation set of {CHECKPOINT.name}"
    searches = SEARCHES + tuple(c for c in contestants if c not in CONTESTANTS)  # a candidate network searches
    run_heldout(args, held, contestants, budgets, wanted, csv_path, rows, show, title=title,
                searches=searches, on_row=_check_row,
                prefix=lambda h, budget: f"{h.family:<9} {h.label:<40}{h.problem.n:>6} {budget:>3} ")


def _check_row(h, name: str, rep, row: dict) -> None:
    """Stop if ``muzero`` (or a candidate network) did not play its network; record the exploration constant the
    search used."""
    if name not in ("mcts", "msa", "uniform", "default") and rep.stats.get("prior") != "network":
        raise SystemExit(f"{name} on {h.label}: played prior {rep.stats.get('prior')!r}, not the network")
    row["exploration"] = rep.stats.get("exploration", "")


if __name__ == "__main__":
    main()
