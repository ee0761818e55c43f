"""Warm start and fallback, now in the core (:mod:`mallocgame.solving`, the one solve path of every door).

Kept so that ``from mallocgame.hybrid.warm_start import solve_with_warm_start, better`` goes on working.
"""

from __future__ import annotations

from mallocgame.solving import _warm_start_run, better, solve_with_warm_start  # noqa: F401

__all__ = ["better", "solve_with_warm_start"]
