"""The value head's error against held-out returns (issue 40 item 1): what value leaves would back up, measured.

    nice python experiments/value_head_error.py [--min-n 1000] [--states 8] [--checkpoint PATH] [--out PATH]

For every held-out program of at least ``--min-n`` buffers (:func:`heldout.held_out`: the generated families'
fresh seeds and the ``xla`` suite at 25% and 40% of the max live bytes; nothing tuned or trained on them) it labels
the children of ``--states`` states of a walk that follows the greedy (a random move with probability 0.05;
:func:`mallocgame.search.muzero.value.label_states`, seeded per problem) with their true ``y``: the return of a
greedy rollout to the end relative to the reference episode, in percent of that episode's return (the quantity a
value leaf estimates; :mod:`mallocgame.search.muzero.value`). It reports per family and overall the rows, the
value head's mean squared and mean absolute error, those of ``y = 0`` (the reference control: no network), the
correlation of the head with the truth and ``R^2 = 1 - MSE(head) / MSE(y = 0)`` (above 0: the head knows more
than the reference episode; "-" where every label is 0). The checkpoint is ``value.pt`` (the network value leaves
read by default); where it has a ``context_value`` head, that head (over the value head's input and the leaf's
context features, as :class:`~mallocgame.search.muzero.value.NetworkValue` reads it) is what is measured.
Writes ``experiments/results/value_head_error.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, write_results
from heldout import held_out

from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import label_states
from mallocgame.solvers.muzero import VALUE_CHECKPOINT


def head_of(net, features: np.ndarray, context: np.ndarray | None = None) -> np.ndarray:
    """What a value leaf reads (``y`` in percent) of value-head inputs ``[m, L + d]`` and the leaves' context
    features ``[m, C]``: the ``context_value`` head where the network has one, else the value head."""
    if not len(features):
        return np.zeros(0)
    if context is not None and getattr(net, "context_value", None) is not None:
        return net.context_value(np.concatenate([features, context], 1))[:, 0].astype(np.float64)
    return net.value_head(features)[:, 0].astype(np.float64)


def summary(y: np.ndarray, pred: np.ndarray) -> str:
    if not len(y):
        return "0 | - | - | - | - | - | -"
    mse, mse0 = float(((pred - y) ** 2).mean()), float((y ** 2).mean())
    corr = float(np.corrcoef(pred, y)[0, 1]) if y.std() > 0 and pred.std() > 0 else float("nan")
    # R^2 only where the truth varies: on a program whose every labelled child ends as the reference does (y = 0 to
    # float rounding) any head's error divided by ~1e-25 says nothing
    r2 = f"{1.0 - mse / mse0:.3f}" if mse0 > 1e-12 else "-"
    return (f"{len(y)} | {mse:.4g} | {float(np.abs(pred - y).mean()):.4g} | {mse0:.4g} | "
            f"{float(np.abs(y).mean()):.4g} | {corr:.3f} | {r2}")


def family_table(t: Transcript, by_family: dict[str, list[tuple[np.ndarray, np.ndarray]]]) -> None:
    """The error table by family and over all rows: ``by_family`` maps a family to its (truth, prediction) pairs."""
    t("\n| family | rows | MSE head | MAE head | MSE y=0 | MAE y=0 | corr | R^2 |")
    t("|---|---:|---:|---:|---:|---:|---:|---:|")
    every = []
    for family, parts in by_family.items():
        every += parts
        t(f"| {family} | {summary(np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts]))} |")
    if every:
        t(f"| all | {summary(np.concatenate([a for a, _ in every]), np.concatenate([b for _, b in every]))} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-n", type=int, default=1000)
    ap.add_argument("--families", default="generated,xla")
    ap.add_argument("--states", type=int, default=8)
    ap.add_argument("--checkpoint", default=str(VALUE_CHECKPOINT))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="value_head_error.md")
    args = ap.parse_args()
    net, fields = load_agent_network(args.checkpoint)
    t = Transcript()
    t(f"# value head error on held-out returns (>= {args.min_n} buffers)\n")
    t(f"checkpoint `{args.checkpoint}`, {args.states} walk states a program, all their children labelled\n")
    t("| program | n | rows | MSE head | MAE head | MSE y=0 | MAE y=0 | corr | R^2 | seconds |")
    t("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by_family: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for i, h in enumerate(p for p in held_out(tuple(args.families.split(","))) if p.problem.n >= args.min_n):
        start = time.monotonic()
        rows: dict = {}
        x, y = label_states(h.problem, h.hardware, net, fields, np.random.default_rng([args.seed, i]),
                            states=args.states, rows=rows)
        pred = head_of(net, x, rows["context"])
        y = y.astype(np.float64)
        by_family.setdefault(h.family, []).append((y, pred))
        t(f"| {h.label} | {h.problem.n} | {summary(y, pred)} | {time.monotonic() - start:.1f} |")
    family_table(t, by_family)
    write_results(args.out, t.text)


if __name__ == "__main__":
    main()
