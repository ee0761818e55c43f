"""Leave-one-problem-out error of value-leaf head configurations on labelled training problems (issue 40 item 1).

    nice python experiments/value_head_cv.py --data runs/real.npz [--out value_head_cv_real.md]
    nice python experiments/value_head_cv.py --data runs/nstep.npz --target y --truth y_greedy [--clip 1 0.5] \
        [--configs context:8] [--out value_head_cv_nstep.md]

The choice of the ``context_value`` head (:func:`mallocgame.search.muzero.value.train_context_head`) made on
training problems only: for each configuration (inputs: the leaf's context features alone or with the value
head's inputs; hidden units) a head is trained on all labelled problems of ``--data`` (written by
``experiments/train_value_head.py``) but one and scored on that one, for every problem in turn, as
``train_context_head`` trains it (standardised inputs, AdamW, MSE; a fixed number of epochs, no shrinking). It
reports, per problem kind and overall, ``R^2 = 1 - MSE(head) / MSE(y = 0)`` (above 0: the head knows more than the
reference episode on problems it never saw). No held-out problem is read.

``--target`` names the column the heads are trained on (``y``; on ``nstep_value_targets.py``'s data also ``y_n16``,
``y_best``, ``y_greedy``) and ``--truth`` the one they are scored against (by default the target; ``y_greedy`` is
the quantity the tuning and held-out checks measure). ``--drop ahead`` leaves a context feature out of every
head. ``--clip c`` adds, per configuration, heads trained on the
target clipped to ``[-c, c]`` (one outlying problem's search gains pull less). Each configuration also gets the output
factor ``s`` in [0, 1] with the lowest squared error of ``s x prediction`` against the truth over all the
left-out predictions, and a second row with the R^2 of ``s x prediction``: a shrink chosen on the training problems
(fitted on the same predictions it is scored on, so that row is optimistic by one parameter).
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import Transcript, write_results

from mallocgame.search.muzero.value import CONTEXT_FEATURES

CONFIGS = (("context", 8), ("context", 32), ("both", 32))


def held_out_predictions(x: np.ndarray, y: np.ndarray, problems: np.ndarray, used: np.ndarray, hidden: int,
                         epochs: int, seed: int) -> np.ndarray:
    """Each problem's rows predicted by a head trained on the other problems' rows."""
    import torch

    torch.set_num_threads(1)
    pred = np.zeros(len(y))
    for q in np.unique(problems):
        tr, te = problems != q, problems == q
        mean, std = x[tr].mean(0), x[tr].std(0) + 1e-6
        z = np.where(used, (x - mean) / std, 0.0).astype(np.float32)
        torch.manual_seed(seed)
        head = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
        opt = torch.optim.AdamW(head.parameters(), lr=1e-3, weight_decay=1e-3)
        zt, yt = torch.from_numpy(z[tr]), torch.from_numpy(y[tr])
        gen = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            for idx in torch.randperm(len(yt), generator=gen).split(256):
                loss = ((head(zt[idx]).squeeze(-1) - yt[idx]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            pred[te] = head(torch.from_numpy(z[te])).squeeze(-1).numpy()
    return pred


def r_squared(y: np.ndarray, pred: np.ndarray, rows: np.ndarray) -> str:
    """``1 - MSE(pred) / MSE(y = 0)`` over ``rows``, "-" where every label there is 0."""
    mse0 = float((y[rows] ** 2).mean())
    return f"{1.0 - float(((pred[rows] - y[rows]) ** 2).mean()) / mse0:.3f}" if mse0 > 1e-12 else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="value_head_cv_real.md")
    ap.add_argument("--target", default="y", help="the column the heads are trained on")
    ap.add_argument("--truth", default=None, help="the column they are scored against (default: --target)")
    ap.add_argument("--clip", type=float, nargs="*", default=[], help="also train on the target clipped to [-c, c]")
    ap.add_argument("--drop", nargs="*", default=[], help="context features no head reads (value.CONTEXT_FEATURES)")
    ap.add_argument("--configs", nargs="*", default=None, help="inputs:hidden pairs (default: context:8 context:32 "
                                                                "both:32)")
    args = ap.parse_args()
    d = np.load(args.data)
    truth_column = args.truth or args.target
    for column in (args.target, truth_column):
        if column not in d.files:
            raise SystemExit(f"value_head_cv.py: {args.data}: no column {column!r}")
    configs = CONFIGS if args.configs is None else [(c.split(":")[0], int(c.split(":")[1])) for c in args.configs]
    target, y, problems, kinds = (d[args.target].astype(np.float32), d[truth_column].astype(np.float64),
                                  d["problem"], d["kind"])
    x = np.concatenate([d["x"], d["context"]], 1).astype(np.float32)
    width = d["x"].shape[1]
    t = Transcript()
    t("# value leaves' head: leave-one-problem-out error on the training problems\n")
    t(f"`{args.data}`: {len(y)} labelled children of {len(np.unique(problems))} problems "
      f"({', '.join(f'{k} {int((kinds == k).sum())}' for k in np.unique(kinds))} rows), {args.epochs} epochs; "
      f"trained on `{args.target}`, scored against `{truth_column}`"
      + (f"; context features not read: {', '.join(args.drop)}" if args.drop else "") + "\n")
    groups = [str(k) for k in np.unique(kinds)] + ["all"]
    t("| inputs | hidden | clip | shrink | " + " | ".join(f"R^2 {g}" for g in groups) + " |")
    t("|---|---:|---:|---:|" + "---:|" * len(groups))
    for inputs, hidden in configs:
        used = np.ones(x.shape[1], bool) if inputs == "both" else np.arange(x.shape[1]) >= width
        for name in args.drop:
            used[width + CONTEXT_FEATURES.index(name)] = False
        for clip in [None, *args.clip]:
            trained_on = target if clip is None else np.clip(target, -clip, clip)
            pred = held_out_predictions(x, trained_on, problems, used, hidden, args.epochs, args.seed)
            s = float(np.clip((pred * y).sum() / max(float((pred * pred).sum()), 1e-12), 0.0, 1.0))
            for shrink, label in ((1.0, "1"), (s, f"{s:.3f}*")):
                cells = [r_squared(y, shrink * pred, kinds == g if g != "all" else np.ones(len(y), bool))
                         for g in groups]
                t(f"| {inputs} | {hidden} | {'-' if clip is None else clip} | {label} | " + " | ".join(cells) + " |")
    t("\n`*`: the factor with the lowest squared error over all left-out predictions (chosen on these problems).")
    write_results(args.out, t.text)


if __name__ == "__main__":
    main()
