"""Leave-one-problem-out error of value-leaf head configurations on labelled training problems (issue 40 item 1).

    nice python experiments/value_head_cv.py --data runs/real.npz [--out value_head_cv_real.md]

The choice of the ``context_value`` head (:func:`mallocgame.search.muzero.value.train_context_head`) made on
training problems only: for each configuration (inputs: the leaf's context features alone or with the value
head's inputs; hidden units) a head is trained on all labelled problems of ``--data`` (written by
``experiments/train_value_head.py``) but one and scored on that one, for every problem in turn, as
``train_context_head`` trains it (standardised inputs, AdamW, MSE; a fixed number of epochs, no shrinking). It
reports, per problem kind and overall, ``R^2 = 1 - MSE(head) / MSE(y = 0)`` (above 0: the head knows more than the
reference episode on problems it never saw). No held-out problem is read.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import Transcript, write_results

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="value_head_cv_real.md")
    args = ap.parse_args()
    d = np.load(args.data)
    y, problems, kinds = d["y"].astype(np.float32), d["problem"], d["kind"]
    x = np.concatenate([d["x"], d["context"]], 1).astype(np.float32)
    width = d["x"].shape[1]
    t = Transcript()
    t("# value leaves' head: leave-one-problem-out error on the training problems\n")
    t(f"`{args.data}`: {len(y)} labelled children of {len(np.unique(problems))} problems "
      f"({', '.join(f'{k} {int((kinds == k).sum())}' for k in np.unique(kinds))} rows), {args.epochs} epochs\n")
    groups = [str(k) for k in np.unique(kinds)] + ["all"]
    t("| inputs | hidden | " + " | ".join(f"R^2 {g}" for g in groups) + " |")
    t("|---|---:|" + "---:|" * len(groups))
    for inputs, hidden in CONFIGS:
        used = np.ones(x.shape[1], bool) if inputs == "both" else np.arange(x.shape[1]) >= width
        pred = held_out_predictions(x, y, problems, used, hidden, args.epochs, args.seed)
        cells = []
        for g in groups:
            m = kinds == g if g != "all" else np.ones(len(y), bool)
            mse0 = float((y[m] ** 2).mean())
            cells.append(f"{1.0 - float(((pred[m] - y[m]) ** 2).mean()) / mse0:.3f}" if mse0 > 1e-12 else "-")
        t(f"| {inputs} | {hidden} | " + " | ".join(cells) + " |")
    write_results(args.out, t.text)


if __name__ == "__main__":
    main()
