"""Choose mcts's rollout depth in prefetch mode on the tuning problems (never the held-out sets).

    nice python experiments/tune_mcts_rollout_depth.py --seconds 10 [--sets tuning,tuning-real,real] \
        [--candidates end,16,64,256,auto] [--csv PATH] [--out tune_mcts_rollout_depth.md]

Problems, each turned to prefetch mode at its capacity as ``mallocgame solve --mode prefetch`` reads it
(``heldout.in_prefetch_mode``; programs without ops are dropped), smallest first within a set:

* ``tuning``: ``level_muzero_mcts.tuning()`` (seeds 201-212, 60-200 buffers; its layered programs have ops);
* ``tuning-real``: ``level_muzero_mcts.tuning_real()`` (seeds 1,960,000-1,960,011: XLA-compiled and model programs
  of 300-800 buffers);
* ``real``: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` prefetch curriculum
  (``--real-count`` recipes, seeds from 1,970,000 that no training stream draws; XLA-compiled, torch-exported and
  layered programs), those of at most ``--max-n`` requested buffers: the real-size ones.

Candidates, solver ``mcts`` with its options given explicitly (so that a later change of default does not change
what a row means): ``end`` (``leaf=rollout``: greedy rollouts to the end of the episode, the prefetch default when
this script was written), ``D`` for a number (``leaf=rollout``, ``rollout_depth=D``: rollouts cut ``D`` steps past
the root), ``auto`` (``leaf=auto``: rollouts where the time per move affords two to the end, else 64 greedy steps
valued by the greedy episode's return to go; the muzero solver's prefetch leaf without a network).

Every run: its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time limit and no cap
on simulations (``--simulations``, default 10^9: equal wall time as ``heldout_muzero_mcts.budget_of("t10")``), seed
``--seed``, through :func:`mallocgame.engine.runner.run_solver` (validated; an invalid answer stops the script).
On problem ``i`` the candidates run in their order rotated by ``i``, so that no candidate always runs first or last
on a loaded machine. Every run is appended to ``--csv`` as it ends; a rerun skips the runs already there (resumes).

Printed: per problem the values and simulations; per candidate the wins/ties/losses against ``--against`` (default
``end``; ties within :data:`mallocgame.problem.objective.TOLERANCE`), the one-sided sign test p (ties dropped),
the families where it has more losses than wins, the mean and median simulations per wall second and per CPU
second of the process, and the mean ratio of its value to the baseline's. ``--repeat-of CSV`` (a first run's CSV):
also each candidate of this run against the same candidate in that run, the run-to-run noise of a 10 s limit on a
loaded machine that a difference between candidates must stand out from.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, read_runs, results_path, run_rotated, tally, write_results
from heldout import Held, in_prefetch_mode
from heldout_muzero_mcts import own_copy
from level_muzero_mcts import sign_test, tuning, tuning_real

from mallocgame.engine.runner import run_solver
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

SETS = ("tuning", "tuning-real", "real")
FIELDS = ["set", "family", "problem", "n", "candidate", "value", "simulations", "seconds", "cpu_seconds",
          "answer_from", "leaf_played"]


def candidate_options(name: str) -> dict:
    """The mcts options of candidate ``name`` (module docstring)."""
    if name == "end":
        return {"leaf": "rollout"}
    if name == "auto":
        return {"leaf": "auto"}
    try:
        depth = int(name)
    except ValueError:
        raise SystemExit(f"--candidates: {name!r} is not end, auto or a number of steps") from None
    if depth < 1:
        raise SystemExit(f"--candidates: a rollout depth is at least 1 step, got {depth}")
    return {"leaf": "rollout", "rollout_depth": depth}


def problems(sets: list[str], real_count: int, max_n: int) -> list[tuple[str, str, str, object, object]]:
    """``(set, family, label, problem, hardware)`` of the tuning problems with ops, in prefetch mode."""
    out = []
    for which in sets:
        if which == "tuning":
            recipes = tuning()
        elif which == "tuning-real":
            recipes = tuning_real()
        else:
            recipes = [r for r in tuning_recipes(named_curriculum("real", "prefetch"), real_count) if r.n <= max_n]
        held = []
        for r in recipes:
            problem, hw = build(r)
            held.append(Held(r.kind, f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}", problem, hw))
        for h in sorted(in_prefetch_mode(held), key=lambda h: h.problem.n):
            out.append((which, f"{which}:{h.family}", h.label, h.problem, h.hardware))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="time limit per run")
    ap.add_argument("--simulations", type=int, default=10**9, help="simulations per move (default: no cap)")
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    ap.add_argument("--candidates", default="end,16,64,256,auto")
    ap.add_argument("--against", default="end", help="the candidate the others are compared with")
    ap.add_argument("--real-count", type=int, default=8, help="tuning_recipes' count for the real set")
    ap.add_argument("--max-n", type=int, default=13_000, help="real set: skip recipes of more buffers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="default: --out with .csv")
    ap.add_argument("--out", default="tune_mcts_rollout_depth.md")
    ap.add_argument("--repeat-of", metavar="CSV", default=None,
                    help="a first run's CSV: also each candidate against itself in that run (the run-to-run noise)")
    args = ap.parse_args()
    sets = args.sets.split(",")
    if any(s not in SETS for s in sets):
        raise SystemExit(f"--sets: give some of {', '.join(SETS)}, got {args.sets!r}")
    names = args.candidates.split(",")
    options = {name: candidate_options(name) for name in names}
    if args.against not in options:
        raise SystemExit(f"--against: {args.against!r} is not among the candidates")
    csv_path = Path(args.csv) if args.csv else results_path(Path(args.out).with_suffix(".csv"))
    done = read_runs(csv_path, "candidate")
    show = Transcript()
    show(f"mcts, prefetch mode, {args.seconds:g} s per run, {args.simulations} simulations per move at most, "
         f"seed {args.seed}; sets {', '.join(sets)} (real: "
         f"tuning_recipes count {args.real_count}, <= {args.max_n} buffers); candidates {', '.join(names)}; "
         f"resumed {len(done)} runs")
    insts = problems(sets, args.real_count, args.max_n)

    def run(i: int, name: str) -> dict:
        which, family, label, problem, hw = insts[i]
        copy = own_copy(problem, hw)
        cpu = time.process_time()
        rep = run_solver("mcts", copy, hw, time_limit=args.seconds, seed=args.seed,
                         options={**options[name], "simulations": args.simulations})
        cpu = time.process_time() - cpu
        if not rep.valid:
            raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
        return {"set": which, "family": family, "problem": label, "n": problem.n, "candidate": name,
                "value": repr(float(rep.objective)), "simulations": rep.stats.get("simulations", 0),
                "seconds": round(rep.seconds, 3), "cpu_seconds": round(cpu, 3),
                "answer_from": rep.stats.get("answer_from", ""), "leaf_played": rep.stats.get("leaf_played", "")}

    def shown(i: int) -> None:
        _, _, label, problem, _ = insts[i]
        show(f"{label} ({problem.n} buffers): " + ", ".join(
            f"{name} {float(done[(label, name)]['value']):.6g} ({done[(label, name)]['simulations']} sims)"
            for name in names))

    preload_solvers(["mcts"])  # the first run's seconds hold no first import
    run_rotated(csv_path, FIELDS, done, [label for _, _, label, _, _ in insts], names, run, after_problem=shown)
    show()
    show(summary(insts, names, args.against, done))
    if args.repeat_of:
        if not Path(args.repeat_of).exists():
            raise SystemExit(f"--repeat-of: no such file {args.repeat_of}")
        show()
        show(f"This run against the same candidate in {Path(args.repeat_of).name} (W/T/L of this run, sign test p):")
        show(repeat_summary(insts, names, done, read_runs(args.repeat_of, "candidate")))
    write_results(args.out, (
        "# mcts's rollout depth in prefetch mode, on the tuning problems\n\n"
        "Made by `experiments/tune_mcts_rollout_depth.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


def repeat_summary(insts: list, names: list[str], done: dict, first: dict) -> str:
    """Each candidate of this run against itself in the ``first`` run, on the problems both ran."""
    lines = []
    for name in names:
        t = tally("prefetch", (("", float(done[(label, name)]["value"]), float(first[(label, name)]["value"]))
                               for _, _, label, _, _ in insts if (label, name) in done and (label, name) in first))
        lines.append(f"- {name}: {t.wins}/{t.ties}/{t.losses}, p = {sign_test(t.wins, t.losses):.3g}"
                     if t.wins + t.ties + t.losses else f"- {name}: no runs")
    return "\n".join(lines)


def summary(insts: list, names: list[str], against: str, done: dict) -> str:
    """The table of every candidate against ``against`` (module docstring)."""
    lines = [f"| candidate | vs {against} W/T/L | sign test p | families behind | mean value / {against}'s "
             "| sims per wall s (mean, median) | sims per CPU s (mean, median) | leaf played |",
             "|---|---|---|---|---|---|---|---|"]
    labels = [(family, label) for _, family, label, _, _ in insts]
    for name in names:
        if any((label, name) not in done or (label, against) not in done for _, label in labels):
            lines.append(f"| {name} | incomplete | | | | | | |")
            continue
        t = tally("prefetch", ((family, float(done[(label, name)]["value"]), float(done[(label, against)]["value"]))
                               for family, label in labels))
        ratios, wall, cpu, played = [], [], [], {}
        for _, label in labels:
            a, b = done[(label, name)], done[(label, against)]
            va, vb = float(a["value"]), float(b["value"])
            if vb > 0:
                ratios.append(va / vb)
            sims = int(a["simulations"])
            wall.append(sims / max(float(a["seconds"]), 1e-9))
            cpu.append(sims / max(float(a["cpu_seconds"]), 1e-9))
            if a["leaf_played"]:
                played[a["leaf_played"]] = played.get(a["leaf_played"], 0) + 1
        behind = [f"{f} ({x}/{y})" for f, (x, y) in t.behind().items()]
        lines.append(f"| {name} | {t.wins}/{t.ties}/{t.losses} | {sign_test(t.wins, t.losses):.3g} | "
                     f"{', '.join(behind) or 'none'} | "
                     f"{statistics.mean(ratios) if ratios else float('nan'):.5f} | "
                     f"{statistics.mean(wall):,.1f}, {statistics.median(wall):,.1f} | "
                     f"{statistics.mean(cpu):,.1f}, {statistics.median(cpu):,.1f} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(played.items())) or '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
