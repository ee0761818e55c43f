"""MuZero n-step value targets from the guided search's own moves at real size, and a head trained on them (issue 40).

    nice python experiments/nstep_value_targets.py generate --data runs/nstep.npz --log runs/nstep.jsonl \
        --seconds 2700 [--sampling reanalyse] [--simulations 8] [--n 8] [--states 8] [--min-size 1000 --max-size 5000]
    nice python experiments/nstep_value_targets.py train --data runs/nstep.npz --out runs/nstep.pt \
        [--target y] [--inputs both] [--log runs/nstep_train.jsonl]
    nice python experiments/nstep_value_targets.py tune --checkpoint runs/a.pt runs/b.pt [--cache runs/tuning.npz] \
        [--count 8] [--states 8]

``generate`` labels training problems (:func:`mallocgame.search.muzero.nstep.generate`: the
:mod:`mallocgame.search.muzero.problems` curriculum, seeds >= 1,000,000, layered, random-interval, realistic and
XLA-compiled programs of ``--min-size``..``--max-size`` buffers; never a tuning or held-out problem) with the
n-step targets of the muzero solver's guided search in map mode (its selection rule, prior power, exploration and
commitment; the prior of ``default.pt``, rollout leaves, ``--simulations`` per move; the features under
``value.pt``'s frozen network, which value leaves read) for ``--seconds`` into ``--data``, continuing an existing
file (resumable: the problems are drawn per index from ``--seed``; ``--cap intervals=3000`` makes a family's larger
draws that size). ``train`` trains a ``context_value`` head
(:func:`mallocgame.search.muzero.value.train_context_head`, added to ``value.pt``) on the column ``--target``
(``y``: n = ``--n`` of the generation; ``y_n1``, ``y_n4``, ``y_n16``, ``y_best``, or ``y_greedy``, the greedy
rollout's label of the same states, the control; ``--clip c``: clipped to ``[-c, c]``; ``--drop ahead``: without
that context feature), chosen on the last problems
of ``--data`` (or those a seeded permutation puts last, ``--val-seed``), its output scaled by the factor best there
or by ``--shrink``; a head on an n-step column is marked
:data:`~mallocgame.search.muzero.nstep.NSTEP_TARGET`, which value leaves never read. ``tune`` measures
a checkpoint's error against the greedy rollout's ``y`` on the tuning problems of the curriculum
(:func:`mallocgame.search.muzero.problems.tuning_recipes`, never trained on nor held out), the quantity
``experiments/value_head_error.py`` measures on the held-out programs: per family and overall, head against
``y = 0``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import Transcript, write_results

from mallocgame.search.muzero import checkpoint as ckpt
from mallocgame.search.muzero.nstep import NSTEP_TARGET, SAMPLINGS, generate
from mallocgame.search.muzero.problems import Curriculum, build, tuning_recipes
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import CONTEXT_FEATURES, label_states, train_context_head
from mallocgame.search.uct import DEFAULT_COMMIT, MCTSConfig
from mallocgame.solvers.muzero import (
    DEFAULT_CHECKPOINT,
    DEFAULT_EXPLORATION,
    DEFAULT_PRIOR_POWER,
    DEFAULT_SELECTION,
    VALUE_CHECKPOINT,
)


def curriculum_of(args) -> Curriculum:
    return Curriculum(min_size=args.min_size, max_size=args.max_size, layered_share=0.6, min_capacity_fraction=0.2,
                      max_capacity_fraction=0.5, realistic_share=args.realistic_share, xla_share=args.xla_share)


@dataclasses.dataclass(frozen=True)
class CappedCurriculum(Curriculum):
    """A curriculum whose problems of a family are at most a size (``caps``: ``(kind, max buffers)`` pairs): the same
    draws, one family's large problems made smaller (one 4,680-buffer random-interval program takes longer to label
    than dozens of the others)."""

    caps: tuple[tuple[str, int], ...] = ()

    def sample(self, rng: np.random.Generator):
        recipe = super().sample(rng)
        cap = dict(self.caps).get(recipe.kind)
        return recipe if cap is None or recipe.n <= cap else dataclasses.replace(recipe, n=cap)


def family_caps(specs: list[str]) -> tuple[tuple[str, int], ...]:
    """``["intervals=3000", ...]`` as ``(("intervals", 3000), ...)``; a malformed one exits with one line."""
    caps = []
    for spec in specs:
        kind, _, size = spec.partition("=")
        if not kind or not size.isdigit():
            print(f"nstep_value_targets.py: --cap {spec!r}: expected KIND=BUFFERS, e.g. intervals=3000", file=sys.stderr)
            sys.exit(2)
        caps.append((kind, int(size)))
    return tuple(caps)


def search_config(simulations: int) -> MCTSConfig:
    """The muzero solver's guided search in map mode (its defaults), rollout leaves, ``simulations`` per move."""
    return MCTSConfig(simulations=simulations, exploration=DEFAULT_EXPLORATION[DEFAULT_SELECTION]["map"],
                      rollout="greedy", commit=DEFAULT_COMMIT["map"], guided=DEFAULT_SELECTION,
                      prior_power=DEFAULT_PRIOR_POWER)


def run_generate(args) -> None:
    value_net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    prior_net, prior_fields = load_agent_network(str(DEFAULT_CHECKPOINT))
    if prior_fields != fields:
        print(f"nstep_value_targets.py: {DEFAULT_CHECKPOINT} and {VALUE_CHECKPOINT} play different games",
              file=sys.stderr)
        sys.exit(2)
    Path(args.data).parent.mkdir(parents=True, exist_ok=True)
    try:
        curriculum = CappedCurriculum(**dataclasses.asdict(curriculum_of(args)), caps=family_caps(args.cap))
        done = generate(args.data, prior_net, value_net, fields, curriculum, search_config(args.simulations),
                        seed=args.seed, seconds=args.seconds, sampling=args.sampling, n=args.n, states=args.states,
                        log=args.log, problems=args.problems, save_every=args.save_every)
    except ValueError as exc:  # a data file this generator cannot continue
        print(f"nstep_value_targets.py: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps({"problems": done, "data": args.data}))


def run_train(args) -> None:
    arrays = dict(np.load(args.data))
    if args.target not in arrays:
        print(f"nstep_value_targets.py: {args.data}: no column {args.target!r}", file=sys.stderr)
        sys.exit(2)
    arrays["y"] = arrays[args.target] if args.clip is None else np.clip(arrays[args.target], -args.clip, args.clip)
    if args.val_seed is not None:  # the validation problems (the last ids) drawn by a seeded permutation of the ids
        ids = np.unique(arrays["problem"])
        renumber = dict(zip(ids.tolist(), np.random.default_rng(args.val_seed).permutation(len(ids)).tolist()))
        arrays["problem"] = np.asarray([renumber[i] for i in arrays["problem"].tolist()], np.int64)
    with tempfile.TemporaryDirectory() as tmp:  # the trainer reads column y
        data = str(Path(tmp) / "data.npz")
        np.savez(data, **arrays)
        summary = train_context_head(data, str(VALUE_CHECKPOINT), args.out, inputs=args.inputs,
                                     seconds=args.train_seconds, seed=args.seed, hidden=args.hidden, log=args.log,
                                     shrink=args.shrink, drop=tuple(args.drop))
    if args.target != "y_greedy":  # the search's n-step return, not the value leaves' one target: marked so
        payload = ckpt.load(args.out)
        ckpt.atomic_save(dict(payload, value_target=NSTEP_TARGET), args.out)
    summary.update(target=args.target, data=args.data, clip=args.clip, fixed_shrink=args.shrink)
    line = json.dumps({"summary": summary})
    if args.log:
        with open(args.log, "a") as fh:
            fh.write(line + "\n")
    print(line)


def tuning_set(args, net, fields) -> dict[str, np.ndarray]:
    """The tuning problems' labelled leaves (``x``, ``context``, the greedy rollout's ``y``, ``kind``, ``problem``),
    read from ``--cache`` where it exists, else labelled and written there."""
    if args.cache and Path(args.cache).exists():
        return dict(np.load(args.cache))
    parts: dict[str, list] = {"x": [], "context": [], "y": [], "kind": [], "problem": []}
    for i, recipe in enumerate(tuning_recipes(curriculum_of(args), args.count)):
        problem, hw = build(recipe)
        rows: dict = {}
        x, y = label_states(problem, hw, net, fields, np.random.default_rng([args.seed, i]), states=args.states,
                            rows=rows)
        for k, v in (("x", x), ("context", rows["context"]), ("y", y), ("kind", np.full(len(y), recipe.kind, "<U10")),
                     ("problem", np.full(len(y), i))):
            parts[k].append(v)
        print(f"tuning problem {i}: {recipe.kind}-{problem.n}-c{recipe.capacity_fraction}, {len(y)} leaves", flush=True)
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    if args.cache:
        np.savez(args.cache + ".tmp.npz", **arrays)
        Path(args.cache + ".tmp.npz").replace(args.cache)
    return arrays


def data_summary(path: str, t) -> None:
    """The generated targets of ``path``: problems and rows per family, and per target column its mean, spread and
    correlation with the greedy rollout's ``y`` of the same leaves."""
    d = np.load(path)
    t(f"\n## The generated targets (`{path}`)\n")
    t("| family | problems | buffers | rows |")
    t("|---|---:|---|---:|")
    for kind in sorted(set(d["kind"].tolist())):
        rows = d["kind"] == kind
        sizes = d["n"][rows]
        t(f"| {kind} | {len(set(d['problem'][rows].tolist()))} | {sizes.min()}-{sizes.max()} | {int(rows.sum())} |")
    t(f"| all | {len(set(d['problem'].tolist()))} | {d['n'].min()}-{d['n'].max()} | {len(d['y'])} |")
    t("\n| target | mean | std | corr with y_greedy | mean (target - y_greedy) |")
    t("|---|---:|---:|---:|---:|")
    g = d["y_greedy"].astype(np.float64)
    for col in ("y", "y_n1", "y_n4", "y_n16", "y_best", "y_greedy"):
        v = d[col].astype(np.float64)
        corr = np.corrcoef(v, g)[0, 1] if v.std() > 0 and g.std() > 0 else float("nan")
        t(f"| {col} | {v.mean():.4f} | {v.std():.4f} | {corr:.3f} | {(v - g).mean():.4f} |")


def run_tune(args) -> None:
    from value_head_error import head_of, summary  # experiments/: the held-out measure's own functions

    t = Transcript()
    nets = [load_agent_network(c) for c in args.checkpoint]
    data = tuning_set(args, *nets[0])
    y = data["y"].astype(np.float64)
    t(f"# n-step value heads on the tuning problems ({args.count} tuning recipes, {args.states} walk states each)\n")
    t("The truth is the greedy rollout's `y` of every child of the walk states (as `value_head_error.py` measures on "
      "the held-out programs); R^2 = 1 - MSE(head) / MSE(y = 0).\n")
    t("| checkpoint | family | rows | MSE head | MAE head | MSE y=0 | MAE y=0 | corr | R^2 |")
    t("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for path, (net, _) in zip(args.checkpoint, nets):
        pred = head_of(net, data["x"], data["context"])
        for family in [*sorted(set(data["kind"].tolist())), "all"]:
            rows = data["kind"] == family if family != "all" else np.ones(len(y), bool)
            t(f"| {path} | {family} | {summary(y[rows], pred[rows])} |")
    if args.data:
        data_summary(args.data, t)
    if args.out:
        write_results(args.out, t.text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("generate", "train", "tune"):
        p = sub.add_parser(name)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--min-size", type=int, default=1000)
        p.add_argument("--max-size", type=int, default=5000)
        p.add_argument("--realistic-share", type=float, default=0.25)
        p.add_argument("--xla-share", type=float, default=0.25)
        if name == "generate":
            p.add_argument("--data", required=True)
            p.add_argument("--log", default=None)
            p.add_argument("--seconds", type=float, default=2700.0)
            p.add_argument("--sampling", choices=SAMPLINGS, default="reanalyse")
            p.add_argument("--simulations", type=int, default=8)
            p.add_argument("--n", type=int, default=8)
            p.add_argument("--states", type=int, default=8)
            p.add_argument("--problems", type=int, default=None, help="stop at this problem count")
            p.add_argument("--cap", nargs="*", default=[], metavar="KIND=BUFFERS",
                           help="at most this many buffers in a family's problems (the same draws otherwise)")
            p.add_argument("--save-every", type=float, default=60.0,
                           help="seconds between saves (0: after every problem, so a stopped run keeps each one)")
        elif name == "train":
            p.add_argument("--data", required=True)
            p.add_argument("--out", required=True)
            p.add_argument("--log", default=None)
            p.add_argument("--target", default="y")
            p.add_argument("--inputs", choices=("both", "context"), default="both")
            p.add_argument("--hidden", type=int, default=32)
            p.add_argument("--train-seconds", type=float, default=300.0)
            p.add_argument("--clip", type=float, default=None, help="train on the target clipped to [-clip, clip]")
            p.add_argument("--drop", nargs="*", default=[], choices=CONTEXT_FEATURES,
                           help="context features the head does not read")
            p.add_argument("--shrink", type=float, default=None,
                           help="the output factor in [0, 1] (instead of the one best on the validation problems)")
            p.add_argument("--val-seed", type=int, default=None,
                           help="validate on the problems a seeded permutation puts last (default: the last ones)")
        else:
            p.add_argument("--checkpoint", nargs="+", required=True)
            p.add_argument("--cache", default=None, help="the labelled tuning set (.npz): read if it exists")
            p.add_argument("--data", default=None, help="the generated targets to summarise too")
            p.add_argument("--out", default=None, help="the record in experiments/results/")
            p.add_argument("--count", type=int, default=8)
            p.add_argument("--states", type=int, default=8)
    args = ap.parse_args()
    {"generate": run_generate, "train": run_train, "tune": run_tune}[args.command](args)


if __name__ == "__main__":
    main()
