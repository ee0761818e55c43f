"""split_idle (mallocgame.formats.lift): a prefetch answer's stays cut at their idle gaps, same value, less memory held."""

from __future__ import annotations

from mallocgame.engine.session import session_for
from mallocgame.formats.lift import lift_map_answer, split_idle
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.problem.model import FastInterval, Solution, Status
from mallocgame.runtime.budget import Budget
from mallocgame.solvers.cpsat.prefetch_windows import _starts
from tests.prefetch_tools import program

UNIT = PRESETS["unit"]  # fast 10 B/s, slow 1 B/s, copies 1 B/s: a 4-byte copy takes 4 s


def _program(*, second_write: str = "read", filler: int = 4):
    """x written at op 0, read at 1; 30 ops reading f (``filler`` bytes each: the copies' budget, ``filler`` s
    per op when f is slow); x touched again at 32 (``second_write``: "read", or "write", a pure write) and
    read at 33."""
    gap = [[("f", "read", filler)] if filler else [] for _ in range(30)]
    return program([[("x", "write", 4)], [("x", "read", 4)], *gap, [("x", second_write, 4)], [("x", "read", 4)]],
                   [("x", 4, "activation"), ("f", 4, "weight")], capacity=8)


def _held(answer) -> int:
    return sum(iv.end - iv.occupied_from for iv in answer)


def test_split_frees_the_gap_with_an_eviction_and_a_prefetch():
    p = _program()
    whole = lift_map_answer(p, [0, None])  # x fast for its whole life [0, 34), f slow
    assert whole == [FastInterval(0, 0, 0, 34, None)]
    cut = split_idle(p, UNIT, whole, min_free=4, ratio=1.5)
    # the eviction of the write at 0 takes slots 1..3 (0.4 + 4 + 4 s >= 6 s), the prefetch slots 30..31 (8 s)
    assert cut == [FastInterval(0, 0, 0, 4, None), FastInterval(0, 0, 32, 34, 29)]
    assert validate_intervals(p, cut) is None
    ev = PrefetchEvaluator.of(p, UNIT)
    assert ev.breakdown(cut).stall == 0.0
    assert ev.value(cut) == ev.value(whole)
    assert _held(cut) < _held(whole)


def test_a_pure_write_after_the_gap_needs_no_copy():
    p = _program(second_write="write")
    cut = split_idle(p, UNIT, lift_map_answer(p, [0, None]), min_free=4)
    assert cut == [FastInterval(0, 0, 0, 2, None), FastInterval(0, 0, 32, 34, None)]
    assert validate_intervals(p, cut) is None


def test_no_cut_without_budget_or_room():
    starved = _program(filler=0)  # the gap's ops take no time: no budget for the copies
    whole = lift_map_answer(starved, [0, None])
    assert split_idle(starved, UNIT, whole, min_free=4) == whole
    p = _program()
    whole = lift_map_answer(p, [0, None])
    assert split_idle(p, UNIT, whole, min_free=40) == whole  # the gap frees fewer ops than asked
    assert split_idle(p, UNIT, [], min_free=4) == []


def test_cuts_take_budget_from_each_other():
    """Two buffers with the same gap share one budget: the second cut's copies must fit what the first left."""
    gap = [[("f", "read", 4)] for _ in range(30)]
    p = program([[("x", "write", 4), ("y", "write", 4)], [("x", "read", 4), ("y", "read", 4)], *gap,
                 [("x", "read", 4), ("y", "read", 4)]],
                [("x", 4, "activation"), ("y", 4, "activation"), ("f", 4, "weight")], capacity=12)
    whole = lift_map_answer(p, [0, 4, None])
    cut = split_idle(p, UNIT, whole, min_free=4, ratio=1.5)
    assert validate_intervals(p, cut) is None
    ev = PrefetchEvaluator.of(p, UNIT)
    assert ev.breakdown(cut).stall == 0.0 and ev.value(cut) == ev.value(whole)
    firsts = sorted(iv.end for iv in cut if iv.start == 0)
    assert len(cut) == 4 and firsts[0] < firsts[1]  # the second eviction waits for the budget the first took


def test_the_window_search_starts_from_msa_around_the_cut_hint():
    p = _program()
    hint = Solution((None,) * p.n, Status.FEASIBLE, p.mode, intervals=tuple(lift_map_answer(p, [0, None])))
    starts = _starts(p, UNIT, session_for(p, UNIT), hint, Budget.start(60.0))
    labels = [label for label, _, _ in starts]
    assert "msa+hint-split" in labels and labels.index("msa+hint-split") < labels.index("msa+hint")
    ev = PrefetchEvaluator.of(p, UNIT)
    for label, answer, _ in starts:
        assert validate_intervals(p, answer) is None, label
    split_start = dict((label, answer) for label, answer, _ in starts)["msa+hint-split"]
    assert ev.value(split_start) >= ev.value(hint.intervals) - 1e-12
