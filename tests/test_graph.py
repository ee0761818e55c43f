"""Interference graph and sweeps against brute force on random lifetimes."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.graph import interference_graph
from mallocgame.inputs.generate import random_intervals
from mallocgame.intervals import OverlapIndex, components, count_overlapping_pairs, live_profile, max_live
from mallocgame.model import Buffer, Problem
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
    from mallocgame.io import load_problem

    p = load_problem(str(BENCHMARKS / "minimalloc" / "K.1048576.csv"))
    g = interference_graph(p)
    assert g.number_of_nodes() == 454
    assert g.number_of_edges() == count_overlapping_pairs(p.arrays.start, p.arrays.end) == 7607
    assert max_live(p) == 1048576
    assert np.all([g.nodes[i]["size"] == p.buffers[i].size for i in range(3)])


@settings(max_examples=60, deadline=None)
@given(lifetimes)
def test_neighbour_lists_match_brute_force(rows):
    from mallocgame.intervals import neighbour_lists

    p = problem_of(rows)
    indptr, indices = neighbour_lists(p.arrays.start, p.arrays.end)
    pairs = brute_pairs(p)
    for i in range(p.n):
        want = sorted([j for a, j in pairs if a == i] + [a for a, j in pairs if j == i])
        assert sorted(indices[indptr[i]:indptr[i + 1]].tolist()) == want
    assert neighbour_lists(p.arrays.start, p.arrays.end, max_pairs=len(pairs) - 1) is None or not pairs
