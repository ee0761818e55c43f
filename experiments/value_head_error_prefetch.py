"""The prefetch value head (issue 40 item 5): chosen by leave-one-problem-out on training labels, its error on
held-out returns against ``y = 0``.

    OMP_NUM_THREADS=1 nice python experiments/value_head_error_prefetch.py --data runs/pf.npz --head runs/pfhead.pt \
        [--epochs 40] [--families generated,xla,torch] [--min-n 1000] [--states 16] [--out value_head_error_prefetch.md]

1. *Choice, training problems only.* ``--data`` holds the labels of
   ``experiments/label_prefetch_value.py`` (training seeds of the real prefetch curriculum). For every configuration
   of :data:`CONFIGS` (the :data:`~mallocgame.search.muzero.value.PREFETCH_FEATURES` read, hidden units) a head is
   trained on all labelled problems but one and scored on that one, in turn (``value_head_cv.held_out_predictions``);
   ``R^2 = 1 - MSE(head) / MSE(y = 0)`` per family and overall. The configuration chosen has the best overall
   ``R^2`` among those above 0 in every family (else the best overall); it is trained on all the labels
   (:func:`~mallocgame.search.muzero.value.train_prefetch_head`) into ``--head``.
2. *Error on held-out returns.* Every held-out program in prefetch mode of at least ``--min-n`` buffers
   (:func:`heldout.held_out_prefetch`; nothing chosen or trained on them) is labelled as the training problems are
   (:func:`~mallocgame.search.muzero.value.label_prefetch_states`, ``--states`` walk states, seeded per program) and
   the head's error reported against ``y = 0`` (the reference control, what prefetch leaves read without a head):
   per program, per family and overall, MSE, MAE, correlation and ``R^2``.
Writes ``experiments/results/value_head_error_prefetch.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, write_results
from heldout import held_out_prefetch
from value_head_cv import held_out_predictions
from value_head_error import family_table, summary

from mallocgame.search.muzero.value import (
    PREFETCH_FEATURES,
    label_prefetch_states,
    load_prefetch_head,
    train_prefetch_head,
)

#: (features read, hidden units) tried by leave-one-problem-out.
CONFIGS = ((("ahead", "remaining", "progress"), 16),
           (("ahead", "progress", "scale"), 8),
           (("ahead", "remaining", "progress", "scale", "density"), 16),
           (PREFETCH_FEATURES, 16),
           (PREFETCH_FEATURES, 32))


def r2_cells(y: np.ndarray, pred: np.ndarray, kinds: np.ndarray, groups: list[str]) -> list[float]:
    out = []
    for g in groups:
        m = kinds == g if g != "all" else np.ones(len(y), bool)
        mse0 = float((y[m] ** 2).mean())
        out.append(1.0 - float(((pred[m] - y[m]) ** 2).mean()) / mse0 if mse0 > 1e-12 else float("nan"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--head", required=True, help="where the chosen head is written")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="generated,xla,torch")
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--states", type=int, default=16)
    ap.add_argument("--leaf-steps", type=int, default=64)
    ap.add_argument("--out", default="value_head_error_prefetch.md")
    args = ap.parse_args()
    d = np.load(args.data)
    x, y, problems, kinds = d["context"].astype(np.float32), d["y"].astype(np.float32), d["problem"], d["kind"]
    t = Transcript()
    t("# prefetch value head: choice on training problems, error on held-out returns\n")
    per_kind = ", ".join(f"{k} {len(np.unique(problems[kinds == k]))} problems / {int((kinds == k).sum())} rows"
                         for k in np.unique(kinds))
    t(f"`{args.data}`: {len(y)} labelled leaves of {len(np.unique(problems))} training problems ({per_kind}), "
      f"{args.epochs} epochs a fold\n")
    t("## 1. leave-one-problem-out on the training problems\n")
    groups = [str(k) for k in np.unique(kinds)] + ["all"]
    t("| features | hidden | " + " | ".join(f"R^2 {g}" for g in groups) + " | seconds |")
    t("|---|---:|" + "---:|" * (len(groups) + 1))
    scored = []
    for inputs, hidden in CONFIGS:
        start = time.monotonic()
        used = np.asarray([name in inputs for name in PREFETCH_FEATURES])
        pred = held_out_predictions(x, y, problems, used, hidden, args.epochs, args.seed)
        cells = r2_cells(y, pred, kinds, groups)
        scored.append((inputs, hidden, cells))
        t(f"| {','.join(inputs)} | {hidden} | " + " | ".join(f"{c:.3f}" for c in cells)
          + f" | {time.monotonic() - start:.0f} |")
    positive = [s for s in scored if all(c > 0 for c in s[2] if c == c)]
    inputs, hidden, cells = max(positive or scored, key=lambda s: s[2][-1])
    t(f"\nchosen: {','.join(inputs)}, {hidden} hidden (overall R^2 {cells[-1]:.3f}; "
      f"{'above 0 in every family' if positive else 'NOT above 0 in every family'})\n")
    fit = train_prefetch_head(args.data, args.head, inputs=inputs, hidden=hidden, epochs=4 * args.epochs,
                              seed=args.seed)
    t(f"trained on all labels into `{args.head}`: validation (last 15% of the problems) MSE y=0 "
      f"{fit['val_mse_zero']:.4g}, best epoch {fit['val_mse_best']:.4g}, shrink {fit['shrink']:.3f}, "
      f"saved {fit['val_mse_shrunk']:.4g}\n")
    head, why = load_prefetch_head(args.head)
    assert head is not None, why
    t(f"## 2. error on held-out returns (prefetch mode, >= {args.min_n} buffers)\n")
    t(f"{args.states} walk states a program, every child labelled after {args.leaf_steps} greedy steps\n")
    t("| program | family | n | rows | MSE head | MAE head | MSE y=0 | MAE y=0 | corr | R^2 | seconds |")
    t("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by_family: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    held = [h for h in held_out_prefetch(tuple(args.families.split(","))) if h.problem.n >= args.min_n]
    for i, h in enumerate(held):
        start = time.monotonic()
        feats, truth = label_prefetch_states(h.problem, h.hardware, np.random.default_rng([args.seed, i]),
                                             states=args.states, leaf_steps=args.leaf_steps)
        pred = head(feats) if len(truth) else np.zeros(0)
        truth = truth.astype(np.float64)
        by_family.setdefault(h.family, []).append((truth, pred))
        t(f"| {h.label} | {h.family} | {h.problem.n} | {summary(truth, pred)} | {time.monotonic() - start:.1f} |")
    family_table(t, by_family)
    write_results(args.out, t.text)


if __name__ == "__main__":
    main()
