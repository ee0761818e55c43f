"""The one neighbourhood-search driver (mallocgame.algorithms.neighbourhood_search) on a toy problem of its own.

The toy: an answer is a tuple of digits, its value minus the squared distance to a hidden target;
a neighbourhood is a slice of positions; re-solving it draws new digits there at random (often
worse), so only the driver's judging keeps the search from going down.
"""

from __future__ import annotations

import time

import pytest

from mallocgame.algorithms.neighbourhood_search import MARGIN, Round, Step, Trial, Verdict, proportional_share, search

TARGET = (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8)


def toy_value(answer: tuple[int, ...]) -> float:
    return -float(sum((a - t) ** 2 for a, t in zip(answer, TARGET)))


class FakeClock:
    """A clock that moves only when told (solve spends its whole budget)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Toy:
    """Random slices, random digits; ``rounds`` rounds of ``width`` slices each, then stop (unless None)."""

    def __init__(self, clock=None, *, rounds: int | None = 5, width: int = 3, spend: float = 0.0) -> None:
        self.clock, self.rounds, self.width, self.spend = clock, rounds, width, spend
        self.calls: list[tuple[float, float]] = []  # (start, until) of every solve
        self.ended: list[Round] = []
        self.learned: list[Step] = []

    def plan(self, incumbent, rng):
        if self.rounds is not None and len(self.ended) >= self.rounds:
            return None
        out = []
        for _ in range(self.width):
            lo = int(rng.integers(0, len(TARGET) - 2))
            out.append((lo, lo + 3))
        return out

    def seconds(self, plan, w, left):
        return proportional_share([3] * len(plan), w, left, 0.1)

    def solve(self, incumbent, slice_, until, rng):
        start = self.clock() if self.clock else time.monotonic()
        self.calls.append((start, until))
        if self.clock is not None:
            self.clock.now = min(until, start + self.spend) if self.spend else until
        lo, hi = slice_
        digits = rng.integers(0, 10, hi - lo).tolist()
        return Trial(incumbent[:lo] + tuple(digits) + incumbent[hi:], proven=bool(rng.random() < 0.5))

    def judge(self, incumbent, value, trial):
        v = toy_value(trial)
        return Verdict(v, v >= value, v > value)

    def learn(self, step):
        self.learned.append(step)
        return False

    def end_round(self, result, rng):
        self.ended.append(result)
        return False


START = (0,) * len(TARGET)


def test_never_returns_worse_than_the_start_and_the_value_is_the_answers():
    for seed in range(5):
        out = search(Toy(rounds=20), START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=seed)
        assert out.value >= toy_value(START)
        assert out.value == toy_value(out.answer)
        values = [v for _, v in out.history]
        assert values == sorted(set(values))  # strictly better each time
        assert out.steps == 60 and out.rounds == 20 and out.stopped_by == "mode"
        assert out.improved <= out.accepted <= out.steps


def test_a_judge_that_refuses_everything_keeps_the_start():
    class Refusing(Toy):
        def judge(self, incumbent, value, trial):
            return Verdict(toy_value(trial), False, False)

    out = search(Refusing(rounds=3), START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=1)
    assert out.answer == START and out.value == toy_value(START) and out.accepted == 0 and out.history == ()


def test_a_worse_trial_within_tolerance_is_kept_but_the_value_never_drops():
    class Tolerant(Toy):
        def judge(self, incumbent, value, trial):
            v = toy_value(trial)
            return Verdict(v, True, v > value)  # accepts anything

    space = Tolerant(rounds=4)
    out = search(space, START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=2)
    assert out.accepted == out.steps
    assert all(b.value >= a.value for a, b in zip(space.learned, space.learned[1:]))
    assert out.value >= toy_value(START)


def test_same_seed_same_answer_other_seed_other_trajectory():
    def run(seed):
        out = search(Toy(rounds=8), START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=seed)
        return out.answer, [v for _, v in out.history], out.steps, out.accepted

    assert run(7) == run(7)
    assert len({run(s)[0] for s in range(6)}) > 1


def test_stops_at_the_deadline_and_no_budget_passes_it():
    clock = FakeClock()
    space = Toy(clock, rounds=None, width=4, spend=1.0)  # every solve takes a second of its budget
    out = search(space, START, toy_value(START), deadline=10.0, t0=0.0, seed=0, clock=clock)
    assert out.stopped_by == "deadline"
    assert clock.now <= 10.0 and len(space.calls) > 4
    assert all(until <= 10.0 for _, until in space.calls)
    assert all(start < 10.0 - MARGIN for start, _ in space.calls)  # nothing starts within the margin
    assert out.rounds == len(space.ended)


def test_a_round_cut_by_the_deadline_is_reported_not_complete():
    clock = FakeClock()

    class Proven(Toy):
        def solve(self, incumbent, slice_, until, rng):
            trial = super().solve(incumbent, slice_, until, rng)
            clock.now = 3.0 * len(self.calls)  # the second solve of the first round ends past the deadline
            return Trial(trial.answer, proven=True)

    space = Proven(clock, rounds=None, width=4)
    out = search(space, START, toy_value(START), deadline=5.0, t0=0.0, seed=0, clock=clock)
    assert out.steps == 2 and out.rounds == 1 and out.stopped_by == "deadline"
    assert len(space.ended) == 1 and not space.ended[0].complete  # cut: reported to the mode, not complete


def test_per_neighbourhood_budgets_share_the_time_left():
    clock = FakeClock()
    space = Toy(clock, rounds=1, width=4, spend=0.5)
    search(space, START, toy_value(START), deadline=20.0, t0=0.0, seed=0, clock=clock)
    budgets = [until - start for start, until in space.calls]
    assert budgets[0] == pytest.approx(20.0 / 4)  # its share of four equal neighbourhoods
    assert budgets[1] == pytest.approx(19.5 / 3)  # the time the first did not use goes to the rest


def test_real_clock_search_ends_on_time():
    class Slow(Toy):
        def solve(self, incumbent, slice_, until, rng):
            time.sleep(max(0.0, min(until - time.monotonic(), 0.05)))
            return super().solve(incumbent, slice_, until, rng)

    t0 = time.monotonic()
    out = search(Slow(rounds=None), START, toy_value(START), deadline=t0 + 0.5, t0=t0, seed=0)
    assert time.monotonic() - t0 < 0.5 + 0.1
    assert out.stopped_by == "deadline" and out.steps > 0


def test_learn_can_stop_at_once_without_ending_the_round():
    class StopFirst(Toy):
        def learn(self, step):
            super().learn(step)
            return True

    space = StopFirst(rounds=None)
    out = search(space, START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=0)
    assert out.steps == 1 and out.stopped_by == "mode" and space.ended == [] and out.rounds == 1


def test_empty_rounds_and_the_end_round_stop():
    class Empty(Toy):
        def plan(self, incumbent, rng):
            return []

        def end_round(self, result, rng):
            super().end_round(result, rng)
            return len(self.ended) >= 3

    space = Empty(rounds=None)
    out = search(space, START, toy_value(START), deadline=time.monotonic() + 30, t0=0.0, seed=0)
    assert out.steps == 0 and out.rounds == 3 and out.answer == START
    assert space.ended == [Round(gained=False, complete=True)] * 3


def test_proportional_share():
    assert proportional_share([1, 1, 2], 0, 8.0, 0.1) == pytest.approx(2.0)
    assert proportional_share([1, 1, 2], 2, 8.0, 0.1) == pytest.approx(8.0)
    assert proportional_share([1, 99], 0, 10.0, 0.3) == pytest.approx(0.3)  # the floor
    assert proportional_share([1, 99], 0, 0.2, 0.3) == pytest.approx(0.2)  # never past what is left
    assert proportional_share([0, 0], 0, 5.0, 0.0) == 0.0


def test_the_modes_hooks_are_complete():
    from mallocgame.hybrid.lns import MapWindows, PackWindows
    from mallocgame.solvers.cpsat.prefetch_windows import PrefetchWindows

    for cls in (MapWindows, PackWindows, PrefetchWindows):
        for hook in ("plan", "seconds", "solve", "judge", "learn", "end_round"):
            assert callable(getattr(cls, hook, None)), (cls, hook)
