"""How well the prefetch game follows a solver's answer: the teacher of expert iteration with ``teacher="answer"``.

For curriculum problems (training seeds; layered programs, model programs and XLA-compiled programs of random
architecture, in prefetch mode), each teacher's validated answer (``msa``; the ``portfolio`` with a short limit) is
followed move by move in the prefetch game the network plays (``PrefetchGame.answer_action``: at the answer's
offsets, or at the game's best fit with ``follow_offsets=False``). Prints the answer's value, the value of the game
played by following it, and the game's greedy playout; a teacher whose followed moves end below the greedy is
labelling moves the game cannot carry out as the answer did (issue 21 item 3)::

    nice python experiments/prefetch_teacher_follow.py [--problems 6] [--portfolio-seconds 5]
"""

from __future__ import annotations

import argparse
import math

from _common import Transcript, fenced, write_results

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.expert import GAME_FIELDS, stays_by_buffer
from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Recipe, build
from mallocgame.search.uct import play_greedy

KINDS = ("layered", "realistic", "xla")


def followed(problem, hw, intervals, follow_offsets: bool) -> float:
    game = Game(problem, hw, GameConfig(**GAME_FIELDS["prefetch"]))
    stays = stays_by_buffer(intervals)
    while not game.done:
        game.step(game.answer_action(stays, follow_offsets))
    return game.total_reward()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=6, help="per family")
    ap.add_argument("--size", type=int, default=150)
    ap.add_argument("--portfolio-seconds", type=float, default=5.0)
    ap.add_argument("--out", default="prefetch_teacher_follow.md")
    args = ap.parse_args()
    out = Transcript()
    out(f"{'problem':28s} {'buffers':>7s} {'greedy':>10s} {'teacher':>9s} {'answer':>10s} {'at offsets':>10s} "
        f"{'best fit':>10s}")
    ratios: dict[tuple[str, str], list[float]] = {}
    for kind in KINDS:
        for i in range(args.problems):
            recipe = Recipe(kind, args.size, TRAIN_SEED_BASE + 900_000 + 1000 * KINDS.index(kind) + i,
                            (0.2, 0.3, 0.4)[i % 3])
            problem, hw = build(recipe)
            problem = problem.replace(mode="prefetch")
            slow = PrefetchEvaluator.of(problem, hw).time_all_slow
            greedy = Game(problem, hw, GameConfig(**GAME_FIELDS["prefetch"]))
            play_greedy(greedy)
            g = greedy.total_reward() * slow
            label = f"{kind}-{recipe.seed}-c{recipe.capacity_fraction}"
            for teacher, limit in (("msa", 60.0), ("portfolio", args.portfolio_seconds)):
                report = run_solver(teacher, problem, hw, time_limit=limit, seed=0)
                if not report.valid:
                    raise SystemExit(f"{teacher} on {label}: invalid answer ({report.violation})")
                at = followed(problem, hw, report.intervals, True) * slow
                fit = followed(problem, hw, report.intervals, False) * slow
                out(f"{label:28s} {problem.n:7d} {g:10.4g} {teacher:>9s} {report.objective:10.4g} {at:10.4g} "
                    f"{fit:10.4g}")
                for name, value in (("answer", report.objective), ("at offsets", at), ("best fit", fit)):
                    if g > 0 and value > 0:
                        ratios.setdefault((teacher, name), []).append(value / g)
    out()
    out("geometric mean over the problems where both are positive, x the game's greedy playout:")
    for (teacher, name), values in ratios.items():
        geo = math.exp(sum(math.log(v) for v in values) / len(values))
        worse = sum(v < 1 - 1e-9 for v in values)
        out(f"  {teacher:9s} {name:10s} {geo:.4f} ({len(values)} problems, below the greedy on {worse})")
    write_results(args.out, "# Following a teacher's answer in the prefetch game\n\n"
                  "Values are seconds saved against all-slow (higher is better); 'at offsets' and 'best fit' are the "
                  "game played by following the answer (PrefetchGame.answer_action).\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
