"""The bridge to the real game (:mod:`mallocgame.search.game`): configs and game factories.

The network's input shapes depend on the ``GameConfig`` (``k``, ``upcoming``,
``profile_bins``), so a checkpoint stores the config it was trained with as a dict and the
solver rebuilds exactly that game.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Callable

from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.problems import Recipe, build


def game_config(fields: dict[str, Any] | None = None):
    return GameConfig(**(fields or {}))


def game_config_dict(config) -> dict[str, Any]:
    return asdict(config)


def game_factory(fields: dict[str, Any]) -> Callable[[Recipe], Any]:
    """``recipe -> Game`` for the given ``GameConfig`` fields."""
    config = game_config(fields)

    def make(recipe: Recipe):
        problem, hardware = build(recipe)
        return Game(problem, hardware, config)

    return make
