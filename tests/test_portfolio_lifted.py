"""A prefetch portfolio runs map-only members in map mode and lifts their answers (hybrid.portfolio)."""

from __future__ import annotations

import mallocgame
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hybrid.portfolio import lifted_members, member_names
from mallocgame.lift import lift_map_answer


def test_map_members_are_lifted_in_prefetch_mode_only():
    names = member_names("prefetch", "msa,select-pack,greedy-xla")
    assert names == ["msa", "select-pack", "greedy-xla"]
    assert lifted_members(names) == {"select-pack", "greedy-xla"}
    assert member_names("pack", "msa,best-fit") == ["best-fit"]


def test_a_lifted_member_wins_when_it_is_best_and_its_answer_is_valid():
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    result = mallocgame.solve(problem, "portfolio", time_limit=6, solvers="msa,select-pack", seed=0)
    assert result.valid
    members = result.solution.stats["members"]
    assert set(members) >= {"msa", "select-pack"} and members["select-pack"]["valid"]
    map_answer = mallocgame.solve(problem.replace(mode="map"), "select-pack", time_limit=3, seed=0)
    lifted = PrefetchEvaluator.of(problem, problem.hardware).value(lift_map_answer(problem, map_answer.solution.offsets))
    assert members["select-pack"]["status"] == "FEASIBLE"  # a map optimum is never reported as a prefetch one
    assert result.objective >= max(members["msa"]["objective"], 0.99 * lifted)
    assert mallocgame.validate(problem, result.solution)
