"""Prefetch mode (docs/prefetch.md): every rule of the validator, the cost of copies and stalls, map
answers as intervals, and the bound against exhaustive search on tiny programs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mallocgame.bounds.bounds import prefetch_upper_bound
from mallocgame.engine.registry import load_solver, solver_entries
from mallocgame.engine.runner import run_solver
from mallocgame.formats.io import intervals_csv_text, read_intervals_csv
from mallocgame.formats.lift import lift_map_answer, map_intervals
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator, eviction_of, serve_copies
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import FastInterval, Problem
from tests.prefetch_tools import interval_sets, program

UNIT = PRESETS["unit"]  # fast 10 B/s, slow 1 B/s, copies 1 B/s, 1 FLOP/s


@pytest.fixture
def chain() -> Problem:
    """w (weight) read by ops 0 and 3; x written at 0, read at 2; y (output) written at 2."""
    return program([[("w", "read", 8), ("x", "write", 4)], [], [("x", "read", 4), ("y", "write", 2)],
                    [("w", "read", 8)]], [("w", 8, "weight"), ("x", 4, "activation"), ("y", 2, "output")])


# ---------------------------------------------------------------- the validator, rule by rule

def iv(b, off, s, e, c=None) -> FastInterval:
    return FastInterval(b, off, s, e, c)


@pytest.mark.parametrize("intervals, message", [
    ([iv(0, 0, 0, 1)], "not a pure write"),  # a parameter cannot be produced in place
    ([iv(1, 0, 1, 3)], "not a pure write"),  # x is written at 0, not 1
    ([iv(0, 0, 0, 5, -1)], "start < end <="),  # past the last op
    ([iv(1, 0, 0, 4)], "ends after the buffer's live range"),
    ([iv(0, 12, 3, 4, 2)], "exceeds capacity"),
    ([iv(0, -4, 3, 4, 2)], "negative offset"),
    ([iv(0, 0, 3, 4, 3)], "copy_start 3 must be in [-1, start)"),
    ([iv(0, 0, 3, 4, -2)], "must be in [-1, start)"),
    ([iv(1, 0, 2, 3, 0)], None),  # prefetching x after op 0 (its write): fine
    ([iv(0, 0, 0, 1, -1), iv(1, 8, 0, 3)], None),
    ([iv(0, 0, 0, 1, -1), iv(1, 4, 0, 3)], "overlap"),  # w [0, 8) and x [4, 8) both at op 0
    ([iv(0, 0, 0, 1, -1), iv(1, 8, 0, 3), iv(0, 4, 3, 4, 1)], "overlap"),  # w's copy from op 2 hits x at [8, 12)
    ([iv(0, 0, 0, 1, -1), iv(1, 8, 0, 3), iv(0, 4, 3, 4, 2)], None),  # a copy after op 2 starts when x is gone
    ([iv(0, 0, 0, 1, -1), iv(1, 8, 0, 3), iv(0, 0, 3, 4, 1)], None),
])
def test_validator_rules(chain, intervals, message):
    violation = validate_intervals(chain, intervals)
    if message is None:
        assert violation is None
    else:
        assert violation is not None and message in violation


def test_same_buffer_occupancy_may_touch_but_not_overlap(chain):
    # x produced at 0 held for [0, 1), prefetched back for op 2 by a copy after op 0: occupied [1, 3).
    assert validate_intervals(chain, [iv(1, 0, 0, 1), iv(1, 0, 2, 3, 0)]) is None
    assert "same time" in validate_intervals(chain, [iv(1, 0, 0, 2), iv(1, 0, 2, 3, 0)])


def test_prefetch_must_wait_for_the_last_write():
    p = program([[("a", "write", 4)], [], [("a", "read", 4), ("a", "write", 4)], [], [("a", "read", 4)]],
                [("a", 4, "activation")])
    assert "before the value written at op 2" in validate_intervals(p, [iv(0, 0, 4, 5, 1)])
    assert validate_intervals(p, [iv(0, 0, 4, 5, 2)]) is None
    # the in-place update at op 2 reads the old value: it cannot start an interval without a copy
    assert "not a pure write" in validate_intervals(p, [iv(0, 0, 2, 3)])


def test_alignment_is_checked():
    p = program([[("a", "write", 4)], [("a", "read", 4)]], [("a", 4, "activation")])
    p = p.replace(buffers=(p.buffers[0].__class__("a", 4, 0, 2, alignment=4),))
    assert "alignment" in validate_intervals(p, [iv(0, 2, 0, 2)])
    assert validate_intervals(p, [iv(0, 4, 0, 2)]) is None


# ---------------------------------------------------------------- time: ops, copies, stalls

def test_served_operands_are_fast_only_inside_the_interval(chain):
    ev = PrefetchEvaluator(chain, UNIT)
    slow = ev.op_times([])
    assert slow.tolist() == [12.0, 0.0, 6.0, 8.0]
    fast = ev.op_times([iv(0, 0, 3, 4, 0)])  # w served at op 3 only
    assert fast.tolist() == [12.0, 0.0, 6.0, pytest.approx(0.8)]


def test_prefetch_hidden_by_a_long_enough_window_and_stalls_otherwise(chain):
    ev = PrefetchEvaluator(chain, UNIT)
    # copy of w (8 s) after op 0: slots 1, 2 offer 0 + 6 s of budget -> 2 s stall
    b = ev.breakdown([iv(0, 0, 3, 4, 0)])
    assert [c.stall for c in b.copies] == [pytest.approx(2.0)]
    assert b.time == pytest.approx(12 + 0 + 6 + 0.8 + 2)
    # a window of ops 0..2 offers 12 + 0 + 6 s: no stall
    b = ev.breakdown([iv(0, 0, 3, 4, -1)])
    assert b.stall == 0 and b.time == pytest.approx(18.8)


def test_evictions_of_outputs_and_of_values_needed_later(chain):
    ev = PrefetchEvaluator(chain, UNIT)
    y = iv(2, 0, 2, 4)  # output y produced fast at op 2, held to the end: evicted in slot 3
    assert eviction_of(chain, y) == (2, 4)
    x_short = iv(1, 0, 0, 1)  # x produced fast but read at op 2 outside the interval: evicted, window empty
    assert eviction_of(chain, x_short) == (0, 1)
    assert ev.breakdown([x_short]).stall == pytest.approx(4.0)
    x_whole = iv(1, 0, 0, 3)  # serves every touch, not an output: no eviction
    assert eviction_of(chain, x_whole) is None
    assert eviction_of(chain, iv(0, 0, 3, 4, 0)) is None  # a prefetch of an unchanged value is never evicted


def test_no_eviction_when_the_next_touch_overwrites():
    p = program([[("a", "write", 4)], [("a", "read", 4)], [("a", "write", 4)], [("a", "read", 4)]],
                [("a", 4, "activation")])
    assert eviction_of(p, iv(0, 0, 0, 2)) is None
    p_update = program([[("a", "write", 4)], [("a", "read", 4)], [("a", "read", 4), ("a", "write", 4)]],
                       [("a", 4, "activation")])
    assert eviction_of(p_update, iv(0, 0, 0, 2)) == (0, 2)


def test_prefetch_and_eviction_budgets_are_separate():
    p = program([[("a", "write", 4), ("w", "read", 1)], [("c", "read", 4)], [("w", "read", 4)], [("a", "read", 4)]],
                [("a", 4, "activation"), ("w", 4, "weight"), ("c", 4, "weight")])
    ev = PrefetchEvaluator(p, UNIT)
    # a evicted in slots 1..1 (4 s of budget); w prefetched in slots 1..1 too: each has its own 4 s
    b = ev.breakdown([iv(0, 0, 0, 2), iv(1, 4, 2, 3, 0)])
    assert {c.kind: c.stall for c in b.copies} == {"eviction": 0.0, "prefetch": 0.0}


def test_copies_are_served_in_deadline_order_earliest_slot_first():
    assert serve_copies([(0, 2, 1.5), (0, 3, 1.0)], np.array([1.0, 1.0, 0.25])) == [0.0, 0.25]
    assert serve_copies([(0, 2, 2.5), (1, 3, 1.0)], np.array([1.0, 1.0, 0.5])) == [0.5, 0.5]
    assert serve_copies([(2, 2, 1.0)], np.array([5.0, 5.0, 5.0])) == [1.0]  # empty window


def test_all_slow_and_map_intervals_score_their_map_time():
    problem = layered_network(80, seed=4, capacity_fraction=0.4).replace(mode="prefetch")
    ev = PrefetchEvaluator(problem, PRESETS["tpuv4i"])
    assert ev.value([]) == 0.0


MAP_SOLVERS = [n for n in sorted(solver_entries()) if "map" in getattr(load_solver(n), "modes", ())]


@pytest.mark.parametrize("name", MAP_SOLVERS)
def test_every_map_solvers_answer_scores_the_same_as_intervals(name):
    """docs/prefetch.md section 6: written as intervals, a map answer scores exactly its map time,
    and lifted to prefetch mode it is valid."""
    hw = PRESETS["tpuv4i"]
    problem = layered_network(60, seed=7, capacity_fraction=0.4)
    report = run_solver(name, problem, hw, time_limit=1.0, seed=0)
    assert report.valid
    ev = PrefetchEvaluator(problem, hw)
    assert ev.time(map_intervals(problem, report.offsets), mode="map") == pytest.approx(report.estimated_time, rel=1e-12)
    prefetch = problem.replace(mode="prefetch")
    lifted = lift_map_answer(prefetch, report.offsets)
    assert validate_intervals(prefetch, lifted) is None


def test_interval_csv_round_trip(tmp_path, chain):
    answer = [iv(0, 0, 0, 1, -1), iv(1, 8, 0, 3), iv(0, 0, 3, 4, 1)]
    path = tmp_path / "answer.csv"
    path.write_text(intervals_csv_text(chain, answer))
    assert path.read_text().splitlines()[0] == "id,offset,start,end,copy_start"
    assert sorted(read_intervals_csv(path, chain), key=lambda v: (v.buffer, v.start)) == \
        sorted(answer, key=lambda v: (v.buffer, v.start))
    (tmp_path / "empty.csv").write_text("id,offset,start,end,copy_start\n")
    assert read_intervals_csv(tmp_path / "empty.csv", chain) == []


# ---------------------------------------------------------------- the bound against exhaustive search

def _best_value(problem: Problem, hw) -> float:
    ev = PrefetchEvaluator(problem, hw)
    sets = [interval_sets(problem, b) for b in range(problem.n)]
    best = 0.0
    for combo in itertools.product(*sets):
        timing = [(b, x) for b, chosen in enumerate(combo) for x in chosen]
        value = ev.value([iv(b, 0, *x) for b, x in timing])
        if value <= best:
            continue
        sizes = [problem.buffers[b].size for b, _ in timing]
        for offsets in itertools.product(*[range(problem.capacity - z + 1) for z in sizes]):
            if validate_intervals(problem, [iv(b, o, *x) for (b, x), o in zip(timing, offsets)]) is None:
                best = value
                break
    return best


@pytest.mark.parametrize("seed", range(8))
def test_bound_holds_against_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    names = ["a", "b"]
    kinds = ["weight" if rng.random() < 0.5 else "activation", "output" if rng.random() < 0.5 else "activation"]
    ops: list[list[tuple[str, str, int]]] = [[], [], []]
    for name, kind in zip(names, kinds):
        touched = sorted(rng.choice(3, size=int(rng.integers(1, 3)), replace=False).tolist())
        for k, t in enumerate(touched):
            access = "write" if (k == 0 and kind != "weight") else "read"
            ops[t].append((name, access, int(rng.integers(1, 4))))
    sizes = [int(rng.integers(1, 3)), int(rng.integers(1, 3))]
    problem = program(ops, [(n, z, k) for n, z, k in zip(names, sizes, kinds)], capacity=int(rng.integers(1, 4)),
                      flops=float(rng.integers(0, 3)))
    hw = UNIT.replace(copy_bw=float(rng.choice([0.5, 2.0, 8.0])))
    best = _best_value(problem, hw)
    bound = prefetch_upper_bound(problem, hw).value
    assert best <= bound + 1e-9, (best, bound)


# ---------------------------------------------------------------- the command line, end to end

def test_cli_prefetch_round_trip(tmp_path):
    from tests.conftest import run_cli

    answer, picture, played = tmp_path / "msa.csv", tmp_path / "msa.png", tmp_path / "played.csv"
    info = run_cli("info", "example:layered150", "--mode", "prefetch")
    assert info.returncode == 0 and "mode: prefetch" in info.stdout and "docs/prefetch.md" in info.stdout
    solved = run_cli("solve", "example:layered150", "--mode", "prefetch", "--solver", "msa", "-o", str(answer))
    assert solved.returncode == 0, solved.stderr
    assert answer.read_text().splitlines()[0] == "id,offset,start,end,copy_start"
    assert any(line.split(",")[4] for line in answer.read_text().splitlines()[1:]), "msa prefetches something"
    checked = run_cli("validate", "example:layered150", str(answer), "--mode", "prefetch")
    assert checked.returncode == 0 and checked.stdout.startswith("ok:") and "copies" in checked.stdout
    drawn = run_cli("plot", "example:layered150", str(answer), "--mode", "prefetch", "-o", str(picture))
    assert drawn.returncode == 0 and picture.stat().st_size > 0
    hinted = run_cli("solve", "example:layered150", "--mode", "prefetch", "--solver", "mcts", "--hint", str(answer),
                     "--time-limit", "1")
    assert hinted.returncode == 0, hinted.stderr
    played_run = run_cli("play", "example:layered150", "--variant", "prefetch", "--policy", "greedy", "--quiet",
                         "-o", str(played))
    assert played_run.returncode == 0 and "valid" in played_run.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("id,offset,start,end,copy_start\nw1,0,0,1,\n")  # a weight cannot be produced in place
    rejected = run_cli("validate", "example:layered150", str(bad), "--mode", "prefetch")
    assert rejected.returncode == 1 and "not a pure write" in rejected.stdout
    csv_input = run_cli("info", "example:pack40", "--mode", "prefetch")
    assert csv_input.returncode == 2 and "needs a workload with ops" in csv_input.stderr


PREFETCH_SOLVERS = [n for n in sorted(solver_entries()) if "prefetch" in getattr(load_solver(n), "modes", ())]


@pytest.mark.parametrize("name", PREFETCH_SOLVERS)
def test_no_prefetch_solver_ends_below_msa_when_warm_started_from_it(name):
    from mallocgame.engine.solving import solve_with_warm_start

    hw = PRESETS["tpuv4i"]
    problem = layered_network(80, seed=5, capacity_fraction=0.25).replace(mode="prefetch")
    msa = run_solver("msa", problem, hw, time_limit=2.0, seed=0)
    assert msa.valid and msa.objective > 0
    report = solve_with_warm_start(name, problem, hw, time_limit=2.0, seed=0, warm_start="msa")
    assert report.valid and report.objective >= msa.objective - 1e-12 * abs(msa.objective)


def test_lns_prefetch_starts_from_msa_and_never_ends_below_it():
    hw = PRESETS["tpuv4i"]
    for seed in (1, 2):
        problem = layered_network(70, seed=seed, capacity_fraction=0.3).replace(mode="prefetch")
        msa = run_solver("msa", problem, hw, time_limit=2.0, seed=0)
        lns = run_solver("lns", problem, hw, time_limit=2.0, seed=0)
        assert lns.valid and lns.objective >= msa.objective - 1e-12 * abs(msa.objective)
        assert lns.stats["incumbent"] == "msa"


def test_a_map_only_solver_warm_starts_a_prefetch_solver_through_the_lift():
    from mallocgame.engine.solving import solve_with_warm_start

    hw = PRESETS["tpuv4i"]
    problem = layered_network(60, seed=3, capacity_fraction=0.3).replace(mode="prefetch")
    lifted = PrefetchEvaluator(problem, hw).value(
        lift_map_answer(problem, run_solver("greedy-xla", problem.replace(mode="map"), hw, time_limit=1, seed=0).offsets))
    report = solve_with_warm_start("mcts", problem, hw, time_limit=1.5, seed=0, warm_start="greedy-xla")
    assert report.valid and report.mode == "prefetch" and report.objective >= lifted - 1e-12 * abs(lifted)


def test_served_marks_exactly_the_operands_of_the_intervals():
    """served() marks all intervals' operand ranges at once (searchsorted + a difference array); the same
    as marking each interval's range in a loop, with overlapping, empty and clipped intervals."""
    import random

    import numpy as np

    from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network
    from mallocgame.problem.model import FastInterval

    p = layered_network(300, seed=2, capacity_fraction=0.25).replace(mode="prefetch")
    ev = PrefetchEvaluator(p, PRESETS["tpuv4i"])
    rng = random.Random(0)
    width = ev.base.n_ops + 1
    for _ in range(20):
        ivs = []
        for _ in range(rng.randrange(0, 80)):
            b = rng.randrange(p.n)
            s = rng.randrange(-2, ev.base.n_ops + 2)
            ivs.append(FastInterval(b, 0, s, s + rng.randrange(0, 40), None))
        loop = np.zeros(len(ev._key), bool)
        for iv in ivs:
            lo = np.searchsorted(ev._key, iv.buffer * width + max(iv.start, 0))
            hi = np.searchsorted(ev._key, iv.buffer * width + min(iv.end, ev.base.n_ops))
            loop[lo:hi] = True
        want = np.zeros(len(ev._key), bool)
        want[ev._order] = loop
        assert (ev.served(ivs) == want).all()


def _copies_one_by_one(ev: PrefetchEvaluator, intervals) -> list[tuple]:
    """The copy list as the evaluator made it before copy_arrays: one eviction_of call per interval, in
    (buffer, start) order, then per kind sorted by (deadline, first slot, buffer) with a stable sort."""
    listed = []
    for x in sorted(intervals, key=lambda v: (v.buffer, v.start)):
        seconds = float(ev.sizes[x.buffer]) / ev.hardware.copy_bw
        if x.copy_start is not None:
            listed.append(("prefetch", x.buffer, x.copy_start + 1, x.start, seconds))
        evict = eviction_of(ev.problem, x)
        if evict is not None:
            listed.append(("eviction", x.buffer, evict[0] + 1, evict[1], seconds))
    return [c for kind in ("prefetch", "eviction")
            for c in sorted((c for c in listed if c[0] == kind), key=lambda c: (c[3], c[2], c[1]))]


def test_copy_arrays_equal_the_copies_made_one_interval_at_a_time():
    """copy_arrays decides every eviction at once (searchsorted over all touches, a running last write); on
    random interval sets (valid or not: clipped, empty, serving no write, outputs) the copies, their order and
    the time equal the per-interval rule's, stalls included."""
    import random

    p = layered_network(300, seed=3, capacity_fraction=0.25).replace(mode="prefetch")
    ev = PrefetchEvaluator(p, PRESETS["tpuv4i"])
    T, rng = ev.base.n_ops, random.Random(1)
    evictions = 0
    for _ in range(30):
        ivs = []
        for _ in range(rng.randrange(0, 120)):
            b = rng.randrange(p.n)
            ops = p.touches.of(b)[0].tolist()
            # from one of its touches (so that writes are served) or anywhere, clipped or not
            if len(ops) > 1 and rng.random() < 0.7:  # touch i .. touch j: writes served, reads after it
                i = rng.randrange(len(ops) - 1)
                s, e = ops[i], ops[rng.randrange(i, len(ops) - 1)] + 1
            else:
                s = rng.randrange(-2, T + 2)
                e = s + rng.randrange(0, 60)
            ivs.append(FastInterval(b, 0, s, e, rng.choice([None, s - 1, s - 5, -1])))
        want = _copies_one_by_one(ev, ivs)
        got = [(c.kind, c.buffer, c.first, c.deadline, c.seconds) for c in ev.copies(ivs)]
        assert got == want
        evictions += sum(c[0] == "eviction" for c in want)
        stalls = [s for kind in ("prefetch", "eviction")
                  for s in serve_copies([(c[2], c[3], c[4]) for c in want if c[0] == kind], ev.op_times(ivs))]
        assert [c.stall for c in ev.breakdown(ivs).copies] == stalls
        assert ev.time(ivs) == pytest.approx(float(ev.op_times(ivs).sum()) + sum(stalls), rel=1e-12)
    assert evictions > 50  # the sets do exercise the eviction rule


def test_validator_at_once_agrees_with_the_rule_by_rule_loop(monkeypatch):
    """validate_intervals first checks every rule column-wise; on msa's answers and on each of many one-field
    mutations of them (offset, start, end, copy_start, buffer, a copy of another interval) it says valid exactly
    when the rule-by-rule loop finds no violation, and the message is the loop's."""
    import dataclasses
    import random
    import time

    from mallocgame.algorithms.memory_space_assignment import msa_run
    from mallocgame.hardware import validator

    rng = random.Random(4)
    checked = {True: 0, False: 0}
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries

    tiny = next(e for e in suite_entries("xla") if e.name == "gpt2-tiny-train-adam")  # in-place updates, evictions
    for p in (layered_network(200, seed=1, capacity_fraction=0.3).replace(mode="prefetch"),
              prepare(tiny.build(), mode="prefetch")[0]):
        answer, _ = msa_run(p, PRESETS["tpuv4i"], time.monotonic() + 60)
        assert answer and validate_intervals(p, answer) is None
        cases = [list(answer)]
        for _ in range(150):
            ivs = list(answer)
            k = rng.randrange(len(ivs))
            x = ivs[k]
            field, delta = rng.choice([("offset", 256), ("offset", -256), ("start", 1), ("start", -1), ("end", 1),
                                       ("end", -1), ("copy_start", -1), ("copy_start", 1), ("copy_start", None),
                                       ("buffer", 1), ("copy", 0), ("early", 0), ("touch", 0),
                                       ("late", 0)])
            ops = [t for t in p.touches.of(x.buffer)[0].tolist() if x.start <= t < x.end]
            aside = -(-2 * p.capacity // 4096) * 4096  # an address above everything else: no overlap to hide behind
            if field == "early" and x.copy_start is not None:  # a prefetch before the value is written, for some
                ivs[k] = dataclasses.replace(x, offset=aside, copy_start=rng.randrange(-1, x.copy_start + 1))
            elif field == "late":  # a copy that starts at its first use or before the program
                ivs[k] = dataclasses.replace(x, offset=aside, copy_start=rng.choice([x.start, x.start + 1, -2]))
            elif field in ("touch", "early"):  # produced in place at a touch: a pure write, a read, an update
                ivs[k] = dataclasses.replace(x, offset=aside, start=rng.choice(ops), copy_start=None)
            elif field == "copy":
                ivs.append(ivs[rng.randrange(len(ivs))])
            elif delta is None or (field == "copy_start" and x.copy_start is None):
                ivs[k] = dataclasses.replace(x, copy_start=None if x.copy_start is not None else x.start - 1)
            else:
                ivs[k] = dataclasses.replace(x, **{field: getattr(x, field) + delta})
            cases.append(ivs)
        for ivs in cases:
            cap = 4 * p.capacity
            fast = validator._intervals_valid_at_once(p, ivs, cap)
            with monkeypatch.context() as m:
                m.setattr(validator, "_intervals_valid_at_once", lambda *a: False)
                loop = validate_intervals(p, ivs, capacity=cap)
            assert fast == (loop is None)
            assert validate_intervals(p, ivs, capacity=cap) == loop
            checked[fast] += 1
    assert checked[True] > 20 and checked[False] > 100
