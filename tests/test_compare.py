"""`mallocgame compare`: rows for every (input, solver), CSV with input,solver first, JSON beside it,
exit codes, one-line errors for bad input, and failing solvers reported in their rows."""

from __future__ import annotations

import csv
import json
import textwrap

import pytest

from mallocgame.engine.comparison import parse_solver_options
from mallocgame.formats.io import atomic_write_text, problem_csv_text, write_workload_json
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.problem.model import InputError
from tests.conftest import run_cli
from tests.test_plugins import make_distribution

FAILING_MODULE = textwrap.dedent('''
    """Solvers that fail on purpose (compare must report them and go on)."""
    import os
    from mallocgame.engine.protocol import Solver

    class Raises(Solver):
        name = "raises"

        def solve(self, request):
            raise RuntimeError("boom on " + request.problem.name)

    class Sleeps(Solver):
        """Starts a helper process, writes its pid where PID_FILE says, and never returns."""
        name = "sleeps"

        def solve(self, request):
            import subprocess, time
            helper = subprocess.Popen(["sleep", "120"])
            with open(os.environ["PID_FILE"], "w") as fh:
                fh.write(str(helper.pid))
            time.sleep(120)

    class Dies(Solver):
        name = "dies"

        def solve(self, request):
            os._exit(3)
''')

FAILING_FILES = {"failing_plugin/__init__.py": "", "failing_plugin/solver.py": FAILING_MODULE}


@pytest.fixture
def tiny_inputs(tmp_path):
    """Two small map inputs: a workload with ops (JSON) and a CSV with benefits and a capacity."""
    work = tmp_path / "layered.json"
    write_workload_json(work, layered_network(40, seed=2))
    data = json.loads(work.read_text())
    data["capacity"] = layered_network(40, seed=2).capacity
    work.write_text(json.dumps(data))
    table = tmp_path / "intervals.48.csv"
    atomic_write_text(table, problem_csv_text(random_intervals(30, seed=1, max_size=16, with_benefit=True)))
    return [str(work), str(table)]


def read_rows(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_two_inputs_two_solvers_write_csv_and_json(tiny_inputs, tmp_path):
    out = tmp_path / "res" / "results.csv"
    out.parent.mkdir()  # a missing folder is an error (issue 12), not created
    r = run_cli("compare", *tiny_inputs, "--solvers", "greedy-xla,best-fit", "--time-limit", "2",
                "--jobs", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = read_rows(out)
    assert rows[0][:2] == ["input", "solver"]
    assert len(rows) == 1 + 2 * 2
    assert {(row[0], row[1]) for row in rows[1:]} == {(i, s) for i in ("layered", "intervals")
                                                      for s in ("greedy-xla", "best-fit")}
    header = rows[0]
    for row in rows[1:]:
        rec = dict(zip(header, row))
        assert rec["valid"] == "true" and rec["mode"] == "map"
        assert float(rec["value"]) <= float(rec["bound"]) * (1 + 1e-9)
        if rec["solver"] == "greedy-xla":
            assert float(rec["speedup_vs_greedy"]) == 1.0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["format"] == "mallocgame.compare/1" and len(doc["results"]) == 4
    assert {i["input"] for i in doc["inputs"]} == {"layered", "intervals"}
    for res in doc["results"]:
        assert "history" in res["report"] and len(res["offsets"]) == res["report"]["total"]
    # The table names every pair, and the summary compares with greedy-xla.
    assert r.stdout.count("greedy-xla") >= 2 and "vs greedy-xla" in r.stdout
    assert not list(out.parent.glob(".*tmp"))  # atomic writes leave no temp files


def test_builtin_suite_entry_and_capacity_fraction(tmp_path):
    out = tmp_path / "r.csv"
    r = run_cli("compare", "quick:encoder-tiny-b4", "--solvers", "greedy-xla", "--time-limit", "1",
                "--capacity-fraction", "0.25", "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    (inp,) = doc["inputs"]
    assert inp["capacity_fraction"] == 0.25 and inp["capacity"] <= 0.25 * inp["max_live"]


@pytest.mark.parametrize("args, message", [
    (["nosuchsuite", "--solvers", "greedy-xla"], "not a suite"),
    (["missing.csv", "--solvers", "greedy-xla"], "missing.csv: file not found"),
    (["quick", "--solvers", "greedy-xla,nosolver"], "unknown solver 'nosolver'"),
    (["quick:nope", "--solvers", "greedy-xla"], "no entry 'nope'"),
    (["quick", "--solvers", "greedy-xla", "--time-limit", "0"], "--time-limit"),
    (["quick", "--solvers", "greedy-xla", "--solver-option", "novalue"], "KEY=VALUE"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "r.csv"
    r = run_cli("compare", *args, "--out", str(out))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_failing_solvers_get_error_rows_and_the_rest_goes_on(tiny_inputs, tmp_path):
    make_distribution(tmp_path, "failing-plugin", "raises = failing_plugin.solver:Raises\n"
                                                  "dies = failing_plugin.solver:Dies\n"
                                                  "unloadable = failing_plugin.missing:Nothing", FAILING_FILES)
    out = tmp_path / "r.csv"
    r = run_cli("compare", *tiny_inputs, "--solvers", "raises,greedy-xla,dies,unloadable", "--time-limit", "2",
                "--jobs", "2", "--out", str(out), env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    rows = read_rows(out)
    header = rows[0]
    recs = {(row[0], row[1]): dict(zip(header, row)) for row in rows[1:]}
    assert len(recs) == 2 * 4
    for inp in ("layered", "intervals"):
        assert recs[(inp, "greedy-xla")]["valid"] == "true"
        assert recs[(inp, "raises")]["status"] == "ERROR"
        assert recs[(inp, "raises")]["error"].startswith("RuntimeError: boom on")
        assert recs[(inp, "dies")]["status"] == "ERROR" and "died" in recs[(inp, "dies")]["error"]
        assert recs[(inp, "unloadable")]["status"] == "ERROR" and "failed to load" in recs[(inp, "unloadable")]["error"]
    assert "boom on" in r.stdout  # the reasons are printed under the table


def test_no_valid_answer_anywhere_exits_1(tiny_inputs, tmp_path):
    make_distribution(tmp_path, "failing-plugin", "raises = failing_plugin.solver:Raises", FAILING_FILES)
    r = run_cli("compare", tiny_inputs[0], "--solvers", "raises", "--time-limit", "1",
                env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1 and "ERROR" in r.stdout


def test_solver_options_parse():
    opts = parse_solver_options(["simulations=64", "mcts:workers=1", "mcts:temperature=0.5", "x:flag=true"],
                                ["mcts", "x"])
    assert opts == {"mcts": {"simulations": 64, "workers": 1, "temperature": 0.5},
                    "x": {"simulations": 64, "flag": True}}
    with pytest.raises(InputError, match="not in --solvers"):
        parse_solver_options(["other:k=1"], ["mcts"])


def test_overrunning_solver_is_killed_with_its_helpers(tmp_path, monkeypatch):
    import os
    import time

    from mallocgame.engine.comparison import Input, run_matrix
    from mallocgame.hardware.spec import PRESETS

    make_distribution(tmp_path, "failing-plugin", "sleeps = failing_plugin.solver:Sleeps", FAILING_FILES)
    monkeypatch.syspath_prepend(str(tmp_path))
    pid_file = tmp_path / "helper.pid"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    inp = Input("tiny", layered_network(20, seed=1), PRESETS["tpuv4i"])
    (row,) = run_matrix([inp], ["sleeps"], time_limit=0.5, seed=0, jobs=1, options={}, load_errors={},
                        progress=False, hard_limit=2.0)
    # stopped at its limit + LIMIT_GRACE (1.5 s), before the hard limit; it sent no answer
    assert row.status == "ERROR" and row.error.startswith("stopped at the limit: still running at 0.5 s + 1 s grace")
    helper = int(pid_file.read_text())
    for _ in range(50):  # the helper was in the run's process group: it is gone too
        try:
            os.kill(helper, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the solver's helper process survived the kill")
