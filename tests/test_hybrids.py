"""The hybrids: select-then-pack, large neighbourhood search and the portfolio."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.bounds.bounds import map_upper_bound
from mallocgame.engine.runner import run_solver
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate
from mallocgame.hybrid.lns import LargeNeighbourhoodSearch, window_around
from mallocgame.hybrid.portfolio import Portfolio, member_names
from mallocgame.hybrid.select_pack import SelectPack, relaxation_choice
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.problem.intervals import OverlapIndex, live_profile
from mallocgame.problem.model import Buffer, Problem, Solution, Status, offsets_array
from mallocgame.solvers.cpsat.model import value_terms

HW = PRESETS["tpuv4i"]
UNIT = PRESETS["unit"]


def greedy(problem, hw=HW):
    return run_solver("greedy-xla" if problem.mode == "map" else "best-fit", problem, hw, time_limit=5, seed=0)


def as_hint(report, mode):
    return Solution(report.offsets, Status.FEASIBLE, mode, solver=report.solver)


# ------------------------------------------------------------------ select-pack


def test_relaxation_choice_reaches_the_bound_and_respects_capacity_at_every_moment():
    p = layered_network(200, seed=4)
    ev = Evaluator(p, HW)
    candidates = (ev.benefits > 0) & (p.arrays.size <= p.capacity)
    chosen = relaxation_choice(p, ev, candidates, time_limit=10)
    assert not (chosen & ~candidates).any()
    assert live_profile(p, chosen)[1].max() <= p.capacity
    everyone = np.arange(p.n)
    relaxed_value = value_terms(ev, everyone).value(chosen)  # the concave saving, no fragmentation
    assert relaxed_value == pytest.approx(map_upper_bound(p, HW).value, rel=1e-6)


def test_select_pack_beats_greedy_on_a_layered_network():
    p = layered_network(300, seed=2)
    s = SelectPack().solve(SelectPack.request(p, HW, time_limit=10, seed=0))
    assert validate(p, s.offsets) is None
    value = Evaluator(p, HW).value(s.offsets)
    assert value >= greedy(p).objective * (1 - 1e-9)
    assert value <= map_upper_bound(p, HW).value * (1 + 1e-9)
    assert s.stats["rounds"] >= 1 and s.history


def test_select_pack_never_returns_less_than_its_hint():
    p = random_intervals(60, seed=5, with_benefit=True).replace(capacity=120, mode="map")
    hint = as_hint(greedy(p, UNIT), "map")
    s = SelectPack().solve(SelectPack.request(p, UNIT, time_limit=5, seed=0, hint=hint))
    ev = Evaluator(p, UNIT)
    assert validate(p, s.offsets) is None and ev.value(s.offsets) >= ev.value(hint.offsets) - 1e-9


def test_select_pack_packs_a_tight_instance_and_proves_an_over_full_one_infeasible():
    p, _ = packed_instance(30, seed=7, capacity=48, horizon=16)
    s = SelectPack().solve(SelectPack.request(p, UNIT, time_limit=10, seed=0))
    assert s.status is Status.OPTIMAL and validate(p, s.offsets) is None
    over = Problem("over", (Buffer("a", 4, 0, 2), Buffer("b", 4, 0, 2), Buffer("c", 4, 1, 3)), capacity=10,
                   mode="pack")
    assert SelectPack().solve(SelectPack.request(over, UNIT, time_limit=5, seed=0)).status is Status.INFEASIBLE


def test_select_pack_packs_a_choice_best_fit_cannot_with_the_pack_search(monkeypatch):
    # map mode at a capacity where every buffer fits at once, but only in one tight arrangement (a guillotine-cut
    # strip, as MiniMalloc's hard set): best fit and the CP-SAT windows left 39 of 150 buffers slow in 2 s; the
    # pack search on the first choice packs them all, at the bound
    import mallocgame.hybrid.select_pack as select_pack

    p, _ = packed_instance(150, seed=0, capacity=1024, horizon=200)
    p = p.replace(mode="map")
    s = SelectPack().solve(SelectPack.request(p, UNIT, time_limit=2, seed=0))
    assert validate(p, s.offsets) is None and s.status is Status.OPTIMAL and all(o is not None for o in s.offsets)
    monkeypatch.setattr(select_pack, "PACK_SEARCH_SECONDS", 0.0)  # best fit and the windows alone
    alone = SelectPack().solve(SelectPack.request(p, UNIT, time_limit=2, seed=0))
    assert sum(o is not None for o in alone.offsets) < p.n and alone.status is Status.FEASIBLE


# ------------------------------------------------------------------ lns


def test_window_holds_about_k_candidates_around_the_centre():
    p = random_intervals(300, seed=1, horizon=200)
    a = p.arrays
    index = OverlapIndex(a.start, a.end)
    got = window_around(index, np.ones(p.n, bool), 100, 40, (0, 200))
    assert 40 <= len(got) <= 80
    assert ((a.start[got] <= 140) & (a.end[got] >= 60)).all()  # all live near the centre


def test_lns_improves_a_weak_hint_and_never_returns_less():
    p = layered_network(200, seed=6)
    ev = Evaluator(p, HW)
    weak = offsets_array(greedy(p).offsets)
    weak[::2] = -1  # drop half the greedy placement: a valid but poor start
    hint = Solution(tuple(None if o < 0 else int(o) for o in weak), Status.FEASIBLE, "map", solver="weak")
    s = LargeNeighbourhoodSearch().solve(LargeNeighbourhoodSearch.request(p, HW, time_limit=4, seed=0, hint=hint))
    assert validate(p, s.offsets) is None
    assert ev.value(s.offsets) > ev.value(weak) * 1.01
    assert s.stats["start"] == "weak" and s.stats["steps"] >= 1


def test_lns_lowers_the_peak_in_pack_mode():
    p, _ = packed_instance(40, seed=3, capacity=64, horizon=24)
    p = p.replace(capacity=None)
    base = greedy(p, UNIT)
    s = LargeNeighbourhoodSearch().solve(LargeNeighbourhoodSearch.request(p, UNIT, time_limit=5, seed=0, minimize_peak=True))
    assert validate(p, s.offsets) is None
    assert s.objective <= base.objective and s.objective >= s.bound
    assert s.objective == max(b.size + o for b, o in zip(p.buffers, s.offsets))


def test_lns_same_seed_same_answer():
    p = layered_network(40, seed=8)
    a = LargeNeighbourhoodSearch().solve(LargeNeighbourhoodSearch.request(p, HW, time_limit=5, seed=3))
    b = LargeNeighbourhoodSearch().solve(LargeNeighbourhoodSearch.request(p, HW, time_limit=5, seed=3))
    assert a.offsets == b.offsets


# ------------------------------------------------------------------ portfolio


def test_member_names_skip_unknown_and_unsupported_solvers():
    names = member_names("map", "greedy-xla, no-such-solver, portfolio, cpsat")
    assert names == ["greedy-xla", "cpsat"]
    assert "portfolio" not in member_names("pack")


def test_portfolio_keeps_the_best_valid_member_answer():
    p = layered_network(150, seed=1)
    s = Portfolio().solve(Portfolio.request(p, HW, time_limit=6, seed=0, workers=2, solvers="greedy-xla,lns,select-pack"))
    assert validate(p, s.offsets) is None
    members = s.stats["members"]
    # Every member either answered or was stopped (a member that proves optimality ends the race).
    assert set(members) | set(s.stats["errors"]) == {"greedy-xla", "lns", "select-pack"}, s.stats
    assert all("stopped" in why for why in s.stats["errors"].values())
    if s.stats["errors"]:
        assert members[s.stats["winner"]]["status"] == "OPTIMAL"
    best_member = max(m["objective"] for m in members.values() if m["valid"])
    assert Evaluator(p, HW).value(s.offsets) == pytest.approx(best_member, rel=1e-9)
    assert s.stats["winner"] in members


class _EndTogether:
    """A pool whose runs all end in one ``wait`` (two members finishing while the portfolio's process waits)."""

    def __init__(self, reports):
        self.reports, self.runs = reports, []

    free = property(lambda self: 2 - len(self.runs))
    busy = property(lambda self: bool(self.runs))

    def running(self):
        return [(key, 0.0) for key in self.runs]

    def start(self, key, *args, **kwargs):
        self.runs.append(key)

    def wait(self, timeout):
        done, self.runs = [(key, "ok", self.reports[key]) for key in self.runs], []
        return done

    def sent_answers(self):
        return []


def test_portfolio_keeps_every_report_of_a_wait_in_which_one_member_settles_the_problem():
    import dataclasses
    import time

    from mallocgame.engine.session import session_for
    from mallocgame.hybrid.portfolio import _Race
    from mallocgame.runtime.budget import Budget

    p = layered_network(150, seed=1)
    answered = greedy(p)
    reports = {"select-pack": dataclasses.replace(answered, solver="select-pack", status="OPTIMAL"),
               "lns": dataclasses.replace(answered, solver="lns")}
    race = _Race(p, HW, Budget(10.0, time.monotonic()), minimize_peak=False, lifted=set(), session=session_for(p, HW))
    assert Portfolio._run_parallel(["select-pack", "lns"], race, 0, None, {}, 2, _EndTogether(reports))
    assert set(race.reports) == {"select-pack", "lns"} and not race.errors  # lns's report, after the settling one
    assert race.best.solver == "select-pack"


def test_portfolio_reports_a_proven_infeasible_pack():
    over = Problem("over", (Buffer("a", 4, 0, 2), Buffer("b", 4, 0, 2), Buffer("c", 4, 1, 3)), capacity=10,
                   mode="pack")
    s = Portfolio().solve(Portfolio.request(over, UNIT, time_limit=5, seed=0, workers=1, solvers="best-fit,cpsat"))
    assert s.status is Status.INFEASIBLE and all(o is None for o in s.offsets)
