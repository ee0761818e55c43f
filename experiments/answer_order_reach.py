"""Whether the fixed-order game can reach the best fallback answers of map mode, on real-size tuning problems.

    nice python experiments/answer_order_reach.py [--count 12] [--min-n 1000]

Problems: the ``real`` map-mode curriculum's :func:`mallocgame.search.muzero.problems.tuning_recipes` (``--count``
recipes, those of at least ``--min-n`` buffers; never the held-out sets). Per problem, in-process, without a clock:
the greedy episodes of the order game in greedy-xla's order and in start order and of the address game; then the
address game's answer replayed in the order game with the buffers in the order the address game placed them and in
the answer's offset order (``search/game_order.py`` ``answer_order``): ``misses`` counts the buffers whose offset in
the answer is not among the ``k`` = 16 offsets the order game offers when it is decided (the replay then plays the
greedy's move); and the order game's greedy episode in each of those orders. Last, for each of the three greedy
answers, the order game's greedy episode in that answer's offset order: its value and whether it is the same
placement. Values are the game's normalised returns.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Transcript, fenced, write_results

from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import _DecisionOrder, answer_order
from mallocgame.search.muzero.problems import build, named_curriculum, tuning_recipes
from mallocgame.search.uct import play_greedy

K = 16


def greedy(problem, hw, data, cfg: GameConfig) -> Game:
    game = Game(problem, hw, cfg, data=data)
    play_greedy(game)
    return game


def address_placement_order(problem, hw, data) -> tuple[Game, np.ndarray]:
    """The address game's greedy episode and the order its buffers were placed in, then its slow ones (xla order)."""
    game = Game(problem, hw, GameConfig(variant="address", k=K), data=data)
    placed: list[int] = []
    before = game.offsets()
    while not game.done:
        game.step(game.greedy_action())
        now = game.offsets()
        placed.extend(np.flatnonzero(now != before).tolist())
        before = now
    slow = np.setdiff1d(np.arange(problem.n), placed)
    xla = data.orders["xla"].position
    return game, np.concatenate([np.array(placed, np.int64), slow[np.argsort(xla[slow], kind="stable")]])


def in_order(problem, hw, data, name: str, order: np.ndarray) -> GameConfig:
    data.orders[name] = _DecisionOrder(data, name, order)
    return GameConfig(variant="order", k=K, order=name)


def replay(problem, hw, data, cfg: GameConfig, target: np.ndarray) -> tuple[float, int]:
    """The order game ``cfg`` played to ``target``'s offsets where offered (else the greedy's move): value, misses."""
    game = Game(problem, hw, cfg, data=data)
    misses = 0
    while not game.done:
        want = target[game.current]
        if want < 0:
            action = game.slow_action
        else:
            offered = [h[0] for h in game.holes()]
            if want in offered:
                action = offered.index(want)
            else:
                action, misses = game.greedy_action(), misses + 1
        game.step(action)
    return game.total_reward(), misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--min-n", type=int, default=1000)
    args = ap.parse_args()
    show = Transcript()
    show(f"real-size tuning recipes (count {args.count}, n >= {args.min_n}); map mode; k = {K}")
    show("| problem | n | greedy xla | greedy start | greedy address | placement order: replay (misses), greedy | "
         "offset order: replay (misses), greedy | xla answer's order | start answer's order | address answer's order |")
    show("|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(tuning_recipes(named_curriculum("real", "map"), count=args.count), key=lambda r: (r.n, r.seed)):
        problem, hw = build(r)
        if problem.n < args.min_n:
            continue
        t = time.monotonic()
        data = GameData(problem, hw)
        answers = {name: greedy(problem, hw, data, cfg) for name, cfg in (
            ("xla", GameConfig(variant="order", k=K, order="xla")),
            ("start", GameConfig(variant="order", k=K, order="start")))}
        answers["address"], placement = address_placement_order(problem, hw, data)
        target = answers["address"].offsets()
        cells = []
        for name, order in (("placement", placement), ("offset", answer_order(data, target))):
            cfg = in_order(problem, hw, data, f"address-{name}", order)
            value, misses = replay(problem, hw, data, cfg, target)
            cells.append(f"{value:.5f} ({misses}), {greedy(problem, hw, data, cfg).total_reward():.5f}")
        for name, game in answers.items():
            cfg = in_order(problem, hw, data, f"answer-{name}", answer_order(data, game.offsets()))
            again = greedy(problem, hw, data, cfg)
            same = "same" if np.array_equal(again.offsets(), game.offsets()) else "other"
            cells.append(f"{again.total_reward():.5f} ({same})")
        label = f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}"
        show(f"| {label} | {problem.n} | " + " | ".join(f"{answers[k].total_reward():.5f}" for k in answers) + " | "
             + " | ".join(cells) + f" |  ({time.monotonic() - t:.1f} s)")
    write_results("answer_order_reach.md", (
        "# Whether the fixed-order game reaches map mode's fallback answers (real-size tuning problems)\n\n"
        "Made by `experiments/answer_order_reach.py` (its docstring says what each column is). Output as printed:\n\n"
        + fenced(show.text)))


if __name__ == "__main__":
    main()
