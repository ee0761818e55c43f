"""The fast paths of issue 11 item 5 give exactly what the checking paths give.

* ``io._fast_buffers`` / ``io._fast_ops`` (column-wise reading of a well-formed workload) build
  the same problem as the per-field loops, and any irregular field falls back to those loops;
* ``intervals.maximal_live_csr`` lists the same sets as brute force;
* ``bounds.no_fragmentation_relaxation`` without binding rows (closed form) equals the MIP.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mallocgame.bounds.bounds import no_fragmentation_relaxation
from mallocgame.formats import io as mio
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.intervals import maximal_live_csr, maximal_live_sets
from mallocgame.problem.model import InputError


def _slow(monkeypatch, path, data):
    with monkeypatch.context() as m:
        m.setattr(mio, "_fast_buffers", lambda *a: None)
        m.setattr(mio, "_fast_ops", lambda *a: None)
        return mio.parse_workload(path, data)


def test_fast_reader_equals_checking_reader(monkeypatch):
    problem = layered_network(300, seed=2)
    data = mio.workload_dict(problem)
    data["buffers"][3]["benefit"] = 2.5
    data["ops"][5]["control_deps"] = [data["ops"][1]["id"]]
    assert mio._fast_buffers(data["buffers"]) is not None
    by_id = {b.id: b for b in mio._fast_buffers(data["buffers"])}
    assert mio._fast_ops(data["ops"], by_id) is not None
    fast, slow = mio.parse_workload("w.json", data), _slow(monkeypatch, "w.json", data)
    assert fast == slow
    assert fast.buffers == slow.buffers and fast.ops == slow.ops and fast.control_deps == slow.control_deps
    assert fast.buffers[3].benefit == 2.5


@pytest.mark.parametrize("where, key, value", [
    ("buffers", "size", "64"), ("buffers", "size", 64.0), ("buffers", "kind", ["x"]), ("buffers", "id", 7),
    ("buffers", "extra", 1), ("ops", "flops", "1e3"), ("ops", "operands", None), ("ops", "control_deps", None),
    ("ops", "id", {"x": 1}), ("ops", "kind", {"x": 1}), ("ops", "kind", None), ("ops", "kind", 5),
])
def test_irregular_fields_take_the_checking_path(monkeypatch, where, key, value):
    problem = layered_network(50, seed=1)
    data = mio.workload_dict(problem)
    data[where][1][key] = value
    bufs = mio._fast_buffers(data["buffers"])
    fast_result = bufs is None or mio._fast_ops(data["ops"], {b.id: b for b in bufs}) is None
    assert fast_result  # the fast path declines ...
    try:  # ... and the reader answers as the checking loops do
        got = ("ok", mio.parse_workload("w.json", data))
    except InputError as exc:
        got = ("error", str(exc))
    try:
        want = ("ok", _slow(monkeypatch, "w.json", data))
    except InputError as exc:
        want = ("error", str(exc))
    assert got == want


def test_bad_values_give_the_same_error(tmp_path):
    problem = layered_network(40, seed=1)
    data = mio.workload_dict(problem)
    data["buffers"][4]["size"] = 0
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"buffers\[4\], field 'size': size must be positive"):
        mio.load_problem(path)
    data = mio.workload_dict(problem)
    data["ops"][2]["operands"][0]["bytes"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"ops\[2\]\.operands\[0\], field 'bytes'"):
        mio.load_problem(path)


def test_maximal_live_csr_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 30))
        start = rng.integers(0, 25, n)
        end = start + rng.integers(1, 12, n)
        times, indptr, indices = maximal_live_csr(start, end)
        live = [frozenset(np.flatnonzero((start <= t) & (end > t)).tolist()) for t in range(40)]
        maximal = sorted({s for s in live if s and not any(s < o for o in live)}, key=lambda s: min(end[list(s)]))
        got = [frozenset(indices[indptr[r]:indptr[r + 1]].tolist()) for r in range(len(times))]
        assert set(got) == set(maximal) and len(got) == len(maximal)
        assert [s.tolist() for s in maximal_live_sets(start, end)] == [sorted(s) for s in got]


def test_relaxation_without_binding_rows_is_all_fast():
    """Capacity above max live: no clique row binds, the closed form gives all-slow minus all-fast time."""
    from mallocgame.problem.intervals import max_live

    hw = PRESETS["tpuv4i"]
    problem = layered_network(400, seed=3)
    problem = problem.replace(capacity=2 * max_live(problem))
    ev = Evaluator.of(problem, hw)
    cand = (problem.arrays.size <= problem.capacity) & (ev.benefits > 0)
    r = no_fragmentation_relaxation(problem, ev, cand)
    assert r.kind == "mip" and r.chosen[cand].all()
    assert r.value == pytest.approx(ev.time_all_slow - ev.time_all_fast, rel=1e-9)
    # At half the max live rows bind, and the MIP's bound is below the all-fast value.
    tight = problem.replace(capacity=max_live(problem) // 2)
    ev2 = Evaluator.of(tight, hw)
    r2 = no_fragmentation_relaxation(tight, ev2, (tight.arrays.size <= tight.capacity) & (ev2.benefits > 0))
    assert r2.value < r.value


@pytest.mark.parametrize("variant", ["order", "address"])
@pytest.mark.parametrize("mode", ["map", "pack"])
def test_game_fast_paths_match_the_mask(variant, mode):
    """legal_actions (built without the mask) and the Python candidate scan agree with the numpy paths."""
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.game_address import AddressGame

    hw = PRESETS["tpuv4i"]
    problem = layered_network(300, seed=4)
    if mode == "pack":
        problem = problem.replace(mode="pack", capacity=None)
    rng = np.random.default_rng(0)
    game = Game(problem, hw, GameConfig(variant=variant))
    while not game.done:
        legal = game.legal_actions()
        assert legal.dtype == np.int64 and legal.tolist() == np.flatnonzero(game.legal_mask()).tolist()
        if isinstance(game, AddressGame):
            a, r, _ = game._seg
            sd = game._sky
            lo, hi = np.searchsorted(sd.sorted_cs, a), np.searchsorted(sd.sorted_cs, r)
            idx = sd.by_cs[lo:hi]
            idx = idx[game._undecided[idx] & (sd.ce[idx] <= r) & (sd.threshold[idx] >= game._height[a])]
            want = idx[np.argsort(sd.rank[idx])][:game.config.k].tolist()
            assert game.candidates() == want
        game.step(int(legal[rng.integers(len(legal))]))
    assert game.legal_actions().tolist() == []


def test_critical_window_bound_is_a_valid_lower_bound():
    """Between max live and the peak of a validated packing, on random instances and a real-trace-like one."""
    from mallocgame.bounds.bounds import critical_window_bound, pack_lower_bound
    from mallocgame.engine.runner import run_solver
    from mallocgame.hardware.validator import peak, validate
    from mallocgame.inputs.generate import random_intervals
    from mallocgame.problem.intervals import max_live

    for seed in range(3):
        problem = random_intervals(60, seed=seed).replace(mode="pack", capacity=None)
        report = run_solver("best-fit", problem, PRESETS["unit"], time_limit=10, seed=0)
        assert validate(problem, report.offsets) is None
        b = critical_window_bound(problem, time_limit=2.0, seed=0)
        assert max_live(problem) <= b.value <= peak(problem, report.offsets)
        assert b.kind in ("max-live", "window") and (b.kind == "window") == (b.value > max_live(problem))
        assert b.seconds < 10
    assert pack_lower_bound(problem).kind == "max-live"


def test_info_prints_the_lower_bound(tmp_path):
    from click.testing import CliRunner

    from mallocgame.cli.main import main

    path = tmp_path / "t.csv"
    path.write_text("id,lower,upper,size\na,0,2,4\nb,1,3,4\nc,2,4,8\n")
    out = CliRunner().invoke(main, ["info", str(path), "--mode", "pack", "--bound-time", "2"])
    assert out.exit_code == 0, out.output
    assert "lower bound: 12B (max live; the critical-window bound found nothing higher in 2 s)" in out.output
    out = CliRunner().invoke(main, ["info", str(path), "--mode", "pack"])
    assert "lower bound: 12B (max live)" in out.output


def test_validator_fast_check_agrees_with_the_sweep():
    """validate (column-wise check first) gives exactly the loop-and-sweep verdict on valid and broken answers."""
    import mallocgame.hardware.validator as hv
    from mallocgame.engine.runner import run_solver
    from mallocgame.inputs.generate import random_intervals

    rng = np.random.default_rng(0)
    for seed in range(4):
        for mode in ("pack", "map"):
            problem = random_intervals(80, seed=seed).replace(mode=mode, capacity=None if mode == "pack" else 2000)
            offsets = list(run_solver("best-fit", problem, PRESETS["unit"], time_limit=10, seed=0).offsets)
            variants = [offsets]
            for _ in range(20):
                broken = list(offsets)
                i = int(rng.integers(len(broken)))
                broken[i] = [None, -8, 3, 2.5, 1999, int(rng.integers(0, 400)), 10**30][int(rng.integers(7))]
                variants.append(broken)
            for offs in variants:
                slow = _loop_and_sweep(problem, offs)
                assert hv.validate(problem, offs) == slow


def _loop_and_sweep(problem, offsets):
    """validate as it was: the per-buffer loop, then the sweep."""
    import mallocgame.hardware.validator as hv

    saved = hv._valid_at_once
    hv._valid_at_once = lambda *a: False
    try:
        return hv.validate(problem, offsets)
    finally:
        hv._valid_at_once = saved


@pytest.mark.parametrize("hw_name", ["tpuv4i", "unit"])
def test_relaxation_with_unconstrained_candidates_fixed_is_the_same(monkeypatch, hw_name):
    """Fixing the candidates of no binding row fast (bounds.REDUCE_FROM) leaves the relaxation's value unchanged."""
    import mallocgame.bounds.bounds as mb
    from mallocgame.problem.intervals import max_live, maximal_live_sets

    hw = PRESETS[hw_name]
    problem = layered_network(600, seed=5)
    if hw_name == "unit":
        problem = problem.replace(ops=())
    problem = problem.replace(capacity=max_live(problem) * 2 // 5)
    ev = Evaluator.of(problem, hw)
    cand = (problem.arrays.size <= problem.capacity) & (ev.benefits > 0)
    whole = mb.no_fragmentation_relaxation(problem, ev, cand)
    monkeypatch.setattr(mb, "REDUCE_FROM", 0)
    reduced = mb.no_fragmentation_relaxation(problem, ev, cand)
    assert whole.kind == reduced.kind == "mip"
    assert reduced.value == pytest.approx(whole.value, rel=1e-6)
    a = problem.arrays
    chosen = np.flatnonzero(reduced.chosen)
    assert all(a.size[chosen][s].sum() <= problem.capacity for s in maximal_live_sets(a.start[chosen], a.end[chosen]))
