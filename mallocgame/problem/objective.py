"""Is this answer better: the one comparison of two answers' objectives, with the one tolerance.

An objective is the time saved against all-slow (map and prefetch modes: higher is better) or the
peak address in bytes (pack mode: lower is better). Two answers' objectives are floats summed from the
same terms in different orders, so they may differ in the last bits: one is better only by more than
:data:`TOLERANCE` relative to the other (relative to ``max(1, |value|)``, so a saving of a few
microseconds is compared to within a picosecond, and a peak in bytes to within a byte up to 10^12 bytes).
Every place that asks "is this answer better" -- a solver keeping its incumbent, the solve session's
baselines, the warm start's fallback, the channel of better answers, the conformance suite's "not
worse than the baseline" -- asks :func:`better` (or :func:`exceeds` for a quantity with no mode).

Example:
    >>> better("map", 2.0, 1.0), better("pack", 100, 101), better("map", 1.0, 1.0 + 1e-15)
    (True, True, False)
    >>> at_least("prefetch", 1.0 - 1e-15, 1.0), at_least("pack", 101, 100)
    (True, False)
"""

from __future__ import annotations

# Relative to max(1, |value|): above float rounding of sums of ~10^6 terms (~1e-16 each), below any real change.
TOLERANCE = 1e-12


def exceeds(a: float, b: float) -> bool:
    """Is ``a`` above ``b`` by more than :data:`TOLERANCE` (relative to ``max(1, |b|)``)?"""
    return a > b + TOLERANCE * max(1.0, abs(b))


def better(mode: str, a: float, b: float) -> bool:
    """Is objective ``a`` strictly better than ``b`` in ``mode``: a higher saving (map, prefetch) or a lower
    peak (pack), by more than :data:`TOLERANCE`?"""
    if mode == "pack":
        return exceeds(b, a)
    return exceeds(a, b)


def at_least(mode: str, a: float, b: float) -> bool:
    """Is objective ``a`` as good as ``b`` within :data:`TOLERANCE` (``b`` not better than ``a``)?"""
    return not better(mode, b, a)
