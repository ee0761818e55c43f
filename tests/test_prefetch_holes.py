"""The prefetch game's compiled hole finder (search/_prefetch_holes.pxi) against the NumPy code it replaced.

The reference is ``PrefetchGame._holes`` as it was before it was compiled, written with the core's
``free_holes`` and ``best_fit_offset``; both are asked at every decision of random and greedy episodes on
generated and real programs, so the sets they see are the game's own (ties in address, holes at the top,
later touches out of reach).
"""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame._native import prefetch_holes
from mallocgame.algorithms.placement import best_fit_offset
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_order import free_holes


def reference_holes(game, b: int, a: int, p: int):
    d, s = game.data, game._seg
    t = s.t[p]
    m = game._m
    occ, end, off, top = game._occ[:m], game._end[:m], game._off[:m], game._top[:m]
    size, align, cap = d.size_l[b], d.align_l[b], d.capacity
    near = (occ < t + 1) & (end > a)
    holes = free_holes(off[near], top[near], size, align, cap, m + 1)
    if not holes:
        return []
    later = s.later[p]
    lo, hi = 0, len(later)
    stay = near
    while lo < hi:
        mid = (lo + hi + 1) // 2
        wide = (occ < later[mid - 1] + 1) & (end > a)
        if free_holes(off[wide], top[wide], size, align, cap, 1):
            lo, stay = mid, wide
        else:
            hi = mid - 1
    best = best_fit_offset(off[stay], top[stay], size, align, cap)
    first = next(h for h in holes if h[1] <= best < h[2])
    rest = [h for h in holes if h[0] != best][:game.config.k - 1]
    return [(best, first[1], first[2])] + rest


def _check_episode(game, rng, greedy_share: float) -> int:
    checked = 0
    while not game.done:
        s, p = game._seg, game._pos
        b, t = s.buf[p], s.t[p]
        for a in sorted({t, max(0, t - 3), max(0, t - 40)}):
            got = prefetch_holes(game._occ, game._end, game._off, game._top, game._m, a, t, s.later[p],
                                 game.data.size_l[b], game.data.align_l[b], game.data.capacity, game.config.k)
            assert got == reference_holes(game, b, a, p)
            checked += 1
        legal = game.legal_actions()
        move = game.greedy_action() if rng.random() < greedy_share else int(legal[rng.integers(len(legal))])
        game.step(move)
    return checked


@pytest.mark.parametrize("n,capacity,seed", [(30, 0.2, 1), (60, 0.35, 2), (120, 0.5, 3)])
def test_generated_programs(n, capacity, seed):
    p = layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="prefetch")
    game = Game(p, PRESETS["tpuv4i"], GameConfig(variant="prefetch", k=4))
    assert _check_episode(game, np.random.default_rng(seed), 0.5) > n


def test_real_program():
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries

    entry = next(e for e in suite_entries("xla") if e.name == "mixer-s16-b8")
    problem, hw = prepare(entry.build(), mode="prefetch", hardware=PRESETS["tpuv4i"])
    problem = problem.replace(capacity=problem.capacity // 4)
    game = Game(problem, hw, GameConfig(variant="prefetch"))
    assert _check_episode(game, np.random.default_rng(0), 0.8) > 285


def test_unbounded_capacity_top_hole_is_inf():
    occ = np.array([0, 0], np.int64)
    end = np.array([5, 5], np.int64)
    off = np.array([0, 10], np.int64)
    top = np.array([4, 14], np.int64)
    holes = prefetch_holes(occ, end, off, top, 2, 0, 2, (), 4, 2, None, 3)
    # best fit: the 6-byte hole [4, 10) at 4; then the hole above everything, unbounded
    assert holes == [(4, 4, 10), (14, 14, float("inf"))]
    assert prefetch_holes(occ, end, off, top, 2, 0, 2, (), 7, 1, 14, 3) == []  # no 7-byte hole below 14
