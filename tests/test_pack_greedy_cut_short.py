"""greedy-xla in pack mode cut short by its deadline still answers a packing: the rest stacked above."""

from __future__ import annotations

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate
from mallocgame.inputs.generate import layered_network

HW = PRESETS["tpuv4i"]


def test_a_pack_greedy_cut_short_stacks_the_rest_and_is_valid():
    problem = layered_network(4000, seed=3).replace(mode="pack", capacity=None)
    report = run_solver("greedy-xla", problem, HW, time_limit=0.001, seed=0)  # its deadline is gone at once
    assert report.valid, report.summary(has_ops=True)
    assert validate(problem, report.offsets) is None and report.placed == problem.n
    assert report.stats["cut_short"] and 0 < report.stats["stacked"] <= problem.n
    whole = run_solver("greedy-xla", problem, HW, time_limit=60, seed=0)
    assert whole.valid and "cut_short" not in whole.stats and whole.objective <= report.objective
