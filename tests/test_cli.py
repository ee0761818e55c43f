"""The command line as users call it: contract names, exit codes, one-line errors, no half-written files."""

from __future__ import annotations

import json

import pytest

from mallocgame.formats.io import problem_csv_text
from mallocgame.inputs.generate import packed_instance, random_intervals
from tests.conftest import BENCHMARKS, DATA, needs_benchmarks, run_cli

EXAMPLE = str(DATA / "layered150.json")


def test_solvers_lists_builtins_without_importing_them():
    r = run_cli("solvers")
    assert r.returncode == 0
    assert "greedy-xla" in r.stdout and "best-fit" in r.stdout
    r = run_cli("solvers", env={"PYTHONPROFILEIMPORTTIME": "1"})
    imported = r.stderr
    assert "mallocgame.solvers.greedy_xla" not in imported and " torch" not in imported and "ortools" not in imported


def test_solve_writes_solution_and_report(tmp_path):
    out, rep = tmp_path / "sol.csv", tmp_path / "rep.json"
    r = run_cli("solve", EXAMPLE, "--solver", "greedy-xla", "-o", str(out), "--report", str(rep), "--seed", "3")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("greedy-xla: FEASIBLE") and "placed=" in line and "wall=" in line
    report = json.loads(rep.read_text())
    for key in ("solver", "mode", "status", "objective", "bound", "gap", "placed", "total", "peak", "seconds",
                "estimated_time"):
        assert key in report
    assert report["mode"] == "map" and report["objective"] <= report["bound"] * (1 + 1e-9)
    v = run_cli("validate", EXAMPLE, str(out))
    assert v.returncode == 0 and v.stdout.startswith("ok")


@pytest.mark.parametrize("mode,solver,fraction", [("map", "greedy-xla", "0.5"), ("pack", "best-fit", "1.5"),
                                                   ("prefetch", "msa", "0.5")])
def test_solve_bound_is_the_runners(tmp_path, mode, solver, fraction):
    """solve's bound (built in the parent before the solver's fork): same bound and gap as in one process."""
    from mallocgame.engine.solving import solve_with_warm_start
    from mallocgame.inputs.load import prepare, read_problem

    rep = tmp_path / "rep.json"
    r = run_cli("solve", EXAMPLE, "--solver", solver, "--mode", mode, "--report", str(rep), "--capacity-fraction", fraction)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(rep.read_text())
    problem, spec = prepare(read_problem(EXAMPLE), mode=mode, capacity_fraction=float(fraction))
    alone = solve_with_warm_start(solver, problem, spec, time_limit=10.0, seed=0)
    assert alone.gap is not None
    assert report["bound"] == pytest.approx(alone.bound, rel=1e-12) and report["bound_kind"] == alone.bound_kind
    assert report["gap"] == pytest.approx(alone.gap, rel=1e-9, abs=1e-12)
    assert report["objective"] == pytest.approx(alone.objective, rel=1e-12)


def test_validate_reports_first_violation(tmp_path):
    p, offsets = packed_instance(12, seed=1, capacity=32, horizon=10)
    prob = tmp_path / "p.32.csv"
    prob.write_text(problem_csv_text(p))
    sol = tmp_path / "s.csv"
    bad = [0] * len(offsets)
    sol.write_text(problem_csv_text(p, bad))
    r = run_cli("validate", str(prob), str(sol))
    assert r.returncode == 1 and "overlap" in r.stdout
    sol.write_text(problem_csv_text(p, offsets))
    assert run_cli("validate", str(prob), str(sol)).returncode == 0


def test_info_prints_the_facts():
    r = run_cli("info", EXAMPLE)
    assert r.returncode == 0
    for key in ("buffers: 150", "ops: ", "horizon:", "components:", "max live bytes:", "bound (no-fragmentation"):
        assert key in r.stdout


def test_info_shows_the_components_and_the_largest_clique_of_the_interference_graph():
    import json

    from mallocgame.inputs.load import load_problem
    from mallocgame.problem.intervals import components, max_live

    p = load_problem(EXAMPLE)
    r = run_cli("info", EXAMPLE, "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    parts = components(p)
    assert f["components"] == len(parts) and f["largest_component_buffers"] == max(map(len, parts))
    assert f["largest_clique_bytes"] == f["max_live_bytes"] == max_live(p)
    a = p.arrays
    times = sorted(set(a.start.tolist()))
    assert f["largest_clique_buffers"] == len(max(([i for i in range(p.n) if a.start[i] <= t < a.end[i]] for t in times),
                                                 key=lambda live: a.size[live].sum()))
    text = run_cli("info", EXAMPLE).stdout
    assert f"components: {len(parts)} (largest: {max(map(len, parts))} buffers)" in text
    assert f"largest clique (most bytes live together): {f['largest_clique_buffers']} buffers, " in text


def test_info_describes_a_pack_problem_with_a_buffer_above_the_capacity():
    """Issue 19: a program with one buffer above the (default) capacity is described, not refused;
    solve still refuses it (pack mode must place every buffer)."""
    r = run_cli("info", EXAMPLE, "--mode", "pack", "--capacity", "4MiB")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("does not fit:"))
    assert "larger than the capacity" in line and "largest 'w" in line
    r = run_cli("info", EXAMPLE, "--mode", "pack", "--capacity", "4MiB", "--json")
    facts = json.loads(r.stdout)
    assert r.returncode == 0 and facts["buffers_over_capacity"] > 0
    assert facts["largest_over_capacity"]["size"] > 4 * 2**20
    r = run_cli("info", EXAMPLE, "--mode", "pack", "--capacity", "1GiB", "--json")
    assert json.loads(r.stdout)["buffers_over_capacity"] == 0 and "does not fit" not in r.stdout
    r = run_cli("solve", EXAMPLE, "--mode", "pack", "--capacity", "4MiB", "--solver", "best-fit")
    assert r.returncode == 2 and "exceeds capacity" in r.stderr


def test_pack_mode_over_capacity_is_no_solution(tmp_path):
    p, _ = packed_instance(40, seed=3, capacity=64, horizon=30)
    prob = tmp_path / "tight.64.csv"
    prob.write_text(problem_csv_text(p))
    out = tmp_path / "sol.csv"
    r = run_cli("solve", str(prob), "--solver", "best-fit", "-o", str(out))
    # best fit overflows this tight instance: its own status, the peak above the capacity, never INVALID or UNKNOWN
    assert r.stdout.startswith("best-fit: does not fit: peak 79B > capacity 64B ") and "placed=40/40" in r.stdout
    assert "INVALID" not in r.stdout and "UNKNOWN" not in r.stdout
    assert r.returncode == 1 and not out.exists()
    report = json.loads(run_cli("solve", str(prob), "--solver", "best-fit", "--json").stdout)
    assert report["status"] == "DOES_NOT_FIT" and report["peak"] == 79 and report["capacity"] == 64
    assert report["violation"] == "does not fit: peak 79B > capacity 64B" and report["valid"] is False


def bad_inputs(tmp_path):
    ok = tmp_path / "ok.100.csv"
    ok.write_text(problem_csv_text(random_intervals(8, seed=1)))
    files = {
        "empty": ("empty.csv", ""),
        "nocol": ("nocol.csv", "id,lower,size\na,0,4\n"),
        "nonnum": ("nonnum.csv", "id,lower,upper,size\na,zero,2,4\n"),
        "size": ("size.csv", "id,lower,upper,size\na,0,2,0\n"),
        "upper": ("upper.csv", "id,lower,upper,size\na,3,2,4\n"),
        "dup": ("dup.csv", "id,lower,upper,size\na,0,2,4\na,0,2,4\n"),
        "unknown-buffer": ("ub.json", json.dumps({"format": "mallocgame.workload/1", "buffers": [
            {"id": "x", "size": 4, "start": 0, "end": 1}], "ops": [{"id": "o", "operands": [{"buffer": "y"}]}]})),
        "format": ("fmt.json", json.dumps({"format": "nope", "buffers": []})),
        "big": ("big.16.csv", "id,lower,upper,size\na,0,2,32\n"),
    }
    for key, (name, text) in files.items():
        (tmp_path / name).write_text(text)
    other = tmp_path / "other.csv"
    other.write_text(problem_csv_text(random_intervals(8, seed=2), [None] * 8))
    return {
        **{k: ["solve", str(tmp_path / n), "--solver", "greedy-xla"] for k, (n, _) in files.items()},
        "missing-file": ["solve", str(tmp_path / "nope.csv"), "--solver", "greedy-xla"],
        "capacity-zero": ["solve", str(ok), "--solver", "greedy-xla", "--capacity", "0"],
        "capacity-negative": ["solve", str(ok), "--solver", "greedy-xla", "--capacity", "-5"],
        "unknown-solver": ["solve", str(ok), "--solver", "no-such-solver"],
        "foreign-hint": ["solve", str(ok), "--solver", "greedy-xla", "--mode", "map", "--hint", str(other)],
        "time-limit": ["solve", str(ok), "--solver", "greedy-xla", "--time-limit", "0"],
    }


@pytest.fixture
def bad(tmp_path):
    return tmp_path, bad_inputs(tmp_path)


CASES = ["empty", "nocol", "nonnum", "size", "upper", "dup", "unknown-buffer", "format", "big", "missing-file",
         "capacity-zero", "capacity-negative", "unknown-solver", "foreign-hint", "time-limit"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2(bad, case):
    tmp_path, cases = bad
    out = tmp_path / f"out-{case}.csv"
    r = run_cli(*cases[case], "-o", str(out))
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()


@needs_benchmarks()
def test_minimalloc_pack_default_mode():
    r = run_cli("info", str(BENCHMARKS / "minimalloc" / "input.12.csv"))
    assert "mode: pack" in r.stdout and "capacity: 12" in r.stdout
