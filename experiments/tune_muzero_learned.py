"""Choose the learned-dynamics arm's checkpoint and c_scale on the tuning problems (seeds 201-212, never held out).

    nice python experiments/tune_muzero_learned.py --checkpoints A.pt,B.pt --c-scales 0.02,0.1 --simulations 16

For each checkpoint and Gumbel ``c_scale``: solver ``muzero`` with ``model=learned`` on the 12 tuning
problems of ``level_muzero_mcts.py``; per setting the mean gap of the answer to the no-fragmentation
bound (the answer is the best of the searched episode and the game's greedy episode, as the solver
returns it), the mean ratio of the searched episode alone to the game's greedy episode (the answer
clamps at greedy, so this is where two networks differ), and how often the search's episode was
the answer. Writes the table to ``--out`` (under experiments/results/).

``--losses TRAIN_PT`` instead prints each checkpoint's training loss parts (policy, value, reward,
legality, consistency; unroll 5) on one fixed batch of 1024 positions from that training
checkpoint's replay buffer (seed 12345): how well each network's dynamics match what was observed.
"""

from __future__ import annotations

import argparse
import statistics

from _common import Transcript, preload_solvers, write_results
from level_muzero_mcts import tuning

from mallocgame.engine.runner import problem_bound, run_solver
from mallocgame.search.muzero.problems import build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", required=True, help="comma-separated .pt files (model=learned's network)")
    ap.add_argument("--c-scales", default="0.02", help="comma-separated Gumbel c_scale values")
    ap.add_argument("--simulations", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="muzero_learned_tuning.md")
    ap.add_argument("--losses", default=None, metavar="TRAIN_PT", help="print loss parts on this run's replay instead")
    args = ap.parse_args()
    if args.losses:
        return losses(args.losses, args.checkpoints.split(","))
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.search.uct import play_greedy

    show = Transcript()
    show(f"tuning set (seeds 201-212); model=learned; {args.simulations} simulations; seed {args.seed}")
    show("| checkpoint | c_scale | mean gap of the answer | searched episode / greedy's (mean) | search was the answer |")
    show("|---|---|---|---|---|")
    insts = []
    for r in tuning():
        problem, hw = build(r)
        insts.append((r, problem, hw, problem_bound(problem, hw)))
    preload_solvers(["muzero"])  # the first run's seconds hold no first import
    for path in args.checkpoints.split(","):
        game_fields = load_inference(path)[1]["game"]
        greedy = []
        for _, problem, hw, _ in insts:
            g = Game(problem, hw, GameConfig(**game_fields))
            play_greedy(g)
            greedy.append(g.total_reward())
        for c in (float(x) for x in args.c_scales.split(",")):
            gaps, ratios, searched = [], [], 0
            for (r, problem, hw, bound), g0 in zip(insts, greedy):
                rep = run_solver("muzero", problem, hw, time_limit=600, seed=args.seed, bound=bound,
                                 options={"model": "learned", "checkpoint": path, "c_scale": c,
                                          "simulations": args.simulations})
                if not rep.valid:
                    raise SystemExit(f"{path} on seed {r.seed}: invalid answer: {rep.violation}")
                gaps.append(rep.gap)
                ratios.append(rep.stats["search_value_normalised"] / g0 if g0 > 0 else 1.0)
                searched += rep.stats["answer_from"].startswith("search")
            show(f"| {path} | {c:g} | {statistics.mean(gaps):.3%} | {statistics.mean(ratios):.4f} | "
                 f"{searched}/{len(insts)} |")
    write_results(args.out, "# The learned-dynamics arm on the tuning problems\n\n"
                  "Made by `experiments/tune_muzero_learned.py` (its docstring says what is measured). "
                  "Output as printed:\n\n" + show.text)


def losses(train_path: str, checkpoints: list[str]) -> None:
    import numpy as np
    import torch

    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero.train import configure_torch, loss, resume

    configure_torch()
    state = resume(train_path)
    batch = state.replay.sample(np.random.default_rng(12345), 1024, 5)
    keys = ("policy", "value", "reward", "legal", "consistency")
    print(f"loss parts per position on 1024 positions of {train_path}'s replay buffer (unroll 5)")
    print("| checkpoint | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for path in checkpoints:
        net = ckpt.network_from(ckpt.load(path))
        with torch.no_grad():
            _, parts = loss(net, batch, state.config)
        print(f"| {path} | " + " | ".join(f"{parts[k]:.4f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
