"""Prefetch mode's search started around the best fallback answer: a counterfactual game whose greedy follows it.

The default searches of ``mcts`` and ``muzero`` play the prefetch game from its own greedy episode; on most held-out
prefetch programs both end at msa's answer, which the game cannot replay (``prefetch_teacher_follow.py``). This script
measures the search that starts near that answer instead: in the game the search plays, the greedy move (the first
move tried at every node, the rollout policy, the reference episode of truncated leaves) is replaced by the move that
follows the best fallback answer at the game's best fit (``PrefetchGame.answer_action(follow_offsets=False)``), the
greedy's move where it offers no window. The substitution happens in this process only (the search's ``run`` is
wrapped); nothing in the product changes. Each solver runs with its defaults, once as shipped and once following.

Problems: the ``real`` prefetch curriculum's tuning recipes (``tuning_recipes``; never a held-out program), own copies,
``--seconds`` per run, seed 0::

    nice python experiments/prefetch_follow_start.py [--seconds 10] [--count 12]
"""

from __future__ import annotations

import argparse

from _common import Transcript, fenced, preload_solvers, write_results
from heldout_muzero_mcts import own_copy

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search import uct
from mallocgame.search.game import Game
from mallocgame.search.game_prefetch import NativePrefetchGame, intervals_of
from mallocgame.search.muzero.expert import stays_by_buffer
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

SOLVERS = ("mcts", "muzero")


class FollowingGame(NativePrefetchGame):
    """The native prefetch game whose greedy move follows ``stays`` (buffer -> fast intervals of an answer)."""

    stays: dict = {}
    _inside = False  # answer_action falls back to the greedy's move: the game's own one

    def greedy_action(self) -> int:
        if self._inside:
            return self._core.greedy_action()
        self._inside = True
        try:
            return self.answer_action(self.stays, follow_offsets=False)
        finally:
            self._inside = False

    greedy_rollout = Game.greedy_rollout  # step by step through greedy_action, not the native engine's own greedy


def follow_best_incumbent(on: dict):
    """Wrap ``UCTSearch.run``: while ``on["follow"]``, a prefetch search plays :class:`FollowingGame` after the best
    fallback answer instead of the game it was given (same configuration and data, nothing played yet)."""
    run = uct.UCTSearch.run

    def following(self, game, *, budget, incumbents=(), **kw):
        if on["follow"] and game.data.mode == "prefetch" and incumbents:
            best = max(incumbents, key=lambda e: e.value)
            game = FollowingGame(None, None, game.config, data=game.data)
            game.stays = stays_by_buffer(intervals_of(best.offsets))
        return run(self, game, budget=budget, incumbents=incumbents, **kw)

    uct.UCTSearch.run = following


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--out", default=None, help="results file (default prefetch_follow_start_tS.md)")
    args = ap.parse_args()
    on = {"follow": False}
    follow_best_incumbent(on)
    preload_solvers(SOLVERS)
    out = Transcript()
    out(f"{'problem':24s} {'buffers':>7s}  " + "  ".join(f"{s + (' follow' if f else ''):>14s}"
                                                         for s in SOLVERS for f in (False, True)) + "  (gap %)")
    tally = {s: [0, 0, 0] for s in SOLVERS}  # following against shipped: better, same, worse
    for r in sorted(tuning_recipes(named_curriculum("real", "prefetch"), count=args.count), key=lambda r: r.n):
        problem, hw = build(r)
        problem = problem if problem.mode == "prefetch" else problem.replace(mode="prefetch")
        bound = problem_bound(problem, hw)
        cells, notes = [], []
        for solver in SOLVERS:
            gaps = []
            for follow in (False, True):
                on["follow"] = follow
                rep = run_solver(solver, own_copy(problem, hw), hw, time_limit=args.seconds, seed=0, bound=bound)
                if not rep.valid:
                    raise SystemExit(f"{solver} on {r}: invalid answer: {rep.violation}")
                gaps.append(rep.gap)
                cells.append(f"{rep.gap:14.4%}")
                notes.append(f"{solver}{' follow' if follow else ''}: {rep.stats.get('simulations')} sim, "
                             f"{rep.stats.get('answer_from')}")
            tally[solver][0 if gaps[1] < gaps[0] - 1e-12 else 2 if gaps[1] > gaps[0] + 1e-12 else 1] += 1
        out(f"{r.kind}-{r.n}-c{r.capacity_fraction:g}".ljust(24) + f" {problem.n:7d}  " + "  ".join(cells))
        out(" " * 26 + "; ".join(notes))
    out()
    for solver, (better, same, worse) in tally.items():
        out(f"{solver}: following the best fallback answer against as shipped: {better} better, {same} the same, "
            f"{worse} worse")
    write_results(args.out or f"prefetch_follow_start_t{args.seconds:g}.md",
                  "# Prefetch mode's search started around the best fallback answer\n\n"
                  "Gaps to the bound (lower is better) of each solver as shipped and with the game's greedy move "
                  "following the best fallback answer at best fit; tuning recipes of the real prefetch curriculum.\n\n"
                  + fenced(out.text))


if __name__ == "__main__":
    main()
