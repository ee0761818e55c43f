"""The one CP-SAT model of fixed-time rectangle packing (mallocgame.algorithms.packing_model), against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mallocgame.algorithms.packing_model import add_cumulative, add_no_overlap, add_rectangles, pinned_holes

cp_model = pytest.importorskip("ortools.sat.python.cp_model")


def _brute_min_peak(start, end, size, align, grid):
    best = None
    for offs in itertools.product(*[range(0, grid, int(a)) for a in align]):
        ok = all(not (start[i] < end[j] and start[j] < end[i]) or offs[i] + size[i] <= offs[j] or offs[j] + size[j] <= offs[i]
                 for i in range(len(size)) for j in range(i + 1, len(size)))
        if ok:
            peak = max(o + z for o, z in zip(offs, size))
            best = peak if best is None else min(best, peak)
    return best


@pytest.mark.parametrize("formulation", ["2d", "cliques", "both"])
@pytest.mark.parametrize("seed", range(6))
def test_min_peak_equals_brute_force(formulation, seed):
    rng = np.random.default_rng(seed)
    n = 4
    start = rng.integers(0, 4, n)
    end = start + rng.integers(1, 4, n)
    size = rng.integers(1, 4, n)
    align = rng.choice([1, 2], n)
    top = int(size.sum() + align.max() * n)
    model = cp_model.CpModel()
    rect = add_rectangles(model, start, end, size, top=top, align=align)
    peak = model.new_int_var(0, top, "peak")
    for i in rect.placed:
        model.add(rect.offset_expr(i) + int(size[i]) <= peak)
    assert add_no_overlap(model, rect, formulation=formulation)
    add_cumulative(model, rect, peak)
    model.minimize(peak)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(model) == cp_model.OPTIMAL
    assert int(solver.objective_value) == _brute_min_peak(start, end, size, align, top)
    offsets = rect.offsets(solver)
    assert (offsets % align == 0).all()


def test_optional_items_with_knapsack_rows_and_pinned_items():
    # Three items live together, capacity 10: the pinned one (size 4 at 0) leaves room for one of the others.
    start, end, size = np.array([0, 0, 0]), np.array([2, 2, 2]), np.array([4, 5, 5])
    model = cp_model.CpModel()
    rect = add_rectangles(model, start, end, size, top=10, optional=True, fixed_offsets=[0, None, None])
    add_no_overlap(model, rect, formulation="cliques", knapsack_top=10)
    model.maximize(sum(rect.present[i] for i in rect.placed))
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    offsets = rect.offsets(solver)
    assert offsets[0] == 0 and (offsets[1:] >= 0).sum() == 1


def test_an_item_without_room_gets_no_variables_and_skip_is_kept_out():
    model = cp_model.CpModel()
    rect = add_rectangles(model, np.array([0, 0, 0]), np.array([1, 1, 1]), np.array([3, 20, 3]), top=10,
                          skip=np.array([False, False, True]))
    assert rect.placed == [0]
    with pytest.raises(ValueError):
        add_no_overlap(model, rect, formulation="3d")


def _brute_max_placed(start, end, size, align, top, pinned):
    """The largest total size of the optional items placeable around the pinned ones ({item: offset})."""
    n = len(size)
    choices = [[pinned[i]] if i in pinned else [-1, *range(0, top - int(size[i]) + 1, int(align[i]))] for i in range(n)]
    best = -1
    for offs in itertools.product(*choices):
        ok = all(offs[i] < 0 or offs[j] < 0 or not (start[i] < end[j] and start[j] < end[i])
                 or offs[i] + size[i] <= offs[j] or offs[j] + size[j] <= offs[i]
                 for i in range(n) for j in range(i + 1, n))
        if ok:
            best = max(best, sum(int(size[i]) for i in range(n) if offs[i] >= 0 and i not in pinned))
    return best


@pytest.mark.parametrize("formulation", ["2d", "cliques"])
@pytest.mark.parametrize("seed", range(8))
def test_pinned_as_holes_keeps_the_optimum(formulation, seed):
    # Optional items around pinned ones: the pinned items as holes in the others' domains give the brute-force optimum.
    rng = np.random.default_rng(seed)
    n, top = 5, 8
    start = rng.integers(0, 4, n)
    end = start + rng.integers(1, 4, n)
    size = rng.integers(1, 4, n)
    align = rng.choice([1, 2], n)
    pinned = {i: int(rng.integers(0, (top - size[i]) // align[i] + 1)) * int(align[i]) for i in (0, 1)}
    if start[0] < end[1] and start[1] < end[0] and not (pinned[0] + size[0] <= pinned[1] or pinned[1] + size[1] <= pinned[0]):
        pinned.pop(1)  # the two pinned items must not overlap each other
    values = []
    for holes in (False, True):
        model = cp_model.CpModel()
        rect = add_rectangles(model, start, end, size, top=top, align=align, optional=True,
                              fixed_offsets=[pinned.get(i) for i in range(n)])
        assert add_no_overlap(model, rect, formulation=formulation, pinned_as_holes=holes)
        model.maximize(sum(int(size[i]) * rect.present[i] for i in rect.placed if i not in pinned))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(model) == cp_model.OPTIMAL
        offsets = rect.offsets(solver)
        for i, o in pinned.items():
            assert offsets[i] == o
        values.append(int(solver.objective_value))
    assert values[0] == values[1] == _brute_max_placed(start, end, size, align, top, pinned)


def test_pinned_holes_are_the_steps_that_meet_a_pinned_item():
    # A pinned item [4, 7) live with item 1 (size 2, alignment 2): steps 2 (offset 4) and 3 (offset 6) meet it,
    # step 1 (offset 2, ends at 4) does not; item 2 is not live with it and has no holes.
    model = cp_model.CpModel()
    rect = add_rectangles(model, np.array([0, 1, 5]), np.array([3, 2, 6]), np.array([3, 2, 2]), top=10,
                          align=np.array([1, 2, 1]), optional=True, fixed_offsets=[4, None, None])
    assert pinned_holes(rect, 1) == [(2, 3)]
    assert pinned_holes(rect, 2) == []


@pytest.mark.parametrize("form", ["graph", "clique path"])
@pytest.mark.parametrize("formulation", ["cliques", "both"])
@pytest.mark.parametrize("seed", range(4))
def test_cliques_from_the_interference_graph_build_the_same_model(form, formulation, seed):
    """The no-overlap and knapsack rows read from the problem's conflicts (either form) are the sweep's: the
    same model, constraint for constraint."""
    from mallocgame.inputs.generate import random_intervals
    from mallocgame.problem.graph import CliquePath, GraphConflicts, interference_graph

    p = random_intervals(40, seed=seed, horizon=60)
    conflicts = GraphConflicts(interference_graph(p)) if form == "graph" else CliquePath.of(p)
    rng = np.random.default_rng(seed)
    free = np.sort(rng.choice(p.n, 30, replace=False))
    a = p.arrays
    skip = rng.random(len(free)) < 0.2  # items without variables: the cliques are of the others

    def build(cliques_of):
        model = cp_model.CpModel()
        rect = add_rectangles(model, a.start[free], a.end[free], a.size[free], top=int(a.size.sum()),
                              optional=True, skip=skip)
        add_no_overlap(model, rect, formulation=formulation, knapsack_top=int(a.size[free].sum()) // 3,
                       knapsack_always=True, cliques_of=cliques_of)
        return str(model.Proto())

    from_facts = build(lambda placed: conflicts.cliques_among(free[placed]))
    assert from_facts == build(None)
    assert from_facts.count("no_overlap {") > 3 and from_facts.count("linear {") > 3  # cliques and knapsack rows
