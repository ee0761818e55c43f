"""Speed of the prefetch game on real programs: steps per second of greedy and random episodes.

For each program of the ``xla`` suite (XLA-compiled JAX training and inference steps, 285-13,465
buffers) in prefetch mode at 25% and 40% of its max live bytes -- the held-out protocol's
capacities (experiments/heldout.py) -- plays one greedy episode (XLA's decision ladder with its
look-ahead, the rollout policy of ``mcts`` and the searches' fallback) and one episode of
uniformly random legal moves from a fresh game, and reports the steps (use segments), seconds and
steps/s, and the game data's build time. The steps/s bound how many simulations a prefetch search
gets: a simulation plays the rest of an episode.

Usage: nice python experiments/bench_prefetch_game.py [--entries a,b] [--capacities 0.25,0.4] [--seed 0]
       [--random-seconds 120] [--out PATH]

A random episode builds far more intervals and copies than the greedy's; where it would run for minutes it is
stopped after ``--random-seconds`` and its steps/s are over the steps played (marked in the table).

The speed before the compiled copy service and hole finder (commit 1ee9df0) is quoted in
docs/results.md, "The compiled parts of the prefetch game", from an in-process probe.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, write_results


def episode(game, policy: str, rng: np.random.Generator, seconds: float = float("inf")) -> tuple[int, float]:
    """Play ``game`` to the end (or for ``seconds``); ``(steps played, seconds)``."""
    t = time.perf_counter()
    while not game.done and time.perf_counter() - t < seconds:
        if policy == "greedy":
            game.step(game.greedy_action())
        else:
            legal = game.legal_actions()
            game.step(int(legal[rng.integers(len(legal))]))
    return game.steps, time.perf_counter() - t


def main() -> None:
    from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries
    from mallocgame.inputs.workloads import with_capacity
    from mallocgame.search.game import Game, GameConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", default="", help="comma-separated xla-suite entries (default: all)")
    ap.add_argument("--capacities", default="0.25,0.4", help="fractions of the max live bytes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-seconds", type=float, default=120.0,
                    help="stop a random episode after this long (its steps/s are then over the steps played)")
    ap.add_argument("--out", default="bench_prefetch_game.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    hw = PRESETS["tpuv4i"]
    wanted = set(filter(None, args.entries.split(",")))
    show = Transcript()
    show("| program | buffers | capacity | steps | build s | greedy s | greedy steps/s | random s | random steps/s "
         "| greedy value = evaluator |")
    show("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for entry in suite_entries("xla"):
        if wanted and entry.name not in wanted:
            continue
        base = entry.build()
        for fraction in (float(x) for x in args.capacities.split(",")):
            # as the held-out protocol builds them (experiments/heldout.py): with_capacity, then prefetch mode
            held = with_capacity(base, fraction)
            problem = prepare(held, mode="prefetch", hardware=hw, capacity=held.capacity)[0]
            t = time.perf_counter()
            fresh = Game(problem, hw, GameConfig(variant="prefetch"))
            build = time.perf_counter() - t
            game = fresh.clone()
            steps, greedy_s = episode(game, "greedy", np.random.default_rng(args.seed))
            ev = PrefetchEvaluator.of(problem, hw)
            exact = abs(game.total_reward() - ev.value(game.intervals()) / ev.time_all_slow) < 1e-9
            played, random_s = episode(fresh.clone(), "random", np.random.default_rng(args.seed), args.random_seconds)
            cut = "" if played == steps else f" (stopped after {played} steps)"
            show(f"| {entry.name} | {problem.n} | {fraction:g} | {steps} | {build:.2f} | {greedy_s:.2f} "
                 f"| {steps / greedy_s:,.0f} | {random_s:.2f}{cut} | {played / random_s:,.0f} | {exact} |")
    write_results(args.out, (
        "# Prefetch game speed on the xla suite\n\n"
        "Made by `experiments/bench_prefetch_game.py` (its docstring says what is measured). tpuv4i, default "
        "`GameConfig(variant=\"prefetch\")`; one greedy and one random episode per program and capacity, from a "
        f"fresh game (`build s`: constructing it; not timed in the episodes); a random episode stops after "
        f"{args.random_seconds:g} s. The last column checks the greedy "
        "episode's summed rewards against the prefetch evaluator at 1e-9.\n\n"
        "Output as printed:\n\n" + show.text))


if __name__ == "__main__":
    main()
