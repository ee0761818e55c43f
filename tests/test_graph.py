"""Interference graph, its compressed form (the clique path) and the sweeps against brute force."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.inputs.generate import random_intervals
from mallocgame.problem.graph import CliquePath, GraphConflicts, interference_graph
from mallocgame.problem.intervals import (
    OverlapIndex,
    components,
    count_overlapping_pairs,
    live_profile,
    max_live,
    maximal_live_sets,
)
from mallocgame.problem.model import Buffer, Problem
from tests.conftest import BENCHMARKS, needs_benchmarks

lifetimes = st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8), st.integers(1, 50)), min_size=1, max_size=40)


def problem_of(rows) -> Problem:
    return Problem("h", tuple(Buffer(f"b{i}", size, s, s + length) for i, (s, length, size) in enumerate(rows)))


def brute_pairs(p: Problem) -> set[tuple[int, int]]:
    b = p.buffers
    return {(i, j) for i in range(p.n) for j in range(i + 1, p.n) if b[i].start < b[j].end and b[j].start < b[i].end}


@settings(max_examples=60, deadline=None)
@given(lifetimes)
def test_graph_edges_match_brute_force(rows):
    p = problem_of(rows)
    g = interference_graph(p)
    assert {tuple(sorted(e)) for e in g.edges()} == brute_pairs(p)
    assert count_overlapping_pairs(p.arrays.start, p.arrays.end) == len(brute_pairs(p))


@settings(max_examples=60, deadline=None)
@given(lifetimes)
def test_components_match_networkx(rows):
    p = problem_of(rows)
    expected = sorted(sorted(c) for c in nx.connected_components(interference_graph(p)))
    assert sorted(components(p)) == expected


@settings(max_examples=60, deadline=None)
@given(lifetimes)
def test_max_live_matches_brute_force(rows):
    p = problem_of(rows)
    horizon = max(b.end for b in p.buffers)
    per_time = [sum(b.size for b in p.buffers if b.start <= t < b.end) for t in range(horizon)]
    assert max_live(p) == max(per_time)
    times, live = live_profile(p)
    for t, v in zip(times.tolist(), live.tolist()):
        if t < horizon:
            assert v == per_time[t]


@settings(max_examples=60, deadline=None)
@given(lifetimes, st.integers(0, 40), st.integers(1, 10), st.sampled_from([1, 3, 10_000_000]))
def test_overlap_index_matches_brute_force(rows, s, length, budget):
    p = problem_of(rows)
    a = p.arrays
    idx = OverlapIndex(a.start, a.end, budget=budget)
    got = sorted(idx.query(s, s + length).tolist())
    want = [i for i, b in enumerate(p.buffers) if b.start < s + length and b.end > s]
    assert got == want


def test_graph_refuses_to_explode():
    p = random_intervals(300, seed=1, horizon=10)
    try:
        interference_graph(p, max_edges=100)
    except ValueError as exc:
        assert "more than 100 edges" in str(exc)
    else:
        raise AssertionError("expected ValueError")


@needs_benchmarks()
def test_graph_of_largest_minimalloc_instance():
    from mallocgame.formats.io import load_problem

    p = load_problem(str(BENCHMARKS / "minimalloc" / "K.1048576.csv"))
    g = interference_graph(p)
    assert g.number_of_nodes() == 454
    assert g.number_of_edges() == count_overlapping_pairs(p.arrays.start, p.arrays.end) == 7607
    assert max_live(p) == 1048576
    assert np.all([g.nodes[i]["size"] == p.buffers[i].size for i in range(3)])


@settings(max_examples=60, deadline=None)
@given(lifetimes)
def test_neighbour_lists_match_brute_force(rows):
    from mallocgame.problem.intervals import neighbour_lists

    p = problem_of(rows)
    indptr, indices = neighbour_lists(p.arrays.start, p.arrays.end)
    pairs = brute_pairs(p)
    for i in range(p.n):
        want = sorted([j for a, j in pairs if a == i] + [a for a, j in pairs if j == i])
        assert sorted(indices[indptr[i]:indptr[i + 1]].tolist()) == want
    assert neighbour_lists(p.arrays.start, p.arrays.end, max_pairs=len(pairs) - 1) is None or not pairs


def assert_forms_agree(p: Problem, subsets=()) -> None:
    """The networkx graph and the clique path give the same conflicts, neighbours, components, cliques (of the
    whole graph and of induced subgraphs) and largest cliques, which are those of brute force and the sweeps."""
    graph, path = GraphConflicts(interference_graph(p)), CliquePath.of(p)
    a = p.arrays
    assert graph.edge_count == path.edge_count == count_overlapping_pairs(a.start, a.end)
    for i in range(p.n):
        want = graph.neighbours(i).tolist()
        assert path.neighbours(i).tolist() == want
        assert all(path.conflict(i, j) and graph.conflict(i, j) for j in want)
        assert len(want) == sum(path.conflict(i, j) for j in range(p.n))
    assert graph.components() == path.components() == components(p)
    sweep = [c.tolist() for c in maximal_live_sets(a.start, a.end)]
    assert [c.tolist() for c in graph.cliques()] == [c.tolist() for c in path.cliques()] == sweep
    for items in subsets:
        sweep = [c.tolist() for c in maximal_live_sets(a.start[items], a.end[items])]
        assert [c.tolist() for c in graph.cliques_among(items)] == sweep
        assert [c.tolist() for c in path.cliques_among(items)] == sweep
    for weight in ("size", None):
        assert graph.largest_clique(weight).tolist() == path.largest_clique(weight).tolist()
    assert path.clique_bytes(path.largest_clique()) == max_live(p)


def brute_edges(p: Problem) -> int:
    return len(brute_pairs(p))


@settings(max_examples=80, deadline=None)
@given(lifetimes, st.randoms(use_true_random=False))
def test_graph_and_clique_path_agree(rows, rnd):
    p = problem_of(rows)
    items = np.array(sorted(rnd.sample(range(p.n), rnd.randint(0, p.n))), np.int64)
    shuffled = np.array(rnd.sample(range(p.n), p.n), np.int64)
    assert_forms_agree(p, subsets=(items, shuffled))
    path = CliquePath.of(p)
    assert sum(path.conflict(i, j) for i in range(p.n) for j in range(i + 1, p.n)) == brute_edges(p)


@pytest.mark.parametrize("name", ["gpt2-tiny-train-adam", "mixer-s16-b8"])
def test_graph_and_clique_path_agree_on_suite_programs(name):
    from mallocgame.inputs.load import prepare
    from mallocgame.inputs.suites import suite_entries

    entry = next(e for e in suite_entries("xla") if e.name == name)
    p = prepare(entry.build(), mode="pack")[0]
    rng = np.random.default_rng(0)
    assert_forms_agree(p, subsets=(np.sort(rng.choice(p.n, p.n // 3, replace=False)),))
    assert len(CliquePath.of(p).components()) >= 1 and CliquePath.of(p).edge_count > p.n


def test_conflicts_choose_the_form():
    from mallocgame.problem.graph import GRAPH_EDGES, conflicts, problem_graph

    p = random_intervals(300, seed=1, horizon=10)
    edges = count_overlapping_pairs(p.arrays.start, p.arrays.end)
    path = conflicts(p)  # a solver's: no networkx graph built
    assert isinstance(path, CliquePath) and conflicts(p) is path and conflicts(p, build_graph_up_to=edges - 1) is path
    found = conflicts(p, build_graph_up_to=edges)  # info's, when the graph is small enough
    assert isinstance(found, GraphConflicts) and found.graph is problem_graph(p) and conflicts(p) is found
    q = random_intervals(300, seed=2, horizon=10)
    problem_graph(q)  # built by someone: every reader gets the graph's answers
    assert isinstance(conflicts(q), GraphConflicts) and GRAPH_EDGES > 0
