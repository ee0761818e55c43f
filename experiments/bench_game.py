"""Speed of the mallocGame: steps per second, clone and observation cost (issue 4).

For generated ``layered_network`` inputs of 500 and 5,000 buffers, both game variants
and two policies (uniformly random legal actions; the greedy's choice), plays episodes
from a fresh game and reports steps/s of the first episode (cold: per-problem caches
are filled) and of the following ones (warm), plus microseconds per ``clone()`` and per
``observation()``. The goal of issue 4 is >= 5,000 steps/s on 500 buffers.

Usage: nice python experiments/bench_game.py [--sizes 500 5000] [--episodes 5] [--seed 1] [--out PATH]

Writes the table to ``--out`` (default ``experiments/results/bench_game.md``; the write-up
``game_speed.md`` quotes a run of this script and is kept by hand).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from _common import Transcript, write_results

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData


def play(game: Game, policy: str, rng: np.random.Generator) -> int:
    while not game.done:
        if policy == "greedy":
            game.step(game.greedy_action())
        else:
            legal = game.legal_actions()
            game.step(int(legal[rng.integers(len(legal))]))
    return game.steps


def bench(n: int, variant: str, policy: str, episodes: int, seed: int) -> dict:
    hw = PRESETS["tpuv4i"]
    problem = layered_network(n, seed=seed)
    t = time.perf_counter()
    data = GameData(problem, hw)
    fresh = Game(problem, hw, GameConfig(variant=variant), data=data)
    build = time.perf_counter() - t
    rng = np.random.default_rng(seed)
    rates = []
    for _ in range(episodes):
        game = fresh.clone()
        t = time.perf_counter()
        steps = play(game, policy, rng)
        rates.append(steps / (time.perf_counter() - t))
    # clone() and observation() on a state half-way through a greedy episode.
    mid = fresh.clone()
    while mid.steps < mid.data.n // 2 and not mid.done:
        mid.step(mid.greedy_action())
    reps = 200
    t = time.perf_counter()
    for _ in range(reps):
        mid.clone()
    clone_us = (time.perf_counter() - t) / reps * 1e6
    t = time.perf_counter()
    for _ in range(reps):
        mid.observation()
    obs_us = (time.perf_counter() - t) / reps * 1e6
    return {"n": problem.n, "variant": variant, "policy": policy, "build_s": build, "cold": rates[0],
            "warm": float(np.median(rates[1:])) if len(rates) > 1 else rates[0], "steps": steps,
            "clone_us": clone_us, "obs_us": obs_us}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="bench_game.md", help="results file (a bare name: under experiments/results/)")
    args = ap.parse_args()
    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    show("| buffers | variant | policy | steps/episode | steps/s cold | steps/s warm (median) "
         "| clone us | observation us | build s |")
    show("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        for variant in ("order", "address"):
            for policy in ("random", "greedy"):
                r = bench(n, variant, policy, args.episodes, args.seed)
                show(f"| {r['n']} | {variant} | {policy} | {r['steps']} | {r['cold']:,.0f} | {r['warm']:,.0f} "
                     f"| {r['clone_us']:.0f} | {r['obs_us']:.0f} | {r['build_s']:.2f} |")
    write_results(args.out, (
        "# mallocGame speed (issue 4)\n\n"
        f"Inputs: `layered_network(n, seed={args.seed})` workloads (map mode, tpuv4i, capacity 40% of max live), "
        "default `GameConfig`. \"cold\" is the first episode on a fresh problem; \"warm\" is the median of the "
        f"following ones ({args.episodes} episodes in all). `clone us` / `observation us`: one call on a state half-way "
        "through a greedy episode. `build s`: `GameData` plus the first game.\n\n"
        "Output as printed:\n\n" + show.text))


if __name__ == "__main__":
    main()
