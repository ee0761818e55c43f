"""Choose muzero's focus (moves the network is sure of go unsearched) at equal wall time on real-size tuning problems.

    nice python experiments/tune_muzero_focus.py --seconds 10 [--count 12] [--focus 0.5,0.8] [--csv PATH]

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` map-mode curriculum (``--count``
recipes, sizes spread over 1,000-15,000 requested buffers, seeds from 1,970,000 that no training stream draws and no
held-out set holds; XLA-compiled, torch-exported, layered and interval programs), those of at least ``--min-n``
buffers; never the held-out sets.

Settings, each through :func:`mallocgame.engine.runner.run_solver` (validated; an invalid answer stops the script) on
its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time limit, no cap on simulations,
seed ``--seed``: ``mcts`` (its defaults), ``muzero`` (its defaults) and ``focus=F`` (``muzero`` with option
``focus=F``: a move whose network prior gives the greedy's choice at least ``F`` is committed to it unsearched;
``search/uct.py``, "Focus"). On problem ``i`` the settings run in their order rotated by ``i``, so that none always
runs first or last on a loaded machine. Every run is appended to ``--csv`` as it ends; a rerun skips the runs there.

Printed: per problem each setting's gap to the bound, simulations and moves searched; per setting the mean gap,
wins/ties/losses against ``mcts`` (ties within :data:`mallocgame.problem.objective.TOLERANCE`) with the one-sided
sign test p (ties dropped), the families with more losses than wins, and on how many problems the network played.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, read_runs, results_path, run_rotated, tally, write_results
from heldout_muzero_mcts import budget_of, own_copy
from level_muzero_mcts import sign_test

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

FIELDS = ["family", "problem", "n", "setting", "value", "bound", "gap", "simulations", "searched_moves",
          "focused_moves", "seconds", "prior", "answer_from"]


def settings(focus: list[float]) -> list[tuple[str, str, dict]]:
    """``(name, solver, options)`` of every setting (module docstring)."""
    return [("mcts", "mcts", {}), ("muzero", "muzero", {})] + [
        (f"focus={f:g}", "muzero", {"focus": f}) for f in focus]


def problems(count: int, min_n: int) -> list[tuple[str, str, object, object]]:
    """``(family, label, problem, hardware)`` of the real-size tuning recipes, smallest first."""
    out = []
    for r in tuning_recipes(named_curriculum("real", "map"), count=count):
        problem, hw = build(r)
        if problem.n >= min_n:
            out.append((r.kind, f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}", problem, hw))
    return sorted(out, key=lambda p: p[2].n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--focus", default="0.5,0.8", help="comma-separated focus values (each in (0, 1])")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="results file (default tune_muzero_focus_tS.md)")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    try:
        focus = [float(f) for f in args.focus.split(",") if f]
    except ValueError:
        raise SystemExit(f"--focus: give comma-separated numbers, got {args.focus!r}") from None
    if any(not 0 < f <= 1 for f in focus):
        raise SystemExit(f"--focus: every value in (0, 1], got {args.focus!r}")
    out_name = args.out or f"tune_muzero_focus_t{args.seconds:g}.md"
    csv_path = Path(args.csv) if args.csv else results_path(Path(out_name).with_suffix(".csv"))
    sims, limit = budget_of(f"t{args.seconds:g}", args.seconds)
    chosen = settings(focus)
    done = read_runs(csv_path, "setting")
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; {limit:g} s per run, no cap on "
         f"simulations; seed {args.seed}; settings {', '.join(s[0] for s in chosen)}; resumed {len(done)} runs")
    insts = problems(args.count, args.min_n)

    def run(i: int, name: str) -> dict:
        family, label, problem, hw = insts[i]
        solver, opts = by_name[name]
        if i not in bounds:
            bounds[i] = problem_bound(problem, hw)
        rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=limit, seed=args.seed,
                         options={**opts, "simulations": sims}, bound=bounds[i])
        if not rep.valid:
            raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
        return {"family": family, "problem": label, "n": problem.n, "setting": name, "value": rep.objective,
                "bound": bounds[i].value, "gap": rep.gap, "simulations": rep.stats.get("simulations", 0),
                "searched_moves": rep.stats.get("searched_moves", ""),
                "focused_moves": rep.stats.get("focused_moves", ""), "seconds": round(rep.seconds, 2),
                "prior": rep.stats.get("prior", ""), "answer_from": rep.stats.get("answer_from", "")}

    def shown(i: int) -> None:
        _, label, problem, _ = insts[i]
        cells = [f"{name} {float(done[(label, name)]['gap']):.3%} ({done[(label, name)]['simulations']} sim, "
                 f"{done[(label, name)]['searched_moves']} searched)" for name, _, _ in chosen]
        show(f"{label:34s} {problem.n:6d}  " + "  ".join(cells))

    by_name = {name: (solver, opts) for name, solver, opts in chosen}
    bounds = {}
    labels = [lb for _, lb, _, _ in insts]
    preload_solvers(solver for _, solver, _ in chosen)  # the first run's seconds hold no first import
    run_rotated(csv_path, FIELDS, done, labels, [name for name, _, _ in chosen], run, after_problem=shown)
    show()
    show("| setting | mean gap | vs mcts W/T/L | p | families behind | network played |")
    show("|---|---|---|---|---|---|")
    for name, _, _ in chosen:
        rows = [done[(lb, name)] for lb in labels]
        t = tally("map", ((r["family"], float(r["value"]), float(done[(r["problem"], "mcts")]["value"])) for r in rows))
        behind = ", ".join(sorted(t.behind())) or "none"
        network = sum(r["prior"] == "network" for r in rows)
        show(f"| {name} | {statistics.mean(float(r['gap']) for r in rows):.3%} | {t.wins}/{t.ties}/{t.losses} | "
             f"{sign_test(t.wins, t.losses):.3g} | {behind} | {network}/{len(rows)} |")
    write_results(out_name, (
        f"# muzero's focus at equal wall time ({limit:g} s) on real-size tuning problems\n\n"
        "Made by `experiments/tune_muzero_focus.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
