"""The residency bound (mallocgame.bounds.prefetch_bound): valid against exhaustive search, tighter than the per-op bound."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.bounds.bounds import prefetch_upper_bound
from mallocgame.bounds.prefetch_bound import _brackets, residency_bound
from mallocgame.hardware.spec import PRESETS
from tests.prefetch_tools import program
from tests.test_prefetch import UNIT, _best_value


def _tiny(seed: int, n_ops: int = 4):
    """Two buffers on ``n_ops`` ops, touched one to three times, random kinds, sizes, capacity and copy speed."""
    rng = np.random.default_rng(seed)
    names = ["a", "b"]
    kinds = ["weight" if rng.random() < 0.5 else "activation", "output" if rng.random() < 0.5 else "activation"]
    ops: list[list[tuple[str, str, int]]] = [[] for _ in range(n_ops)]
    for name, kind in zip(names, kinds):
        touched = sorted(rng.choice(n_ops, size=int(rng.integers(1, 4)), replace=False).tolist())
        for k, t in enumerate(touched):
            access = "write" if (k == 0 and kind != "weight") else "read"
            ops[t].append((name, access, int(rng.integers(1, 4))))
    sizes = [int(rng.integers(1, 3)), int(rng.integers(1, 3))]
    problem = program(ops, [(n, z, k) for n, z, k in zip(names, sizes, kinds)], capacity=int(rng.integers(1, 4)),
                      flops=float(rng.integers(0, 3)))
    return problem, UNIT.replace(copy_bw=float(rng.choice([0.5, 2.0, 8.0])))


@pytest.mark.parametrize("seed", range(40))
def test_the_bound_holds_against_exhaustive_search(seed):
    problem, hw = _tiny(seed)
    best = _best_value(problem, hw)
    bound = residency_bound(problem, hw, time_limit=30)
    assert bound.solved
    assert best <= bound.value + 1e-9, (best, bound.value)


def test_the_lp_relaxation_holds_too_and_is_no_tighter_than_the_mip():
    for seed in range(10):
        problem, hw = _tiny(seed)
        lp = residency_bound(problem, hw, integral=False)
        mip = residency_bound(problem, hw)
        assert _best_value(problem, hw) <= lp.value + 1e-9
        assert mip.value <= lp.value + 1e-9


def test_tighter_than_the_per_op_bound_where_copies_cannot_hide():
    # An MLP whose first weight's prefetch cannot start before the op that reads it: the per-op bound counts
    # its saving, the residency bound charges the stall (and proves msa's answer optimal on this program).
    from mallocgame.inputs.workloads import mlp, with_capacity

    problem = with_capacity(mlp([1024, 2048, 2048, 2048, 2048, 10], batch=32), 0.25).replace(mode="prefetch")
    hw = PRESETS["tpuv4i"]
    per_op = prefetch_upper_bound(problem, hw).value
    bound = residency_bound(problem, hw, time_limit=30)
    assert bound.solved and bound.value < 0.5 * per_op


def test_brackets_cover_every_suffix_length():
    gap, memory, budget = _brackets(np.array([0, 1, 5, 8]))
    for g, length in enumerate([0, 1, 5, 8]):
        mine = gap == g
        for real in range(length + 1):  # every real suffix length falls in one bracket: memory <= real <= budget
            assert ((memory[mine] <= real) & (real <= budget[mine])).any()
        assert (memory[mine] <= budget[mine]).all() and budget[mine].max() == length


def test_info_computes_both_bounds_and_solve_and_the_api_report_the_tighter_one(tmp_path):
    import json

    import mallocgame
    from tests.conftest import run_cli

    info = run_cli("info", "example:layered150", "--mode", "prefetch")
    assert info.returncode == 0 and "bounds: per-op" in info.stdout and "residency" in info.stdout
    rep = tmp_path / "rep.json"  # info stored both in the bound cache: solve reports them at once
    r = run_cli("solve", "example:layered150", "--mode", "prefetch", "--solver", "msa", "--time-limit", "5",
                "--report", str(rep))
    assert r.returncode == 0, r.stderr
    report = json.loads(rep.read_text())
    assert set(report["bounds"]) == {"per-op", "residency"}
    assert report["bound"] == min(report["bounds"].values()) and report["bound_kind"] == "residency"
    assert report["objective"] <= report["bound"] * (1 + 1e-9)
    result = mallocgame.solve(mallocgame.load_problem("example:layered150", mode="prefetch"), "msa", time_limit=5)
    assert result.bound == pytest.approx(report["bound"], rel=1e-9)


def test_above_the_touch_limit_only_the_per_op_bound_is_reported(monkeypatch):
    from mallocgame.bounds import prefetch_bound
    from mallocgame.bounds.bounds import Bound

    problem, hw = _tiny(0)
    monkeypatch.setattr(prefetch_bound, "RESIDENCY_TOUCHES", 0)
    bound = prefetch_bound.tightened(problem, hw, Bound(1.0, "per-op"), seconds=5)
    assert (bound.value, bound.kind, bound.others) == (1.0, "per-op", (("per-op", 1.0),))


def _lp_of(problem, hw):
    from mallocgame.bounds.prefetch_bound import _build

    prog, lp = _build(problem, hw)
    return prog, lp.arrays()


@pytest.mark.parametrize("seed", range(8))
def test_any_multipliers_give_a_bound_no_lower_than_the_lp_optimum(seed):
    # Weak duality: the optimal duals, perturbed ones, random ones (of either sign: _lagrangian clips) and the
    # per-op start all give min-form values at most the LP's optimum, i.e. bounds at least its value.
    from mallocgame.bounds.prefetch_bound import _highs, _highs_duals, _lagrangian, _per_op_duals

    problem, hw = _tiny(seed)
    prog, a = _lp_of(problem, hw)
    res = _highs(a, 30, integral=False)
    assert res.status == 0
    optimum = float(res.fun)
    y_opt = _highs_duals(a, res)
    assert _lagrangian(a, y_opt) == pytest.approx(optimum, abs=1e-3)  # the LP's seconds: 1e6 = the whole program
    rng = np.random.default_rng(seed)
    tries = [y_opt + rng.normal(0, scale, len(y_opt)) for scale in (1e-3, 1e-1, 10.0)]
    tries += [rng.normal(0, 1, len(y_opt)) * rng.random(len(y_opt)) for _ in range(20)]
    tries += [_per_op_duals(prog, a.first_row, len(a.rhs))]
    for y in tries:
        assert _lagrangian(a, y) <= optimum + 1e-9 * max(1.0, abs(optimum))


def test_any_multipliers_bound_a_random_lp():
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    from mallocgame.bounds.prefetch_bound import _Arrays, _lagrangian

    rng = np.random.default_rng(7)
    for _ in range(20):
        m, n = int(rng.integers(2, 12)), int(rng.integers(2, 12))
        dense = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.6)
        eq = rng.random(m) < 0.3
        x0 = rng.random(n)  # a feasible point inside the box
        rhs = dense @ x0 + np.where(eq, 0.0, rng.random(m))
        lo, hi, cost = -rng.random(n), 1 + rng.random(n), rng.normal(size=n)
        res = linprog(cost, A_ub=dense[~eq], b_ub=rhs[~eq], A_eq=dense[eq] if eq.any() else None,
                      b_eq=rhs[eq] if eq.any() else None, bounds=np.column_stack([lo, hi]), method="highs")
        assert res.status == 0
        a = _Arrays(csr_matrix(dense), rhs, eq, lo, hi, cost, np.zeros(n, np.int8), np.zeros(n, np.int64), {})
        for _ in range(50):
            assert _lagrangian(a, rng.normal(0, 3, m)) <= res.fun + 1e-9


def test_the_lagrangian_refuses_an_unboxed_column():
    from scipy.sparse import csr_matrix

    from mallocgame.bounds.prefetch_bound import _Arrays, _lagrangian

    a = _Arrays(csr_matrix(np.ones((1, 1))), np.ones(1), np.zeros(1, bool), np.zeros(1), np.full(1, np.inf),
                np.ones(1), np.zeros(1, np.int8), np.zeros(1, np.int64), {})
    with pytest.raises(ValueError, match="boxed"):
        _lagrangian(a, np.zeros(1))


def test_without_the_whole_lp_the_buffer_prices_still_bound_it(monkeypatch):
    # A medium program (150 layers) on the path large programs take (no whole LP, no MIP): a finite value,
    # at least the exact LP optimum, and no looser than the per-op bound.
    from mallocgame.bounds import prefetch_bound
    from mallocgame.inputs.load import load_problem

    problem = load_problem("example:layered150", mode="prefetch")
    hw = PRESETS["tpuv4i"]
    prog, a = _lp_of(problem, hw)
    res = prefetch_bound._highs(a, 60, integral=False)
    assert res.status == 0
    exact = -float(res.fun) / prog.scale
    monkeypatch.setattr(prefetch_bound, "DIRECT_VARS", 0)
    fast = residency_bound(problem, hw, time_limit=10)
    assert not fast.solved and fast.source in ("buffer prices", "per-op prices", "per-op")
    assert np.isfinite(fast.value) and fast.value >= exact * (1 - 1e-9)
    assert fast.value <= prefetch_upper_bound(problem, hw).value


def _op_savings_item_by_item(problem, ev, exact_up_to):
    """:func:`prefetch_op_savings`'s knapsack of every op, one operand and one item at a time (the reference)."""
    import itertools

    capacity = problem.capacity
    sizes = problem.arrays.size
    headroom = np.maximum(ev.slow_mem - ev.compute, 0.0)
    saving, exact = np.zeros(ev.n_ops), True
    for t in range(ev.n_ops):
        if headroom[t] <= 0:
            continue
        per: dict[int, float] = {}
        rows = sorted(np.flatnonzero(ev.op_of == t).tolist(), key=lambda r: int(ev.buf_of[r]))
        for r in rows:
            b = int(ev.buf_of[r])
            if sizes[b] <= capacity:
                per[b] = per.get(b, 0.0) + float(ev.delta[r])
        items = [(per[b], int(sizes[b])) for b in sorted(per) if per[b] > 0]
        if sum(z for _, z in items) <= capacity:
            best = sum(d for d, _ in items)
        elif len(items) <= exact_up_to:
            best = max(sum(d for d, _ in combo) for k in range(len(items) + 1)
                       for combo in itertools.combinations(items, k) if sum(z for _, z in combo) <= capacity)
        else:
            exact, best, room = False, 0.0, capacity
            for d, z in sorted(items, key=lambda it: -it[0] / it[1]):
                take = min(1.0, room / z)
                best += d * take
                room -= z * take
                if room <= 0:
                    break
        saving[t] = min(float(headroom[t]), best)
    return saving, exact


@pytest.mark.parametrize("exact_up_to", [0, 2, 10])
def test_the_per_op_knapsacks_by_columns_equal_the_item_by_item_walk(exact_up_to, monkeypatch):
    from mallocgame.bounds import bounds as bounds_module
    from mallocgame.hardware.evaluator import Evaluator
    from mallocgame.inputs.generate import layered_network

    solved = []
    knapsack = bounds_module._op_knapsack
    monkeypatch.setattr(bounds_module, "_op_knapsack", lambda *a: solved.append(1) or knapsack(*a))
    for seed in range(4):
        problem = layered_network(200, seed=seed, capacity_fraction=0.03).replace(mode="prefetch")
        ev = Evaluator.of(problem, PRESETS["tpuv4i"])
        got, got_exact = bounds_module.prefetch_op_savings(problem, ev, exact_up_to=exact_up_to)
        want, want_exact = _op_savings_item_by_item(problem, ev, exact_up_to)
        assert got.tolist() == want.tolist() and got_exact == want_exact
    assert solved  # ops whose operands do not all fit took the knapsack path


class _NoScalarIndexing(np.ndarray):
    """Sizes that refuse to be read one buffer at a time (a Python walk over an op's operands)."""

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            raise AssertionError("sizes read one buffer at a time")
        return np.asarray(super().__getitem__(key))


def test_an_op_with_many_operands_is_bounded_by_columns_not_operand_by_operand():
    from types import SimpleNamespace

    from mallocgame.bounds.bounds import prefetch_op_savings
    from mallocgame.hardware.evaluator import Evaluator

    n = 400  # one op writes n buffers, one reads them: a shape where a walk per operand costs seconds at 500k
    sizes = [256 * (1 + i % 7) for i in range(n)]
    problem = program([[(f"b{i}", "write", sizes[i]) for i in range(n)], [(f"b{i}", "read", sizes[i]) for i in range(n)]],
                      [(f"b{i}", sizes[i], "activation") for i in range(n)], capacity=64 * 1024, flops=0.0)
    ev = Evaluator.of(problem, PRESETS["tpuv4i"])
    want = prefetch_op_savings(problem, ev)
    guarded = SimpleNamespace(capacity=problem.capacity,
                              arrays=SimpleNamespace(size=np.asarray(problem.arrays.size).view(_NoScalarIndexing)))
    got = prefetch_op_savings(guarded, ev)
    assert got[0].tolist() == want[0].tolist() and got[1] is want[1] is False  # the fractional knapsack ran
    assert got[0].sum() > 0
