"""Choose where map mode's search starts (option ``start`` of mcts and muzero), and muzero's settings there, at equal
wall time on real-size tuning problems.

    nice python experiments/tune_map_start.py --seconds 10 [--count 12] [--csv PATH] [--solvers mcts]
    nice python experiments/tune_map_start.py --seconds 10 --count 12 --settings relax,auto,relax-auto [--not-in 12]

Problems: :func:`mallocgame.search.muzero.problems.tuning_recipes` of the ``real`` map-mode curriculum (``--count``
recipes, sizes spread over 1,000-15,000 requested buffers, seeds from 1,970,000 that no training stream draws and no
held-out set holds; XLA-compiled, torch-exported, layered and interval programs), those of at least ``--min-n``
buffers and, with ``--not-in C``, none of the ``C``-recipe set (a second tuning set apart from the first); never the
held-out sets.

Settings, each through :func:`mallocgame.engine.runner.run_solver` (validated; an invalid answer stops the script) on
its own copy of the problem (``heldout_muzero_mcts.own_copy``), ``--seconds`` of time limit, no cap on simulations,
seed ``--seed``. By default (:data:`STARTS`): ``mcts`` and ``muzero`` with option ``start=game`` (the fixed-order game
in greedy-xla's order) and with ``start=answer`` (the search starts from the best fallback answer: ``search/uct.py``
``answer_game``, what it plays depends on the code it runs at, which the records name). muzero's network was trained
on greedy-xla's order. ``--solvers``: of these, the settings of these solvers only (e.g. ``mcts``, the check of a
longer limit in half the time), and the comparisons among them. ``--settings KEY,...``: instead, the named muzero
candidates of :data:`CANDIDATES` (all at ``start=answer``, none reading the network in the answer's order), each
against ``mcts start=answer``, which runs with them. Problems run in order of requested size; on problem ``i`` the
settings run in their order rotated by ``i``, so that none always runs first or last on a loaded machine
(``_common.run_rotated``). Every run is appended to ``--csv`` as it ends; a rerun skips the runs there.

Printed: per problem each setting's gap to the bound, simulations and where the answer came from; then each
comparison (by default ``start=answer`` against ``start=game`` for each solver, and muzero against mcts at each start;
with ``--settings`` each candidate against ``mcts start=answer``): wins/ties/losses (ties within
:data:`mallocgame.problem.objective.TOLERANCE`), the one-sided sign test p (ties dropped) and the families with more
losses than wins; per setting the mean gap, on how many problems the answer is the search's own (a committed path or
rollout) rather than a fallback answer or the game's greedy episode, and on how many the network played.
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

FIELDS = ["family", "problem", "n", "setting", "value", "bound", "gap", "simulations", "searched_moves", "seconds",
          "prior", "start", "answer_from"]
#: The answer's statistics each row carries (the columns of FIELDS past the run's own).
STATS = ("simulations", "searched_moves", "prior", "start", "answer_from")
#: ``(name, solver, options)`` of the default settings: each solver at each start.
STARTS = [("mcts start=game", "mcts", {"start": "game"}), ("mcts start=answer", "mcts", {"start": "answer"}),
          ("muzero start=game", "muzero", {"start": "game"}), ("muzero start=answer", "muzero", {"start": "answer"})]
#: ``(setting, against)``: the comparisons printed among the default settings.
COMPARISONS = [("mcts start=answer", "mcts start=game"), ("muzero start=answer", "muzero start=game"),
               ("muzero start=answer", "mcts start=answer"), ("muzero start=game", "mcts start=game")]
#: The baseline every candidate of ``--settings`` is compared with.
BASELINE = STARTS[1]
_ANSWER = {"start": "answer"}
_AUTO = {"leaf": "auto", "leaf_value": "reference"}  # truncated leaves valued by the reference episode, no network
#: ``--settings`` key: ``(name, solver, options)`` of muzero's candidates at ``start=answer``. ``prior=relaxation``
#: reads the no-fragmentation relaxation's fast set (any order); ``leaf=auto`` plays rollouts where a move affords
#: them, else truncated leaves valued by the reference (``search/uct.py`` ``auto_leaf``); ``focus`` with the
#: relaxation prior commits unsearched the moves where the relaxation gives the greedy's move at least that much.
CANDIDATES = {
    "muzero": ("muzero start=answer", "muzero", _ANSWER),
    "relax": ("muzero start=answer prior=relaxation", "muzero", {**_ANSWER, "prior": "relaxation"}),
    "auto": ("muzero start=answer leaf=auto", "muzero", {**_ANSWER, **_AUTO}),
    "relax-auto": ("muzero start=answer prior=relaxation leaf=auto", "muzero",
                   {**_ANSWER, "prior": "relaxation", **_AUTO}),
    "relax-focus": ("muzero start=answer prior=relaxation focus=0.9", "muzero",
                    {**_ANSWER, "prior": "relaxation", "focus": 0.9}),
}
#: An answer the search found itself past its start (anything else is a fallback answer or the game's greedy
#: episode, which with start=answer replays the best fallback answer).
SEARCHED = ("rollout", "committed")


def label_of(r) -> str:
    return f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}"


def recipes(count: int, not_in: int | None) -> list:
    """The tuning recipes of ``count`` in order of requested size, less those of the ``not_in``-recipe set."""
    real = named_curriculum("real", "map")
    apart = {label_of(r) for r in tuning_recipes(real, count=not_in)} if not_in else set()
    return [r for r in sorted(tuning_recipes(real, count=count), key=lambda r: (r.n, r.seed)) if label_of(r) not in apart]


def chosen_settings(solvers: str, keys: str | None) -> tuple[list, list]:
    """``(settings, comparisons)`` of ``--solvers`` / ``--settings`` (module docstring)."""
    if keys is None:
        wanted = set(solvers.split(","))
        settings = [s for s in STARTS if s[1] in wanted]
        names = {s[0] for s in settings}
        return settings, [c for c in COMPARISONS if set(c) <= names]
    unknown = [k for k in keys.split(",") if k not in CANDIDATES]
    if unknown or not keys:
        raise SystemExit(f"--settings: unknown {', '.join(unknown) or '(none given)'} (known: {', '.join(CANDIDATES)})")
    settings = [BASELINE] + [CANDIDATES[k] for k in dict.fromkeys(keys.split(","))]
    return settings, [(s[0], BASELINE[0]) for s in settings[1:]]


class Problems:
    """The problems of ``recipes`` of at least ``min_n`` buffers, built one at a time as :func:`run_rotated` reaches
    them (24 real-size programs held at once take about 6 GB); a problem whose runs are all in ``done`` already is
    not built (its size is read from its rows)."""

    def __init__(self, recipes: list, min_n: int, done: dict, names: list[str]):
        self.recipes, self.min_n, self.done, self.names = recipes, min_n, done, names
        self.labels: list[str] = []  # the problems reached, in order
        self.family: dict[str, str] = {}
        self.n: dict[str, int] = {}
        self.built: dict[int, tuple] = {}  # index -> (problem, hardware, bound), the current problem only

    def __iter__(self):
        for r in self.recipes:
            label = label_of(r)
            rows = [self.done.get((label, name)) for name in self.names]
            if all(rows) and int(rows[0]["n"]) >= self.min_n:
                n = int(rows[0]["n"])
            else:
                problem, hw = build(r)
                if problem.n < self.min_n:
                    continue
                n = problem.n
                self.built = {len(self.labels): (problem, hw, problem_bound(problem, hw))}
            self.labels.append(label)
            self.family[label], self.n[label] = r.kind, n
            yield label


def run_row(insts: Problems, settings: dict, i: int, name: str, *, limit: float, sims: int, seed: int,
            stats: tuple[str, ...]) -> dict:
    """One run of setting ``name`` (``settings[name] = (solver, options)``) on the ``i``-th problem of ``insts`` (own
    copy, ``limit`` seconds, ``sims`` simulations, ``seed``), validated: its CSV row, with the answer's ``stats``."""
    label = insts.labels[i]
    problem, hw, bound = insts.built[i]
    solver, opts = settings[name]
    rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=limit, seed=seed,
                     options={**opts, "simulations": sims}, bound=bound)
    if not rep.valid:
        raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
    row = {"family": insts.family[label], "problem": label, "n": problem.n, "setting": name, "value": rep.objective,
           "bound": bound.value, "gap": rep.gap, "seconds": round(rep.seconds, 2)}
    return row | {key: rep.stats.get(key, 0 if key == "simulations" else "") for key in stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--not-in", type=int, default=None, help="leave out the problems of this count's set")
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="results file (default tune_map_start_tS.md)")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--solvers", default="mcts,muzero", help="the default settings of these solvers (comma list)")
    ap.add_argument("--settings", default=None, help=f"muzero candidates against mcts start=answer (comma list of "
                                                     f"{', '.join(CANDIDATES)})")
    args = ap.parse_args()
    settings, comparisons = chosen_settings(args.solvers, args.settings)
    by_name = {name: (solver, opts) for name, solver, opts in settings}
    out_name = args.out or f"tune_map_start_t{args.seconds:g}.md"
    csv_path = Path(args.csv) if args.csv else results_path(Path(out_name).with_suffix(".csv"))
    sims, limit = budget_of(f"t{args.seconds:g}", args.seconds)
    done = read_runs(csv_path, "setting")
    show = Transcript()
    apart = f", none of the count-{args.not_in} set" if args.not_in else ""
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}{apart}); map mode; {limit:g} s per run, no "
         f"cap on simulations; seed {args.seed}; settings {', '.join(s[0] for s in settings)}; resumed {len(done)} runs")
    insts = Problems(recipes(args.count, args.not_in), args.min_n, done, list(by_name))

    def run(i: int, name: str) -> dict:
        return run_row(insts, by_name, i, name, limit=limit, sims=sims, seed=args.seed, stats=STATS)

    def shown(i: int) -> None:
        label = insts.labels[i]
        cells = [f"{name} {float(done[(label, name)]['gap']):.3%} ({done[(label, name)]['simulations']} sim, "
                 f"{done[(label, name)]['answer_from']})" for name in by_name]
        show(f"{label:34s} {insts.n[label]:6d}  " + "  ".join(cells))

    preload_solvers(solver for solver, _ in by_name.values())  # the first run's seconds hold no first import
    run_rotated(csv_path, FIELDS, done, insts, list(by_name), run, after_problem=shown)
    summary(show, done, insts.labels, list(by_name), comparisons)
    title = "muzero's candidates at map mode's answer start" if args.settings else "Where map mode's search starts"
    write_results(out_name, (
        f"# {title}, at equal wall time ({limit:g} s) on real-size tuning problems\n\n"
        "Made by `experiments/tune_map_start.py` (its docstring says what is compared). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


def summary(show, done: dict, labels: list[str], names: list[str], comparisons: list) -> None:
    """The comparisons' table and the settings' table (module docstring)."""
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
    for name in names:
        rows = [done[(lb, name)] for lb in labels]
        own = sum(r["answer_from"] in SEARCHED for r in rows)
        network = sum(r["prior"] == "network" for r in rows)
        show(f"| {name} | {statistics.mean(float(r['gap']) for r in rows):.3%} | {own}/{len(rows)} | "
             f"{network}/{len(rows)} |")


if __name__ == "__main__":
    main()
