"""Expert iteration of a network for the prefetch game (issue 21 item 3): the ``muzero`` solver's prior in prefetch mode.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/train_prefetch_net.py --out /tmp/pf/run.pt \
        --log /tmp/pf/train.log --time-limit 2400
    OMP_NUM_THREADS=1 nice -n 10 python experiments/train_prefetch_net.py --resume /tmp/pf/run.pt \
        --log /tmp/pf/train.log --time-limit 1800
    python experiments/train_prefetch_net.py --ship /tmp/pf/run.pt   # -> search/muzero/checkpoints/prefetch.pt

The loop is :mod:`mallocgame.search.muzero.expert` with ``mode="prefetch"``: problems from the curriculum
(:class:`mallocgame.search.muzero.problems.Curriculum`, training seeds >= 1,000,000: layered programs and model
programs of random architecture, never random intervals, which have no ops) turned to prefetch mode; the
student is the deployed search (the ``muzero`` solver's prefetch defaults: the prefetch game with k = 4 per
copy window, two windows, greedy-xla's order; ``untried-uct`` with prior power 2, exploration 1, ``commit="max"``,
16 simulations per move); the teacher is plain UCT (the uniform prior, i.e. ``mcts``'s search) with
``--teacher-simulations`` from the states the student reached, its target the mean of its root visits and the
root move holding the best return it saw (``--teacher-target mix``); or, with ``--teacher answer``, a prefetch
solver's validated answer to the whole problem (``--teacher-solver``: the portfolio with ``--teacher-seconds``, or
msa), followed in the game at its best fit (``PrefetchGame.answer_action``) as a one-hot target.
``--xla-share`` adds XLA-compiled JAX programs of random architecture (needs jax), ``--torch-share``
torch-exported ones. Fresh weights (or
``--init``), the game's plain observation (``features=""``). Checkpoints every ``--checkpoint-seconds``;
``--resume`` continues exactly; snapshots
``run.g<games>.pt`` are model-only. One seed (``--seed``) fixes the whole run (per game: ``--games N``
reproduces snapshot ``gN``; not with the portfolio as teacher, whose answer depends on the clock).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from mallocgame.engine.runner import run_solver

SHIPPED = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "prefetch.pt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--resume", default=None, help="continue the run of this checkpoint")
    ap.add_argument("--init", default="none", help="weights to start from, a prefetch checkpoint (default none: "
                                                   "fresh weights; e.g. " + str(SHIPPED.relative_to(SHIPPED.parents[3])) + ")")
    ap.add_argument("--ship", default=None, help="write this checkpoint's model-only copy to " + str(SHIPPED))
    ap.add_argument("--log", default=None)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--games", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-size", type=int, default=30)
    ap.add_argument("--max-size", type=int, default=150)
    ap.add_argument("--min-capacity", type=float, default=0.2)
    ap.add_argument("--max-capacity", type=float, default=0.5)
    ap.add_argument("--xla-share", type=float, default=0.0,
                    help="share of XLA-compiled JAX programs of random architecture (needs jax; cached, "
                         "search.muzero.problems.cache_dir)")
    ap.add_argument("--torch-share", type=float, default=0.0,
                    help="share of torch-exported programs of random architecture (needs torch; cached like xla's)")
    ap.add_argument("--realistic-share", type=float, default=0.3)
    ap.add_argument("--student-simulations", type=int, default=16)
    ap.add_argument("--teacher-simulations", type=int, default=64)
    ap.add_argument("--teacher-target", default="mix", choices=("visits", "best", "mix"))
    ap.add_argument("--teacher", default="search", choices=("search", "answer"),
                    help="'answer': a prefetch solver's answer (--teacher-solver) labels the student's states")
    ap.add_argument("--teacher-solver", default="portfolio", choices=("portfolio", "msa"))
    ap.add_argument("--teacher-seconds", type=float, default=5.0)
    ap.add_argument("--states-per-game", type=int, default=16)
    ap.add_argument("--updates-per-game", type=int, default=16)
    ap.add_argument("--checkpoint-seconds", type=float, default=180.0)
    args = ap.parse_args()
    if args.ship:
        ship(args.ship)
        return
    from mallocgame.search.muzero.checkpoint import CheckpointError
    from mallocgame.search.muzero.expert import ExpertConfig, resume, train

    try:
        answer = solver_answer(args.teacher_solver, args.teacher_seconds)
        if args.resume:
            resume(args.resume, time_limit=args.time_limit, out=args.out, log_path=args.log, max_games=args.games,
                   teacher_answer=answer)
            return
        if not args.out:
            raise ValueError("give --out (or --resume / --ship)")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        config = ExpertConfig(seed=args.seed, mode="prefetch", min_size=args.min_size, max_size=args.max_size,
                              layered_share=1.0, realistic_share=args.realistic_share, xla_share=args.xla_share,
                              torch_share=args.torch_share,
                              min_capacity=args.min_capacity, max_capacity=args.max_capacity,
                              student_simulations=args.student_simulations,
                              teacher_simulations=args.teacher_simulations, teacher_target=args.teacher_target,
                              teacher=args.teacher,
                              states_per_game=args.states_per_game, updates_per_game=args.updates_per_game,
                              checkpoint_seconds=args.checkpoint_seconds, exploration=1.0,
                              selection="untried-uct", prior_power=2.0, commit="max")
        train(args.out, init=None if args.init == "none" else args.init, config=config,
              time_limit=args.time_limit, log_path=args.log, max_games=args.games, teacher_answer=answer)
    except (ValueError, CheckpointError) as exc:  # bad options or checkpoint: one line, no traceback
        raise SystemExit(f"train_prefetch_net: {exc}") from None


def solver_answer(name: str, seconds: float):
    """``(problem, hardware) -> intervals``: solver ``name``'s validated prefetch answer (seed 0, ``seconds``;
    the portfolio's depends on the clock, so a run with it is not replayed exactly)."""
    def answer(problem, hardware):
        report = run_solver(name, problem, hardware, time_limit=seconds, seed=0)
        if not report.valid:
            raise RuntimeError(f"{name}'s answer to {problem.name} is invalid: {report.violation}")
        return list(report.intervals)
    return answer


def ship(path: str) -> None:
    """The model-only copy of checkpoint ``path`` (network, game fields, summary) as the shipped prefetch network."""
    from mallocgame.search.muzero import checkpoint as ckpt

    payload = ckpt.load(path)
    if payload.get("game", {}).get("variant") != "prefetch":
        raise SystemExit(f"train_prefetch_net: {path} is not a prefetch-game network (game {payload.get('game')})")
    tmp = SHIPPED.with_suffix(".tmp.pt")
    ckpt.atomic_save(ckpt.model_only(payload), str(tmp))
    shutil.move(str(tmp), SHIPPED)
    print(f"wrote {SHIPPED} from {path} (games {payload.get('games')}, step {payload.get('step')})")


if __name__ == "__main__":
    main()
