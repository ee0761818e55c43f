"""What keeps big inputs within their limits: no object per buffer, op or interval where columns do, the limit
counted from before what ``solve`` builds for its child, a search's start baseline given the time it needs, and the
answers that travel from a solving child to its parent (and into the report JSON) in columns."""

from __future__ import annotations

import json
import pickle
import time

import numpy as np
import pytest

from mallocgame.cli import common
from mallocgame.engine import session as session_module
from mallocgame.engine import solving
from mallocgame.engine.protocol import options_of
from mallocgame.engine.report import Report, judge, score
from mallocgame.engine.request import SolveRequest
from mallocgame.engine.session import Session, session_for, work_units
from mallocgame.formats.io import write_workload_json
from mallocgame.formats.lift import lift_map_answer, map_intervals
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, span_columns
from mallocgame.hardware.validator import interval_peak
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.problem.model import FastInterval, OpTable
from mallocgame.runtime import incumbents
from mallocgame.runtime.budget import Budget


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """A 300-buffer layered network written and read back as ``solve`` reads it (ops as columns)."""
    path = tmp_path_factory.mktemp("big") / "layered-300.json"
    write_workload_json(path, layered_network(300, seed=1))
    return str(path)


def _load(path: str, mode: str):
    return prepare(read_problem(path), mode=mode, minimize_peak=mode == "pack")


@pytest.mark.parametrize("mode", ["map", "pack"])
def test_work_units_read_the_op_columns_without_making_an_op(workload, mode):
    problem, _ = _load(workload, mode)
    assert isinstance(problem.ops, OpTable) and not problem.ops.materialized
    units = work_units(problem)
    assert not problem.ops.materialized  # iterating problem.ops made 87k Op objects at 200k buffers (4 s)
    assert "touches" not in problem.__dict__
    expected = problem.n + len(problem.touches.ops)  # + the overlapping pairs, the same on both sides
    live = units - len(problem.touches.ops) - problem.n
    assert live >= 0 and units == expected + live


def _reference_lift(problem, offsets):
    """The per-buffer rule of ``lift_map_answer``: produced in place at a pure write at its start, else prefetched."""
    out = []
    for i, o in enumerate(offsets):
        if o is None or o < 0:
            continue
        start, end = int(problem.arrays.start[i]), int(problem.arrays.end[i])
        ops, reads, writes = problem.touches.of(i)
        k = int(np.searchsorted(ops, start))
        pure_write = k < len(ops) and ops[k] == start and writes[k] and not reads[k]
        out.append(FastInterval(i, int(o), start, end, None if pure_write else start - 1))
    return out


def test_lift_map_answer_takes_every_buffer_at_once_and_keeps_the_rule(workload):
    problem, hw = _load(workload, "prefetch")
    offsets, _ = session_for(problem, hw)._greedy(None)
    assert (offsets >= 0).sum() > 10
    lifted = lift_map_answer(problem, offsets)
    assert lifted == _reference_lift(problem, offsets)
    assert {iv.copy_start is None for iv in lifted} == {True, False}  # both kinds occur
    as_list = [None if o < 0 else int(o) for o in offsets]
    assert lift_map_answer(problem, as_list) == lifted
    assert map_intervals(problem, as_list) == [FastInterval(iv.buffer, iv.offset, iv.start, iv.end) for iv in lifted]
    assert lift_map_answer(problem, [None] * problem.n) == []


def _prefetch_answer(workload):
    problem, hw = _load(workload, "prefetch")
    offsets, _ = session_for(problem, hw)._greedy(None)
    return problem, hw, tuple(lift_map_answer(problem, offsets))


def test_a_report_scores_a_prefetch_answer_without_a_copy_object_and_to_the_same_float(workload):
    problem, hw, answer = _prefetch_answer(workload)
    full = judge(problem, hw, answer)
    lean = judge(problem, hw, answer, copies=False)
    assert full.breakdown is not None and len(full.breakdown.copies) > 0 and lean.breakdown is None
    assert lean.estimated_time == full.estimated_time  # the same float, not merely close
    assert PrefetchEvaluator.of(problem, hw).breakdown_time(answer) == full.breakdown.time
    assert (lean.placed, lean.peak, lean.violation) == (full.placed, full.peak, full.violation)


def test_interval_columns_and_peak_match_the_intervals(workload):
    problem, _, answer = _prefetch_answer(workload)
    cols = span_columns(answer)
    assert cols.shape == (len(answer), 5)
    assert cols.tolist() == [[iv.buffer, iv.start, iv.end, iv.copy_start is not None, iv.copy_start or 0]
                             for iv in answer]
    assert interval_peak(problem, answer) == max(iv.offset + int(problem.arrays.size[iv.buffer]) for iv in answer)
    assert interval_peak(problem, ()) == 0
    odd = (FastInterval(0, 2**70, 0, 1),)  # no int64: summed one by one, as before
    assert interval_peak(problem, odd) == 2**70 + int(problem.arrays.size[0])


def test_answers_travel_from_a_child_as_columns(workload):
    problem, hw, answer = _prefetch_answer(workload)
    cols = incumbents.columns_of_intervals(answer)
    assert cols.dtype == np.int64 and cols.shape == (len(answer), 6)
    assert incumbents.intervals_of_columns(cols) == answer
    assert incumbents.intervals_of_columns(incumbents.columns_of_intervals(())) == ()
    minus_one = (FastInterval(3, 0, 0, 2, -1), FastInterval(4, 8, 1, 3, None))  # copy_start -1 is not "no copy"
    assert incumbents.intervals_of_columns(incumbents.columns_of_intervals(minus_one)) == minus_one
    report = score(problem, hw, _solution(problem, answer), seconds=0.1, bound=None, solver_name="t")
    assert report.valid and report.intervals == answer
    back = pickle.loads(pickle.dumps(report))
    assert back == report and isinstance(back, Report)
    assert all(type(iv) is FastInterval for iv in back.intervals)


def _solution(problem, intervals):
    from mallocgame.problem.model import Solution, Status

    return Solution((None,) * problem.n, Status.FEASIBLE, problem.mode, intervals=tuple(intervals))


def test_a_channel_sends_the_intervals_as_columns(workload, monkeypatch):
    problem, _, answer = _prefetch_answer(workload)
    sent = []

    class Pipe:
        def send(self, message):
            sent.append(pickle.loads(pickle.dumps(message)))

    import threading

    incumbents.open_channel(Pipe(), threading.Lock(), problem, source="t")
    try:
        incumbents.offer(value=1.0, intervals=list(answer), problem=problem)
        deadline = time.monotonic() + 10
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        incumbents.close_channel()
    kind, (events, incumbent) = sent[0]
    assert kind == "incumbent" and events[0].value == 1.0
    assert isinstance(incumbent.interval_columns, np.ndarray) and incumbent.intervals == answer


def test_big_values_of_a_json_document_go_on_one_line_and_small_documents_stay_indented(monkeypatch):
    doc = {"a": 1, "nested": {"x": [1, 2]}, "offsets": {"b0": 0, "b1": None, "b2": 64}, "rows": [1, 2, 3], "s": "t"}
    assert common.dump_json(doc) == json.dumps(doc, indent=1) + "\n"  # below the threshold: as always
    monkeypatch.setattr(common, "COMPACT_ENTRIES", 2)
    text = common.dump_json(doc)
    assert json.loads(text) == doc
    lines = text.splitlines()
    assert ' "offsets": {"b0":0,"b1":null,"b2":64},' in lines and ' "rows": [1,2,3],' in lines
    assert ' "nested": {' in lines and lines[0] == "{" and lines[-1] == "}"


def test_the_limit_counts_what_solve_builds_for_its_child(workload, monkeypatch):
    """The parent's own work (the solver's imports, the bound: seconds at 2M buffers) is spent within the limit, the
    bound while the child solves, and the warm-up (overlap index, evaluators) is the child's, on the clock the parent
    keeps."""
    problem, hw = _load(workload, "map")
    bound, start = solving.problem_bound, solving.ChildCall.start
    bounded, budgets = [], []

    def slow_bound(*args, **kwargs):
        bounded.append(time.monotonic())
        time.sleep(0.2)
        return bound(*args, **kwargs)

    def start_child(fn, args=(), kwargs=None, **options):
        budgets.append((kwargs["budget"], "overlap" in session_for(problem, hw).__dict__))
        return start(fn, args, kwargs, **options)

    monkeypatch.setattr(solving, "problem_bound", slow_bound)
    monkeypatch.setattr(solving.ChildCall, "start", start_child)
    report = solving.solve_beside_bound("greedy-xla", problem, hw, time_limit=5.0, seed=0)
    assert report.valid and bounded and budgets
    budget, warmed = budgets[0]
    assert budget.started < bounded[0] and budget.deadline < bounded[0] + 5.0  # the clock started before the bound
    assert report.bound is not None and report.bound_kind
    assert not warmed  # the overlap index is the child's to build, within the limit the parent keeps


def test_a_big_input_s_child_sends_the_trivial_answer_first(workload, monkeypatch):
    """From FIRST_ANSWER_BUFFERS buffers on: a solver that never answers still ends with a valid answer at the
    limit (all slow; pack: every buffer stacked), not exit 1."""
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 0)
    hang = _Hang()
    monkeypatch.setattr(solving, "solve_with_warm_start", lambda *a, **k: hang.solve(None))
    for mode in ("map", "pack", "prefetch"):
        problem, hw = _load(workload, mode)
        report = solving.solve_beside_bound("greedy-xla", problem, hw, time_limit=0.2, seed=0)
        assert report.valid and report.status == "FEASIBLE", (mode, report.violation)
        assert "first answer" in report.stats["source"] and "stopped_at_limit" in report.stats
        if mode == "pack":
            assert report.placed == problem.n and report.peak >= int(problem.arrays.size.sum())  # all stacked
        else:
            assert report.placed == 0 and report.objective == 0.0
    monkeypatch.setattr(solving, "FIRST_ANSWER_BUFFERS", 10**9)
    report = solving.solve_beside_bound("greedy-xla", problem, hw, time_limit=0.2, seed=0)
    assert not report.valid and "sent no answer" in report.violation  # below the size: as before


class _Hang:
    def solve(self, request):
        while True:
            time.sleep(0.05)


class _Spy(Session):
    """A solve session that records the deadlines its baselines are asked for."""

    def __init__(self, problem, hw):
        super().__init__(problem, hw)
        self.asked: list[tuple[str, float | None]] = []

    def baseline(self, name, deadline=None):
        self.asked.append((name, deadline))
        return super().baseline(name, deadline)


@pytest.mark.parametrize("mode", ["map", "pack"])
def test_lns_gives_its_start_baseline_the_search_time_not_a_share(workload, mode):
    """A greedy cut at 30% of the search's time left most of 200k buffers slow where the greedy alone placed them."""
    from mallocgame.engine.registry import load_solver
    from mallocgame.hybrid.lns import LargeNeighbourhoodSearch

    problem, hw = _load(workload, mode)
    spy = _Spy(problem, hw)
    solver = load_solver("lns")
    assert isinstance(solver, LargeNeighbourhoodSearch)
    budget = Budget.start(30.0)
    request = SolveRequest(problem, hw, budget, 0, None, options_of(solver).taken({}), spy)
    solver.solve(request)
    start = {"map": "greedy-xla", "pack": "best-fit"}[mode]
    deadlines = [d for name, d in spy.asked if name == start and d is not None]
    # pack: best fit may run until an answer of one tuple of offsets is back in time (greedy-xla's keep-back)
    per_buffer = {"per_buffer": 1e-6} if mode == "pack" else {}
    until = budget.search_part(n=problem.n, **per_buffer).deadline
    assert deadlines and max(deadlines) == pytest.approx(until)


@pytest.mark.parametrize("mode", ["map", "pack"])
def test_mcts_builds_the_mode_baselines_first_until_its_deadline(workload, mode, monkeypatch):
    """Built after the game's data and a quarter of the time, greedy-xla was cut at 252 of 200k buffers."""
    from mallocgame.engine.registry import load_solver

    problem, hw = _load(workload, mode)
    spy = _Spy(problem, hw)
    seen = []
    greedy = session_module.Session.baselines

    def baselines(self, deadline=None, **kw):
        seen.append(deadline)
        return greedy(self, deadline, **kw)

    monkeypatch.setattr(Session, "baselines", baselines)
    from mallocgame.search import uct

    played, made, game_data = [], [], uct.GameData
    monkeypatch.setattr(uct, "greedy_incumbents", lambda *a, **k: played.append(bool(seen)) or [])
    monkeypatch.setattr(uct, "GameData", lambda *a, **k: made.append(bool(seen)) or game_data(*a, **k))
    solver = load_solver("mcts")
    budget = Budget.start(2.0)
    request = SolveRequest(problem, hw, budget, 0, None, options_of(solver).taken({"simulations": 2}), spy)
    solver.solve(request)
    assert played == [True] and made == [True]  # the baselines came before the game's data and greedy episodes
    assert seen and seen[0] > budget.part(session_module.BASELINE_SHARE).deadline  # past the half: until the search's end


def test_an_answer_is_read_into_columns_once_per_answer_tuple(workload):
    """Validating, then scoring (serving its copies) read the same answer: one reading, a second at 200k intervals."""
    from mallocgame.hardware.validator import AnswerTuple, interval_columns

    _, _, intervals = _prefetch_answer(workload)
    answer = AnswerTuple(intervals)
    table = interval_columns(answer)
    assert table.shape == (len(answer), 6) and not table.flags.writeable
    assert table.tolist() == [[iv.buffer, iv.offset, iv.start, iv.end, iv.copy_start is not None, iv.copy_start or 0]
                              for iv in answer]
    assert interval_columns(answer) is table  # the same answer: read once
    assert interval_columns(tuple(answer)) is not table  # a plain tuple: read each time (the caller keeps it)
    assert interval_columns(answer[:-1]) is not table and interval_columns(answer[:-1]).shape[0] == len(answer) - 1


def _csv_problems():
    """Problems whose solution CSVs use every column: quoted and non-ASCII ids, alignment, benefit, none."""
    from mallocgame.problem.model import Buffer, Problem

    plain = layered_network(60, seed=3).replace(mode="pack", capacity=None)
    odd = Problem("odd", (Buffer('a,"1"', 8, 0, 2, 1.5, 4), Buffer("b\nc", 16, 1, 3, None, 1), Buffer("é", 4, 0, 3, 2.0, 1),
                          Buffer("d", 2 ** 40, 2, 4, None, 1)), capacity=None, mode="map")
    return [plain, odd, Problem("empty", (), capacity=None, mode="map")]


def test_solution_csv_text_is_the_same_in_both_engines(monkeypatch):
    """The compiled rows (``mallocgame._native.csv_rows``) are the Python join's, byte for byte: with offsets
    (placed, slow, 0, past 32 bits), numpy integers, an int64 array, none, and quoted or non-ASCII ids."""
    from mallocgame.formats import io as io_module

    calls = []
    compiled = io_module.csv_rows
    monkeypatch.setattr(io_module, "csv_rows", lambda *args: calls.append(1) or compiled(*args))
    for p in _csv_problems():
        stacked = np.cumsum([0] + [b.size for b in p.buffers])[:-1].tolist()
        answers = [None, tuple(stacked), tuple(None if i % 3 == 1 else o for i, o in enumerate(stacked)),
                   [np.int64(o) for o in stacked], np.array(stacked, np.int64), [-8] * p.n, [2 ** 62 + 1] * p.n]
        for offsets in answers:
            texts = []
            for name in ("python", "native"):
                monkeypatch.setenv("MALLOCGAME_ENGINE", name)
                texts.append(io_module.problem_csv_text(p, offsets))
            assert texts[1] == texts[0], (p.name, offsets)
    assert len(calls) >= 3 * 5  # the native engine wrote the rows of every problem compiled (not the arrays' rows)


def test_intervals_csv_text_is_the_same_in_both_engines(monkeypatch, workload):
    """A prefetch answer's compiled rows (``mallocgame._native.csv_rows`` over the intervals' columns) are the
    Python rows', byte for byte: unsorted, a buffer with three stays, copies from -1, 0 and past 32 bits, quoted and
    non-ASCII ids, none; and intervals the compiled path leaves to Python (numpy ints, bools, a generator, an index
    out of range) give the Python text too."""
    from mallocgame.formats import io as io_module
    from mallocgame.problem.model import Buffer, Problem

    calls = []
    compiled = io_module.csv_rows
    monkeypatch.setattr(io_module, "csv_rows", lambda *args: calls.append(1) or compiled(*args))
    big, _, greedy = _prefetch_answer(workload)
    odd = Problem("odd", (Buffer('a,"1"', 8, 0, 6), Buffer("b\nc", 16, 1, 5), Buffer("é", 4, 0, 6)), capacity=None,
                  mode="prefetch")
    stays = [FastInterval(2, 2**40, 3, 5, -1), FastInterval(0, 8, 4, 6, 2), FastInterval(0, 0, 0, 2),
             FastInterval(1, 24, 2**34, 2**34 + 1, 2**33), FastInterval(0, 16, 2, 3, 0)]
    exact = [(big, lambda: greedy), (big, lambda: list(reversed(greedy))), (big, tuple), (odd, lambda: list(stays)),
             (odd, lambda: tuple(stays)), (odd, list)]
    left_to_python = [(odd, lambda: [FastInterval(0, np.int64(8), 1, 2)]), (odd, lambda: [FastInterval(0, True, 1, 2)]),
                      (odd, lambda: (iv for iv in stays)), (odd, lambda: [FastInterval(-1, 0, 1, 2)])]
    for problem, intervals in exact + left_to_python:
        texts = []
        for name in ("python", "native"):
            monkeypatch.setenv("MALLOCGAME_ENGINE", name)
            texts.append(io_module.intervals_csv_text(problem, intervals()))
        assert texts[1] == texts[0], (problem.name, intervals())
    assert len(calls) == len(exact)  # the native engine wrote every exact answer's rows compiled, and only those
    assert io_module.intervals_csv_text(odd, stays) == (
        'id,offset,start,end,copy_start\n"a,""1""",0,0,2,\n"a,""1""",16,2,3,0\n"a,""1""",8,4,6,2\n'
        '"b\nc",24,17179869184,17179869185,8589934592\né,1099511627776,3,5,-1\n')
    assert len(io_module.intervals_csv_text(big, greedy).splitlines()) == len(greedy) + 1 > 100


def test_answer_columns_and_intervals_are_the_same_in_both_engines(monkeypatch, workload):
    """An answer's columns (``columns_of_intervals``: read compiled) and its intervals made back from them
    (``intervals_of_columns``: ``mallocgame._native.intervals_of_columns_loop``) are the Python reference's: equal
    columns, equal FastIntervals (hash, ``occupied_from``, ``replace`` and pickle as ever), a copy from -1 kept."""
    import dataclasses

    calls = []
    compiled = incumbents.intervals_of_columns_loop
    monkeypatch.setattr(incumbents, "intervals_of_columns_loop", lambda *args: calls.append(1) or compiled(*args))
    _, _, answer = _prefetch_answer(workload)
    minus_one = (FastInterval(3, 2**40, 0, 2, -1), FastInterval(4, 8, 1, 3, None), FastInterval(4, 8, 5, 9, 3))
    for given in (answer, list(answer), minus_one, (), [FastInterval(1, np.int64(8), 2, 3, 0)]):
        cols, made = [], []
        for name in ("python", "native"):
            monkeypatch.setenv("MALLOCGAME_ENGINE", name)
            cols.append(incumbents.columns_of_intervals(given))
            made.append(incumbents.intervals_of_columns(cols[-1]))
        assert cols[0].dtype == cols[1].dtype == np.int64 and np.array_equal(cols[0], cols[1])
        assert made[1] == made[0] == tuple(given) and type(made[1]) is tuple
        assert all(type(iv) is FastInterval for iv in made[1])
    assert len(calls) == 4  # every non-empty answer made compiled in the native engine
    back = incumbents.intervals_of_columns(incumbents.columns_of_intervals(minus_one))
    assert [iv.occupied_from for iv in back] == [0, 1, 4] and {*back} == {*minus_one}
    assert dataclasses.replace(back[0], offset=0) == FastInterval(3, 0, 0, 2, -1)
    assert pickle.loads(pickle.dumps(back)) == minus_one
    with pytest.raises(dataclasses.FrozenInstanceError):
        back[0].offset = 1


def test_a_prefetch_judgement_counts_and_peaks_from_the_columns(workload):
    """``judge`` in prefetch mode: placed = buffers with a fast interval, peak = the highest address, from the
    columns the validator read; (0, 0) for no interval or an interval of no buffer of the problem; an offset past 64
    bits summed one by one."""
    problem, hw, answer = _prefetch_answer(workload)
    sizes = problem.arrays.size
    verdict = judge(problem, hw, answer, copies=False)
    assert verdict.valid and verdict.placed == len({iv.buffer for iv in answer}) > 100
    assert verdict.peak == max(iv.offset + int(sizes[iv.buffer]) for iv in answer)
    twice = judge(problem, hw, answer + (answer[0],))  # a buffer with two (clashing) stays counts once
    assert not twice.valid and (twice.placed, twice.peak) == (verdict.placed, verdict.peak)
    assert (judge(problem, hw, ()).placed, judge(problem, hw, ()).peak) == (0, 0)
    stray = answer + (FastInterval(problem.n, 0, 0, 1),)
    assert (judge(problem, hw, stray).placed, judge(problem, hw, stray).peak) == (0, 0)
    huge = answer[:1] + (FastInterval(answer[1].buffer, 2**70, 0, 1),)
    far = judge(problem, hw, huge)
    assert not far.valid and (far.placed, far.peak) == (len({iv.buffer for iv in huge}), 2**70 + int(sizes[answer[1].buffer]))


@pytest.mark.parametrize("mode", ["map", "pack", "prefetch"])
def test_the_answer_s_reserve_is_the_same_in_every_mode(workload, monkeypatch, mode):
    """``solve`` gives its child's solver the whole budget less ``answer_reserve(n)`` in every mode: a prefetch
    answer is judged and written by compiled paths as a map or pack answer is, so it keeps no larger reserve."""
    problem, hw = _load(workload, mode)
    whole = Budget(10.0, time.monotonic())
    started = []

    def start(call, args, kwargs, **_):
        started.append(kwargs["budget"])
        raise KeyboardInterrupt  # no child: the budget it would get is what is checked

    monkeypatch.setattr(solving.ChildCall, "start", start)
    with pytest.raises(KeyboardInterrupt):
        solving.solve_beside_bound("greedy-xla" if mode != "prefetch" else "msa", problem, hw, time_limit=10.0,
                                   seed=0, budget=whole)
    assert started[0].deadline == whole.deadline - solving.answer_reserve(problem.n)
    assert solving.answer_reserve(problem.n) == solving.RESERVE_SECONDS + solving.RESERVE_PER_BUFFER * problem.n
