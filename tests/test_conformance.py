"""One conformance suite that every registered solver, plugins included, must pass.

Parametrized over :func:`mallocgame.registry.solver_entries`, so a solver joins simply by
registering under the ``mallocgame.solvers`` entry-point group. Each check is a plain
function so the plugin test can run the same checks on a plugin it installs.
"""

from __future__ import annotations

import time

import pytest

from hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, packed_instance, random_intervals
from mallocgame.io import load_problem
from mallocgame.model import Solution, Status
from mallocgame.registry import load_solver, solver_entries
from mallocgame.runner import run_solver
from tests.conftest import BENCHMARKS

SOLVERS = sorted(solver_entries())
HW = PRESETS["tpuv4i"]
UNIT = PRESETS["unit"]


def modes_of(name: str) -> frozenset[str]:
    return getattr(load_solver(name), "modes", frozenset({"map", "pack"}))


def map_problems():
    yield layered_network(60, seed=11), HW
    yield random_intervals(40, seed=3, with_benefit=True).replace(capacity=150), UNIT
    iree = BENCHMARKS / "idealloc-iree" / "iree_mobilenet.csv"
    if iree.exists():
        p = load_problem(str(iree))
        yield p.replace(capacity=4_000_000, mode="map"), UNIT


def pack_problems():
    p, _ = packed_instance(25, seed=2, capacity=64, horizon=20)
    yield p.replace(capacity=2 * 64), UNIT  # loose: every packer must fit it
    yield p.replace(capacity=None), UNIT  # no capacity: minimise the peak
    small = BENCHMARKS / "minimalloc" / "input.12.csv"
    if small.exists():
        yield load_problem(str(small)).replace(mode="pack", capacity=None), UNIT


def check_valid_answers(name: str, limit: float = 3.0) -> None:
    modes = modes_of(name)
    problems = ([*map_problems()] if "map" in modes else []) + ([*pack_problems()] if "pack" in modes else [])
    assert problems, f"{name} supports no mode"
    for problem, hw in problems:
        report = run_solver(name, problem, hw, time_limit=limit, seed=0)
        assert report.valid, f"{name} on {problem.name}: {report.violation}"
        assert report.placed == problem.n or problem.mode == "map"
        if problem.capacity is not None:
            assert report.peak <= problem.capacity
        if problem.mode == "map":
            assert report.objective >= -1e-12


def check_deterministic(name: str) -> None:
    mode = "map" if "map" in modes_of(name) else "pack"
    problem = layered_network(30, seed=5) if mode == "map" else packed_instance(15, seed=4)[0].replace(capacity=128)
    hw = HW if mode == "map" else UNIT
    # Small enough that no solver should need its whole limit; anytime solvers that do must
    # still be reproducible (e.g. a deterministic work budget rather than wall-clock cut-offs).
    a = run_solver(name, problem, hw, time_limit=8, seed=7)
    b = run_solver(name, problem, hw, time_limit=8, seed=7)
    assert a.valid and a.offsets == b.offsets


def check_time_limit(name: str, limit: float = 2.0) -> None:
    mode = "map" if "map" in modes_of(name) else "pack"
    problem = layered_network(600, seed=9) if mode == "map" else random_intervals(400, seed=9).replace(mode="pack")
    hw = HW if mode == "map" else UNIT
    t0 = time.monotonic()
    report = run_solver(name, problem, hw, time_limit=limit, seed=0)
    elapsed = time.monotonic() - t0
    # Generous slack for model building and a busy CI machine; a solver that ignores the limit fails.
    assert elapsed <= 2 * limit + 8, f"{name} took {elapsed:.1f}s with a {limit}s limit"
    assert report.valid, f"{name}: {report.violation}"


def check_hint_accepted(name: str) -> None:
    mode = "map" if "map" in modes_of(name) else "pack"
    if mode == "map":
        problem, hw = layered_network(50, seed=2), HW
        base = run_solver("greedy-xla", problem, hw, time_limit=5, seed=0)
    else:
        problem, hw = packed_instance(20, seed=6)[0].replace(capacity=None), UNIT
        base = run_solver("best-fit", problem, hw, time_limit=5, seed=0)
    hint = Solution(offsets=base.offsets, status=Status.FEASIBLE, mode=mode, solver="hint")
    report = run_solver(name, problem, hw, time_limit=3, seed=0, hint=hint)
    assert report.valid


@pytest.mark.parametrize("name", SOLVERS)
def test_valid_answers(name):
    check_valid_answers(name)


@pytest.mark.parametrize("name", SOLVERS)
def test_same_seed_same_answer(name):
    check_deterministic(name)


@pytest.mark.parametrize("name", SOLVERS)
def test_time_limit_honoured(name):
    check_time_limit(name)


@pytest.mark.parametrize("name", SOLVERS)
def test_hint_accepted(name):
    check_hint_accepted(name)


@pytest.mark.parametrize("name", SOLVERS)
def test_description_is_listed(name):
    from mallocgame.registry import describe

    text = describe(solver_entries()[name])
    assert text and not text.startswith("(")
