"""Train the guided search's value leaves' head (issue 21 item 2, issue 40 item 1): label, then train a head.

    nice -n 10 python experiments/train_value_head.py --data /tmp/value/data.npz --out /tmp/value/value.pt \
        --log experiments/results/value_head_train.jsonl --label-seconds 900 --train-seconds 300
    nice -n 10 python experiments/train_value_head.py --curriculum real --min-size 1000 --max-size 13000 \
        --states 48 --seed 40 --data runs/real.npz --log runs/label.jsonl --label-seconds 2700 --train-seconds 0
    nice -n 10 python experiments/train_value_head.py --data runs/real.npz --label-seconds 0 --head context \
        --out runs/context.pt --log runs/train.jsonl

Phase 1 labels training problems (:func:`mallocgame.search.muzero.value.generate`: the curriculum of
:mod:`mallocgame.search.muzero.problems`, seeds >= 1,000,000, layered programs, random intervals and model
programs of random architecture, ``--min-size``..``--max-size`` buffers, or ``--curriculum real``: `mallocgame
train --curriculum real`'s map-mode programs, XLA-compiled JAX and torch-exported programs of random architecture,
layered programs and random intervals; never a held-out problem) for ``--label-seconds`` into ``--data``
(continued if it exists: the run resumes); phase 2 (skipped at ``--train-seconds 0``) fine-tunes the value head
of ``--init`` (default cur159, value.pt's network) on it (:func:`mallocgame.search.muzero.value.finetune`), or
with ``--head context|both`` trains a ``context_value`` head added to ``--base``
(:func:`mallocgame.search.muzero.value.train_context_head`), and writes ``--out``. The head is chosen on the
last problems of ``--data`` (:func:`mallocgame.search.muzero.value.split`). Both phases append JSON lines to
``--log``; the summary line is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mallocgame.search.muzero.problems import Curriculum, named_curriculum
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import finetune, generate, train_context_head
from mallocgame.solvers.muzero import VALUE_CHECKPOINT

# value.pt was fine-tuned from cur159, the default network then (default.pt is xla21 since)
SHIPPED = Path(__file__).resolve().parents[1] / "search" / "muzero" / "checkpoints" / "cur159.pt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", default=str(SHIPPED))
    ap.add_argument("--log", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label-seconds", type=float, default=900.0)
    ap.add_argument("--train-seconds", type=float, default=300.0)
    ap.add_argument("--problems", type=int, default=None, help="label at most up to this problem count "
                                                                   "(reproduces a run whose count is known)")
    ap.add_argument("--head", choices=("value", "context", "both"), default="value",
                    help="value: fine-tune --init's value head on the value-head inputs; context / both: train a "
                         "context_value head over the leaves' context features alone / with the value-head inputs, "
                         "added to --base")
    ap.add_argument("--base", default=str(VALUE_CHECKPOINT),
                    help="--head context|both: the checkpoint the head is added to (its network must be --init's: "
                         "value.pt's is cur159's)")
    ap.add_argument("--hidden", type=int, default=32, help="--head context|both: hidden units")
    ap.add_argument("--keep-head", action="store_true", help="start from --init's value head, not a fresh one")
    ap.add_argument("--states", type=int, default=16, help="walk steps labelled per problem (all their children)")
    ap.add_argument("--min-size", type=int, default=200)
    ap.add_argument("--max-size", type=int, default=3000)
    ap.add_argument("--realistic-share", type=float, default=0.4)
    ap.add_argument("--curriculum", choices=("value", "real"), default="value",
                    help="value: layered, interval and model programs of --min-size..--max-size (--realistic-share); "
                         "real: `mallocgame train --curriculum real`'s map-mode programs (XLA-compiled JAX, "
                         "torch-exported, layered, random intervals) of --min-size..--max-size")
    args = ap.parse_args()
    net, game_fields = load_agent_network(args.init)
    if args.curriculum == "real":
        curriculum = named_curriculum("real", "map", args.min_size, args.max_size)
    else:
        curriculum = Curriculum(min_size=args.min_size, max_size=args.max_size, layered_share=0.6,
                                min_capacity_fraction=0.2, max_capacity_fraction=0.5,
                                realistic_share=args.realistic_share)
    try:
        problems = generate(args.data, net, game_fields, curriculum, seed=args.seed, seconds=args.label_seconds,
                            log=args.log, states=args.states, problems=args.problems) if args.label_seconds > 0 else None
    except ValueError as exc:  # a data file this labeller cannot continue
        print(f"train_value_head.py: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.train_seconds <= 0:
        print(json.dumps({"problems": problems}))
        return
    if args.head == "value":
        summary = finetune(args.data, args.init, args.out, seconds=args.train_seconds, seed=args.seed, log=args.log,
                           fresh=not args.keep_head)
    else:
        summary = train_context_head(args.data, args.base, args.out, inputs=args.head, seconds=args.train_seconds,
                                     seed=args.seed, hidden=args.hidden, log=args.log)
    summary["problems"] = problems
    line = json.dumps({"summary": summary})
    if args.log:
        with open(args.log, "a") as fh:
            fh.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
