"""Labels of the value leaves' target ``y`` in prefetch mode at real size (issue 40 item 5).

    OMP_NUM_THREADS=1 nice python experiments/label_prefetch_value.py --out runs/pf.npz --log runs/pf.log \
        --seconds 3000 [--seed 0] [--states 32] [--min-size 1000 --max-size 13000]

Problems of the ``real`` prefetch curriculum (:func:`mallocgame.search.muzero.problems.named_curriculum`: layered,
XLA-compiled and torch-exported programs, training seeds >= ``TRAIN_SEED_BASE``; never a held-out or tuning seed)
in prefetch mode, labelled by :func:`mallocgame.search.muzero.value.generate_prefetch`; an existing ``--out`` is
continued (problem ``i`` is the same recipe whenever it is labelled).
"""

from __future__ import annotations

import argparse

from mallocgame.search.muzero.problems import named_curriculum
from mallocgame.search.muzero.value import generate_prefetch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--log", default=None)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--problems", type=int, default=None, help="stop after this many problems in all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--states", type=int, default=32)
    ap.add_argument("--leaf-steps", type=int, default=64, help="greedy steps after a child's move (the auto leaf's)")
    ap.add_argument("--min-size", type=int, default=1000)
    ap.add_argument("--max-size", type=int, default=13000)
    args = ap.parse_args()
    curriculum = named_curriculum("real", "prefetch", args.min_size, args.max_size)
    done = generate_prefetch(args.out, curriculum, seed=args.seed, seconds=args.seconds, log=args.log,
                             states=args.states, leaf_steps=args.leaf_steps, problems=args.problems)
    print(f"{args.out}: {done} problems labelled")


if __name__ == "__main__":
    main()
