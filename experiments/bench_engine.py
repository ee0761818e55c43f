"""The native engine against the Python reference, side by side in one run (MALLOCGAME_ENGINE).

The map game (``GameConfig()``: the order variant, start order, k=16) on every program of the xla suite
(tpuv4i, capacity 25% of max live) and on ``layered_network(N, seed=1)`` workloads: for each engine, CPU
seconds (``time.process_time``) of

* ``setup``: ``Game(...)`` on a fresh ``GameData`` (the native engine builds its tables here, the reference
  fills its neighbour cache during the first episode);
* ``greedy 1st``: the first greedy episode (cold caches), and ``greedy``: the median of the next ones,
  with its steps/s;
* ``greedy_rollout()``: the greedy episode as one call (``Game.greedy_rollout``: one compiled loop in the
  native engine, no Python call per step), checked to end where the step-by-step episode ends;
* ``random``: steps/s of a seeded uniformly random episode;
* ``clone``: microseconds per ``clone()`` of a state half-way through a greedy episode.

Both engines must agree: every greedy and random episode's rewards (``==``, step by step) and final
offsets are compared, and the script stops on the first difference. Issue 39's goals for the game: a
greedy episode on every xla-suite program <= 50 ms (>= 1M steps/s on the 13,465-buffer LSTM step),
clone <= 5 us; the table says met or missed by how much, per program. With ``--mcts-seconds S`` it also
runs the ``mcts`` solver in-process (map mode, default options) for S seconds per engine on
``layered_network(10000, seed=1)`` and reports its ``simulations`` per wall second and per CPU second (the
solver's deadline is wall time: on a loaded machine it gets a fraction of a core). With
``--mcts-prefetch-seconds S`` it does the same in prefetch mode (the prefetch game) on
``layered_network(10000, seed=1)`` at 25% of its max live bytes (goal: >= 100 simulations/s); with
``--mcts-prefetch-depth N`` (repeatable) also with the option ``rollout_depth=N`` (rollouts cut N steps past the
root instead of played to the end of the program), its value (``value_normalised``) beside the default's.

The prefetch game (``GameConfig(variant="prefetch", order="xla")``, mcts's game in prefetch mode) on every
program of the xla suite in prefetch mode at 25% of its max live bytes (as experiments/bench_prefetch_game.py
builds them), for each engine: ``setup`` (the game on a fresh ``PrefetchData``; the native engine builds its
tables here), ``greedy 1st`` and the median ``greedy`` episode (step by step: ``greedy_action`` then ``step``,
the look-ahead of the greedy included), ``greedy_rollout()`` (one call), ``random``: steps/s of a seeded random
episode's first ``--random-steps`` steps, and ``clone`` microseconds half-way through a greedy episode. The
greedy episodes' rewards (``==``, step by step), final intervals and the random episodes' rewards are compared.

With ``--msa`` it runs only msa's table instead (:func:`bench_msa`: the ``msa`` solver in-process, variants off,
both engines, on the xla suite (least of ``--msa-repeat`` solves) and ``layered_network(100000)``; goals:
<= 0.3 s per xla program, <= 1 s at 100k, >= 20x the reference), written to ``--msa-out``.

With ``--map-games`` it runs only the map-mode section (:func:`map_games_section`), written to ``--map-out``: the
address game (``GameConfig(variant="address")``, k=16) on every program of the xla suite and on
``layered_network(N, seed=1)`` (``--layered``), the same columns as the order game's table (both engines, CPU
seconds, greedy rewards, offsets and random episodes compared); then the tree searches in map mode on
``layered_network(10000, seed=1)``, each for ``--search-seconds`` per engine in-process: mcts on the order game
(its default), mcts on the address game (``variant="address"``) and muzero (its map-mode game, the order game, no
network: uniform prior), with their ``simulations`` per wall and per CPU second. Goals: the address game's greedy
episode <= 50 ms on every xla-suite program; >= 100 simulations/s at 10k buffers.

With ``--pack-search`` it runs only the pack-search section (:func:`pack_search_section`): MiniMalloc's A-K at
capacity 1048576, seeds ``--pack-seeds``, both engines in-process side by side (CP-SAT thread off, so that the
two engines must give the same offsets and counters: checked), then the whole process (``mallocgame solve FILE
--solver pack-search --seed S``, the CP-SAT thread on, as users run it) against MiniMalloc's recorded times.
With ``--placement-1m`` it runs only the 1M whole-process section (:func:`placement_1m_section`): ``mallocgame
solve FILE --solver greedy-xla|best-fit`` on ``layered_network(1000000, seed=1)`` written as workload JSON, both
engines, and where the time goes (reading the file in a child of its own; the solver's own wall time).

Usage: nice python experiments/bench_engine.py [--games order,prefetch] [--layered 10000] [--episodes 3]
       [--random-steps 2000] [--mcts-seconds 10] [--mcts-prefetch-seconds 10] [--out PATH]
       nice python experiments/bench_engine.py --map-games [--layered 10000] [--search-seconds 10] [--map-out PATH]
       nice python experiments/bench_engine.py --msa [--msa-sizes 100000] [--msa-repeat 2] [--msa-out bench_engine_msa.md]
       nice python experiments/bench_engine.py --pack-search [--pack-seeds 0 1 2 3 4] [--out bench_engine_pack.md]
       nice python experiments/bench_engine.py --placement-1m [--out bench_engine_pack.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import Transcript, benchmarks_dir, write_results

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare
from mallocgame.inputs.suites import suite_entries
from mallocgame.inputs.workloads import with_capacity
from mallocgame.search.game import GameConfig
from mallocgame.search.game_address import AddressGame, NativeAddressGame
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import NativeOrderGame, OrderGame
from mallocgame.search.game_prefetch import NativePrefetchGame, PrefetchData, PrefetchGame

HW = PRESETS["tpuv4i"]
ENGINES = {"python": OrderGame, "native": NativeOrderGame}
PREFETCH_ENGINES = {"python": PrefetchGame, "native": NativePrefetchGame}
PREFETCH_CONFIG = GameConfig(variant="prefetch", order="xla")
GREEDY_GOAL_S, CLONE_GOAL_US, LSTM_STEPS_GOAL = 0.050, 5.0, 1_000_000
MCTS_SIMULATIONS_GOAL = 100  # simulations per wall second of a tree search at 10k buffers


def greedy_episode(game) -> tuple[list[float], float]:
    rewards = []
    t = time.process_time()
    while not game.done:
        rewards.append(game.step(game.greedy_action()))
    return rewards, time.process_time() - t


def random_episode(game, seed: int) -> tuple[list[float], float]:
    rng = np.random.default_rng(seed)
    rewards = []
    t = time.process_time()
    while not game.done:
        legal = game.legal_actions()
        rewards.append(game.step(int(legal[rng.integers(len(legal))])))
    return rewards, time.process_time() - t


def clone_us(game, reps: int) -> float:
    mid = game.clone()
    while mid.steps < mid.decisions_left and not mid.done:
        mid.step(mid.greedy_action())
    best = float("inf")
    for _ in range(5):  # the least loaded of five batches: the machine is shared
        t = time.process_time()
        for _ in range(reps):
            mid.clone()
        best = min(best, (time.process_time() - t) / reps * 1e6)
    return best


def bench_engine(problem, engine: str, episodes: int, seed: int) -> dict:
    data = GameData(problem, HW)
    t = time.process_time()
    fresh = ENGINES[engine](problem, HW, GameConfig(), data=data)
    setup = time.process_time() - t
    greedy, first = greedy_episode(fresh.clone())
    times = [greedy_episode(fresh.clone())[1] for _ in range(episodes)]
    final = fresh.clone()
    for _ in greedy:
        final.step(final.greedy_action())
    rand, rand_s = random_episode(fresh.clone(), seed)
    rollouts = []
    for _ in range(max(episodes, 1)):  # the whole greedy episode in one call (the compiled loop in native)
        game = fresh.clone()
        t = time.process_time()
        value = game.greedy_rollout()
        rollouts.append(time.process_time() - t)
        if value != final.total_reward() or not np.array_equal(game.offsets(), final.offsets()):
            raise SystemExit(f"{problem.name}: {engine} greedy_rollout() is not the greedy episode")
    return {"setup": setup, "first": first, "greedy": float(np.median(times)), "steps": len(greedy),
            "rollout": float(np.median(rollouts)),
            "greedy_rewards": greedy, "offsets": final.offsets(), "random_rewards": rand, "random_s": rand_s,
            "clone_us": clone_us(fresh, 2000 if engine == "native" else 200), "value": final.total_reward()}


def rate(steps: int, seconds: float) -> str:
    return f"{steps / seconds:,.0f}" if seconds > 0 else "inf"


def goal_text(value: float, goal: float, unit: str, scale: float = 1.0) -> str:
    if value <= goal:
        return f"met ({value * scale:.3g} {unit} <= {goal * scale:g})"
    return f"missed x{value / goal:.2f} ({value * scale:.3g} {unit} > {goal * scale:g})"


def lstm_steps_goal(steps: int, seconds: float) -> str:
    per_s = steps / seconds if seconds > 0 else float("inf")
    return ("met" if per_s >= LSTM_STEPS_GOAL else f"missed x{LSTM_STEPS_GOAL / per_s:.2f}") + f" ({per_s:,.0f})"


def random_prefix(game, seed: int, steps: int) -> tuple[list[float], float]:
    rng = np.random.default_rng(seed)
    rewards = []
    t = time.process_time()
    while not game.done and len(rewards) < steps:
        legal = game.legal_actions()
        rewards.append(game.step(int(legal[rng.integers(len(legal))])))
    return rewards, time.process_time() - t


def bench_prefetch_engine(problem, engine: str, episodes: int, seed: int, random_steps: int) -> dict:
    data = PrefetchData(problem, HW)
    t = time.process_time()
    fresh = PREFETCH_ENGINES[engine](problem, HW, PREFETCH_CONFIG, data=data)
    setup = time.process_time() - t
    final = fresh.clone()
    greedy, first = greedy_episode(final)
    times = [greedy_episode(fresh.clone())[1] for _ in range(episodes)]
    rollouts = []
    for _ in range(max(episodes, 1)):
        game = fresh.clone()
        t = time.process_time()
        value = game.greedy_rollout()
        rollouts.append(time.process_time() - t)
        if value != sum(greedy, 0.0) or game.intervals() != final.intervals():
            raise SystemExit(f"{problem.name}: {engine} greedy_rollout() is not the greedy episode")
    rand, rand_s = random_prefix(fresh.clone(), seed, random_steps)
    return {"setup": setup, "first": first, "greedy": float(np.median(times)), "steps": len(greedy),
            "rollout": float(np.median(rollouts)), "greedy_rewards": greedy, "intervals": final.intervals(),
            "random_rewards": rand, "random_s": rand_s, "value": final.total_reward(),
            "clone_us": clone_us(fresh, 2000 if engine == "native" else 200)}


def prefetch_table(show, args) -> None:
    show()
    show("## The prefetch game (xla suite, prefetch mode, 25% of max live, GameConfig(variant='prefetch', order='xla'))")
    show()
    show("| program | buffers | steps | setup s py / nat | greedy 1st s py / nat | greedy s py / nat | ratio "
         "| greedy steps/s nat | greedy_rollout() s py / nat | ratio | random steps/s py / nat | ratio "
         "| clone us py / nat | same answers |")
    show("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    goals = []
    for entry in suite_entries("xla"):
        held = with_capacity(entry.build(), 0.25)
        problem = prepare(held, mode="prefetch", hardware=HW, capacity=held.capacity)[0]
        r = {engine: bench_prefetch_engine(problem, engine, args.episodes, args.seed, args.random_steps)
             for engine in PREFETCH_ENGINES}
        py, nat = r["python"], r["native"]
        same = (py["greedy_rewards"] == nat["greedy_rewards"] and py["intervals"] == nat["intervals"]
                and py["random_rewards"] == nat["random_rewards"])
        if not same:
            raise SystemExit(f"{entry.name}: the engines disagree (greedy value {py['value']!r} vs {nat['value']!r})")
        n = py["steps"]
        show(f"| {entry.name} | {problem.n} | {n} | {py['setup']:.3f} / {nat['setup']:.3f} "
             f"| {py['first']:.3f} / {nat['first']:.4f} | {py['greedy']:.3f} / {nat['greedy']:.4f} "
             f"| {py['greedy'] / max(nat['greedy'], 1e-9):.0f}x | {rate(n, nat['greedy'])} "
             f"| {py['rollout']:.3f} / {nat['rollout']:.4f} | {py['rollout'] / max(nat['rollout'], 1e-9):.0f}x "
             f"| {rate(len(py['random_rewards']), py['random_s'])} / {rate(len(nat['random_rewards']), nat['random_s'])} "
             f"| {py['random_s'] / max(nat['random_s'], 1e-9):.0f}x | {py['clone_us']:.1f} / {nat['clone_us']:.2f} "
             f"| yes (value {nat['value']:.6f}) |")
        goals.append((entry.name, n, nat))
    show()
    show("Goals (native engine): greedy episode <= 50 ms on every xla-suite program (warm; cold = setup + first "
         "episode), clone <= 5 us, >= 1M greedy steps/s on the LSTM step")
    show()
    show("| program | greedy warm | greedy_rollout() | greedy cold (setup + 1st) | clone | steps/s |")
    show("|---|---|---|---|---|---|")
    for name, n, nat in goals:
        steps_goal = ""
        if name == "lstm3-scan150-train":
            steps_goal = lstm_steps_goal(n, nat["greedy"])
        show(f"| {name} | {goal_text(nat['greedy'], GREEDY_GOAL_S, 'ms', 1e3)} "
             f"| {goal_text(nat['rollout'], GREEDY_GOAL_S, 'ms', 1e3)} "
             f"| {goal_text(nat['setup'] + nat['first'], GREEDY_GOAL_S, 'ms', 1e3)} "
             f"| {goal_text(nat['clone_us'], CLONE_GOAL_US, 'us')} | {steps_goal} |")


def mcts_answer(problem, engine: str, seconds: float, **options) -> tuple[float, int, float, dict]:
    """The ``mcts`` solver in-process under ``engine`` with ``options``: simulations per wall second, simulations,
    CPU seconds and the answer's stats."""
    from mallocgame.solvers.mcts import MCTSSolver

    os.environ["MALLOCGAME_ENGINE"] = engine
    try:
        t, c = time.monotonic(), time.process_time()
        answer = MCTSSolver().solve(MCTSSolver.request(problem, HW, time_limit=seconds, seed=0, **options))
        wall, cpu = time.monotonic() - t, time.process_time() - c
    finally:
        os.environ.pop("MALLOCGAME_ENGINE", None)
    sims = int(answer.stats["simulations"])
    return sims / wall, sims, cpu, answer.stats


def mcts_rate(problem, engine: str, seconds: float) -> tuple[float, int, float]:
    return mcts_answer(problem, engine, seconds)[:3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", default="order,prefetch", help="the games to measure: order (map mode), prefetch")
    ap.add_argument("--random-steps", type=int, default=2000, help="prefetch game: steps of the random episode")
    ap.add_argument("--layered", type=int, nargs="*", default=[10000], help="layered_network sizes besides the suite")
    ap.add_argument("--episodes", type=int, default=3, help="greedy episodes after the first, per engine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mcts-seconds", type=float, default=0.0, help="mcts in-process per engine (0: skip)")
    ap.add_argument("--mcts-prefetch-seconds", type=float, default=0.0,
                    help="mcts in-process per engine in prefetch mode (0: skip)")
    ap.add_argument("--mcts-prefetch-depth", type=int, action="append", default=[],
                    help="with --mcts-prefetch-seconds: also with the option rollout_depth=N (repeatable)")
    ap.add_argument("--out", default="bench_engine.md", help="results file (a bare name: under experiments/results/)")
    ap.add_argument("--msa", action="store_true", help="only msa (bench_msa: its own table, --msa-out)")
    ap.add_argument("--msa-sizes", type=int, nargs="*", default=[100000], help="with --msa: layered_network sizes")
    ap.add_argument("--msa-out", default="bench_engine_msa.md", help="with --msa: the results file")
    ap.add_argument("--msa-repeat", type=int, default=2, help="with --msa: the least CPU of this many solves per "
                    "xla program and engine (one at the generated sizes)")
    ap.add_argument("--map-games", action="store_true", help="only the map-mode section: the address game and the tree "
                    "searches' simulations/s (map_games_section, --map-out)")
    ap.add_argument("--search-seconds", type=float, default=10.0, help="with --map-games: seconds per tree search and engine")
    ap.add_argument("--map-out", default="bench_engine_address.md", help="with --map-games: the results file")
    ap.add_argument("--pack-search", action="store_true", help="only the pack-search section (MiniMalloc A-K)")
    ap.add_argument("--pack-seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    ap.add_argument("--placement-1m", action="store_true", help="only the 1M whole-process greedy-xla/best-fit section")
    ap.add_argument("--placement-n", type=int, default=1_000_000, help="buffers of the --placement-1m workload")
    ap.add_argument("--placement-file", help="the --placement-1m workload already written (layered_network(N, seed=1) "
                    "by write_workload_json): skips generating it")
    args = ap.parse_args()
    if args.msa:
        bench_msa(args)
        return
    if args.map_games:
        map_games_section(args)
        return
    if args.pack_search or args.placement_1m:
        show = Transcript()
        show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; "
             f"load average {os.getloadavg()[0]:.1f} at the start")
        if args.pack_search:
            pack_search_section(show, args.pack_seeds)
        if args.placement_1m:
            placement_1m_section(show, args.placement_n, args.placement_file)
        write_results(args.out, "# The native engine against the Python reference: pack-search and the 1M whole "
                      "process\n\nOutput of `experiments/bench_engine.py` as printed:\n\n" + show.text)
        return
    games = set(filter(None, args.games.split(",")))
    if games - {"order", "prefetch"}:
        raise SystemExit(f"--games: unknown game(s) {', '.join(sorted(games - {'order', 'prefetch'}))} (known: order, prefetch)")
    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; CPU seconds")
    if "order" in games:
        programs = [(e.name, e.build) for e in suite_entries("xla")]
        programs += [(f"layered_network({n})", lambda n=n: layered_network(n, seed=args.seed)) for n in args.layered]
        show("| program | buffers | setup s py / nat | greedy 1st s py / nat | greedy s py / nat | ratio "
             "| greedy steps/s nat | greedy_rollout() s py / nat | random steps/s py / nat | ratio | clone us py / nat "
             "| same answers |")
        show("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        goals = []
        for name, build in programs:
            problem = build()
            r = {engine: bench_engine(problem, engine, args.episodes, args.seed) for engine in ENGINES}
            py, nat = r["python"], r["native"]
            same = (py["greedy_rewards"] == nat["greedy_rewards"] and np.array_equal(py["offsets"], nat["offsets"])
                    and py["random_rewards"] == nat["random_rewards"])
            if not same:
                raise SystemExit(f"{name}: the engines disagree (greedy value {py['value']!r} vs {nat['value']!r})")
            n = py["steps"]
            show(f"| {name} | {problem.n} | {py['setup']:.3f} / {nat['setup']:.3f} | {py['first']:.3f} / {nat['first']:.4f} "
                 f"| {py['greedy']:.3f} / {nat['greedy']:.4f} | {py['greedy'] / max(nat['greedy'], 1e-9):.0f}x "
                 f"| {rate(n, nat['greedy'])} | {py['rollout']:.3f} / {nat['rollout']:.4f} "
                 f"| {rate(n, py['random_s'])} / {rate(n, nat['random_s'])} "
                 f"| {py['random_s'] / max(nat['random_s'], 1e-9):.0f}x | {py['clone_us']:.1f} / {nat['clone_us']:.2f} "
                 f"| yes (value {nat['value']:.6f}) |")
            if not name.startswith("layered"):
                goals.append((name, problem.n, nat))
        show()
        show("Goals (native engine): greedy episode <= 50 ms on every xla-suite program (warm; cold = setup + first episode), "
             "clone <= 5 us, >= 1M greedy steps/s on the LSTM step")
        show()
        show("| program | greedy warm | greedy cold (setup + 1st) | clone | steps/s |")
        show("|---|---|---|---|---|")
        for name, n, nat in goals:
            steps_goal = ""
            if name == "lstm3-scan150-train":
                steps_goal = lstm_steps_goal(n, nat["greedy"])
            show(f"| {name} | {goal_text(nat['greedy'], GREEDY_GOAL_S, 'ms', 1e3)} "
                 f"| {goal_text(nat['setup'] + nat['first'], GREEDY_GOAL_S, 'ms', 1e3)} "
                 f"| {goal_text(nat['clone_us'], CLONE_GOAL_US, 'us')} | {steps_goal} |")
    if "prefetch" in games:
        prefetch_table(show, args)
    if args.mcts_seconds > 0:
        problem = layered_network(10000, seed=1)
        show()
        show(f"mcts in-process, map mode, default options, time_limit {args.mcts_seconds:g} s, "
             f"layered_network(10000, seed=1):")
        show()
        show("| engine | simulations | simulations/s (wall) | CPU s | simulations per CPU s | load average |")
        show("|---|---:|---:|---:|---:|---:|")
        for engine in ENGINES:
            per_s, sims, cpu = mcts_rate(problem, engine, args.mcts_seconds)
            show(f"| {engine} | {sims} | {per_s:.2f} | {cpu:.1f} | {sims / max(cpu, 1e-9):.1f} "
                 f"| {os.getloadavg()[0]:.1f} |")
    if args.mcts_prefetch_seconds > 0:
        held = with_capacity(layered_network(10000, seed=1), 0.25)
        problem = prepare(held, mode="prefetch", hardware=HW, capacity=held.capacity)[0]
        show()
        show(f"mcts in-process, prefetch mode, default options, time_limit {args.mcts_prefetch_seconds:g} s, "
             f"layered_network(10000, seed=1) at 25% of max live; goal >= 100 simulations/s:")
        show()
        show("| engine | options | simulations | simulations/s (wall) | CPU s | simulations per CPU s | value "
             "| load average | goal |")
        show("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for options in [{}] + [{"rollout_depth": n} for n in args.mcts_prefetch_depth]:
            for engine in ENGINES:
                per_s, sims, cpu, stats = mcts_answer(problem, engine, args.mcts_prefetch_seconds, **options)
                goal = ("met" if per_s >= MCTS_SIMULATIONS_GOAL else
                        f"missed x{MCTS_SIMULATIONS_GOAL / per_s:.1f}" if per_s > 0 else "missed (no simulation)")
                named = ", ".join(f"{k}={v}" for k, v in options.items()) or "default"
                show(f"| {engine} | {named} | {sims} | {per_s:.2f} | {cpu:.1f} | {sims / max(cpu, 1e-9):.1f} "
                     f"| {stats.get('value_normalised', float('nan')):.6f} | {os.getloadavg()[0]:.1f} | {goal} |")
    write_results(args.out, (
        "# The native engine against the Python reference: the games\n\n"
        "Output of `experiments/bench_engine.py` as printed (both engines in one run, CPU seconds, "
        "see the script's docstring for the columns):\n\n" + show.text))


# ---------------------------------------------------------------------------- map mode: the address game, tree searches

ADDRESS_ENGINES = {"python": AddressGame, "native": NativeAddressGame}
ADDRESS_CONFIG = GameConfig(variant="address")
SIMULATIONS_GOAL = 100.0


def bench_address_engine(problem, engine: str, episodes: int, seed: int) -> dict:
    """As :func:`bench_engine`, on the address game."""
    data = GameData(problem, HW)
    t = time.process_time()
    fresh = ADDRESS_ENGINES[engine](problem, HW, ADDRESS_CONFIG, data=data)
    setup = time.process_time() - t
    final = fresh.clone()
    greedy, first = greedy_episode(final)
    times = [greedy_episode(fresh.clone())[1] for _ in range(episodes)]
    rollouts = []
    for _ in range(max(episodes, 1)):
        game = fresh.clone()
        t = time.process_time()
        value = game.greedy_rollout()
        rollouts.append(time.process_time() - t)
        if value != sum(greedy, 0.0) or not np.array_equal(game.offsets(), final.offsets()):
            raise SystemExit(f"{problem.name}: {engine} greedy_rollout() is not the greedy episode")
    rand, rand_s = random_episode(fresh.clone(), seed)
    return {"setup": setup, "first": first, "greedy": float(np.median(times)), "steps": len(greedy),
            "rollout": float(np.median(rollouts)), "greedy_rewards": greedy, "offsets": final.offsets(),
            "random_rewards": rand, "random_s": rand_s, "value": final.total_reward(),
            "clone_us": clone_us(fresh, 2000 if engine == "native" else 200)}


def search_rate(problem, solver: str, engine: str, seconds: float, **options) -> tuple[int, float, float]:
    """``solver`` (mcts or muzero) in-process on ``problem`` under ``engine``: its ``simulations``, wall and CPU
    seconds."""
    from mallocgame.solvers.mcts import MCTSSolver
    from mallocgame.solvers.muzero import MuZeroSolver

    cls = {"mcts": MCTSSolver, "muzero": MuZeroSolver}[solver]
    os.environ["MALLOCGAME_ENGINE"] = engine
    try:
        t, c = time.monotonic(), time.process_time()
        answer = cls().solve(cls.request(problem, HW, time_limit=seconds, seed=0, **options))
        wall, cpu = time.monotonic() - t, time.process_time() - c
    finally:
        os.environ.pop("MALLOCGAME_ENGINE", None)
    return int(answer.stats["simulations"]), wall, cpu


def map_games_section(args) -> None:
    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; CPU seconds; "
         f"load average {os.getloadavg()[0]:.1f} at the start")
    show()
    show("## The address game (map mode, GameConfig(variant='address'), k=16; tpuv4i)")
    show()
    show("| program | buffers | steps | setup s py / nat | greedy 1st s py / nat | greedy s py / nat | ratio "
         "| greedy steps/s nat | greedy_rollout() s py / nat | ratio | random steps/s py / nat | ratio "
         "| clone us py / nat | same answers |")
    show("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    programs = [(e.name, e.build) for e in suite_entries("xla")]
    programs += [(f"layered_network({n})", lambda n=n: layered_network(n, seed=args.seed)) for n in args.layered]
    goals = []
    for name, build in programs:
        problem = build()
        r = {engine: bench_address_engine(problem, engine, args.episodes, args.seed) for engine in ADDRESS_ENGINES}
        py, nat = r["python"], r["native"]
        same = (py["greedy_rewards"] == nat["greedy_rewards"] and np.array_equal(py["offsets"], nat["offsets"])
                and py["random_rewards"] == nat["random_rewards"])
        if not same:
            raise SystemExit(f"{name}: the engines disagree (greedy value {py['value']!r} vs {nat['value']!r})")
        n = py["steps"]
        show(f"| {name} | {problem.n} | {n} | {py['setup']:.3f} / {nat['setup']:.3f} "
             f"| {py['first']:.3f} / {nat['first']:.4f} | {py['greedy']:.3f} / {nat['greedy']:.4f} "
             f"| {py['greedy'] / max(nat['greedy'], 1e-9):.0f}x | {rate(n, nat['greedy'])} "
             f"| {py['rollout']:.3f} / {nat['rollout']:.4f} | {py['rollout'] / max(nat['rollout'], 1e-9):.0f}x "
             f"| {rate(len(py['random_rewards']), py['random_s'])} / {rate(len(nat['random_rewards']), nat['random_s'])} "
             f"| {py['random_s'] / max(nat['random_s'], 1e-9):.0f}x | {py['clone_us']:.1f} / {nat['clone_us']:.2f} "
             f"| yes (value {nat['value']:.6f}) |")
        if not name.startswith("layered"):
            goals.append((name, nat))
    show()
    show("Goal (native engine): a greedy episode of the address game <= 50 ms on every xla-suite program (warm; "
         "cold = setup + first episode)")
    show()
    show("| program | greedy warm | greedy_rollout() | greedy cold (setup + 1st) |")
    show("|---|---|---|---|")
    for name, nat in goals:
        show(f"| {name} | {goal_text(nat['greedy'], GREEDY_GOAL_S, 'ms', 1e3)} "
             f"| {goal_text(nat['rollout'], GREEDY_GOAL_S, 'ms', 1e3)} "
             f"| {goal_text(nat['setup'] + nat['first'], GREEDY_GOAL_S, 'ms', 1e3)} |")
    problem = layered_network(10000, seed=1)
    show()
    show(f"## Tree searches in map mode, in-process, time_limit {args.search_seconds:g} s, layered_network(10000, seed=1)")
    show()
    show("The deadline is wall time: on a loaded machine a search gets a fraction of a core, so simulations per CPU "
         "second is the figure to compare with the goal (>= 100 simulations/s).")
    show()
    show("| search | game | engine | simulations | wall s | simulations/s (wall) | CPU s | simulations per CPU s "
         "| goal (per CPU s) | load average |")
    show("|---|---|---|---:|---:|---:|---:|---:|---|---:|")
    for solver, game, options in (("mcts", "order", {}), ("mcts", "address", {"variant": "address"}),
                                  ("muzero", "order", {})):
        for engine in ("python", "native"):
            sims, wall, cpu = search_rate(problem, solver, engine, args.search_seconds, **options)
            per_cpu = sims / max(cpu, 1e-9)
            goal = ("met" if per_cpu >= SIMULATIONS_GOAL else "missed (no simulation)" if sims == 0
                    else f"missed x{SIMULATIONS_GOAL / per_cpu:.1f}")
            show(f"| {solver} | {game} | {engine} | {sims} | {wall:.1f} | {sims / max(wall, 1e-9):.1f} | {cpu:.1f} "
                 f"| {per_cpu:.1f} | {goal} | {os.getloadavg()[0]:.1f} |")
    write_results(args.map_out, "# The native engine against the Python reference: the address game and the map-mode "
                  "tree searches\n\nOutput of `experiments/bench_engine.py --map-games` as printed (both engines in one "
                  "run, see the script's docstring for the columns):\n\n" + show.text)


# ---------------------------------------------------------------------------- msa

MSA_XLA_GOAL_S, MSA_100K_GOAL_S, MSA_RATIO_GOAL = 0.3, 1.0, 20.0


def msa_solve(build, engine: str, repeat: int = 1) -> dict:
    """The ``msa`` solver in-process (variants off: one run of the algorithm) on a fresh ``build()`` with
    ``engine``; CPU and wall seconds of the solve alone (the problem and its evaluator are built before, and
    the garbage collected), the least of ``repeat`` solves (each on a fresh problem: nothing cached)."""
    import gc

    from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
    from mallocgame.solvers.msa import MemorySpaceAssignment

    cpu = wall = float("inf")
    for _ in range(repeat):
        problem = build()
        hw = problem.hardware or HW
        PrefetchEvaluator.of(problem, hw)
        gc.collect()
        os.environ["MALLOCGAME_ENGINE"] = engine
        try:
            t, c = time.perf_counter(), time.process_time()
            sol = MemorySpaceAssignment().solve(MemorySpaceAssignment.request(problem, hw, time_limit=1e6, seed=0,
                                                                              variants=False))
            wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
        finally:
            os.environ.pop("MALLOCGAME_ENGINE", None)
    key = sorted((iv.buffer, iv.start, iv.end, -2 if iv.copy_start is None else iv.copy_start, iv.offset)
                 for iv in sol.intervals)
    return {"n": problem.n, "cpu": cpu, "wall": wall, "key": key, "objective": sol.objective.hex(),
            "stats": dict(sol.stats), "value": sol.objective}


def bench_msa(args) -> None:
    """msa's two engines side by side: the whole solver in-process on the xla suite (each program's own
    capacity and hardware) and on ``layered_network(N, seed=0)`` at 25% of max live; stops on the first
    difference between their answers (intervals, objective to the bit, statistics)."""
    from mallocgame.inputs.load import prepare

    programs = [(e.name, lambda e=e: prepare(e.build(), mode="prefetch")[0], MSA_XLA_GOAL_S, args.msa_repeat)
                for e in suite_entries("xla")]
    programs += [(f"layered_network({n})", lambda n=n: prepare(layered_network(n, seed=0), mode="prefetch",
                                                               capacity_fraction=0.25, hardware=HW)[0], MSA_100K_GOAL_S, 1)
                 for n in args.msa_sizes]
    show = Transcript()
    show(f"# python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; "
         f"load average at start {os.getloadavg()[0]:.1f} (2 cores)")
    show("| program | buffers | CPU s python | CPU s native | ratio | wall s native | retries | exact copy checks "
         "| same answer | goal (native CPU s; ratio >= 20x) |")
    show("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for name, build, goal, repeat in programs:
        py, nat = msa_solve(build, "python", repeat), msa_solve(build, "native", repeat)
        if (py["key"], py["objective"], py["stats"]) != (nat["key"], nat["objective"], nat["stats"]):
            raise SystemExit(f"{name}: the engines disagree (objective {py['value']!r} vs {nat['value']!r})")
        ratio = py["cpu"] / max(nat["cpu"], 1e-9)
        ratio_text = "met" if ratio >= MSA_RATIO_GOAL else f"missed x{MSA_RATIO_GOAL / ratio:.1f}"
        show(f"| {name} | {nat['n']} | {py['cpu']:.3f} | {nat['cpu']:.3f} | {ratio:.2f}x | {nat['wall']:.3f} "
             f"| {nat['stats'].get('retries')} | {nat['stats'].get('exact_copy_checks')} "
             f"| yes (objective {nat['objective']}) | time {goal_text(nat['cpu'], goal, 's')}; ratio {ratio_text} |")
    show(f"# load average at end {os.getloadavg()[0]:.1f}")
    write_results(args.msa_out, (
        "# The native engine against the Python reference: msa\n\n"
        "Output of `experiments/bench_engine.py --msa` as printed (the `msa` solver in-process, variants off, "
        "both engines in one run, CPU seconds; see `bench_msa`'s docstring):\n\n" + show.text))


# MiniMalloc's own CLI (github.com/google/minimalloc at 9f5cf81, Release build, default settings), timed as a
# subprocess on this machine by experiments/bench_pack_search.py --minimalloc on 2026-12-01 (load 2.4-3.2):
# experiments/results/pack_search_minimalloc_side_by_side.md. (wall s, CPU s) per instance.
MINIMALLOC_RECORDED = {"A": (4.77, 4.76), "B": (4.06, 3.94), "C": (0.79, 0.79), "D": (5.42, 3.62), "E": (5.90, 3.66),
                       "F": (8.23, 5.44), "G": (1.73, 1.12), "H": (2.30, 1.54), "I": (4.68, 3.18), "J": (1.97, 1.33),
                       "K": (1.00, 0.63)}


def child_env(engine: str) -> dict[str, str]:
    """A child's environment: the engine, and byte-code caching on (an installed package has its .pyc files)."""
    env = dict(os.environ, MALLOCGAME_ENGINE=engine)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(argv: list[str], engine: str) -> tuple[float, float, subprocess.CompletedProcess]:
    """``argv`` in a child process: wall and CPU seconds (the child's getrusage, its own children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=child_env(engine))
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} ({engine}) failed: {r.stderr.strip()[-400:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, r


CLI = [sys.executable, "-c", "from mallocgame.cli.main import main; main()"]


def pack_search_section(show: Transcript, seeds: list[int]) -> None:
    """pack-search on MiniMalloc's A-K: in-process (both engines, CP-SAT thread off, identical answers required)
    and whole process (native engine, as users run it) against MiniMalloc's recorded times."""
    from mallocgame.formats.io import load_problem
    from mallocgame.runtime.budget import Budget
    from mallocgame.solvers.pack_search.search import check_packing, pack

    folder = benchmarks_dir("minimalloc")
    names = list("ABCDEFGHIJK")
    show()
    show(f"## pack-search in-process, both engines, seeds {', '.join(map(str, seeds))}, time limit 60 s, "
         "CP-SAT thread off")
    show()
    show("`wall`/`CPU`: the slowest seed; `same`: offsets, status, peak and every counter equal at every seed.")
    show()
    show("| instance | buffers | status | nodes (seed 0) | wall s py / nat | CPU s py / nat | CPU ratio | same |")
    show("|---|---:|---|---:|---:|---:|---:|---|")
    for name in names:
        prob = load_problem(folder / f"{name}.1048576.csv")
        a = prob.arrays
        runs: dict[str, list] = {"python": [], "native": []}
        for seed in seeds:
            for engine in runs:
                os.environ["MALLOCGAME_ENGINE"] = engine
                try:
                    c, t = time.process_time(), time.perf_counter()
                    r = pack(a.size, a.start, a.end, capacity=prob.capacity, alignment=a.alignment, budget=Budget.start(60),
                             seed=seed, use_cpsat=False)
                    runs[engine].append((r, time.perf_counter() - t, time.process_time() - c))
                finally:
                    os.environ.pop("MALLOCGAME_ENGINE", None)
                if check_packing(a.size, a.start, a.end, r.offsets, prob.capacity, a.alignment) is not None:
                    raise SystemExit(f"{name} seed {seed}: the {engine} engine's packing is invalid")
        same = all(np.array_equal(p.offsets, q.offsets) and p.status == q.status and p.peak == q.peak
                   and {k: v for k, v in p.stats.items() if k != "seconds"}
                   == {k: v for k, v in q.stats.items() if k != "seconds"}
                   for (p, _, _), (q, _, _) in zip(runs["python"], runs["native"]))
        if not same:
            raise SystemExit(f"{name}: the engines answer differently")
        wall = {e: max(w for _, w, _ in v) for e, v in runs.items()}
        cpu = {e: max(c for _, _, c in v) for e, v in runs.items()}
        r0 = runs["native"][0][0]
        show(f"| {name} | {prob.n} | {r0.status} | {r0.stats['nodes']} | {wall['python']:.3f} / {wall['native']:.3f} "
             f"| {cpu['python']:.3f} / {cpu['native']:.3f} | {cpu['python'] / max(cpu['native'], 1e-9):.1f}x | yes |")
    show()
    show(f"## pack-search whole process: `mallocgame solve FILE --solver pack-search --time-limit 60 --seed S`, "
         f"seeds {', '.join(map(str, seeds))} (native), seed {seeds[0]} (python); CP-SAT thread on")
    show()
    show("Start-up, reading the file, the pack baseline and the CP-SAT import included (byte code cached: one "
         "untimed run first). MiniMalloc: its CLI's recorded wall and CPU seconds on this machine (see "
         "MINIMALLOC_RECORDED). `within`: the slowest native seed's wall (CPU) time against MiniMalloc's wall "
         "(CPU) time; on a loaded machine the CPU seconds are the fairer figure.")
    show()
    show("| instance | status (native) | wall s nat, slowest seed | CPU s nat, slowest | wall s py (seed "
         f"{seeds[0]}) | MiniMalloc wall / CPU s | wall ratio | within (wall) | CPU ratio | within (CPU) "
         "| load (1 min) |")
    show("|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|")
    run_child(CLI + ["solve", str(folder / "A.1048576.csv"), "--solver", "pack-search", "--time-limit", "5"], "native")
    for name in names:
        path = str(folder / f"{name}.1048576.csv")
        load = os.getloadavg()[0]
        nat = [run_child(CLI + ["solve", path, "--solver", "pack-search", "--time-limit", "60", "--seed", str(s)],
                         "native") for s in seeds]
        py_wall, _, _ = run_child(CLI + ["solve", path, "--solver", "pack-search", "--time-limit", "60", "--seed",
                                         str(seeds[0])], "python")
        wall, cpu = max(w for w, _, _ in nat), max(c for _, c, _ in nat)
        status = nat[0][2].stdout.split(":", 1)[1].split()[0]
        mm_wall, mm_cpu = MINIMALLOC_RECORDED[name]
        verdict = "yes" if wall <= mm_wall else f"no, x{wall / mm_wall:.2f}"
        cpu_verdict = "yes" if cpu <= mm_cpu else f"no, x{cpu / mm_cpu:.2f}"
        show(f"| {name} | {status} | {wall:.2f} | {cpu:.2f} | {py_wall:.2f} | {mm_wall:.2f} / {mm_cpu:.2f} "
             f"| {wall / mm_wall:.2f} | {verdict} | {cpu / mm_cpu:.2f} | {cpu_verdict} | {load:.1f} |")


def placement_1m_section(show: Transcript, n: int, written: str | None = None) -> None:
    """greedy-xla and best-fit on ``layered_network(n, seed=1)`` (map mode), the whole process, both engines, and
    where the time goes: reading the file alone (a child that only reads it), the solver's own wall time."""
    from mallocgame.formats.io import write_workload_json
    from mallocgame.inputs.generate import layered_network

    show()
    show(f"## greedy-xla and best-fit, whole process: `mallocgame solve FILE --solver S --time-limit 600`, "
         f"layered_network({n}, seed=1) as workload JSON")
    show()
    show("`read`: a child that only imports mallocgame and reads the file (`mallocgame.formats.io.load_problem`), the "
         "seconds of the read itself; `solver wall`: what the solver reports (its forked child); the rest is "
         "start-up, the bound and the shared caches the parent builds beside the solver, and the answer's report.")
    show()
    show("| solver | engine | wall s | CPU s | read s (in its child) | solver wall (reported) | goal <= 3 s (wall) "
         "| summary line |")
    show("|---|---|---:|---:|---:|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(written) if written else Path(tmp) / f"layered{n}.json"
        if not written:
            write_workload_json(path, layered_network(n, seed=1))
        reader = [sys.executable, "-c", "import json, sys, time; from mallocgame.formats.io import load_problem; "
                  "t = time.perf_counter(); p = load_problem(sys.argv[1]); "
                  "print(json.dumps({'read': time.perf_counter() - t, 'n': p.n}))", str(path)]
        for solver in ("greedy-xla", "best-fit"):
            for engine in ("python", "native"):
                _, _, r = run_child(reader, engine)
                read = json.loads(r.stdout)["read"]
                wall, cpu, r = run_child(CLI + ["solve", str(path), "--solver", solver, "--time-limit", "600"], engine)
                line = r.stdout.strip().splitlines()[0]
                solver_wall = line.rsplit("wall=", 1)[-1].split()[0] if "wall=" in line else "-"
                goal = "met" if wall <= 3.0 else f"missed x{wall / 3.0:.2f}"
                show(f"| {solver} | {engine} | {wall:.2f} | {cpu:.2f} | {read:.2f} | {solver_wall} | {goal} | {line} |")


if __name__ == "__main__":
    main()
