"""cpsat in prefetch mode (docs/prefetch.md): valid answers, the best answer on tiny programs (against
exhaustive search), never worse than its hint or the lifted map greedy, the same answer for the same seed,
and ahead of the lifted greedy on a weights-heavy program at small capacity."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from mallocgame.algorithms.placement import greedy_place, xla_order
from mallocgame.bounds.bounds import prefetch_upper_bound
from mallocgame.engine.runner import run_solver
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.hardware.validator import validate_intervals
from mallocgame.inputs.generate import layered_network
from mallocgame.inputs.workloads import mlp, with_capacity
from mallocgame.problem.model import FastInterval, Problem, Solution, Status
from mallocgame.solvers.cpsat.prefetch_windows import PrefetchWindows, candidates, op_time_floor, tighten
from mallocgame.solvers.cpsat.solver import CpSat
from tests.prefetch_tools import interval_sets, program, value

HW = PRESETS["tpuv4i"]
UNIT = PRESETS["unit"]  # fast 10 B/s, slow 1 B/s, copies 1 B/s, 1 FLOP/s


def solve(problem: Problem, hw=HW, **kw) -> Solution:
    kw.setdefault("time_limit", 10)
    kw.setdefault("seed", 0)
    return CpSat().solve(CpSat.request(problem, hw, **kw))


def lifted_greedy(problem: Problem, hw) -> list[FastInterval]:
    """greedy-xla's map answer (XLA order, best fit) lifted to prefetch mode, as docs/prefetch.md section 6 does."""
    order = xla_order(problem, Evaluator.of(problem, hw).benefits)
    return lift_map_answer(problem, greedy_place(problem, order, problem.capacity))


# ---------------------------------------------------------------- exhaustive search on tiny programs

def best_value(problem: Problem, hw) -> float:
    """The best value over every valid answer (offsets included), by branch and bound over the sets of
    intervals per buffer: a set's value scored alone without copies (map mode) bounds what it adds to any
    answer (op time is concave in the bytes made fast, copies only add stalls), so the sets are tried in
    order of the sum of those bounds and the search stops when it falls to the best value found."""
    ev = PrefetchEvaluator(problem, hw)
    T, cap = len(problem.ops), problem.capacity
    per_buffer = []
    for b in range(problem.n):
        z = problem.buffers[b].size
        options = []
        for chosen in interval_sets(problem, b):
            ivs = [FastInterval(b, 0, *x) for x in chosen]
            held = tuple(z * sum(iv.occupied_from <= t < iv.end for iv in ivs) for t in range(T))
            options.append((ev.value(ivs, mode="map"), held, chosen))
        per_buffer.append(options)
    combos = [c for c in itertools.product(*per_buffer) if all(sum(col) <= cap for col in zip(*(o[1] for o in c)))]
    combos.sort(key=lambda c: -sum(o[0] for o in c))
    best = 0.0
    for combo in combos:
        if sum(o[0] for o in combo) <= best:
            break
        timing = [(b, x) for b, option in enumerate(combo) for x in option[2]]
        v = ev.value([FastInterval(b, 0, *x) for b, x in timing])
        if v <= best:
            continue
        sizes = [problem.buffers[b].size for b, _ in timing]
        for offsets in itertools.product(*[range(cap - z + 1) for z in sizes]):
            if validate_intervals(problem, [FastInterval(b, o, *x) for (b, x), o in zip(timing, offsets)]) is None:
                best = v
                break
    return best


def tiny_program(seed: int) -> tuple[Problem, object]:
    """Two or three buffers (parameters, activations, outputs) over three or four ops, random sizes,
    bytes, FLOPs, capacity and copy bandwidth."""
    rng = np.random.default_rng(seed)
    names = ["a", "b", "c"][: 2 + seed % 2]
    n_ops = 3 + seed % 2
    kinds = ["weight" if rng.random() < 0.5 else "activation" for _ in names]
    if rng.random() < 0.5:
        kinds[-1] = "output"
    ops: list[list[tuple[str, str, int]]] = [[] for _ in range(n_ops)]
    for name, kind in zip(names, kinds):
        touched = sorted(rng.choice(n_ops, size=int(rng.integers(1, 4)), replace=False).tolist())
        for k, t in enumerate(touched):
            ops[t].append((name, "write" if (k == 0 and kind != "weight") else "read", int(rng.integers(1, 6))))
    sizes = [int(rng.integers(1, 3)) for _ in names]
    problem = program(ops, list(zip(names, sizes, kinds)), capacity=int(rng.integers(1, 4)),
                      flops=float(rng.integers(0, 3)))
    return problem, UNIT.replace(copy_bw=float(rng.choice([0.5, 2.0, 8.0])))


# ---------------------------------------------------------------- valid answers

def test_declares_prefetch_mode():
    assert "prefetch" in CpSat.modes


@pytest.mark.parametrize("n, seed, fraction", [(60, 11, 0.4), (40, 3, 0.2)])
def test_valid_answers_on_generated_workloads(n, seed, fraction):
    problem = layered_network(n, seed=seed, capacity_fraction=fraction).replace(mode="prefetch")
    report = run_solver("cpsat", problem, HW, time_limit=1.5, seed=0)  # validated and scored by the runner
    assert report.valid, report.violation
    assert report.peak <= problem.capacity
    lifted = value(problem, HW, lifted_greedy(problem, HW))
    assert lifted < report.objective <= prefetch_upper_bound(problem, HW).value + 1e-15


def test_hand_made_program_weight_prefetched_under_a_compute_bound_op():
    """x is written at op 0 and read at op 1; w is read at op 3; op 2 computes for 10 s. The capacity holds
    one of them. Best: x produced in place and held through op 1 (an earlier end would need an eviction with
    no window), then w's copy (8 s) started right after op 1, hidden under op 2."""
    p = program([[("x", "write", 8)], [("x", "read", 8)], [], [("w", "read", 8)]],
                [("x", 8, "activation"), ("w", 8, "weight")], capacity=8, flops=[0.0, 10.0, 10.0, 0.0])
    sol = solve(p, UNIT)
    assert validate_intervals(p, sol.intervals) is None
    got = {(p.buffers[iv.buffer].id, iv.start, iv.end, iv.copy_start) for iv in sol.intervals}
    assert got == {("x", 0, 2, None), ("w", 3, 4, 1)}
    assert value(p, UNIT, sol.intervals) == pytest.approx(2 * 7.2) == pytest.approx(best_value(p, UNIT))


def test_hand_made_program_output_evicted_and_in_place_update_prefetched():
    """y (output) is produced at op 0 and must end in slow memory; a is updated in place at op 2 (read and
    write), so a fast interval serving op 2 needs the old value prefetched, after its write at op 0."""
    p = program([[("a", "write", 6), ("y", "write", 4)], [], [("a", "read", 6), ("a", "write", 6)], [("a", "read", 6)]],
                [("a", 4, "activation"), ("y", 4, "output")], capacity=8, flops=[0.0, 12.0, 0.0, 0.0])
    sol = solve(p, UNIT)
    assert validate_intervals(p, sol.intervals) is None
    assert value(p, UNIT, sol.intervals) == pytest.approx(best_value(p, UNIT))
    for iv in sol.intervals:
        if p.buffers[iv.buffer].id == "a" and iv.start == 2:
            assert iv.copy_start is not None and iv.copy_start >= 0  # not produced in place, not before op 0


# ---------------------------------------------------------------- the best answer on tiny programs

@pytest.mark.parametrize("seed", range(40))
def test_best_answer_on_tiny_programs(seed):
    """Equal to the exhaustive optimum (on these 40 programs and 40 more tried; the lifted greedy is below it
    on 16 of these): the candidate stays hold an optimal answer, and the model (op times as copy budgets,
    copies served in one piece) finds and proves it. Never below the lifted greedy, never above the bound."""
    problem, hw = tiny_program(seed)
    sol = solve(problem, hw)
    assert validate_intervals(problem, sol.intervals) is None
    got = value(problem, hw, sol.intervals)
    assert got == pytest.approx(sol.objective)
    assert got >= value(problem, hw, lifted_greedy(problem, hw)) - 1e-12
    assert got <= prefetch_upper_bound(problem, hw).value + 1e-9
    assert got == pytest.approx(best_value(problem, hw), abs=1e-9)


def test_candidates_are_bounded_and_valid():
    problem = layered_network(150, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    floor = op_time_floor(problem, Evaluator.of(problem, HW))
    stays = candidates(problem, HW, [floor])
    assert len(stays) < 5 * problem.n
    roomy = problem.replace(capacity=None)
    for s in stays:
        assert validate_intervals(roomy, [s.interval(0)]) is None


def test_candidates_stop_at_their_deadline_but_keep_the_extra_stays():
    problem = layered_network(150, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    floor = op_time_floor(problem, Evaluator.of(problem, HW))
    extra = lift_map_answer(problem, greedy_place(problem, xla_order(problem, Evaluator.of(problem, HW).benefits),
                                                  problem.capacity))
    full, short = {}, {}
    every = candidates(problem, HW, [floor], extra, report=full)
    cut = candidates(problem, HW, [floor], extra, deadline=time.monotonic() - 1.0, report=short)
    assert len(cut) < len(every)
    # the report says where the cut fell: the first check, before buffer 0
    assert full["buffers_with_candidates"] == problem.n and short["buffers_with_candidates"] == 0
    assert {(iv.buffer, iv.start, iv.end, iv.copy_start) for iv in extra} <= \
        {(s.buffer, s.start, s.end, s.copy_start) for s in cut}


def test_candidates_of_a_buffer_touched_many_times_stop_inside_it_at_their_deadline(monkeypatch):
    # a weight read at each of 60 steps (a scan) has thousands of candidate stays: the clock is looked at inside
    # its runs too, not only between buffers
    from mallocgame.solvers.cpsat import prefetch_windows

    steps = 60
    problem = program([[("w", "read", 64), ("x", "write", 64)] for _ in range(steps)],
                      [("w", 64, "input"), ("x", 64, "temp")], capacity=128, flops=1e6)
    floor = op_time_floor(problem, Evaluator.of(problem, HW))
    full = candidates(problem, HW, [floor], report={})
    calls = []

    def clock() -> float:  # the deadline passes after the first look, before buffer 0
        calls.append(1)
        return 0.0 if len(calls) == 1 else 10.0

    monkeypatch.setattr(prefetch_windows.time, "monotonic", clock)
    short: dict = {}
    cut = candidates(problem, HW, [floor], deadline=5.0, report=short)
    assert len(full) > prefetch_windows.CUT_CHECK
    assert short["buffers_with_candidates"] == 0 and 0 < len(cut) < len(full)
    assert {s.buffer for s in cut} == {0}


def test_window_stays_found_by_binary_search_are_those_of_a_scan():
    problem = layered_network(150, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    pev = PrefetchEvaluator.of(problem, HW)
    space = PrefetchWindows(problem, HW, pev, [], [], seed=0, workers=1, deterministic=True, t0=time.monotonic())
    T = len(problem.ops)
    for lo, hi in [(0, T), (0, 1), (5, 40), (T // 2, T // 2 + 17), (T - 3, T), (10, 10)]:
        scan = np.flatnonzero((space.occ >= lo) & (space.end <= hi))
        assert np.array_equal(space._free_of(("ops", lo, hi)), scan), (lo, hi)


# ---------------------------------------------------------------- hints, starts, seeds, time

def test_never_worse_than_its_hint():
    problem = layered_network(40, seed=3, capacity_fraction=0.2).replace(mode="prefetch")
    own = solve(problem, time_limit=1.0)
    again = solve(problem, time_limit=0.3, hint=own)
    assert validate_intervals(problem, again.intervals) is None
    assert value(problem, HW, again.intervals) >= value(problem, HW, own.intervals) - 1e-15
    # a hint the search cannot improve in the time it has comes back as it is, unless a baseline beats it (on a
    # loaded machine the 1 s solve above can end before its window search, or even msa, had its time: then the
    # 0.01 s solve's msa baseline is better, and returning it is right)
    cut = solve(problem, time_limit=0.01, hint=own)
    by_start = sorted(own.intervals, key=lambda v: (v.buffer, v.start))
    if sorted(cut.intervals, key=lambda v: (v.buffer, v.start)) != by_start:
        assert value(problem, HW, cut.intervals) > value(problem, HW, own.intervals) + 1e-15


def test_map_hint_is_lifted_and_never_lost():
    problem = layered_network(60, seed=7, capacity_fraction=0.3).replace(mode="prefetch")
    map_answer = run_solver("greedy-xla", problem.replace(mode="map"), HW, time_limit=1, seed=0)
    hint = Solution(tuple(map_answer.offsets), Status.FEASIBLE, "map")
    lifted = value(problem, HW, tighten(problem, lift_map_answer(problem, map_answer.offsets)))
    sol = solve(problem, time_limit=1.0, hint=hint)
    assert validate_intervals(problem, sol.intervals) is None
    assert value(problem, HW, sol.intervals) >= lifted


def test_never_worse_than_the_lifted_greedy_even_without_time_or_with_a_poor_hint():
    problem = layered_network(150, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    all_slow = Solution((None,) * problem.n, Status.FEASIBLE, "prefetch")
    for hint in (None, all_slow):
        sol = solve(problem, time_limit=0.05, hint=hint)
        assert validate_intervals(problem, sol.intervals) is None
        assert value(problem, HW, sol.intervals) >= value(problem, HW, lifted_greedy(problem, HW))


def test_same_seed_same_answer():
    """The search ends on its own here (every window proven), so the clock plays no part."""
    problem = layered_network(20, seed=1, capacity_fraction=0.3).replace(mode="prefetch")
    a, b = solve(problem, time_limit=30, seed=7), solve(problem, time_limit=30, seed=7)
    assert a.wall_time < 15  # did not run into the limit
    assert a.intervals == b.intervals and a.intervals


def test_respects_the_time_limit():
    problem = layered_network(600, seed=9, capacity_fraction=0.4).replace(mode="prefetch")
    t0 = time.monotonic()
    sol = solve(problem, time_limit=1.0)
    assert time.monotonic() - t0 < 1.0 + 1.5  # the limit, and slack for a busy machine
    assert validate_intervals(problem, sol.intervals) is None


def test_nothing_fits_means_all_slow():
    problem = layered_network(30, seed=5).replace(mode="prefetch")
    problem = problem.replace(capacity=min(b.size for b in problem.buffers) - 1)
    sol = solve(problem, time_limit=1.0)
    assert sol.intervals == () and sol.objective == 0.0


# ---------------------------------------------------------------- a weights-heavy program

def test_beats_the_lifted_greedy_on_a_weights_heavy_program():
    """An MLP at batch 8 (seven 1024x1024 bf16 weights of 2 MiB, each read once; every op weight-bound) with
    fast memory for about one weight. Lifted, the map greedy prefetches each weight one op before its use:
    no window, every copy stalls and the program runs slower than all-slow. Prefetched over windows
    that hide the copies, weights are served fast and the program speeds up."""
    problem = with_capacity(mlp([1024] * 8, batch=8), 0.25).replace(mode="prefetch")
    ev = PrefetchEvaluator.of(problem, HW)
    lifted = lifted_greedy(problem, HW)
    sol = solve(problem, time_limit=3.0)
    assert validate_intervals(problem, sol.intervals) is None
    slow = ev.time_all_slow
    speedup_lifted, speedup_cpsat = slow / ev.time(lifted), slow / ev.time(sol.intervals)
    print(f"\nweights-heavy MLP: all-slow {slow * 1e6:.2f} us, lifted greedy-xla {ev.time(lifted) * 1e6:.2f} us "
          f"(x{speedup_lifted:.3f}), cpsat {ev.time(sol.intervals) * 1e6:.2f} us (x{speedup_cpsat:.3f})")
    assert speedup_lifted < 1.0 < 1.1 < speedup_cpsat


# ---------------------------------------------------------------- windows of repeated layers


def test_repeated_layers_share_op_and_window_shapes():
    """An MLP's identical layers give identical op shapes, so windows over them share a shape; a window over
    ops of other sizes does not."""
    from mallocgame.solvers.cpsat.prefetch_windows import op_shapes, window_shape

    p = mlp([256, 256, 256, 256, 256, 64], batch=32)
    shape = op_shapes(p)
    assert len(shape) == len(p.ops) and len(set(shape.tolist())) < len(p.ops)
    # the same op shape sequence at two places: the same window shape; another sequence: another shape
    seq = shape.tolist()
    width = 2
    pairs = [(a, b) for a in range(len(seq) - width) for b in range(a + 1, len(seq) - width)
             if seq[a:a + width] == seq[b:b + width]]
    assert pairs
    a, b = pairs[0]
    assert window_shape(shape, ("ops", a, a + width)) == window_shape(shape, ("ops", b, b + width))
    other = next(c for c in range(len(seq) - width + 1) if seq[c:c + width] != seq[a:a + width])
    assert window_shape(shape, ("ops", other, other + width)) != window_shape(shape, ("ops", a, a + width))
    assert window_shape(shape, ("buffers", 1, 2)) != window_shape(shape, ("buffers", 1, 3))


def test_shapes_first_then_a_gain_brings_its_shape_forward():
    """The plan interleaved with one window of every shape (shapes by what all their windows have to gain); a gain
    moves the rest of that shape's windows right behind the current one, in place, the others keeping order."""
    from mallocgame.solvers.cpsat.prefetch_windows import Neighbourhood, promote_shape, shapes_first

    def nb(k):
        return Neighbourhood(("ops", k, k + 1), np.array([k]), k, k + 1)

    plan = [nb(k) for k in range(8)]
    shape_of = {n.key: s for n, s in zip(plan, "AABCBAAD")}
    worth = {n.key: w for n, w in zip(plan, [5, 1, 1, 9, 1, 1, 1, 2])}
    group = Neighbourhood(("buffers", 9), np.array([9]), 0, 9)  # a buffer group keeps its place at the end
    shape_of[group.key], worth[group.key] = "G", 0.0
    assert shapes_first(plan + [group], shape_of, worth)[-1] is group
    order = shapes_first(plan, shape_of, worth)
    # shapes' totals: A 8, B 2, C 9, D 2, so their first windows come C 3, A 0, B 2, D 7 (B before D: the plan's
    # order); interleaved with the plan 0..7, each window once: 0, 3, 1, (0), 2, (2), 7, then 4, 5, 6
    assert [n.key[1] for n in order] == [0, 3, 1, 2, 7, 4, 5, 6]
    moved = promote_shape(order, 0, shape_of)  # window 0 (shape A) gained: 1, 5, 6 move up behind it
    assert moved == 3 and [n.key[1] for n in order] == [0, 1, 5, 6, 3, 2, 7, 4]
    assert promote_shape(order, 7, shape_of) == 0  # nothing after the last one


def test_first_window_of_a_shape_without_gain_sends_its_shape_to_the_end():
    """``demote_shape``: the rest of the current window's shape moves to the end of the round, in place, in order."""
    from mallocgame.solvers.cpsat.prefetch_windows import Neighbourhood, demote_shape

    plan = [Neighbourhood(("ops", k, k + 1), np.array([k]), k, k + 1) for k in range(6)]
    shape_of = {n.key: s for n, s in zip(plan, "ABABCA")}
    assert demote_shape(plan, 0, shape_of) == 2
    assert [n.key[1] for n in plan] == [0, 1, 3, 4, 2, 5]
    assert demote_shape(plan, 5, shape_of) == 0


def _mlp_prefetch(layers: int = 7, capacity: int = 3 * 131072):
    p = mlp([256] * layers, batch=32)
    return p.replace(mode="prefetch", capacity=capacity)


def test_layer_map_pairs_the_buffers_of_repeated_layers():
    from mallocgame.solvers.cpsat.prefetch_windows import layer_map

    p = _mlp_prefetch()
    ix = p.index
    m = layer_map(p, 1, 3, 2)  # ops 1-2 (fc1 -> fc2 -> fc3) onto ops 3-4 (fc3 -> fc4 -> fc5)
    assert m == {ix["fc1"]: ix["fc3"], ix["fc2.w"]: ix["fc4.w"], ix["fc2"]: ix["fc4"],
                 ix["fc3.w"]: ix["fc5.w"], ix["fc3"]: ix["fc5"]}
    # ops 0-1 onto 1-2: x -> fc1 and fc1 -> fc2 is one to one, but a program whose ops differ is not mapped
    q = program([[("a", "read", 4), ("w", "read", 4)], [("a", "read", 4), ("a", "write", 4)]],
                [("a", 1, "activation"), ("w", 1, "weight")], capacity=2)
    assert layer_map(q, 0, 1, 1) is None  # a -> a and w -> a: not one to one


def test_a_gain_is_repeated_on_the_next_layer_placed_around_what_is_there():
    """``repeat_gain``: a weight prefetched for layer 2 becomes layer 4's weight prefetched for op 3, shifted by the
    layers' distance, placed best-fit above an interval that is there; it does not apply where the incumbent
    differs, where the moved stay is no candidate, where its buffer is in fast memory around it or nothing fits."""
    from mallocgame.solvers.cpsat.prefetch_windows import Gain, _key, repeat_gain

    p = _mlp_prefetch()
    ix = p.index
    w2, w4 = ix["fc2.w"], ix["fc4.w"]
    gain = Gain(1, frozenset(), (FastInterval(w2, 0, 1, 2, 0),))
    anything = lambda key: True  # noqa: E731
    assert repeat_gain(p, gain, 3, set(), [], anything) == [FastInterval(w4, 0, 3, 4, 2)]
    there = FastInterval(ix["fc3"], 0, 2, 4, None)  # fc3 (16 KiB) produced at op 2 at address 0, read at op 3
    moved = repeat_gain(p, gain, 3, set(), [there], anything)
    assert moved == [FastInterval(w4, 16384, 3, 4, 2)]
    assert validate_intervals(p, [there, *moved]) is None
    assert repeat_gain(p, gain, 1, set(), [], anything) is None  # the window of the gain itself
    assert repeat_gain(p, gain, 3, {_key(there)}, [], anything) is None  # the incumbent there is not the image
    assert repeat_gain(p, gain, 3, set(), [], lambda key: False) is None
    assert repeat_gain(p, gain, 3, set(), [FastInterval(w4, 0, 2, 4, 1)], anything) is None
    full = FastInterval(ix["fc4"], 131072, 3, 5, None)  # fc3 at 0, fc4 at 128 KiB: no 128 KiB hole below 256 KiB
    assert repeat_gain(p.replace(capacity=2 * 131072), gain, 3, set(), [there, full], anything) is None


def test_repeated_layers_gains_are_repeated_without_a_solve_and_stay_valid():
    """On a 12-layer MLP at a capacity of two weights the window search repeats a layer's gain on the others
    (``stats["repeated"]``); the answer is valid and at least as good as with repeats off."""
    from mallocgame.solvers.cpsat import prefetch_windows as pw

    p = _mlp_prefetch(layers=13, capacity=2 * 131072 + 2 * 16384)
    hw = HW
    before = pw.WINDOW_STAYS
    pw.WINDOW_STAYS = 6  # windows of a layer or two, as on a real training step's thousands of ops
    try:
        on = solve(p, hw, time_limit=4)
        pw.REPEAT_GAINS = False
        off = solve(p, hw, time_limit=4)
    finally:
        pw.REPEAT_GAINS, pw.WINDOW_STAYS = True, before
    assert on.stats["repeated"] > 0 and off.stats["repeated"] == 0
    assert validate_intervals(p, on.intervals) is None
    assert on.objective >= off.objective - 1e-12


def test_a_gain_at_the_very_first_window_counts():
    """The window search knows its start's value, so a gain at its first step promotes its shape and is kept
    to repeat (it used to compare with infinity and count as no gain)."""
    from mallocgame.algorithms.neighbourhood_search import Step, Trial
    from mallocgame.engine.session import session_for
    from mallocgame.solvers.cpsat.prefetch_windows import Gain

    p = _mlp_prefetch(layers=9, capacity=2 * 131072 + 2 * 16384)
    pev = session_for(p, HW).prefetch_evaluator
    space = PrefetchWindows(p, HW, pev, [], [], seed=0, workers=1, deterministic=True, t0=time.monotonic(),
                            value=0.0)
    plan = space.plan([], np.random.default_rng(0))
    nb = next(o for o in plan if o.key[0] == "ops")
    space._cursor = plan.index(nb)
    gain = Gain(nb.key[1], frozenset(), ())
    space._change = (nb.key, gain)
    space.learn(Step(nb, Trial([], False), True, 1e-6))
    assert space._gains[space._shape_of[nb.key]] is gain
