"""The order game past its pair budget (native engine, in-process): greedy rollouts and mcts, builds side by side.

Real programs of 5k+ buffers whose weights live throughout have more interfering pairs than the order game's
decision order tabulates (``_DecisionOrder.PAIR_BUDGET``); there every decision reads its earlier interfering
buffers from the problem's overlap index. On the map-mode tuning programs of ``mallocgame train --curriculum real``
past that budget (``tuning_recipes(named_curriculum("real", "map"), count=12)``, ``--recipes``: by default [8] the
XLA-compiled program of 7,578 buffers and [9] the torch-exported one of 7,972), for mcts's map-mode game
(``GameConfig(order="xla")``, k=16), native engine, CPU seconds (``time.process_time``):

* ``setup``: ``NativeOrderGame`` on a fresh ``GameData`` (the decision order and the compiled tables);
* ``rollout``: ``greedy_rollout()`` from the start, least and median of ``--repeat``, with its value;
* ``half``: ``greedy_rollout()`` from the state half-way through the greedy episode (mcts's rollouts start inside
  the episode), least and median of ``--repeat``;
* ``mcts``: the ``mcts`` solver in-process (default options, seed 0) for ``--mcts-seconds`` (wall: its deadline),
  its ``simulations``, wall and CPU seconds and its answer's ``value_normalised``.

With ``--intervals N`` (repeatable) also ``random_intervals(N, seed=1, max_size=64, with_benefit=True)`` in map
mode on the unit hardware at 1/40 of its bytes (live ranges a quarter of the horizon long on average: some
thousands of interfering buffers per decision): ``setup``, ``rollout`` and the process's peak resident memory.

It measures whatever ``mallocgame`` the path imports; with ``--trees A B`` it runs itself once per tree
(``PYTHONPATH`` set to it, each tree's own compiled module), alternating for ``--rounds`` rounds, so that two builds
are compared under the same load, and writes what they printed to ``--out``. The two builds must give the same
rollout values (checked).

Usage: nice python experiments/bench_order_game_past_budget.py [--recipes 8 9] [--repeat 3] [--mcts-seconds 10]
       [--intervals 30000] [--trees BEFORE AFTER --rounds 2 --out order_game_past_budget.md]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time

from _common import Transcript, add_tree_arguments, run_in_trees, write_results

from mallocgame.problem.intervals import count_overlapping_pairs
from mallocgame.search.game import GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import NativeOrderGame, _DecisionOrder
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes

CONFIG = GameConfig(order="xla")  # mcts's map-mode game (search.uct.DEFAULT_GAME)


def rollouts(game: NativeOrderGame, repeat: int) -> tuple[float, float, float]:
    """``(least s, median s, value)`` of ``repeat`` greedy rollouts from clones of ``game``."""
    times, value = [], 0.0
    for _ in range(repeat):
        clone = game.clone()
        t = time.process_time()
        value = clone.greedy_rollout()
        times.append(time.process_time() - t)
    times.sort()
    return times[0], times[len(times) // 2], value


def probe(index: int, repeat: int, mcts_seconds: float) -> None:
    from mallocgame.solvers.mcts import MCTSSolver

    recipe = tuning_recipes(named_curriculum("real", "map"), count=12)[index]
    problem, hw = build(recipe)
    a = problem.arrays
    pairs = count_overlapping_pairs(a.start, a.end)
    t = time.process_time()
    game = NativeOrderGame(problem, hw, CONFIG, data=GameData(problem, hw, mode="map"))
    setup = time.process_time() - t
    past = game._dec.cache is None
    least, median, value = rollouts(game, repeat)
    half = game.clone()
    while half.steps < problem.n // 2:
        half.step(half.greedy_action())
    h_least, h_median, h_value = rollouts(half, repeat)
    print(f"[{index}] {recipe.kind} {problem.n} buffers, {pairs:,} interfering pairs "
          f"({'past' if past else 'within'} the budget of {_DecisionOrder.PAIR_BUDGET:,}): setup {setup:.3f} s, "
          f"rollout least {least:.3f} s median {median:.3f} s value {value!r}, "
          f"half least {h_least:.3f} s median {h_median:.3f} s value {h_value!r}")
    if mcts_seconds > 0:
        t, c = time.monotonic(), time.process_time()
        answer = MCTSSolver().solve(MCTSSolver.request(problem, hw, time_limit=mcts_seconds, seed=0))
        wall, cpu = time.monotonic() - t, time.process_time() - c
        print(f"[{index}] mcts {mcts_seconds:g} s: {int(answer.stats['simulations'])} simulations, wall {wall:.2f} s, "
              f"CPU {cpu:.2f} s, value_normalised {answer.stats.get('value_normalised', float('nan')):.6f}, "
              f"load {os.getloadavg()[0]:.1f}")
    sys.stdout.flush()


def probe_intervals(n: int, repeat: int) -> None:
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import random_intervals

    problem = random_intervals(n, seed=1, max_size=64, with_benefit=True)
    a = problem.arrays
    problem = problem.replace(capacity=int(a.size.sum()) // 40)
    pairs = count_overlapping_pairs(a.start, a.end)
    t = time.process_time()
    game = NativeOrderGame(problem, PRESETS["unit"], CONFIG, data=GameData(problem, PRESETS["unit"], mode="map"))
    setup = time.process_time() - t
    least, median, value = rollouts(game, repeat)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"[intervals-{n}] {n} buffers, {pairs:,} interfering pairs "
          f"({'past' if game._dec.cache is None else 'within'} the budget): setup {setup:.3f} s, "
          f"rollout least {least:.3f} s median {median:.3f} s value {value!r}, peak RSS {rss:.0f} MB")
    sys.stdout.flush()


def compare(args) -> None:
    """Run this probe once per tree of ``args.trees``, alternating for ``args.rounds`` rounds; write the outputs."""
    show = Transcript()
    show("# The order game past its pair budget: builds side by side")
    show()
    show(f"Trees: {', '.join(args.trees)}; one run per tree in turn, {args.rounds} rounds; native engine, CPU seconds "
         f"(mcts: {args.mcts_seconds:g} s wall each, its deadline).")
    args_of_run = ["--recipes", *map(str, args.recipes), "--repeat", str(args.repeat),
                   "--mcts-seconds", str(args.mcts_seconds)]
    for n in args.intervals:
        args_of_run += ["--intervals", str(n)]
    values: dict[str, set[str]] = {}
    for _, output in run_in_trees(show, __file__, args_of_run, args.trees, args.rounds):
        for key, value in re.findall(r"(\[[\w-]+\]).*?rollout .*?value (\S+),", output):
            values.setdefault(key, set()).add(value)
    differ = {k: v for k, v in values.items() if len(v) > 1}
    show()
    show("The rollout values agree across the trees." if not differ else f"The rollout values DIFFER: {differ}")
    write_results(args.out, show.text)
    if differ:
        raise SystemExit(f"the trees' rollout values differ: {differ}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", type=int, nargs="+", default=[8, 9],
                    help="indices into tuning_recipes(named_curriculum('real', 'map'), count=12)")
    ap.add_argument("--repeat", type=int, default=3, help="greedy rollouts per measurement")
    ap.add_argument("--mcts-seconds", type=float, default=10.0, help="mcts in-process per program (0: skip)")
    ap.add_argument("--intervals", type=int, action="append", default=[],
                    help="also random_intervals(N) in map mode: setup, rollout, peak memory (repeatable)")
    add_tree_arguments(ap, out="order_game_past_budget.md")
    args = ap.parse_args()
    if args.trees:
        compare(args)
        return
    import mallocgame

    print(f"# {mallocgame.__file__}")
    for index in args.recipes:
        probe(index, args.repeat, args.mcts_seconds)
    for n in args.intervals:
        probe_intervals(n, args.repeat)


if __name__ == "__main__":
    main()
