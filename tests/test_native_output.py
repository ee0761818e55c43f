"""Issue 19 item 4: ``--json`` and ``-o -`` are exactly the document on stdout even when a solver
(or a native library under it, as HiGHS does with ``HighsMipSolverData::...`` lines) writes to
file descriptor 1: a plugin solver that prints from C (libc ``printf``), with ``os.write(1, ...)``
and with ``print`` must leave stdout parseable; what it printed goes to stderr."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.conftest import DATA, run_cli
from tests.test_plugins import make_distribution

NOISY = '''
import ctypes
import os

from mallocgame.problem.model import Solution, Status
from mallocgame.engine.protocol import Solver


class Noisy(Solver):
    name = "noisy"
    modes = frozenset({"map", "pack"})

    def solve(self, request):
        problem = request.problem
        libc = ctypes.CDLL(None)
        libc.printf(b"HighsMipSolverData::noise from C printf\\n")
        libc.fflush(None)
        os.write(1, b"noise from os.write(1)\\n")
        print("noise from print", flush=True)
        return Solution(offsets=(None,) * problem.n, status=Status.FEASIBLE, mode=problem.mode, solver=self.name)
'''


@pytest.fixture
def noisy_path(tmp_path):
    make_distribution(tmp_path, "noisy-plugin", "noisy = noisy_solver:Noisy", {"noisy_solver.py": NOISY})
    return tmp_path


def test_solve_json_is_json_when_a_solver_prints_from_c(noisy_path):
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "noisy", "--time-limit", "2", "--json",
                env={"PYTHONPATH": str(noisy_path)})
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # nothing but the document
    assert report["solver"] == "noisy"
    for noise in ("noise from C printf", "noise from os.write(1)", "noise from print"):
        assert noise not in r.stdout and noise in r.stderr, (r.stdout[:300], r.stderr)


def test_solve_to_stdout_is_the_csv_alone(noisy_path):
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "noisy", "--time-limit", "2", "-o", "-",
                env={"PYTHONPATH": str(noisy_path)})
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0][:2] == ["id", "lower"] and len(rows) == 151, r.stdout[:300]
    assert "noise" not in r.stdout


def test_compare_to_stdout_is_the_table_alone(noisy_path):
    r = run_cli("compare", str(DATA / "layered150.json"), "--solvers", "noisy,greedy-xla", "--time-limit", "2",
                "-o", "-", env={"PYTHONPATH": str(noisy_path)})
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sorted(row["solver"] for row in rows) == ["greedy-xla", "noisy"], r.stdout[:300]
    assert "noise" not in r.stdout and "noise from C printf" in r.stderr


def test_the_bound_in_the_main_process_keeps_stdout_clean(capfd):
    """What ``solve`` and ``info`` wrap the bound in: native writes to fd 1 land on stderr."""
    import ctypes
    import os

    from mallocgame.runtime.forking import stdout_to_stderr

    with stdout_to_stderr():
        ctypes.CDLL(None).printf(b"from C inside\n")
        ctypes.CDLL(None).fflush(None)
        os.write(1, b"fd 1 inside\n")
    os.write(1, b"fd 1 after\n")
    out, err = capfd.readouterr()
    assert out == "fd 1 after\n" and "from C inside" in err and "fd 1 inside" in err
