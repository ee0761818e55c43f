"""NN-guided search (muzero: learned model and AlphaZero-style simulator) vs plain MCTS vs greedy.

Columns: ``muzero-learned`` plans inside the learned dynamics (MuZero proper);
``alphazero`` plans with the true game and values leaves by the network alone;
``muzero-default`` is the solver's default (since issue 10: plain MCTS's search with pUCT on the
network's prior; ``experiments/level_muzero_mcts.py`` is the level comparison); ``mcts`` is plain UCT with greedy
rollouts (its defaults). Equal simulation budgets per move, on generated held-out problems (seeds below the
training stream's ``TRAIN_SEED_BASE``, so none was seen in training). Every answer goes
through :func:`mallocgame.engine.runner.run_solver` (validated, scored by the evaluator); the gap is to
the no-fragmentation bound (:func:`mallocgame.engine.runner.problem_bound`, map mode). For muzero the table also shows the value
of the
search's own episode (``own``), before the solver keeps the better of it and the game's
greedy episode.

    nice python experiments/compare_muzero_mcts.py --simulations 16 --time-limit 600 [--out PATH]

Writes what it printed to ``--out`` (default ``experiments/results/compare_muzero_mcts.md``; the
write-up ``muzero_vs_mcts.md`` quotes runs of this script and is kept by hand).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import Transcript, fenced, preload_solvers, write_results

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search.muzero.problems import Recipe, build

HELD_OUT = [Recipe("layered", 50, 101), Recipe("layered", 50, 102), Recipe("layered", 100, 103),
            Recipe("layered", 100, 104), Recipe("layered", 200, 105), Recipe("layered", 200, 106),
            Recipe("intervals", 60, 107, 0.4), Recipe("intervals", 120, 108, 0.4)]


def entries(sims: int):
    """(column name, solver, options)."""
    return [
        ("greedy-xla", "greedy-xla", {}),
        ("mcts", "mcts", {"simulations": sims}),
        ("muzero-learned", "muzero", {"simulations": sims, "search_model": "learned"}),
        ("alphazero", "muzero", {"simulations": sims, "search_model": "simulator", "rollout_depth": 0}),
        # (the earlier searches: method gumbel via search_model)
        ("muzero-default", "muzero", {"simulations": sims}),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--time-limit", type=float, default=600.0, help="per solve; large so the budget never binds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=len(HELD_OUT), help="first N problems only")
    parser.add_argument("--out", default="compare_muzero_mcts.md", help="results file (a bare name: under experiments/results/)")
    args = parser.parse_args()
    cols = entries(args.simulations)
    show = Transcript()
    show(f"simulations per move: {args.simulations}; gap = (bound - value) / bound; own = muzero's search episode")
    header = f"{'problem':<22}{'n':>5}{'bound':>11}" + "".join(f"{name:>26}" for name, _, _ in cols)
    show(header)
    gaps: dict[str, list[float]] = {name: [] for name, _, _ in cols}
    own_gaps: dict[str, list[float]] = {name: [] for name, solver, _ in cols if solver == "muzero"}
    preload_solvers(solver for _, solver, _ in cols)  # the first run's seconds hold no first import
    for recipe in HELD_OUT[:args.limit]:
        problem, hw = build(recipe)
        bound = problem_bound(problem, hw)  # map mode: the no-fragmentation bound
        label = f"{recipe.kind}-{recipe.n}-s{recipe.seed}"
        cells = []
        for name, solver, options in cols:
            t0 = time.monotonic()
            report = run_solver(solver, problem, hw, time_limit=args.time_limit, seed=args.seed, options=options,
                                bound=bound)
            seconds = time.monotonic() - t0
            assert report.valid, f"{name} on {label}: {report.violation}"
            gaps[name].append(report.gap)
            cell = f"{report.gap:7.2%} {seconds:6.1f}s"
            if solver == "muzero":
                st = report.stats  # the guided default reports its best episode, the earlier searches their own
                own = st.get("search_value_normalised", st.get("value_normalised", 0.0)) * report.time_all_slow
                own_gap = max(0.0, (bound.value - own) / bound.value)
                own_gaps[name].append(own_gap)
                cell = f"{report.gap:6.2%} own {own_gap:6.2%} {seconds:5.1f}s"
            cells.append(f"{cell:>26}")
        show(f"{label:<22}{problem.n:>5}{bound.value:>11.4g}" + "".join(cells))
    show("mean gap: " + ", ".join(f"{k} {statistics.mean(v):.2%}" for k, v in gaps.items()))
    show("mean gap of muzero's own search episode: " + ", ".join(f"{k} {statistics.mean(v):.2%}"
                                                             for k, v in own_gaps.items()))
    write_results(args.out, (
        f"# NN-guided search (muzero) vs plain MCTS vs greedy, {args.simulations} simulations per move\n\n"
        f"The first {min(args.limit, len(HELD_OUT))} held-out problems (seeds 101-108), time limit "
        f"{args.time_limit:g} s per solve, seed {args.seed}; columns as in the script's docstring. "
        "Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
