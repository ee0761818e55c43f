"""The guided search against plain MCTS on the held-out protocol (issue 21, items 1 and 5), map mode.

    nice python experiments/heldout_muzero_mcts.py --budgets 16 --csv experiments/results/heldout_muzero_mcts.csv

Problems: :func:`heldout.held_out` (fixed before any run: fresh generator seeds of every Recipe kind,
150-2,000 buffers; the realistic suite; the HLO fixtures and the xla suite at 25% and 40% of max live), all in one list,
smallest first, so a run cut short has every family at the small sizes. ``--max-n`` leaves larger
ones out. ``--confirmation SHA256`` runs the confirmation set instead (:func:`heldout.confirmation`: 12 fresh-seed
generated problems of 150-2,000 buffers drawn from the chosen checkpoint's hash; the checkpoint is the default
network, ``search/muzero/checkpoints/default.pt``, and a hash that is not its own is refused), to be reported as it
comes out: nothing may be tuned on it.

Contestants (all through :func:`mallocgame.engine.runner.run_solver`: validated, scored against the no-fragmentation
bound): ``mcts`` (its defaults); ``muzero`` (the solver's defaults: the shipped network, the default
selection rule); ``uniform`` and ``relaxation`` (solver ``muzero`` with ``prior=uniform`` / ``prior=relaxation``,
the same rule); ``muzero-puct`` (the network with the earlier rule, ``selection=puct``);
``muzero-value`` / ``muzero-mixed`` (value leaves, ``leaf=value`` / ``leaf=mixed``: the value head of ``value.pt``;
issue 21 item 2) and ``value-reference`` (``leaf=value, leaf_value=reference``: the
same search with y = 0, no network at the leaves). The time limit
(``--time-limit``) is large so the clock does not bind; a run it bound is marked ``*``. A budget ``tS`` (e.g.
``--budgets t10``) is equal wall time instead: S seconds per problem and no cap on simulations.

Every run is appended to ``--csv`` as it ends and a rerun skips what is there (same name, size, budget and
contestant), so the script resumes; a program regenerated under its old name is run again. Each row's gap
is to the bound computed in its own run (the bound's MIP has a time limit, so on a loaded machine it can
differ in the fourth digit between runs); wins and losses compare values, not gaps.
The summary (also ``--summary-only``) counts only problems every listed contestant finished: per family
and overall, mean gaps, wins/ties/losses (a tie: values within 1e-9 of the bound) and the one-sided sign
test (``scipy.stats.binomtest``, ties dropped) that the first of a pair wins more often than it loses.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, results_path, write_results
from heldout import confirmation_for, held_out, with_candidate
from level_muzero_mcts import sign_test

from mallocgame.engine.runner import problem_bound, run_solver, shared_caches

CONTESTANTS = {"mcts": ("mcts", {}), "muzero": ("muzero", {}), "uniform": ("muzero", {"prior": "uniform"}),
               "relaxation": ("muzero", {"prior": "relaxation"}), "muzero-puct": ("muzero", {"selection": "puct"}),
               "muzero-value": ("muzero", {"leaf": "value"}), "muzero-mixed": ("muzero", {"leaf": "mixed"}),
               "value-reference": ("muzero", {"leaf": "value", "leaf_value": "reference"}),
               # the prior's power fading with a node's visits (search/uct.py, "Guided selection")
               "muzero-decay100": ("muzero", {"prior_decay": 100.0})}
PAIRS = (("muzero", "mcts"), ("muzero", "uniform"), ("muzero", "relaxation"), ("uniform", "mcts"),
         ("relaxation", "mcts"), ("muzero-puct", "mcts"), ("muzero", "muzero-puct"), ("muzero-value", "mcts"),
         ("muzero-mixed", "mcts"), ("value-reference", "mcts"), ("muzero-value", "value-reference"),
         ("muzero-value", "muzero"), ("muzero-mixed", "muzero-value"), ("muzero-decay100", "mcts"),
         ("muzero-decay100", "muzero"))
FIELDS = ["family", "problem", "n", "budget", "contestant", "value", "bound", "gap", "seconds", "simulations",
          "clock_bound", "selection", "exploration", "prior", "answer_from"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default=None,
                    help="comma-separated (default 16; with --summary-only: every budget the CSV holds)")
    ap.add_argument("--contestants", default="mcts,muzero,uniform,relaxation",
                    help="comma-separated; with --summary-only several groups separated by ';'")
    ap.add_argument("--families", default="generated,suite,hlo,xla,torch")
    ap.add_argument("--max-n", type=int, default=None)
    ap.add_argument("--min-n", type=int, default=None, help="leave out problems of fewer buffers")
    ap.add_argument("--time-limit", type=float, default=1800.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default="heldout_muzero_mcts.csv",
                    help="runs are appended here; with --summary-only several CSVs, comma-separated (runs split over processes)")
    ap.add_argument("--out", default="heldout_muzero_mcts.md")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--candidate", metavar="NAME=CHECKPOINT", default=None,
                    help="also a contestant NAME: the muzero solver with CHECKPOINT (a network not yet shipped)")
    ap.add_argument("--confirmation", metavar="SHA256", default=None,
                    help="run the confirmation set drawn from the default network's SHA-256 (not the held-out set)")
    args = ap.parse_args()
    if args.budgets is None and not args.summary_only:
        args.budgets = "16"
    groups = [g.split(",") for g in args.contestants.split(";")]
    wanted = groups[0]
    if len(groups) > 1 and not args.summary_only:
        raise SystemExit("--contestants: several groups (';') with --summary-only only")
    contestants, pairs = with_candidate(CONTESTANTS, PAIRS, args.candidate, ("mcts", "muzero", "uniform"))
    unknown = sorted({c for g in groups for c in g} - set(contestants))
    if unknown:
        raise SystemExit(f"--contestants: unknown {', '.join(unknown)} (known: {', '.join(contestants)})")
    csv_path, names, rows = read_csvs(args.csv, args.summary_only)
    # a summary of a t60 CSV without --budgets t60 was silently empty: by default it takes the CSV's own budgets
    budgets = args.budgets.split(",") if args.budgets else list(dict.fromkeys(r["budget"] for r in rows))
    show = Transcript()
    if not args.summary_only:
        run(args, budgets, wanted, csv_path, rows, show, contestants)
    for group in groups:
        show(f"summary of {names} ({len(rows)} runs); contestants {', '.join(group)}")
        summary(rows, budgets, group, show, pairs)
    write_results(args.out, (
        "# Held-out protocol: muzero vs mcts vs the controls, map mode (issue 21)\n\n"
        "Made by `experiments/heldout_muzero_mcts.py` (its docstring says what is compared and how). "
        f"Every run is in `{names}`. Output as printed:\n\n" + fenced(show.text)))


def budget_of(budget: str, time_limit: float) -> tuple[int, float]:
    """``(simulations per move, time limit)`` of a budget: ``"16"`` is 16 simulations per move under
    ``time_limit``; ``"t10"`` is equal wall time, 10 s per problem, with no cap on simulations (each solver
    shares the time among its moves its own way)."""
    if budget.startswith("t"):
        return 10**9, float(budget[1:])
    return int(budget), time_limit


def read_csvs(spec: str, summary_only: bool) -> tuple[Path, str, list[dict]]:
    """``(path runs are appended to, the CSVs' names as the write-up gives them, their rows)`` for ``--csv``.

    With ``--summary-only`` ``spec`` may name several CSVs (comma-separated): a run split over processes, one CSV
    each, is summarised as one without a concatenated copy. A run (family, problem, budget, contestant) found in
    two of them is an error: the summary would count it twice.
    """
    names = [s for s in spec.split(",") if s]
    if len(names) > 1 and not summary_only:
        raise SystemExit("--csv: several CSVs with --summary-only only (a run appends to one)")
    rows, seen = [], {}
    for name in names:
        path = results_path(name)
        if summary_only and not path.exists():
            raise SystemExit(f"--csv: {path}: no such file")
        for r in read_rows(path):
            key = (r["family"], r["problem"], r["budget"], r["contestant"])
            if key in seen:
                raise SystemExit(f"--csv: {path.name}: {'/'.join(key)} is also in {seen[key]}")
            seen[key] = path.name
            rows.append(r)
    return results_path(names[0]), ", ".join(Path(n).name for n in names), rows


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for key in ("value", "bound", "gap", "seconds"):
            r[key] = float(r[key])
        r["n"], r["simulations"] = int(r["n"]), int(r["simulations"])
    return rows


def run(args, budgets, wanted, csv_path: Path, rows: list[dict], show, contestants=CONTESTANTS) -> None:
    if args.confirmation is None:
        run_heldout(args, held_out, contestants, budgets, wanted, csv_path, rows, show)
        return
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT

    drawn = confirmation_for(args, DEFAULT_CHECKPOINT)
    run_heldout(args, lambda families: drawn, contestants, budgets, wanted, csv_path, rows, show,
                title=f"confirmation set of {DEFAULT_CHECKPOINT.name} ({args.confirmation[:12]}...)")


def own_copy(problem, hardware):
    """``problem`` with an empty store of derived facts, warmed as ``mallocgame solve`` warms it before the fork.

    Each contestant builds its own baselines, fallback answers and game data, as in a forked child: in one process
    the same problem object would hand them to the contestants after the first (``mallocgame.problem.model.derived_facts``),
    free of time, which tilts an equal-wall-time comparison at thousands of buffers (runs before this helper: the
    git history of experiments/README.md).
    """
    own = problem.replace()
    shared_caches(own, hardware)
    return own


def run_heldout(args, held, contestants: dict, budgets: list[str], wanted: list[str], csv_path: Path, rows: list[dict],
                show, *, title: str = "held-out", searches=None, on_row=None, prefix=None) -> None:
    """The run loop of the held-out scripts (this one and ``heldout_prefetch.py``): every contestant of ``wanted``
    (a name of ``contestants``, whose value is ``(solver, options)``) at every budget on each problem of
    ``held(families)``, smallest first, within ``args.max_n`` / ``args.min_n``. What ``rows`` has (same problem,
    size, budget and contestant) is skipped; each new row is appended to ``csv_path`` and ``rows`` as it ends, and
    one line a problem and budget is printed with ``show``. Every contestant's heavy imports are done before the
    first run (``_common.preload_solvers``), so no run's seconds hold them.

    ``searches``: the contestants that take a simulation budget (None: all of them); the others get no
    ``simulations`` option and are never clock-bound. ``on_row(h, name, rep, row)`` may stop the run
    (``SystemExit``) or change the row before it is written. ``prefix(h, budget)`` starts a printed line
    (default: the problem's label, size and the budget).
    """
    # keyed by size too: a suite program regenerated under the same name (the xla suite was, during the first run)
    # is a new problem, run again
    done = {(r["problem"], int(r["n"]), r["budget"], r["contestant"]) for r in rows}
    show(f"{title} families {args.families}; budgets {args.budgets}; contestants {args.contestants}; seed {args.seed}; "
         f"time limit {args.time_limit:g}s; max n {args.max_n}; min n {args.min_n}; resumed {len(done)} runs")
    insts = sorted(held(tuple(args.families.split(","))), key=lambda h: (h.problem.n, h.label))
    insts = [h for h in insts if (args.max_n is None or h.problem.n <= args.max_n)
             and (args.min_n is None or h.problem.n >= args.min_n)]
    prefix = prefix or (lambda h, budget: f"{h.label:<40}{h.problem.n:>5} {budget:>3} ")
    preload_solvers(contestants[name][0] for name in wanted)
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
                    solver, opts = contestants[name]
                    sims, limit = budget_of(budget, args.time_limit)
                    searched = searches is None or name in searches
                    options = {**opts, "simulations": sims} if searched else dict(opts)
                    own = own_copy(h.problem, h.hardware)
                    t0 = time.monotonic()
                    rep = run_solver(solver, own, h.hardware, time_limit=limit, seed=args.seed,
                                     options=options, bound=bound)
                    secs = time.monotonic() - t0
                    if not rep.valid:
                        raise SystemExit(f"{name} on {h.label}: invalid answer: {rep.violation}")
                    st = rep.stats
                    row = {"family": h.family, "problem": h.label, "n": h.problem.n, "budget": budget,
                           "contestant": name, "value": rep.objective, "bound": bound.value, "gap": rep.gap,
                           "seconds": round(secs, 2), "simulations": st.get("simulations", 0),
                           "clock_bound": searched and (st.get("finished_greedily_at") is not None
                                                        or st.get("simulations", 0) < sims * st.get("searched_moves", 0)),
                           "selection": st.get("selection", ""), "exploration": opts.get("exploration", ""),
                           "prior": st.get("prior", ""), "answer_from": st.get("answer_from", "")}
                    if on_row is not None:
                        on_row(h, name, rep, row)
                    out.writerow(row)
                    fh.flush()
                    rows.append(row)
                    cells.append(row)
                if cells:
                    show(prefix(h, budget) + " ".join(
                        f"{r['contestant']} {r['gap']:7.3%}{'*' if r['clock_bound'] else ' '}"
                        f"({r['seconds']:.0f}s {r['simulations']} sim)" for r in cells))
    show()


def _rate(sel: list[dict], who: str) -> float:
    """Simulations per second of ``who`` over the problems ``sel`` (0 when its runs took no measurable time: msa on
    programs of ~100 buffers, whose seconds are rounded to 0.00)."""
    seconds = sum(float(c[who]["seconds"]) for c in sel)
    return sum(int(c[who]["simulations"]) for c in sel) / seconds if seconds > 0 else 0.0


def summary(rows: list[dict], budgets: list[str], wanted: list[str], show, pairs=PAIRS) -> None:
    families = sorted({r["family"] for r in rows})
    for budget in budgets:
        by: dict[str, dict[str, dict]] = {}
        for r in rows:
            if r["budget"] == budget and r["contestant"] in wanted:  # same name, other size: another problem
                by.setdefault((r["problem"], int(r["n"])), {})[r["contestant"]] = r
        complete = {p: c for p, c in by.items() if all(w in c for w in wanted)}
        for fam in families + ["all"]:
            sel = [c for c in complete.values() if fam == "all" or next(iter(c.values()))["family"] == fam]
            if not sel:
                continue
            ns = [next(iter(c.values()))["n"] for c in sel]
            line = (f"budget {budget:>3} {fam:<10} ({len(sel)} problems, {min(ns)}-{max(ns)} buffers): mean gap "
                    + ", ".join(f"{w} {statistics.mean(c[w]['gap'] for c in sel):.3%}" for w in wanted))
            line += "; simulations per second " + ", ".join(f"{w} {_rate(sel, w):.3g}" for w in wanted)
            for me, other in pairs:
                if me not in wanted or other not in wanted:
                    continue
                wins = ties = losses = 0
                for c in sel:
                    d = c[me]["value"] - c[other]["value"]
                    if abs(d) <= 1e-9 * max(abs(c[me]["bound"]), 1e-300):
                        ties += 1
                    elif d > 0:
                        wins += 1
                    else:
                        losses += 1
                line += f"; {me} vs {other} {wins}/{ties}/{losses} p={sign_test(wins, losses):.3g}"
            show(line)


if __name__ == "__main__":
    main()
