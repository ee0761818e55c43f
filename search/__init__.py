"""The mallocGame and the tree searches that play it (docs/architecture.md, "The game").

``Game(problem, hardware, config)`` (:mod:`mallocgame.search.game`) builds the variant its config
names; each variant subclasses ``Game`` in a module of its own, imported here after ``game``, so
that the variants exist whichever module of the package is imported first.
"""

from mallocgame.search import game, game_address, game_order, game_prefetch  # noqa: F401  (the Game variants)
