"""Choose where map mode's search starts (option ``start`` of mcts and muzero) at equal wall time on real-size tuning problems.

    nice python experiments/tune_map_start.py --seconds 10 [--count 12] [--csv PATH] [--solvers mcts]

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` map-mode curriculum (``--count``
recipes, sizes spread over 1,000-15,000 requested buffers, seeds from 1,970,000 that no training stream draws and no
held-out set holds; XLA-compiled, torch-exported, layered and interval programs), those of at least ``--min-n``
buffers; never the held-out sets.

Settings, each through :func:`mallocgame.engine.runner.run_solver` (validated; an invalid answer stops the script) on
its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time limit, no cap on simulations,
seed ``--seed``: ``mcts`` and ``muzero`` with option ``start=game`` (the fixed-order game in greedy-xla's order) and
with ``start=answer`` (the search starts from the best fallback answer: ``search/uct.py`` ``answer_game``, what it plays
depends on the code it runs at, which the records name). muzero's network was trained on greedy-xla's order.
Problems run in order of requested size; on problem ``i`` the settings run in their order rotated by ``i``, so that
none always runs first or last on a loaded machine. ``--solvers``: the settings of these solvers only (e.g. ``mcts``,
the check of a longer limit in half the time), and the comparisons among them. Every run is appended to ``--csv`` as
it ends; a rerun skips the runs there.

Printed: per problem each setting's gap to the bound, simulations and where the answer came from; then each
comparison (``start=answer`` against ``start=game`` for each solver, and muzero against mcts at ``start=answer``):
wins/ties/losses (ties within :data:`mallocgame.problem.objective.TOLERANCE`), the one-sided sign test p (ties
dropped) and the families with more losses than wins; per setting the mean gap and on how many problems the answer
is the search's own (a committed path or rollout) rather than a fallback answer or the game's greedy episode.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from _common import Transcript, fenced, results_path, tally, write_results
from heldout_muzero_mcts import budget_of, own_copy
from level_muzero_mcts import sign_test

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

FIELDS = ["family", "problem", "n", "setting", "value", "bound", "gap", "simulations", "searched_moves", "seconds",
          "prior", "start", "answer_from"]
#: ``(name, solver, options)`` of every setting.
SETTINGS = [("mcts start=game", "mcts", {"start": "game"}), ("mcts start=answer", "mcts", {"start": "answer"}),
            ("muzero start=game", "muzero", {"start": "game"}), ("muzero start=answer", "muzero", {"start": "answer"})]
#: ``(setting, against)``: the comparisons printed.
COMPARISONS = [("mcts start=answer", "mcts start=game"), ("muzero start=answer", "muzero start=game"),
               ("muzero start=answer", "mcts start=answer"), ("muzero start=game", "mcts start=game")]
#: An answer the search found itself past its start (anything else is a fallback answer or the game's greedy
#: episode, which with start=answer replays the best fallback answer).
SEARCHED = ("rollout", "committed")


def problems(count: int, min_n: int):
    """``(family, label, problem, hardware)`` of the real-size tuning recipes in order of requested size, built one at a
    time (24 real-size programs held at once take about 6 GB)."""
    for r in sorted(tuning_recipes(named_curriculum("real", "map"), count=count), key=lambda r: (r.n, r.seed)):
        problem, hw = build(r)
        if problem.n >= min_n:
            yield r.kind, f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}", problem, hw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="results file (default tune_map_start_tS.md)")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--solvers", default="mcts,muzero", help="the settings of these solvers (comma list)")
    args = ap.parse_args()
    wanted = set(args.solvers.split(","))
    settings = [s for s in SETTINGS if s[1] in wanted]
    names = {s[0] for s in settings}
    comparisons = [c for c in COMPARISONS if set(c) <= names]
    out_name = args.out or f"tune_map_start_t{args.seconds:g}.md"
    csv_path = Path(args.csv) if args.csv else results_path(Path(out_name).with_suffix(".csv"))
    sims, limit = budget_of(f"t{args.seconds:g}", args.seconds)
    done: dict[tuple[str, str], dict] = {}
    if csv_path.exists():
        with open(csv_path) as fh:
            done = {(r["problem"], r["setting"]): r for r in csv.DictReader(fh)}
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; {limit:g} s per run, no cap on "
         f"simulations; seed {args.seed}; settings {', '.join(s[0] for s in settings)}; resumed {len(done)} runs")
    labels = []
    new = not csv_path.exists()
    with open(csv_path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for i, (family, label, problem, hw) in enumerate(problems(args.count, args.min_n)):
            labels.append(label)
            bound = problem_bound(problem, hw)
            for name, solver, opts in settings[i % len(settings):] + settings[:i % len(settings)]:
                if (label, name) in done:
                    continue
                rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=limit, seed=args.seed,
                                 options={**opts, "simulations": sims}, bound=bound)
                if not rep.valid:
                    raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
                row = {"family": family, "problem": label, "n": problem.n, "setting": name, "value": rep.objective,
                       "bound": bound.value, "gap": rep.gap, "simulations": rep.stats.get("simulations", 0),
                       "searched_moves": rep.stats.get("searched_moves", ""), "seconds": round(rep.seconds, 2),
                       "prior": rep.stats.get("prior", ""), "start": rep.stats.get("start", ""),
                       "answer_from": rep.stats.get("answer_from", "")}
                writer.writerow(row)
                fh.flush()
                done[(label, name)] = {k: str(v) for k, v in row.items()}
            cells = [f"{name} {float(done[(label, name)]['gap']):.3%} ({done[(label, name)]['simulations']} sim, "
                     f"{done[(label, name)]['answer_from']})" for name, _, _ in settings]
            show(f"{label:34s} {problem.n:6d}  " + "  ".join(cells))
    show()
    show("| setting | against | W/T/L | p | families behind |")
    show("|---|---|---|---|---|")
    for name, against in comparisons:
        t = tally("map", ((done[(lb, name)]["family"], float(done[(lb, name)]["value"]),
                           float(done[(lb, against)]["value"])) for lb in labels))
        behind = ", ".join(sorted(t.behind())) or "none"
        show(f"| {name} | {against} | {t.wins}/{t.ties}/{t.losses} | {sign_test(t.wins, t.losses):.3g} | {behind} |")
    show()
    show("| setting | mean gap | answer the search's own | network played |")
    show("|---|---|---|---|")
    for name, _, _ in settings:
        rows = [done[(lb, name)] for lb in labels]
        own = sum(r["answer_from"] in SEARCHED for r in rows)
        network = sum(r["prior"] == "network" for r in rows)
        show(f"| {name} | {statistics.mean(float(r['gap']) for r in rows):.3%} | {own}/{len(rows)} | "
             f"{network}/{len(rows)} |")
    write_results(out_name, (
        f"# Where map mode's search starts, at equal wall time ({limit:g} s) on real-size tuning problems\n\n"
        "Made by `experiments/tune_map_start.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
