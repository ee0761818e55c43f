"""The residency bound (mallocgame.prefetch_bound): valid against exhaustive search, tighter than the per-op bound."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.bounds import prefetch_upper_bound
from mallocgame.hardware.spec import PRESETS
from mallocgame.prefetch_bound import _brackets, residency_bound
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


def test_solve_info_and_the_api_report_both_bounds_the_tighter_one_first(tmp_path):
    import json

    import mallocgame
    from tests.conftest import run_cli

    rep = tmp_path / "rep.json"
    r = run_cli("solve", "example:layered150", "--mode", "prefetch", "--solver", "msa", "--time-limit", "5",
                "--report", str(rep))
    assert r.returncode == 0, r.stderr
    report = json.loads(rep.read_text())
    assert set(report["bounds"]) == {"per-op", "residency"}
    assert report["bound"] == min(report["bounds"].values()) and report["bound_kind"] == "residency"
    assert report["objective"] <= report["bound"] * (1 + 1e-9)
    info = run_cli("info", "example:layered150", "--mode", "prefetch")
    assert info.returncode == 0 and "bounds: per-op" in info.stdout and "residency" in info.stdout
    result = mallocgame.solve(mallocgame.load_problem("example:layered150", mode="prefetch"), "msa", time_limit=5)
    assert result.bound == pytest.approx(report["bound"], rel=1e-9)


def test_above_the_touch_limit_only_the_per_op_bound_is_reported(monkeypatch):
    from mallocgame import prefetch_bound
    from mallocgame.bounds import Bound

    problem, hw = _tiny(0)
    monkeypatch.setattr(prefetch_bound, "RESIDENCY_TOUCHES", 0)
    bound = prefetch_bound.tightened(problem, hw, Bound(1.0, "per-op"), seconds=5)
    assert (bound.value, bound.kind, bound.others) == (1.0, "per-op", (("per-op", 1.0),))
