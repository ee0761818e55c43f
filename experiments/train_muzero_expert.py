"""Expert-iteration training of the guided search's network (issue 10); resumable; logs one JSON line per game.

    nice -n 10 python experiments/train_muzero_expert.py --init none --features encoder/2 --exploration 10 \
        --teacher-prior relaxation --out /tmp/expert/run.pt --log /tmp/expert/train.log --time-limit 1800
    nice -n 10 python experiments/train_muzero_expert.py --resume /tmp/expert/run.pt \
        --log /tmp/expert/train.log --time-limit 1800

Starts from the shipped checkpoint's weights (``--init``; ``--init none`` = fresh weights). The loop,
targets and curriculum are described in :mod:`mallocgame.search.muzero.expert`. Snapshots ``run.g<games>.pt``
are model-only checkpoints; pick one with ``experiments/level_muzero_mcts.py --set tuning``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mallocgame.search.muzero.checkpoint import CheckpointError
from mallocgame.search.muzero.expert import ExpertConfig, resume, train

SHIPPED = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "default.pt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--resume", default=None, help="continue the run of this checkpoint")
    ap.add_argument("--init", default=str(SHIPPED), help="weights to start from ('none': fresh)")
    ap.add_argument("--log", default=None)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--games", type=int, default=None, help="stop after this many games (the run is deterministic "
                                                               "per game, so --games N reproduces snapshot gN)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-size", type=int, default=50)
    ap.add_argument("--max-size", type=int, default=300)
    ap.add_argument("--teacher-simulations", type=int, default=128)
    ap.add_argument("--student-simulations", type=int, default=16,
                    help="simulations per move of the student's game (its cost grows as n^2: a 2,000-buffer game at "
                         "16 is ~32M rollout steps)")
    ap.add_argument("--states-per-game", type=int, default=8)
    ap.add_argument("--order", default=None, choices=("xla", "answer"),
                    help="map mode's game: greedy-xla's order, or the order of the best fallback answer as the "
                         "solvers' start=answer plays it (default: --init's order; fresh weights: xla)")
    ap.add_argument("--features", default="", help="'encoder/1': the per-buffer encoder; 'encoder/2': and the "
                                                   "relaxation's features (both need --init none or a checkpoint "
                                                   "of the same features); 'encoder/3': encoder/2 with a learned "
                                                   "graph encoder (--init an encoder/2 checkpoint starts from it)")
    ap.add_argument("--exploration", type=float, default=1.0, help="pUCT constant of the student's search")
    ap.add_argument("--teacher-prior", default="uniform", choices=("uniform", "relaxation", "network"),
                    help="'network': the current network guides the teacher's search (AlphaZero's expert iteration)")
    ap.add_argument("--teacher", default="search", choices=("search", "answer"),
                    help="'answer': select-pack's answer (time limit --teacher-seconds) labels the student's states")
    ap.add_argument("--teacher-seconds", type=float, default=5.0)
    ap.add_argument("--teacher-exploration", type=float, default=None,
                    help="pUCT constant of the teacher's search (default: --exploration)")
    ap.add_argument("--xla-share", type=float, default=0.0,
                    help="share of XLA-compiled JAX programs of random architecture (needs jax; cached, "
                         "search.muzero.problems.cache_dir)")
    ap.add_argument("--torch-share", type=float, default=0.0,
                    help="share of torch-exported programs of random architecture (needs torch; cached like xla's)")
    ap.add_argument("--realistic-share", type=float, default=0.0,
                    help="share of model programs of random architecture in the curriculum")
    ap.add_argument("--reanalyse", type=int, default=0, help="earlier labelled states relabelled per game")
    ap.add_argument("--value-weight", type=float, default=0.0,
                    help="weight of the value target relative to the greedy rollout")
    ap.add_argument("--teacher-target", default="visits", choices=("visits", "best", "mix"),
                    help="the teacher search's root visits, the move of its best episode, or their mean")
    ap.add_argument("--aux-weight", type=float, default=0.0,
                    help="weight of the auxiliary target (does the buffer end in fast memory)")
    args = ap.parse_args()
    try:
        run(args)
    except (ValueError, CheckpointError) as exc:  # bad options or checkpoint: one line, no traceback
        raise SystemExit(f"train_muzero_expert: {exc}") from None


def run(args) -> None:
    answer = select_pack_answer(args.teacher_seconds)
    if args.resume:
        resume(args.resume, time_limit=args.time_limit, out=args.out, log_path=args.log, max_games=args.games,
               teacher_answer=answer)
        return
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    config = ExpertConfig(seed=args.seed, min_size=args.min_size, max_size=args.max_size,
                          teacher_simulations=args.teacher_simulations,
                          student_simulations=args.student_simulations, states_per_game=args.states_per_game,
                          features=args.features, exploration=args.exploration, teacher_prior=args.teacher_prior,
                          teacher=args.teacher, teacher_exploration=args.teacher_exploration,
                          realistic_share=args.realistic_share, xla_share=args.xla_share, torch_share=args.torch_share,
                          reanalyse_per_game=args.reanalyse,
                          value_weight=args.value_weight, aux_weight=args.aux_weight,
                          teacher_target=args.teacher_target, order=args.order)
    train(args.out, init=None if args.init == "none" else args.init, config=config, time_limit=args.time_limit,
          log_path=args.log, max_games=args.games, teacher_answer=answer)


def select_pack_answer(seconds: float):
    """``(problem, hardware) -> offsets``: select-pack's validated map-mode answer (seed 0, ``seconds``)."""
    def answer(problem, hardware):
        import numpy as np

        from mallocgame.engine.runner import run_solver

        report = run_solver("select-pack", problem, hardware, time_limit=seconds, seed=0)
        if not report.valid:
            raise RuntimeError(f"select-pack's answer to {problem.name} is invalid: {report.violation}")
        return np.array([-1 if o is None else o for o in report.offsets], np.int64)
    return answer


if __name__ == "__main__":
    main()
