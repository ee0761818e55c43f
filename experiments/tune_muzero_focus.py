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
import csv
import statistics
from pathlib import Path

from _common import Transcript, fenced, results_path, write_results
from heldout_muzero_mcts import budget_of, own_copy
from level_muzero_mcts import sign_test

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.problem.objective import better
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
    done: dict[tuple[str, str], dict] = {}
    if csv_path.exists():
        with open(csv_path) as fh:
            done = {(r["problem"], r["setting"]): r for r in csv.DictReader(fh)}
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; {limit:g} s per run, no cap on "
         f"simulations; seed {args.seed}; settings {', '.join(s[0] for s in chosen)}; resumed {len(done)} runs")
    insts = problems(args.count, args.min_n)
    new = not csv_path.exists()
    with open(csv_path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        for i, (family, label, problem, hw) in enumerate(insts):
            bound = problem_bound(problem, hw)
            for name, solver, opts in chosen[i % len(chosen):] + chosen[:i % len(chosen)]:
                if (label, name) in done:
                    continue
                rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=limit, seed=args.seed,
                                 options={**opts, "simulations": sims}, bound=bound)
                if not rep.valid:
                    raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
                row = {"family": family, "problem": label, "n": problem.n, "setting": name, "value": rep.objective,
                       "bound": bound.value, "gap": rep.gap, "simulations": rep.stats.get("simulations", 0),
                       "searched_moves": rep.stats.get("searched_moves", ""),
                       "focused_moves": rep.stats.get("focused_moves", ""), "seconds": round(rep.seconds, 2),
                       "prior": rep.stats.get("prior", ""), "answer_from": rep.stats.get("answer_from", "")}
                writer.writerow(row)
                fh.flush()
                done[(label, name)] = {k: str(v) for k, v in row.items()}
            cells = [f"{name} {float(done[(label, name)]['gap']):.3%} ({done[(label, name)]['simulations']} sim, "
                     f"{done[(label, name)]['searched_moves']} searched)" for name, _, _ in chosen]
            show(f"{label:34s} {problem.n:6d}  " + "  ".join(cells))
    show()
    labels = [lb for _, lb, _, _ in insts]
    show("| setting | mean gap | vs mcts W/T/L | p | families behind | network played |")
    show("|---|---|---|---|---|---|")
    for name, _, _ in chosen:
        rows = [done[(lb, name)] for lb in labels]
        w = t = lo = 0
        per_family: dict[str, list[int]] = {}
        for r in rows:
            base = done[(r["problem"], "mcts")]
            fam = per_family.setdefault(r["family"], [0, 0])
            if better("map", float(r["value"]), float(base["value"])):
                w += 1
                fam[0] += 1
            elif better("map", float(base["value"]), float(r["value"])):
                lo += 1
                fam[1] += 1
            else:
                t += 1
        behind = ", ".join(f for f, (fw, fl) in sorted(per_family.items()) if fl > fw) or "none"
        network = sum(r["prior"] == "network" for r in rows)
        show(f"| {name} | {statistics.mean(float(r['gap']) for r in rows):.3%} | {w}/{t}/{lo} | "
             f"{sign_test(w, lo):.3g} | {behind} | {network}/{len(rows)} |")
    write_results(out_name, (
        f"# muzero's focus at equal wall time ({limit:g} s) on real-size tuning problems\n\n"
        "Made by `experiments/tune_muzero_focus.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
