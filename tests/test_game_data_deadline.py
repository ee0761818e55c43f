"""The game data's build keeps a deadline, and a search whose game data cannot be built in time still answers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import Buffer, BufferTable
from mallocgame.search import uct
from mallocgame.search.game_data import GameData, GameDataCutShort
from mallocgame.search.game_prefetch import PrefetchData

HW = PRESETS["tpuv4i"]


def test_a_build_past_its_deadline_stops_and_keeps_nothing():
    problem = layered_network(300, seed=1).replace(mode="prefetch")
    past = time.monotonic() - 1.0
    with pytest.raises(GameDataCutShort):
        GameData(problem, HW, until=past)
    with pytest.raises(GameDataCutShort):
        PrefetchData.of(problem, HW, until=past)
    data = PrefetchData.of(problem, HW)  # nothing half-built was kept: a build without a deadline is whole
    assert data.n == problem.n and len(data.op_operands) == data.n_ops
    assert PrefetchData.of(problem, HW, until=past) is data  # built once: kept, whatever the deadline now


def test_weights_are_read_from_the_kind_column_as_from_the_objects():
    problem = layered_network(200, seed=4)
    objects = problem.replace(buffers=tuple(problem.buffers))
    table = problem.replace(buffers=BufferTable.of(tuple(problem.buffers)))
    assert isinstance(table.buffers, BufferTable) and not isinstance(objects.buffers, BufferTable)
    weights = GameData(objects, HW).is_weight
    assert weights.sum() > 0 and np.array_equal(GameData(table, HW).is_weight, weights)
    assert all(isinstance(b, Buffer) for b in objects.buffers)


def test_mcts_answers_from_its_baselines_when_the_prefetch_game_data_is_not_built_in_time(monkeypatch):
    problem = layered_network(400, seed=2).replace(mode="prefetch")

    def too_late(*_, **__):
        raise GameDataCutShort("the game data's build reached its deadline before the evaluator")

    monkeypatch.setattr(uct.PrefetchData, "of", too_late)
    report = run_solver("mcts", problem, HW, time_limit=5, seed=0)
    assert report.valid, report.summary(has_ops=True)
    assert validate_intervals(problem, report.intervals) is None
    assert report.stats["game"] == "not built: its data's build reached the deadline"
    assert report.objective > 0  # a held baseline (greedy-xla lifted, msa) saves time: it is the answer
