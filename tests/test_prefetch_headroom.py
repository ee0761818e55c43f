"""The segment ceiling of experiments/prefetch_headroom.py (issue 18 item 4): copy windows counted at each op's slowest
time are never longer than an answer's (no answer's op is slower), and answers made of the segments are valid and
score no more than the segments do in map mode (copies free there)."""

from __future__ import annotations

import numpy as np
import pytest

import mallocgame
from mallocgame.bounds.bounds import map_upper_bound
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.load import load_problem
from tests.conftest import experiment_module


@pytest.fixture(scope="module")
def headroom():
    return experiment_module("prefetch_headroom")


@pytest.fixture(scope="module")
def program():
    problem = load_problem("example:layered150", mode="prefetch")
    pev = PrefetchEvaluator.of(problem, problem.hardware)
    answer = mallocgame.solve(problem.replace(mode="map"), "greedy-xla", time_limit=10)
    return problem, pev, lift_map_answer(problem, answer.solution.offsets)


def test_slowest_op_times_are_never_below_an_answers(headroom, program):
    problem, pev, lifted = program
    slowest = headroom.op_times(pev, lifted, "slowest")
    answers = [lifted, list(mallocgame.solve(problem, "msa", time_limit=10).solution.intervals)]
    for answer in answers:
        assert validate_intervals(problem, answer) is None
        times = pev.op_times(answer)
        assert np.all(times <= slowest + 1e-18)
        assert np.any(times < slowest)  # the answer makes some op faster: the check is not vacuous


@pytest.mark.parametrize("which,ratio,min_free", [("lifted", 1.0, 4), ("slowest", 1.0, 1), ("slowest", 0.5, 1)])
def test_answers_made_of_segments_are_valid_and_below_the_segments_map_value(headroom, program, which, ratio, min_free):
    problem, pev, lifted = program
    seg_problem, owner = headroom.segment_problem(problem, headroom.op_times(pev, lifted, which), ratio=ratio,
                                                  min_free=min_free)
    assert seg_problem.n >= problem.n  # every buffer is one segment at least
    seg = mallocgame.solve(seg_problem, "greedy-xla", time_limit=10)
    answer = headroom.lift_segments(problem, owner, seg.solution.offsets)
    assert validate_intervals(problem, answer) is None
    assert pev.value(answer) <= seg.objective + 1e-12  # the copies cost in prefetch mode, not in map mode
    assert map_upper_bound(seg_problem, problem.hardware, time_limit=20).value >= seg.objective - 1e-12
