"""The level comparison of issue 10: guided search (muzero) vs plain MCTS vs the uniform-prior control.

    nice python experiments/level_muzero_mcts.py                       # held-out set + realistic suite
    nice python experiments/level_muzero_mcts.py --set tuning --no-realistic --checkpoint C.pt   # choose a checkpoint

Contestants, all through :func:`mallocgame.engine.runner.run_solver` (validated, scored by the evaluator):

* ``mcts``            -- plain UCT (solver ``mcts``, its defaults);
* ``muzero``          -- the same search (:class:`mallocgame.search.uct.UCTSearch`: greedy rollouts to the end,
  tree reuse, the same commitment, budgets and fallback answers, every simulation counted) selecting
  by pUCT with the network's prior (solver ``muzero``, ``--checkpoint`` or the shipped one);
* ``uniform``         -- the control: solver ``muzero`` with ``prior=uniform`` (pUCT, no network);
* ``relaxation``      -- a second control: solver ``muzero`` with ``prior=relaxation``, the hand-written
  prior from the no-fragmentation relaxation's fast set that the network (features ``encoder/2``) also
  reads, so the network must show it adds to the relaxation, not only copies it;
* ``learned``         -- the paper's MuZero, reported separately (issue 10, item 5): solver ``muzero`` with
  ``model=learned`` (Gumbel search inside the learned dynamics from one real observation per move; the solver's
  network for it, ``selfplay.pt``, or ``--learned-checkpoint``; ``experiments/results/muzero_learned_arm.md``).

Both controls and ``muzero`` use the solver's default pUCT constant; ``mcts`` its own UCT constant.

Budgets: ``16`` and ``64`` simulations per move (time limit ``--time-limit``, large so the clock
does not bind; a run it bound is marked ``*``), and ``time``: equal wall time, ``--wall-per-buffer``
x n seconds (at least 1 s) with no simulation cap, where the simulations each search managed are the
speed measure: the ratio of simulations at equal wall time, and (robust on a shared machine) the
ratio of simulations per CPU second of the solving process.

Problems: ``held-out``: 30 generated problems (layered programs and random intervals, 50-250
buffers, capacities 20-60% of the max live bytes; seeds 3000-3029, disjoint from training
(>= 1,000,000) and tuning (201-212)); ``tuning``: 12 problems, seeds 201-212, for choosing a
checkpoint; ``--realistic`` adds the realistic suite (``mallocgame suites``). The gap is to the
no-fragmentation bound. Wins/ties/losses compare values per problem (a tie: within 1e-9 of the
bound); ``p`` is the one-sided sign test (``scipy.stats.binomtest``, ties dropped) that the first
wins more often than it loses (muzero vs mcts, muzero vs uniform, and uniform vs mcts).
``--contestants`` runs only some of them and ``--reuse`` takes the
others' runs from an earlier CSV of this script (same problems, budgets and seed; mcts and the
uniform control do not depend on the checkpoint). Writes the tables to ``--out`` (under experiments/results/) and every run
to ``--csv``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

from _common import Transcript, fenced, preload_solvers, results_path, write_results

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.search.muzero.problems import Recipe, build

SIZES = (50, 75, 100, 150, 200, 250)  # 64 simulations with rollouts to the end cost ~n^2 steps per move
CAPACITIES = (0.2, 0.3, 0.4, 0.5, 0.6)


def held_out() -> list[Recipe]:
    return [Recipe("intervals" if i % 3 == 2 else "layered", SIZES[i % len(SIZES)], 3000 + i,
                   CAPACITIES[i % len(CAPACITIES)]) for i in range(30)]


def tuning() -> list[Recipe]:
    return [Recipe("intervals" if i % 3 == 2 else "layered", (60, 100, 150, 200)[i % 4], 201 + i,
                   CAPACITIES[i % len(CAPACITIES)]) for i in range(12)]


#: Seeds of the second tuning set: in the curriculum's range (>= TRAIN_SEED_BASE; a training stream draws one of
#: these 12 among 2^31 with negligible chance) and far from every held-out and confirmation seed (< 1,000,000).
TUNING_REAL_SEED = 1_960_000


def tuning_real() -> list[Recipe]:
    """The second tuning set (issue 21): 12 programs like the held-out set's real ones, which the first (60-200
    buffers, layered and random intervals) lacks: XLA-compiled JAX programs and model programs of random
    architecture (6 each), 300-800 buffers, capacities 20-40% of max live. Never a held-out program (the
    ``xla`` and ``realistic`` curriculum families avoid the suites' architectures)."""
    return [Recipe(("xla", "realistic")[i % 2], (300, 500, 800)[(i // 2) % 3], TUNING_REAL_SEED + i,
                   (0.2, 0.3, 0.4)[i % 3]) for i in range(12)]


def problems(which: str, realistic: bool, limit: int | None):
    out = []
    for r in (held_out() if which == "held-out" else tuning())[:limit]:
        problem, hw = build(r)
        out.append((f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}", problem, hw))
    if realistic:
        from mallocgame.inputs.suites import suite_entries

        for e in suite_entries("realistic")[:limit]:
            problem = e.build()
            out.append((e.name, problem, problem.hardware or PRESETS["tpuv4i"]))
    return out


def contestants(checkpoint: str | None, learned_checkpoint: str | None = None):
    net = {"checkpoint": checkpoint} if checkpoint else {}
    learned = {"model": "learned", **({"checkpoint": learned_checkpoint} if learned_checkpoint else {})}
    return [("mcts", "mcts", {}), ("muzero", "muzero", dict(net)), ("uniform", "muzero", {"prior": "uniform"}),
            ("relaxation", "muzero", {"prior": "relaxation"}), ("learned", "muzero", learned)]


NAMES = ("mcts", "muzero", "uniform", "relaxation", "learned")
DEFAULT_CONTESTANTS = ("mcts", "muzero", "uniform", "relaxation")
PAIRS = (("muzero", "mcts"), ("muzero", "uniform"), ("muzero", "relaxation"), ("uniform", "mcts"),
         ("relaxation", "mcts"), ("learned", "mcts"), ("learned", "muzero"))


def sign_test(wins: int, losses: int) -> float:
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue) if wins + losses else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("held-out", "tuning"), default="held-out")
    ap.add_argument("--realistic", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--budgets", default="16,64,time")
    ap.add_argument("--checkpoint", default=None, help="muzero's checkpoint (default: the shipped one)")
    ap.add_argument("--learned-checkpoint", default=None, help="learned's checkpoint (default: the solver's)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="per solve at a simulation budget")
    ap.add_argument("--wall-per-buffer", type=float, default=0.01, help="equal wall time: seconds per buffer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="first N problems of each group only")
    ap.add_argument("--contestants", default=",".join(DEFAULT_CONTESTANTS), help=f"some of {', '.join(NAMES)}")
    ap.add_argument("--reuse", default=None, help="CSV of an earlier run: rows of the contestants not run now")
    ap.add_argument("--from-csv", nargs="+", default=None, metavar="CSV",
                    help="run nothing: summarise these CSVs of earlier runs (a later file's row replaces an earlier "
                         "one for the same problem, budget and contestant)")
    ap.add_argument("--out", default="level_muzero_mcts.md")
    ap.add_argument("--csv", default=None, help="every run as CSV (default: --out with .csv)")
    args = ap.parse_args()
    budgets = args.budgets.split(",")
    if args.from_csv:
        merged: dict[tuple[str, str, str], dict] = {}
        for path in args.from_csv:
            for r in read_csv(path):
                merged[(r["problem"], r["budget"], r["contestant"])] = r
        rows = list(merged.values())
        show = Transcript()
        show(f"summary of {', '.join(args.from_csv)}")
        summary(rows, [b for b in budgets if any(r["budget"] == b for r in rows)], show)
        write_results(args.out, (
            "# Level comparison: muzero (guided UCT) vs mcts vs the uniform-prior control\n\n"
            "Made by `experiments/level_muzero_mcts.py --from-csv` from the runs in "
            f"{', '.join('`' + Path(p).name + '`' for p in args.from_csv)}. Output as printed:\n\n" + fenced(show.text)))
        return
    wanted = args.contestants.split(",")
    unknown = sorted(set(wanted) - set(NAMES))
    if unknown:
        raise SystemExit(f"--contestants: unknown {', '.join(unknown)} (known: {', '.join(NAMES)})")
    cols = [c for c in contestants(args.checkpoint, args.learned_checkpoint) if c[0] in wanted]
    reused: dict[tuple[str, str, str], dict] = {}
    if args.reuse:
        for r in read_csv(args.reuse):
            if r["contestant"] not in wanted:
                reused[(r["problem"], r["budget"], r["contestant"])] = r
    reused_names = {key[2] for key in reused}
    csv_path = Path(args.csv) if args.csv else results_path(Path(args.out).with_suffix(".csv"))
    show = Transcript()
    show(f"set {args.set}{' + realistic suite' if args.realistic else ''}; checkpoint "
         f"{args.checkpoint or 'shipped'}"
         + (f", learned {args.learned_checkpoint or 'the solver default'}" if "learned" in wanted else "")
         + f"; budgets {args.budgets}; seed {args.seed}; run now: {args.contestants}"
         + (f"; others from {args.reuse}" if args.reuse else ""))
    rows: list[dict] = []
    insts = problems(args.set, args.realistic, args.limit)
    preload_solvers(solver for _, solver, _ in cols)  # the first run's seconds hold no first import
    with open(csv_path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["problem", "n", "budget", "contestant", "value", "bound", "gap", "seconds", "simulations",
                      "sims_per_s", "cpu_seconds", "sims_per_cpu_s", "clock_bound", "answer_from", "network_evaluations"])
        for label, problem, hw in insts:
            bound = problem_bound(problem, hw)
            for budget in budgets:
                if budget == "time":
                    tl, sims = max(1.0, args.wall_per_buffer * problem.n), 10**6
                else:
                    tl, sims = args.time_limit, int(budget)
                for name, solver, opts in cols:
                    t0, c0 = time.monotonic(), time.process_time()
                    rep = run_solver(solver, problem, hw, time_limit=tl, seed=args.seed,
                                     options={**opts, "simulations": sims}, bound=bound)
                    secs, cpu = time.monotonic() - t0, time.process_time() - c0
                    if not rep.valid:
                        raise SystemExit(f"{name} on {label}: invalid answer: {rep.violation}")
                    st = rep.stats
                    row = {"problem": label, "n": problem.n, "budget": budget, "contestant": name,
                           "value": rep.objective, "bound": bound.value, "gap": rep.gap, "seconds": secs,
                           "simulations": st.get("simulations", 0),
                           "sims_per_s": st.get("simulations", 0) / max(secs, 1e-9),
                           "cpu_seconds": cpu, "sims_per_cpu_s": st.get("simulations", 0) / max(cpu, 1e-9),
                           "clock_bound": budget != "time" and (st.get("finished_greedily_at") is not None or
                                                               st.get("simulations", 0) <
                                                               sims * st.get("searched_moves", 0)),
                           "answer_from": st.get("answer_from"), "network_evaluations": st.get("network_evaluations")}
                    rows.append(row)
                    out.writerow([row[k] for k in row])
                    fh.flush()
                for name in NAMES:
                    if name not in wanted and name in reused_names:
                        r = reused.get((label, budget, name))
                        if r is None:
                            raise SystemExit(f"--reuse has no {name} run on {label} at budget {budget}")
                        rows.append(r)
                        out.writerow([r[k] for k in rows[0]])
                cells = [r for r in rows if r["problem"] == label and r["budget"] == budget]
                show(f"{label:<34}{problem.n:>5} {budget:>5} " + " ".join(
                    f"{r['contestant']} {r['gap']:7.3%}{'*' if r['clock_bound'] else ' '} "
                    f"({r['simulations']} sims, {r['seconds']:.1f}s)" for r in cells))
    show()
    summary(rows, budgets, show)
    write_results(args.out, (
        "# Level comparison: muzero (guided UCT) vs mcts vs the uniform-prior control\n\n"
        "Made by `experiments/level_muzero_mcts.py` (its docstring says what is compared and how). "
        f"Every run is in `{csv_path.name}`. Output as printed:\n\n" + fenced(show.text)))


def read_csv(path: str) -> list[dict]:
    """The rows of a CSV this script wrote, with numbers as numbers."""
    rows = []
    with open(path) as fh:
        for r in csv.DictReader(fh):
            for key in ("value", "bound", "gap", "seconds", "sims_per_s", "cpu_seconds", "sims_per_cpu_s"):
                r[key] = float(r[key])
            r["n"], r["simulations"] = int(r["n"]), int(r["simulations"])
            r["clock_bound"] = r["clock_bound"] == "True"
            rows.append(r)
    return rows


def summary(rows: list[dict], budgets: list[str], show) -> None:
    groups = [("generated", lambda r: r["problem"].startswith(("layered-", "intervals-"))),
              ("realistic", lambda r: not r["problem"].startswith(("layered-", "intervals-"))),
              ("all", lambda r: True)]
    for budget in budgets:
        for gname, pred in groups:
            sel = [r for r in rows if r["budget"] == budget and pred(r)]
            if not sel:
                continue
            by = {}
            for r in sel:
                by.setdefault(r["problem"], {})[r["contestant"]] = r
            present = [c for c in NAMES if all(c in p for p in by.values())]
            line = f"budget {budget:>4} {gname:<9} ({len(by)} problems): mean gap " + ", ".join(
                f"{c} {statistics.mean(p[c]['gap'] for p in by.values()):.3%}" for c in present)
            for me, other in PAIRS:
                if me not in present or other not in present:
                    continue
                wins = ties = losses = 0
                for p in by.values():
                    d = p[me]["value"] - p[other]["value"]
                    if abs(d) <= 1e-9 * max(p[me]["bound"], 1e-300):
                        ties += 1
                    elif d > 0:
                        wins += 1
                    else:
                        losses += 1
                line += f"; {me} vs {other} {wins}/{ties}/{losses} (W/T/L) p={sign_test(wins, losses):.3g}"
            if budget == "time" and {"muzero", "mcts"} <= set(present):
                ratio = [p["muzero"]["simulations"] / max(p["mcts"]["simulations"], 1) for p in by.values()]
                cpu = [p["muzero"]["sims_per_cpu_s"] / max(p["mcts"]["sims_per_cpu_s"], 1e-9) for p in by.values()]
                line += (f"; simulations muzero/mcts at equal wall time: median {statistics.median(ratio):.2f} "
                         f"(min {min(ratio):.2f}), per CPU second: median {statistics.median(cpu):.2f} "
                         f"(min {min(cpu):.2f})")
            show(line)


if __name__ == "__main__":
    main()
