"""muzero against mcts and the baselines at equal wall time on held-out real-size programs (issue 40 item 6).

    nice python experiments/compare_equal_wall_time.py --mode map --seconds 10
    nice python experiments/compare_equal_wall_time.py --mode map --seconds 60
    nice python experiments/compare_equal_wall_time.py --mode prefetch --seconds 10   # and 60
    python experiments/compare_equal_wall_time.py --mode map --seconds 10 --summary-only

Fixed in code before its first run (this docstring is the method; nothing below is tuned on its results).

**Problems** (:func:`problems`), all of at least ``MIN_BUFFERS`` = 1,000 buffers, smallest first:

* ``torch``: programs of a family no shipped network was trained on (the ``torch`` curriculum kind came after
  them; the ``torch`` family of ``heldout.py`` is 36-377 buffers): PyTorch models of random architecture
  (:func:`mallocgame.search.muzero.problems.torch_workload`, up to 3,000 buffers) from the fresh seeds
  ``TORCH_SEEDS`` (600,000-600,007: below every held-out, confirmation and training seed range of
  ``heldout.py``; a check below refuses an overlap), exported by ``torch.export``, map mode at 25% / 40% of the max
  live bytes (alternating by seed) on ``tpuv4i``; a program under 1,000 buffers is left out;
* ``xla``: the ``xla`` suite's JAX programs of 1,000 buffers or more (1,247-13,465) at 25% and 40%
  (:func:`heldout.held_out`), held out since the protocol was fixed; their family is not wholly unseen: the
  default network's curriculum held generated XLA programs of other architectures;
* ``generated`` (only when asked for, ``--families``): the held-out generated recipes of 1,000 buffers or more,
  fresh seeds of families the networks were trained on.

``--mode prefetch`` turns each into prefetch mode at its capacity (:func:`heldout.in_prefetch_mode`).

**Contestants** (``CONTESTANTS``), each through :func:`mallocgame.engine.runner.run_solver` (validated, scored against
the problem's bound) on its own copy of the problem (``heldout_muzero_mcts.own_copy``: no contestant inherits
another's baselines or game data), seed 0, the same wall time ``--seconds`` each and no cap on simulations:
``muzero`` (the solver's defaults), ``muzero-auto`` (``leaf=auto``: value leaves from the value head, batched,
where a measured rollout costs more than a measured leaf; ``search/uct.py`` ``auto_leaf``), ``mcts`` (its
defaults) and the mode's baseline, ``greedy-xla`` in map mode and ``msa`` in prefetch mode (``--contestants``: a
subset of them, for a rerun of a pair at a later commit).

**Reported** (``heldout_muzero_mcts.summary``): per family and overall, mean gaps to the bound, simulations per
second of every contestant (simulations over its seconds), and wins / ties / losses with the one-sided sign test
(``scipy.stats.binomtest``, ties dropped: values within 1e-9 of the bound) that the first of each pair of
``PAIRS`` wins more often than it loses. Every run is appended to ``--csv`` as it ends; a rerun skips what is
there, so the script resumes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import Transcript, fenced, write_results
from heldout import HELDOUT_SEED_BASE, Held, all_seeds, held_out, in_prefetch_mode
from heldout_muzero_mcts import read_csvs, run_heldout, summary

MIN_BUFFERS = 1000
TORCH_SEEDS = tuple(range(600_000, 600_008))
TORCH_MAX_BUFFERS = 3000
TORCH_CAPACITIES = (0.25, 0.4)
FAMILIES = ("torch", "xla", "generated")
DEFAULT_FAMILIES = "torch,xla"
BASELINE = {"map": "greedy-xla", "prefetch": "msa"}
CONTESTANTS = {"muzero": ("muzero", {}), "muzero-auto": ("muzero", {"leaf": "auto"}), "mcts": ("mcts", {}),
               "greedy-xla": ("greedy-xla", {}), "msa": ("msa", {})}
SEARCHES = ("muzero", "muzero-auto", "mcts")
PAIRS = (("muzero", "mcts"), ("muzero-auto", "mcts"), ("muzero", "greedy-xla"), ("muzero-auto", "greedy-xla"),
         ("mcts", "greedy-xla"), ("muzero", "msa"), ("muzero-auto", "msa"), ("mcts", "msa"),
         ("muzero-auto", "muzero"))

assert not set(TORCH_SEEDS) & all_seeds() and max(TORCH_SEEDS) < HELDOUT_SEED_BASE


def torch_programs() -> list[Held]:
    """The ``torch`` family (module docstring): one map-mode problem per seed of ``TORCH_SEEDS``."""
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.workloads import with_capacity
    from mallocgame.search.muzero.problems import torch_architecture, torch_workload

    out = []
    for i, seed in enumerate(TORCH_SEEDS):
        frac = TORCH_CAPACITIES[i % len(TORCH_CAPACITIES)]
        program = torch_workload(TORCH_MAX_BUFFERS, seed)
        if program.n < MIN_BUFFERS:
            continue
        model = torch_architecture(seed)[0]
        problem = with_capacity(program, frac).replace(mode="map")
        out.append(Held("torch", f"torch:{model}-s{seed}-c{frac:g}", problem, PRESETS["tpuv4i"]))
    return out


def problems(families: tuple[str, ...], mode: str = "map") -> list[Held]:
    """The problems of ``families`` (module docstring) of at least ``MIN_BUFFERS`` buffers in ``mode``."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise SystemExit(f"--families: unknown {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
    out = torch_programs() if "torch" in families else []
    out += [h for h in held_out(tuple(f for f in families if f in ("xla", "generated")))]
    out = [h for h in out if h.problem.n >= MIN_BUFFERS]
    return in_prefetch_mode(out) if mode == "prefetch" else out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("map", "prefetch"), required=True)
    ap.add_argument("--seconds", type=int, choices=(10, 60), required=True)
    ap.add_argument("--families", default=DEFAULT_FAMILIES, help=f"comma-separated of {', '.join(FAMILIES)}")
    ap.add_argument("--csv", default=None, help="default: equal_wall_time_{mode}_t{seconds}.csv in experiments/results")
    ap.add_argument("--out", default=None, help="default: the CSV's name with .md")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--contestants", default=None,
                    help="comma-separated subset of the four (default: all); a rerun of a pair at a new commit")
    args = ap.parse_args()
    csv_name = args.csv or f"equal_wall_time_{args.mode}_t{args.seconds}.csv"
    out_name = args.out or Path(csv_name).with_suffix(".md").name
    wanted = ["muzero", "muzero-auto", "mcts", BASELINE[args.mode]]
    if args.contestants:
        chosen = args.contestants.split(",")
        if not set(chosen) <= set(wanted):
            raise SystemExit(f"--contestants: a subset of {', '.join(wanted)}, got {args.contestants!r}")
        wanted = [w for w in wanted if w in chosen]
    budget = f"t{args.seconds}"
    # the attributes run_heldout reads: every family, size and seed is fixed above
    run_args = argparse.Namespace(families=args.families, budgets=budget, contestants=",".join(wanted), seed=0,
                                  time_limit=float(args.seconds), max_n=None, min_n=MIN_BUFFERS)
    csv_path, names, rows = read_csvs(csv_name, args.summary_only)
    show = Transcript()
    if not args.summary_only:
        run_heldout(run_args, lambda families: problems(families, args.mode), CONTESTANTS, [budget], wanted,
                    csv_path, rows, show, title=f"equal wall time, {args.mode} mode", searches=SEARCHES)
    show(f"summary of {names} ({len(rows)} runs); contestants {', '.join(wanted)}")
    summary(rows, [budget], wanted, show, PAIRS)
    write_results(out_name, (
        f"# muzero vs mcts vs {BASELINE[args.mode]} at equal wall time ({args.seconds} s), {args.mode} mode, "
        "held-out programs of 1,000+ buffers (issue 40)\n\n"
        "Made by `experiments/compare_equal_wall_time.py` (its docstring is the method, fixed before the first run). "
        f"Every run is in `{names}`. Output as printed:\n\n" + fenced(show.text)))


if __name__ == "__main__":
    main()
