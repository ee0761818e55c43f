"""The conformance suite (:mod:`mallocgame.engine.conformance`) over every registered solver, plugins included.

Parametrized over :func:`mallocgame.engine.registry.solver_entries`, so a solver joins simply by
registering under the ``mallocgame.solvers`` entry-point group. Each case runs one check
through :func:`mallocgame.engine.conformance.check_solver`, the path ``mallocgame check-solver``
takes, so together they show that ``check-solver`` passes for every built-in solver.
The real-benchmark cases skip when ``../shared/benchmarks`` is missing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from mallocgame.engine import conformance
from mallocgame.engine.registry import solver_entries
from mallocgame.formats.io import load_problem
from tests.conftest import BENCHMARKS, run_cli

SOLVERS = sorted(solver_entries())
TIME_LIMIT = 1.0


@pytest.mark.parametrize("check", list(conformance.CHECKS))
@pytest.mark.parametrize("name", SOLVERS)
def test_check(name, check):
    [result] = conformance.check_solver(name, time_limit=TIME_LIMIT, checks=[check])
    assert result.name == check
    assert result.passed, f"{name}: {check}: {result.message}"


def real_problems():
    iree = BENCHMARKS / "idealloc-iree" / "iree_mobilenet.csv"
    if iree.exists():
        yield load_problem(str(iree)).replace(capacity=4_000_000, mode="map"), conformance.UNIT
    small = BENCHMARKS / "minimalloc" / "input.12.csv"
    if small.exists():
        yield load_problem(str(small)).replace(mode="pack", capacity=None), conformance.UNIT


@pytest.mark.parametrize("name", SOLVERS)
def test_valid_answers_on_real_benchmarks(name):
    subject = conformance.subject_of(name, time_limit=3.0)
    problems = [(p, hw) for p, hw in real_problems() if subject.supports(p.mode)]
    if not problems:
        pytest.skip(f"no real benchmark of a mode {name} supports under {BENCHMARKS}")
    for problem, hw in problems:
        conformance.check_problem(subject, problem, hw)


def test_check_solver_cli_greedy_xla(tmp_path):
    # Run from an empty directory: the installed package alone, no source tree on the path.
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-m", "mallocgame.cli.main", "check-solver", "greedy-xla"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [line.split()[1] for line in lines[:-1]] == list(conformance.CHECKS)
    assert all(re.fullmatch(r"ok \S+ \([0-9.]+(ns|µs|ms|s)\)", line) for line in lines[:-1])
    assert lines[-1].startswith(f"greedy-xla: all {len(conformance.CHECKS)} checks passed in ")
    assert r.stderr == ""


def test_check_solver_cli_json_and_options():
    r = run_cli("check-solver", "best-fit", "--json", "--check", "protocol", "--check", "valid-answers")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["solver"] == "best-fit" and doc["passed"] is True
    assert [c["name"] for c in doc["checks"]] == ["protocol", "valid-answers"]
    assert all(c["passed"] and c["seconds"] >= 0 for c in doc["checks"])
    for args, needle in [(("nope",), "unknown solver 'nope'"), (("best-fit", "--check", "nope"), "unknown check 'nope'"),
                         (("best-fit", "--time-limit", "0"), "--time-limit"), ((), "missing argument NAME")]:
        r = run_cli("check-solver", *args)
        assert r.returncode == 2 and r.stdout == "", args
        assert r.stderr.count("\n") == 1 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_conformance_needs_no_tests_or_pytest():
    code = ("import sys, mallocgame.engine.conformance, mallocgame.cli.check_solver; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tests', 'pytest', 'solvers', 'search', 'hybrid')); "
            "print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def _jumping(clock, step: float = 100.0):
    """``clock``, 100 s further on at every reading than the reading before (a wall clock that stalls)."""
    jumps = iter(range(1, 10**9))
    return lambda: clock() + step * next(jumps)


def test_reference_is_the_held_baselines_whatever_the_load(monkeypatch):
    # The never-below reference is the baselines a search of that limit holds (mallocgame.engine.session.held_names:
    # the problem's size and the limit, no clock), so a busy machine does not change what a solver is held to
    # (a wall deadline in the searches against CPU seconds in the check made short-limits fail under load).
    base = conformance._layered(150, 2, 0.25)
    problem = base.replace(name="reference-probe", mode="prefetch")
    quiet = conformance._reference(problem, conformance.HW, 0.2)
    with conformance._CpuLoad(3.0):
        busy = conformance._reference(problem, conformance.HW, 0.2)
    assert quiet[0] == "msa" and busy == quiet
    # a stall of the wall clock (100 s on every reading the check takes) changes nothing
    stalled = SimpleNamespace(thread_time=_jumping(time.thread_time), monotonic=_jumping(time.monotonic),
                              perf_counter=_jumping(time.perf_counter), time=_jumping(time.time))
    monkeypatch.setattr(conformance, "time", stalled)
    assert conformance._reference(problem, conformance.HW, 0.2) == quiet
    monkeypatch.undo()
    # no baseline fits half of 10 ms by its estimate: all-slow is what is left to hold to
    assert conformance._reference(problem, conformance.HW, 0.01)[0] == "all-slow"
