"""One bound per problem, kept on disk (mallocgame.bounds.bound_cache), and no solve waits for it.

Every report on a problem carries the tightest bound known without waiting: the instant bound of its
mode, or the expensive one (the residency bound, the map relaxation) once ``info`` or ``compare`` has
computed it and stored it in the cache. Each test has its own cache folder (the root conftest).
"""

from __future__ import annotations

import json
import os

import pytest

import mallocgame
from mallocgame.bounds import bound_cache
from mallocgame.bounds.bounds import Bound
from mallocgame.engine import session
from mallocgame.inputs.load import load_problem
from tests.conftest import run_cli

EXAMPLE = "example:layered150"


def _prefetch():
    return load_problem(EXAMPLE, mode="prefetch")


def _counting(monkeypatch) -> list:
    """Count the computations of the expensive bound in this process."""
    calls: list = []
    real = session.expensive_bound

    def counted(*args, **kwargs):
        calls.append(args[0].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "expensive_bound", counted)
    return calls


def _solve_json(*args: str) -> dict:
    r = run_cli("solve", EXAMPLE, "--mode", "prefetch", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_msa_and_portfolio_report_the_same_bound_before_and_after_info():
    """Before any bound is cached, every solver reports the instant bound; after ``info`` every solver,
    the API and ``info`` itself report the residency bound it stored."""
    # 5 s: the limit counts from the command's start (its imports too: the portfolio's take 3 s at load 10), and
    # each must answer on a loaded machine
    before = [_solve_json("--solver", name, "--time-limit", "5") for name in ("msa", "portfolio")]
    assert [(d["bound"], d["bound_kind"]) for d in before] == [(before[0]["bound"], "per-op")] * 2

    info = run_cli("info", EXAMPLE, "--mode", "prefetch", "--json")
    assert info.returncode == 0, info.stderr
    facts = json.loads(info.stdout)
    assert facts["bound"] < before[0]["bound"] and "residency" in facts["bound_kind"]

    after = [_solve_json("--solver", name, "--time-limit", "5") for name in ("msa", "portfolio")]
    assert {(d["bound"], d["bound_kind"]) for d in after} == {(facts["bound"], "residency")}
    for d in after:
        assert d["gap"] == pytest.approx((d["bound"] - d["objective"]) / d["bound"], rel=1e-9)
    api = mallocgame.solve(_prefetch(), "msa", time_limit=1)
    assert (api.bound, api.report.bound_kind) == (facts["bound"], "residency")
    line = run_cli("solve", EXAMPLE, "--mode", "prefetch", "--solver", "msa").stdout
    assert "(residency)" in line  # the summary names the bound


def test_the_second_command_reads_the_bound_from_the_cache(monkeypatch):
    calls = _counting(monkeypatch)
    first = session.session_for(p := _prefetch(), p.hardware).bound(tighten=10)
    assert calls == [p.name] and first.kind == "residency"
    assert bound_cache.entry_path(p, p.hardware).is_file()
    again = _prefetch()  # a new problem object, a new session: only the disk knows the bound
    second = session.session_for(again, again.hardware).bound(tighten=10)
    assert calls == [p.name], "the expensive bound was computed again"
    assert (second.value, second.kind, dict(second.others)) == (first.value, first.kind, dict(first.others))


def test_the_bound_is_not_computed_again_with_more_time_once_it_finished(monkeypatch):
    calls = _counting(monkeypatch)
    session.session_for(p := _prefetch(), p.hardware).bound(tighten=10)  # the residency MIP is solved in ~1 s
    assert bound_cache.load(p, p.hardware).complete
    session.session_for(q := _prefetch(), q.hardware).bound(tighten=30)
    assert len(calls) == 1


def test_no_cache_neither_reads_nor_writes(tmp_path):
    folder = os.environ[bound_cache.CACHE_ENV]
    info = run_cli("info", EXAMPLE, "--mode", "prefetch", "--no-cache", "--json")
    assert info.returncode == 0, info.stderr
    assert "residency" in json.loads(info.stdout)["bound_kind"]
    assert not os.path.exists(os.path.join(folder, "bounds")) or not os.listdir(os.path.join(folder, "bounds"))
    assert run_cli("info", EXAMPLE, "--mode", "prefetch").returncode == 0  # now cached
    assert len([n for n in os.listdir(os.path.join(folder, "bounds")) if n.endswith(".json")]) == 1
    assert _solve_json("--solver", "msa")["bound_kind"] == "residency"
    assert _solve_json("--solver", "msa", "--no-cache")["bound_kind"] == "per-op"


@pytest.mark.parametrize("text", ["", "{not json", "[]", '{"format": "mallocgame.bound/1", "mode": "prefetch"}',
                                  '{"format": "mallocgame.bound/1", "mode": "prefetch", "value": "0.1", "kind": "x",'
                                  ' "others": {}, "full_seconds": 1}',
                                  '{"format": "mallocgame.bound/1", "mode": "prefetch", "value": 1e-9, "kind": "x",'
                                  ' "others": {"x": "nan"}, "full_seconds": 1}',
                                  '{"format": "mallocgame.bound/1", "mode": "map", "value": 1e-9, "kind": "x",'
                                  ' "others": {}, "full_seconds": 99}'])
def test_a_corrupt_entry_is_ignored_and_rebuilt(monkeypatch, text):
    p = _prefetch()
    path = bound_cache.entry_path(p, p.hardware)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert bound_cache.load(p, p.hardware) is None
    calls = _counting(monkeypatch)
    b = session.session_for(p, p.hardware).bound(tighten=10)
    assert calls and b.kind == "residency" and b.value > 1e-6
    entry = bound_cache.load(p, p.hardware)
    assert entry is not None and entry.bound.value == b.value and entry.full_seconds == 10


def test_solve_does_not_wait_for_the_expensive_bound(monkeypatch, tmp_path):
    """Neither the command's solve path nor the API computes the residency bound: the report carries
    the instant bound, and nothing runs beside the solver."""
    from mallocgame.bounds.prefetch_bound import RESIDENCY_SECONDS  # noqa: F401  (the bound's module is loaded)
    from mallocgame.engine.solving import solve_beside_bound  # the command's solve path and the API's

    calls = _counting(monkeypatch)
    started: list = []
    monkeypatch.setattr("mallocgame.bounds.prefetch_bound.start_residency", lambda *a, **k: started.append(a))
    p = _prefetch()
    report = solve_beside_bound("msa", p, p.hardware, time_limit=2, seed=0, hint=None, warm_start=None, options={})
    api = mallocgame.solve(_prefetch(), "msa", time_limit=2)
    assert calls == [] and started == []
    assert report.bound_kind == api.report.bound_kind == "per-op" and report.bound == api.bound


def test_the_key_is_the_content():
    p = _prefetch()
    key = bound_cache.problem_key(p, p.hardware)
    assert bound_cache.problem_key(p.replace(name="other", source="elsewhere.json"), p.hardware) == key
    assert bound_cache.problem_key(p.replace(capacity=p.capacity // 2), p.hardware) != key
    assert bound_cache.problem_key(p.replace(mode="map"), p.hardware) != key
    assert bound_cache.problem_key(_prefetch(), p.hardware.__class__(**{**vars(p.hardware), "copy_bw": 1e9})) != key


def test_the_key_changes_with_the_bound_code(monkeypatch):
    p = _prefetch()
    key = bound_cache.problem_key(p, p.hardware)
    monkeypatch.setattr(bound_cache, "_CODE_VERSION", ["another version"])
    assert bound_cache.problem_key(_prefetch(), p.hardware) != key


def test_an_entry_only_gets_tighter():
    p = _prefetch()
    bound_cache.store(p, p.hardware, Bound(2.0, "per-op"))
    bound_cache.store(p, p.hardware, Bound(1.0, "residency"), full_seconds=5)
    entry = bound_cache.store(p, p.hardware, Bound(3.0, "per-op"))
    assert (entry.bound.value, entry.bound.kind, entry.full_seconds) == (1.0, "residency", 5)
    assert dict(entry.bound.others) == {"per-op": 2.0, "residency": 1.0}
    pack = p.replace(mode="pack")  # a lower bound: the higher one is tighter
    bound_cache.store(pack, p.hardware, Bound(10.0, "max-live"))
    assert bound_cache.store(pack, p.hardware, Bound(12.0, "window")).bound.kind == "window"
    assert bound_cache.store(pack, p.hardware, Bound(11.0, "max-live")).bound.value == 12.0


def test_a_cached_window_bound_is_what_pack_solves_report():
    """A critical-window bound above max live in the cache (``info --bound-time`` stores the ones it finds)
    is what a later pack solve reports, and its gap is measured from it."""
    from mallocgame.inputs.load import prepare, read_problem

    path = "example:pack40"
    problem, spec = prepare(read_problem(path), mode="pack")
    live = float(problem.arrays.size.sum())  # a stand-in value above max live
    bound_cache.store(problem, spec, Bound(live, "window"))
    r = run_cli("solve", path, "--mode", "pack", "--solver", "best-fit", "--json")
    doc = json.loads(r.stdout)
    assert (doc["bound"], doc["bound_kind"]) == (live, "window")


def test_compare_reports_the_bound_info_stored(monkeypatch):
    info = run_cli("info", EXAMPLE, "--mode", "prefetch", "--json")
    assert info.returncode == 0, info.stderr
    stored = json.loads(info.stdout)["bound"]
    calls = _counting(monkeypatch)
    rows = mallocgame.compare([EXAMPLE], ["msa"], mode="prefetch", time_limit=1)
    assert calls == [] and [(r["solver"], r["bound"]) for r in rows] == [("msa", pytest.approx(stored, rel=1e-12))]


def _store_many(folder: str, value: float, rounds: int) -> None:
    os.environ[bound_cache.CACHE_ENV] = folder
    p = _prefetch()
    for i in range(rounds):
        bound_cache.store(p, p.hardware, Bound(value + i, f"kind{value:g}", 0.0))


def test_two_commands_storing_at_once_keep_the_tightest():
    """Each store is a read-merge-write under the folder's lock: two processes merging bounds of one problem at
    once never lose the tighter one (without the lock, a write based on an older read would)."""
    import multiprocessing

    folder = os.environ[bound_cache.CACHE_ENV]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_store_many, args=(folder, value, 60)) for value in (1.0, 1000.0)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    p = _prefetch()
    entry = bound_cache.load(p, p.hardware)
    assert entry.bound.value == 1.0  # the tightest (lowest) upper bound of the 120 stored
    assert dict(entry.bound.others) == {"kind1": 1.0, "kind1000": 1000.0}


def test_a_full_cache_loses_its_least_recently_used(monkeypatch):
    monkeypatch.setattr(bound_cache, "MAX_ENTRIES", 4)
    problems = [_prefetch().replace(capacity=c) for c in (1000, 2000, 3000, 4000)]
    for i, p in enumerate(problems):
        bound_cache.store(p, p.hardware, Bound(1.0, "x", 0.0))
        os.utime(bound_cache.entry_path(p, p.hardware), ns=(i * 10**9, i * 10**9))  # stored one second apart
    assert bound_cache.load(problems[0], problems[0].hardware) is not None  # read: the most recently used now
    fifth = _prefetch().replace(capacity=5000)
    bound_cache.store(fifth, fifth.hardware, Bound(1.0, "x", 0.0))
    kept = [bound_cache.load(p, p.hardware) is not None for p in [*problems, fifth]]
    # 5 entries > 4: pruned to int(4 * 0.9) = 3, the two least recently used (stored at 1 s and 2 s) go
    assert kept == [True, False, False, True, True]
