"""Third-party solvers: a plugin distribution on the path joins the registry and the conformance checks;
a broken one gives a clear error and breaks nothing else."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.conftest import DATA, run_cli

PLUGIN_MODULE = textwrap.dedent('''
    """Left-edge first fit: start order, lowest offset that fits (a third-party example)."""
    import numpy as np
    from mallocgame.model import Solution, Status, offsets_tuple
    from mallocgame.protocol import Solver
    from mallocgame.placement import greedy_place

    class FirstFit(Solver):
        name = "first-fit-plugin"
        modes = frozenset({"map", "pack"})

        def solve(self, problem, hardware, *, time_limit, seed, hint=None):
            a = problem.arrays
            order = np.lexsort((np.arange(problem.n), a.start))
            cap = problem.capacity if problem.mode == "map" else None
            out = greedy_place(problem, order, cap)
            return Solution(offsets=offsets_tuple(out), status=Status.FEASIBLE, mode=problem.mode)
''')


def make_distribution(root, dist: str, entry_points: str, module: str | None = None) -> None:
    pkg = dist.replace("-", "_")
    if module is not None:
        (root / pkg).mkdir()
        (root / pkg / "__init__.py").write_text("")
        (root / pkg / "solver.py").write_text(module)
    info = root / f"{pkg}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[mallocgame.solvers]\n{entry_points}\n")


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    make_distribution(tmp_path, "tiny-plugin", "first-fit-plugin = tiny_plugin.solver:FirstFit", PLUGIN_MODULE)
    make_distribution(tmp_path, "broken-plugin", "broken = broken_plugin.missing:Nothing")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_plugin_is_registered_listed_and_solves(plugin_path):
    env = {"PYTHONPATH": str(plugin_path)}
    listed = run_cli("solvers", env=env)
    assert listed.returncode == 0
    assert "first-fit-plugin" in listed.stdout and "Left-edge first fit" in listed.stdout
    assert "[plugin: tiny-plugin]" in listed.stdout
    assert "broken" in listed.stdout and "greedy-xla" in listed.stdout
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "first-fit-plugin", env=env)
    assert r.returncode == 0 and r.stdout.startswith("first-fit-plugin: FEASIBLE"), r.stderr


def test_broken_plugin_gives_one_clear_line(plugin_path):
    env = {"PYTHONPATH": str(plugin_path)}
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "broken", env=env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "broken-plugin" in r.stderr and "failed to load" in r.stderr
    ok = run_cli("solve", str(DATA / "layered150.json"), "--solver", "greedy-xla", env=env)
    assert ok.returncode == 0


def test_plugin_passes_the_conformance_checks(plugin_path):
    from tests import test_conformance as conformance

    assert "first-fit-plugin" in __import__("mallocgame.registry").registry.solver_entries()
    conformance.check_valid_answers("first-fit-plugin")
    conformance.check_deterministic("first-fit-plugin")
    conformance.check_hint_accepted("first-fit-plugin")
    conformance.check_time_limit("first-fit-plugin")
    assert "tiny_plugin.solver" in sys.modules  # imported only when asked for


CRASHING_MODULE = textwrap.dedent('''
    """A solver that raises inside solve (for the CLI's error handling)."""
    class Crash:
        name = "crash"
        modes = frozenset({"map"})

        def solve(self, problem, hardware, *, time_limit, seed, hint=None):
            raise RuntimeError("boom")
''')


def test_solver_that_raises_is_one_line_exit_1(tmp_path):
    make_distribution(tmp_path, "crash-plugin", "crash = crash_plugin.solver:Crash", CRASHING_MODULE)
    out = tmp_path / "sol.csv"
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "crash", "-o", str(out),
                env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1 and r.stderr.strip() == "error: solver 'crash' failed: RuntimeError: boom"
    assert not out.exists()
    r = run_cli("solve", str(DATA / "pack40.64.csv"), "--solver", "crash", env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 2 and "does not support pack mode" in r.stderr
