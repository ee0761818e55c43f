"""One "is this answer better", with one tolerance (:mod:`mallocgame.problem.objective`), wherever answers are compared:
reports (:func:`mallocgame.engine.report.better`), the solve session's baselines, the channel of better answers, and the
solvers' and the conformance suite's own comparisons (no tolerance of their own left in the source)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from mallocgame.engine.report import Report
from mallocgame.engine.report import better as better_report
from mallocgame.engine.session import Baseline
from mallocgame.problem.objective import TOLERANCE, at_least, better, exceeds
from mallocgame.runtime import incumbents

ROOT = Path(__file__).resolve().parents[1]
BELOW = 0.5 * TOLERANCE  # a difference within the tolerance: rounding
ABOVE = 2 * TOLERANCE  # a difference beyond it: a better answer


def _report(mode: str, objective: float | None, valid: bool = True) -> Report:
    return Report("s", mode, "FEASIBLE" if valid else "UNKNOWN", valid, objective, None, None, None, 0, 0, 0, 0.0,
                  None, None, None)


def _channel(mode: str, capacity=None) -> incumbents._Channel:
    return incumbents._Channel(None, threading.Lock(), SimpleNamespace(mode=mode, capacity=capacity, n=1), source="s")


@pytest.mark.parametrize("value", [1e-4, 0.5, 1.0, 3.0e3])
def test_every_comparison_of_answers_draws_the_line_at_the_one_tolerance(value):
    scale = max(1.0, value)
    for mode, sign in (("map", 1), ("prefetch", 1), ("pack", -1)):
        within, beyond = value + sign * BELOW * scale, value + sign * ABOVE * scale
        assert not better(mode, within, value) and better(mode, beyond, value)
        assert at_least(mode, value - sign * BELOW * scale, value) and not at_least(mode, value - sign * ABOVE * scale, value)
        assert not better_report(_report(mode, within), _report(mode, value))
        assert better_report(_report(mode, beyond), _report(mode, value))
        assert not Baseline("b", within, True, 0.0).better_than(Baseline("a", value, True, 0.0), mode)
        assert Baseline("b", beyond, True, 0.0).better_than(Baseline("a", value, True, 0.0), mode)
        channel = _channel(mode)
        channel.best = value
        assert not channel.improves(within) and channel.improves(beyond)
    assert exceeds(value + ABOVE * scale, value) and not exceeds(value + BELOW * scale, value)


def test_valid_beats_invalid_and_a_peak_over_the_capacity_is_no_improvement():
    assert better_report(_report("map", 0.0), _report("map", None, valid=False))
    assert not better_report(_report("map", None, valid=False), _report("map", 0.0))
    channel = _channel("pack", capacity=100)
    assert channel.improves(100) and not channel.improves(101)


def test_peaks_in_bytes_compare_exactly():
    assert better("pack", 10**11 - 1, 10**11) and not better("pack", 10**11, 10**11)


# The files that compare answers; none keeps a tolerance of its own for it (mallocgame.problem.objective holds the one).
COMPARERS = ["mallocgame/engine/solving.py", "mallocgame/engine/report.py", "mallocgame/engine/session.py",
             "mallocgame/runtime/incumbents.py", "mallocgame/engine/conformance.py", "mallocgame/formats/lift.py",
             "solvers/msa.py", "solvers/cpsat/solver.py", "hybrid/lns.py", "solvers/cpsat/prefetch_windows.py"]


def test_no_file_that_compares_answers_keeps_a_tolerance_of_its_own():
    own = re.compile(r"[<>]=?[^<>=\n]*\b1e-(9|12|15)\b")
    found = [f"{path}:{i}: {line.strip()}" for path in COMPARERS
             for i, line in enumerate((ROOT / path).read_text().splitlines(), 1)
             if own.search(line) and "not an answer" not in line]
    assert not found, "compare answers with mallocgame.problem.objective.better:\n" + "\n".join(found)
