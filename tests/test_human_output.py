"""What a person reads: human units (mallocgame.problem.units) in every command's lines while --json and the CSVs
keep exact numbers; different numbers never print alike; OPTIMAL only at gap 0; a pack answer above the
capacity is DOES_NOT_FIT; a decimal capacity unit is said; a solver's one mode is implied; an unknown
name ends with the closest known one."""

from __future__ import annotations

import json
import re

import pytest

from mallocgame.bounds.bounds import Bound
from mallocgame.engine.comparison import Input, Row, table_text
from mallocgame.engine.report import Report, score, with_bound
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import packed_instance
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.problem.model import Solution, Status
from mallocgame.problem.units import distinct, format_bytes, format_percent, format_seconds
from tests.conftest import run_cli

LAYERED = "example:layered150"
PACK = "example:pack40"
HUMAN_TIME = r"[0-9.]+(ns|µs|ms|s)"
HUMAN_BYTES = r"[0-9.]+(B|KiB|MiB|GiB|TiB)"


def _report(objective: float, *, status: str = "FEASIBLE", gap: float | None = None, valid: bool = True) -> Report:
    return Report("s", "map", status, valid, objective, None, None, gap, 1, 1, 0, 0.01, None, None, None)


def test_different_numbers_never_print_alike():
    # compare printed 0.010us for a value and a bound 2.62% apart
    value, bound = 1.0e-8, 1.0262e-8
    shown = distinct(format_seconds, [value, bound])
    assert shown[0] != shown[1] and shown == ["10ns", "10.26ns"]
    assert distinct(format_seconds, [0.000132485, 0.000132486, 0.000132485]) == ["132.485µs", "132.486µs", "132.485µs"]
    assert len(set(distinct(format_bytes, [10**9, 10**9 + 1, 10**9 + 2]))) == 3
    assert format_percent(1e-7) != format_percent(0.0) and format_percent(0.9999999) != format_percent(1.0)


def test_compare_table_prints_a_value_and_its_bound_apart():
    problem, _ = prepare(read_problem(LAYERED))
    inp = Input("tiny", problem, PRESETS["tpuv4i"], bound=Bound(1.0262e-8, "mip"))
    rows = [Row("tiny", "a", _report(1.0e-8, gap=0.0255)), Row("tiny", "b", _report(1.0262e-8, gap=0.0))]
    table = table_text([inp], rows)
    a_line, b_line = (next(line for line in table.splitlines() if line.split()[:2] == ["tiny", name])
                      for name in ("a", "b"))
    assert a_line.split()[3:5] == ["10ns", "10.26ns"] and b_line.split()[3:5] == ["10.26ns", "10.26ns"]
    assert "2.55%" in a_line and "0.010us" not in table


def test_optimal_only_at_gap_zero():
    problem, known = packed_instance(20, seed=2, capacity=64, horizon=20)
    problem = problem.replace(capacity=None, mode="pack")
    claimed = Solution(offsets=tuple(known), status=Status.OPTIMAL, mode="pack", solver="x")
    peak = max(o + b.size for o, b in zip(known, problem.buffers))
    below = score(problem, None, claimed, seconds=0.1, bound=Bound(peak - 1, "max-live"), solver_name="x")
    assert below.valid and below.gap > 0 and below.status == "FEASIBLE" and below.stats["solver_status"] == "OPTIMAL"
    assert " FEASIBLE " in f" {below.summary()} "
    closed = with_bound(below, Bound(peak, "window"))  # a tighter bound closes the gap: the claim stands
    assert closed.gap == 0 and closed.status == "OPTIMAL"
    assert with_bound(closed, Bound(peak - 2, "max-live")).status == "FEASIBLE"
    unclaimed = score(problem, None, claimed.replace(status=Status.FEASIBLE), seconds=0.1, bound=Bound(peak, "max-live"),
                      solver_name="x")
    assert unclaimed.status == "FEASIBLE"  # at gap 0 a solver's FEASIBLE is not promoted


def test_summary_validate_and_info_lines_are_in_human_units(tmp_path):
    sol = tmp_path / "sol.csv"
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "-o", str(sol))
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"greedy-xla: FEASIBLE objective={HUMAN_TIME} bound={HUMAN_TIME} \(per-op\) gap=[0-9.]+% "
                        rf"placed=113/150 peak={HUMAN_BYTES} wall={HUMAN_TIME}\n", r.stdout), r.stdout
    doc = json.loads(run_cli("solve", LAYERED, "--solver", "greedy-xla", "--json").stdout)
    assert isinstance(doc["objective"], float) and doc["peak"] == 10101248  # exact numbers stay in --json
    r = run_cli("validate", LAYERED, str(sol))
    assert r.stdout == ("ok: 113/150 buffers in fast memory, peak 9.633MiB of capacity 9.637MiB, value 132.5µs, "
                        "estimated time 995.9µs\n")
    r = run_cli("info", LAYERED)
    assert "max live bytes: 24.09MiB (25263616 bytes)\n" in r.stdout and "time all slow: 1.128ms\n" in r.stdout
    assert "capacity: 9.637MiB (10105344 bytes)\n" in r.stdout


def test_a_pack_answer_above_the_capacity_does_not_fit(tmp_path):
    r = run_cli("solve", PACK, "--solver", "best-fit")
    assert r.returncode == 1
    assert re.fullmatch(rf"best-fit: does not fit: peak 79B > capacity 64B bound=64B \(max-live\) placed=40/40 "
                        rf"wall={HUMAN_TIME}\n", r.stdout), r.stdout
    out = tmp_path / "r.csv"
    r = run_cli("compare", PACK, "--solvers", "greedy-xla,best-fit", "--time-limit", "2", "--out", str(out))
    assert "UNKNOWN" not in r.stdout and "INVALID" not in r.stdout and "DOES_NOT_FIT!" not in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("pack40 ")]
    assert [row[:4] for row in rows] == [["pack40", s, "DOES_NOT_FIT", "79B"] for s in ("greedy-xla", "best-fit")]
    assert "pack40 / best-fit: does not fit: peak 79B > capacity 64B" in r.stdout
    assert "DOES_NOT_FIT" in out.read_text()
    sol = tmp_path / "s.csv"
    run_cli("solve", PACK, "--solver", "best-fit", "--minimize-peak", "-o", str(sol))
    r = run_cli("validate", PACK, str(sol))
    assert r.returncode == 1 and r.stdout == "invalid: does not fit: peak 79B > capacity 64B\n"


@pytest.mark.parametrize("capacity, note", [
    ("4 GB", "note: capacity '4 GB' = 4,000,000,000 bytes (decimal; 4 GiB is '4GiB')"),
    ("512KB", "note: capacity '512KB' = 512,000 bytes (decimal; 512 KiB is '512KiB')"),
    ("4GiB", None), ("4G", None), ("4096", None),
])
def test_a_decimal_capacity_unit_is_said_on_stderr(capacity, note):
    r = run_cli("info", PACK, "--capacity", capacity, "--json")
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note:")]
    assert notes == ([note] if note else [])
    json.loads(r.stdout)  # --json stays pure JSON


def test_a_solver_with_one_mode_implies_it(tmp_path):
    r = run_cli("solve", LAYERED, "--solver", "msa", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mode"] == "prefetch"
    r = run_cli("solve", LAYERED, "--solver", "pack-search", "--json", "--time-limit", "2")
    assert json.loads(r.stdout)["mode"] == "pack"  # not map, the workload's default
    out = tmp_path / "r.csv"
    r = run_cli("compare", LAYERED, "--solvers", "msa", "--time-limit", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.with_suffix(".json").read_text())["results"][0]["report"]["mode"] == "prefetch"
    r = run_cli("solve", LAYERED, "--solver", "msa", "--mode", "map")  # an explicit mode is still checked
    assert r.returncode == 2 and "does not support map mode" in r.stderr


@pytest.mark.parametrize("args, suggestion", [
    (["solve", LAYERED, "--solver", "gredy-xla"], "greedy-xla"),
    (["compare", LAYERED, "--solvers", "greedy-xla,best-fti"], "best-fit"),
    (["compare", "quik", "--solvers", "greedy-xla"], "quick"),
    (["compare", "quick:encoder-tny-b4", "--solvers", "greedy-xla"], "encoder-tiny-b4"),
    (["suites", "quik"], "quick"),
    (["info", "example:packk40"], "pack40"),
    (["solve", LAYERED, "--solver", "cpsat", "--solver-option", "wokers=2"], "workers"),
    (["solve", LAYERED, "--solver", "greedy-xla", "--tim-limit", "3"], "--time-limit"),
    (["solve", LAYERED, "--solver", "greedy-xla", "--hardware", "tpuv4"], "tpuv4i"),
    (["check-solver", "gredy-xla"], "greedy-xla"),
    (["check-solver", "msa", "--check", "shortlimits"], "short-limits"),
    (["slove", LAYERED], "solve"),
])
def test_an_unknown_name_ends_with_the_closest_one(args, suggestion):
    r = run_cli(*args)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.rstrip("\n").endswith(f"; did you mean {suggestion!r}?"), r.stderr


def test_a_name_close_to_none_gets_no_suggestion():
    r = run_cli("solve", LAYERED, "--solver", "zzzzzz")
    assert r.returncode == 2 and "did you mean" not in r.stderr


def test_a_saving_at_its_bound_but_for_float_rounding_is_at_it():
    bound = 3.710501488174481e-06  # compare's encoder-tiny-b4: cpsat's value and the bound, summed in two orders
    at = Report("cpsat", "map", "OPTIMAL", True, 3.710501488174479e-06, None, None, None, 1, 1, 0, 0.1,
                1e-5, 1.4e-5, 1.4)
    report = with_bound(at, Bound(bound, "mip"))
    assert report.gap == 0.0 and report.status == "OPTIMAL"
    assert "objective=3.711µs bound=3.711µs (mip) gap=0.00%" in report.summary()
    below = with_bound(at, Bound(bound * (1 + 1e-6), "mip"))  # a millionth below the bound is a gap
    assert below.gap > 0 and below.status == "FEASIBLE"
    assert re.search(r"objective=(\S+) bound=(\S+) \(mip\) gap=0\.0001\d*%", below.summary())
    obj, bnd = re.search(r"objective=(\S+) bound=(\S+)", below.summary()).groups()
    assert obj != bnd


def test_the_api_says_does_not_fit_too():
    import mallocgame

    result = mallocgame.solve(mallocgame.load_problem(PACK), "best-fit", time_limit=2)
    assert result.status == "DOES_NOT_FIT" and not result.valid and result.solution is None
    assert result.report.violation == "does not fit: peak 79B > capacity 64B" and result.report.peak == 79
