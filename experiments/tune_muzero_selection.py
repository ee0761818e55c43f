"""Choose the guided search's selection rule on the tuning problems only (seeds 201-212; issue 21, item 4).

    nice python experiments/tune_muzero_selection.py [--simulations 16] [--csv PATH]

Settings: ``mcts`` (plain UCT, committing by visits: map mode's default when the set was first run) and solver
``muzero`` with each selection rule of
:data:`mallocgame.search.uct.GUIDED_RULES` x prior (network, uniform, relaxation) x pUCT/UCT constant, and
``untried-uct`` at UCT's constant 1 with the prior's weight ``(k p)`` raised to ``prior_power``. Per
setting: the mean gap to the no-fragmentation bound, wins/ties/losses against ``mcts`` (value within
1e-9 of the bound: a tie), and, for the uniform prior, on how many problems the answer is exactly
``mcts``'s (same objective and same simulation count). Every run goes to ``--csv`` as it ends, and a
rerun skips the runs already there (resumes). The held-out sets (``experiments/heldout.py``) are never read.

``--set tuning-real``: the second tuning set (``level_muzero_mcts.tuning_real``: XLA-compiled and model programs
of 300-800 buffers, curriculum seeds); ``--candidate NAME=CHECKPOINT`` adds the default rule with a network not yet
shipped, committing by visits and by max (settings ``NAME visits``, ``NAME max``)::

    MALLOCGAME_CACHE=... nice python experiments/tune_muzero_selection.py --set tuning-real \
        --candidate xla21=/path/run.g150.pt --csv results/muzero_tuning_real.csv --out muzero_tuning_real.md

``--mode prefetch``: the set's programs with ops in prefetch mode (the first set's random intervals have none).
``--budget t10``: equal wall time (10 s per problem, no cap on simulations), each run on its own copy of the problem
(``heldout_muzero_mcts.own_copy``), rows named ``SETTING @t10``; the comparisons are then against ``mcts @t10``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, results_path, write_results
from heldout import Held, in_prefetch_mode
from heldout_muzero_mcts import budget_of, own_copy
from level_muzero_mcts import TUNING_REAL_SEED, tuning, tuning_real

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search.muzero.problems import build

SETTINGS = [("mcts", "mcts", {})] + [
    (f"{rule} {prior} c{c:g}", "muzero", {"selection": rule, "prior": prior, "exploration": c})
    for rule, cs in (("puct", (10.0,)), ("untried-puct", (10.0,)), ("untried-uct", (1.0, 3.0)))
    for c in cs for prior in ("network", "uniform", "relaxation")] + [
    (f"untried-uct {prior} c1 power{pw:g}", "muzero", {"selection": "untried-uct", "prior": prior, "exploration": 1.0,
                                                      "prior_power": pw})
    for pw in (2.0, 0.5, 3.0, 4.0) for prior in ("network", "relaxation")] + [
    ("untried-uct uniform c1 power2", "muzero", {"selection": "untried-uct", "prior": "uniform", "exploration": 1.0,
                                                 "prior_power": 2.0})] + [
    # the commitment rule (the default one commits the most visited move, which a prior draws visits to)
    (f"untried-uct {prior} c1 power2 commit-max", "muzero", {"selection": "untried-uct", "prior": prior,
                                                            "exploration": 1.0, "prior_power": 2.0, "commit": "max"})
    # the last two: the network joined with the relaxation (search/muzero/guide.BlendedPrior)
    for prior in ("network", "uniform", "relaxation", "network-relaxation-mean", "network-relaxation-product")] + [
    ("mcts commit-max", "mcts", {"commit": "max"})] + [
    # the prior's power fading with a node's visits (search/uct.py, "Guided selection": prior_decay)
    (f"untried-uct network c1 power2 commit-max decay{m:g}", "muzero",
     {"selection": "untried-uct", "prior": "network", "exploration": 1.0, "prior_power": 2.0, "commit": "max",
      "prior_decay": m}) for m in (10.0, 100.0, 1000.0)] + [
    # leaves valued without a rollout to the end (search/uct.py, "Value leaves"): the reference episode's return to
    # go (y = 0, no network: what prefetch mode has), alone or after 16 / 64 greedy steps; the uniform prior
    (f"uniform {leaf}", "muzero", {"prior": "uniform", "commit": "max", **opts}) for leaf, opts in (
        ("value-reference", {"leaf": "value", "leaf_value": "reference"}),
        ("mixed16-reference", {"leaf": "mixed", "leaf_steps": 16, "leaf_value": "reference"}),
        ("mixed64-reference", {"leaf": "mixed", "leaf_steps": 64, "leaf_value": "reference"}),
        ("auto64-reference", {"leaf": "auto", "leaf_steps": 64, "leaf_value": "reference", "auto_simulations": 16}),
        ("auto64a2-reference", {"leaf": "auto", "leaf_steps": 64, "leaf_value": "reference", "auto_simulations": 2}))]
# The settings above without "commit-max" in their name ran when both searches committed by visits in map mode
# (their rows in the CSVs): they keep that rule now that map mode's default is "max" (search/uct.py DEFAULT_COMMIT).
SETTINGS = [(name, solver, opts if "commit" in opts else {**opts, "commit": "visits"}) for name, solver, opts in SETTINGS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulations", type=int, default=16)
    ap.add_argument("--budget", default=None, help="'tS': equal wall time instead, S seconds per problem and no cap on "
                                                   "simulations; each setting then runs on its own copy of the problem "
                                                   "and its rows are named 'SETTING @tS'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--set", default="tuning", choices=("tuning", "tuning-real"),
                    help="tuning-real: level_muzero_mcts.tuning_real, 12 XLA-compiled and model programs of 300-800 "
                         "buffers")
    ap.add_argument("--candidate", metavar="NAME=CHECKPOINT", default=None,
                    help="also the settings 'NAME visits' and 'NAME max': the default rule with that network")
    ap.add_argument("--mode", default="map", choices=("map", "prefetch"),
                    help="prefetch: the set's programs with ops, turned to prefetch mode at their capacity as "
                         "`mallocgame solve --mode prefetch` reads them; rows named 'SETTING prefetch'")
    ap.add_argument("--out", default="muzero_selection_tuning.md")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    csv_path = Path(args.csv) if args.csv else results_path(Path(args.out).with_suffix(".csv"))
    settings = list(SETTINGS)
    if args.candidate:
        name, sep, path = args.candidate.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise SystemExit(f"--candidate: give NAME=CHECKPOINT of an existing file, got {args.candidate!r}")
        settings += [(f"{name} {commit}", "muzero", {"checkpoint": path, "commit": commit})
                     for commit in ("visits", "max")]
    wanted = args.settings.split(",") if args.settings else [s[0] for s in settings]
    timed = bool(args.budget) and args.budget.startswith("t")
    if args.budget and not timed:
        raise SystemExit(f"--budget: give tS (S seconds per problem), got {args.budget!r}; --simulations sets the rest")
    # a timed or prefetch run's rows: their own names, never mixed with the 16-simulation map-mode ones
    tag = (" prefetch" if args.mode == "prefetch" else "") + (f" @{args.budget}" if timed else "")
    sims, limit = budget_of(args.budget, 600.0) if timed else (args.simulations, 600.0)
    settings = [(name + tag, solver, opts) for name, solver, opts in settings]
    wanted = [w + tag for w in wanted]
    done: dict[tuple[str, str], dict] = {}
    if csv_path.exists():
        with open(csv_path) as fh:
            for r in csv.DictReader(fh):
                done[(r["problem"], r["setting"])] = r
    show = Transcript()
    which = "seeds 201-212" if args.set == "tuning" else f"tuning-real, seeds {TUNING_REAL_SEED}-{TUNING_REAL_SEED + 11}"
    budget = f"{limit:g} s per problem, no cap on simulations" if timed else f"{args.simulations} simulations"
    show(f"tuning set ({which}); {args.mode} mode; {budget}; seed {args.seed}; resumed {len(done)} runs")
    insts = []
    for r in (tuning() if args.set == "tuning" else tuning_real()):
        problem, hw = build(r)
        label = f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}"
        if args.mode == "prefetch":
            turned = in_prefetch_mode([Held(r.kind, label, problem, hw)])
            if not turned:  # random intervals have no ops
                continue
            problem = turned[0].problem
        insts.append((label, problem, hw, problem_bound(problem, hw)))
    preload_solvers(solver for name, solver, _ in settings if name in wanted)  # the first run's seconds hold no first import
    new = not csv_path.exists()
    with open(csv_path, "a", newline="") as fh:
        out = csv.writer(fh)
        if new:
            out.writerow(["problem", "n", "setting", "value", "bound", "gap", "simulations", "seconds", "prior_used"])
        for name, solver, opts in settings:
            if name not in wanted:
                continue
            for label, problem, hw, bound in insts:
                if (label, name) in done:
                    continue
                rep = run_solver(solver, own_copy(problem, hw) if timed else problem, hw, time_limit=limit,
                                 seed=args.seed, options={**opts, "simulations": sims}, bound=bound)
                if not rep.valid:
                    raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
                row = {"problem": label, "n": problem.n, "setting": name, "value": rep.objective, "bound": bound.value,
                       "gap": rep.gap, "simulations": rep.stats.get("simulations", 0), "seconds": round(rep.seconds, 2),
                       "prior_used": rep.stats.get("prior", "")}
                out.writerow(list(row.values()))
                fh.flush()
                done[(label, name)] = {k: str(v) for k, v in row.items()}
            show(f"ran {name}")
    show()
    shipped = "untried-uct network c1 power2 commit-max" + tag  # the default search with the shipped network
    show(f"| setting | mean gap | vs mcts W/T/L | same answer as mcts | vs mcts commit-max W/T/L | vs {shipped} W/T/L |")
    show("|---|---|---|---|---|---|")
    labels = [i[0] for i in insts]

    def versus(rows: list[dict], other: str) -> tuple[str, int]:
        if any((lb, other) not in done for lb in labels):
            return "-", 0
        w = t = lo = same = 0
        for r, b in zip(rows, (done[(lb, other)] for lb in labels)):
            d = float(r["value"]) - float(b["value"])
            if abs(d) <= 1e-9 * max(float(r["bound"]), 1e-300):
                t += 1
            elif d > 0:
                w += 1
            else:
                lo += 1
            same += r["value"] == b["value"] and r["simulations"] == b["simulations"]
        return f"{w}/{t}/{lo}", same

    for name, _, opts in settings:
        if name not in wanted or any((lb, name) not in done for lb in labels):
            continue
        rows = [done[(lb, name)] for lb in labels]
        vs_mcts, same = versus(rows, "mcts" + tag)
        gap = statistics.mean(float(r["gap"]) for r in rows)
        show(f"| {name} | {gap:.3%} | {vs_mcts} | {same}/{len(rows)} | {versus(rows, 'mcts commit-max' + tag)[0]} "
             f"| {versus(rows, shipped)[0]} |")
    write_results(args.out, (
        "# Selection rule of the guided search, chosen on the tuning set (issue 21, item 4)\n\n"
        "Made by `experiments/tune_muzero_selection.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
