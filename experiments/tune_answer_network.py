"""A network trained in the answer's order against ``mcts`` at ``start=answer``, at equal wall time on real-size tuning problems.

    nice python experiments/tune_answer_network.py --checkpoint /work/runs/anet/run/run.pt --seconds 10 --count 24 \
        [--csv PATH] [--out NAME]

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` map-mode curriculum (``--count``
recipes, sizes spread over 1,000-15,000 requested buffers, seeds from 1,970,000 that no training stream draws and no
held-out set holds), those of at least ``--min-n`` buffers, in order of requested size; never the held-out sets.

Settings, each through :func:`mallocgame.engine.runner.run_solver` (validated; an invalid answer stops the script) on
its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time limit, no cap on simulations,
seed ``--seed``: ``muzero`` with ``start=answer`` and ``checkpoint=--checkpoint`` (a network trained in the answer's
order, ``experiments/train_muzero_expert.py --order answer``: it plays the game of ``start=answer``), and ``mcts`` with
``start=answer``. On problem ``i`` the settings run in their order rotated by ``i``. Every run is appended to
``--csv`` as it ends; a rerun skips the runs there.

Printed: per problem each setting's gap to the bound, simulations, prior and where the answer came from; then muzero
against mcts: wins/ties/losses (ties within :data:`mallocgame.problem.objective.TOLERANCE`), the one-sided sign test p
(ties dropped) and the families with more losses than wins, and per setting the mean gap.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, read_runs, results_path, run_rotated, tally, write_results
from heldout_muzero_mcts import budget_of
from level_muzero_mcts import sign_test
from tune_map_start import Problems, recipes, run_row

FIELDS = ["family", "problem", "n", "setting", "value", "bound", "gap", "simulations", "seconds", "prior",
          "network_evaluations", "start", "answer_from"]
STATS = ("simulations", "prior", "network_evaluations", "start", "answer_from")
NETWORK, MCTS = "muzero start=answer answer-net", "mcts start=answer"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="results file (default tune_answer_network_tS_cC.md)")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    out_name = args.out or f"tune_answer_network_t{args.seconds:g}_c{args.count}.md"
    csv_path = Path(args.csv) if args.csv else results_path(Path(out_name).with_suffix(".csv"))
    sims, limit = budget_of(f"t{args.seconds:g}", args.seconds)
    settings = {NETWORK: ("muzero", {"start": "answer", "checkpoint": args.checkpoint}),
                MCTS: ("mcts", {"start": "answer"})}
    done = read_runs(csv_path, "setting")
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; {limit:g} s per run, no cap on "
         f"simulations; seed {args.seed}; checkpoint {args.checkpoint}; resumed {len(done)} runs")
    labels = run_all(args, settings, done, csv_path, sims, limit, show)
    summarise(labels, done, show)
    write_results(out_name, (
        f"# A network trained in the answer's order against mcts at start=answer ({limit:g} s, real-size tuning "
        "problems)\n\nMade by `experiments/tune_answer_network.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


def run_all(args, settings: dict, done: dict, csv_path: Path, sims: int, limit: float, show) -> list[str]:
    """Every setting on every tuning problem, in the rotated order of :func:`_common.run_rotated`, appended to
    ``csv_path`` (a rerun resumes); the problems' labels."""
    names = list(settings)
    insts = Problems(recipes(args.count, None), args.min_n, done, names)

    def run(i: int, name: str) -> dict:
        return run_row(insts, settings, i, name, limit=limit, sims=sims, seed=args.seed, stats=STATS)

    preload_solvers(solver for solver, _ in settings.values())  # the first run's seconds hold no first import
    run_rotated(csv_path, FIELDS, done, insts, names, run,
                after_problem=lambda i: show_problem(show, insts.labels[i], done, names))
    return insts.labels


def show_problem(show, label: str, done: dict, names: list[str]) -> None:
    cells = []
    for name in names:
        row = done[(label, name)]
        cells.append(f"{name} {float(row['gap']):.3%} ({row['simulations']} sim, {row['prior'] or '-'}, "
                     f"{row['answer_from']})")
    show(f"{label:34s} {done[(label, names[0])]['n']:>6s}  " + "  ".join(cells))


def summarise(labels: list[str], done: dict, show) -> None:
    show()
    show("| setting | against | W/T/L | p | families behind |")
    show("|---|---|---|---|---|")
    t = tally("map", ((done[(lb, NETWORK)]["family"], float(done[(lb, NETWORK)]["value"]),
                       float(done[(lb, MCTS)]["value"])) for lb in labels))
    behind = ", ".join(f"{f} {w}/{lo}" for f, (w, lo) in sorted(t.behind().items())) or "none"
    show(f"| {NETWORK} | {MCTS} | {t.wins}/{t.ties}/{t.losses} | {sign_test(t.wins, t.losses):.3g} | {behind} |")
    show()
    show("| setting | mean gap | network played |")
    show("|---|---|---|")
    for name in (NETWORK, MCTS):
        rows = [done[(lb, name)] for lb in labels]
        network = sum(r["prior"] == "network" for r in rows)
        show(f"| {name} | {statistics.mean(float(r['gap']) for r in rows):.3%} | {network}/{len(rows)} |")


if __name__ == "__main__":
    main()
