"""Third-party solvers: the docs' plugin (docs/guide/plugins.md), installed as a distribution on the path, joins the registry
and passes ``mallocgame check-solver``; a broken one fails it or gives a clear error and breaks nothing else."""

from __future__ import annotations

import re
import sys
import textwrap
import tomllib

import pytest

from mallocgame.engine import conformance
from tests.conftest import DATA, ROOT, run_cli

PLUGIN_PAGE = ROOT / "docs" / "guide" / "plugins.md"


def page_plugin() -> dict[str, str]:
    """The files of the docs' plugin: each code block after a ``<!-- plugin-file: PATH -->`` marker."""
    text = PLUGIN_PAGE.read_text(encoding="utf-8")
    files = dict(re.findall(r"<!-- plugin-file: (\S+) -->\n```[a-z]*\n(.*?)\n```", text, flags=re.S))
    assert set(files) == {"pyproject.toml", "my_solver.py"}, f"plugin page markers drifted: {sorted(files)}"
    return {path: body + "\n" for path, body in files.items()}


def make_distribution(root, dist: str, entry_points: str, modules: dict[str, str] | None = None,
                      version: str = "0.1") -> None:
    """A distribution as pip would leave it: the modules plus a ``.dist-info`` with the entry points."""
    for path, body in (modules or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[mallocgame.solvers]\n{entry_points}\n")


def install_page_plugin(root) -> str:
    """Install the docs' plugin under ``root`` exactly as its pyproject.toml declares it; its solver name."""
    files = page_plugin()
    project = tomllib.loads(files["pyproject.toml"])["project"]
    solvers = project["entry-points"]["mallocgame.solvers"]
    assert len(solvers) == 1
    modules = {path: body for path, body in files.items() if path.endswith(".py")}
    make_distribution(root, project["name"], "\n".join(f"{k} = {v}" for k, v in solvers.items()), modules,
                      project["version"])
    return next(iter(solvers))


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    install_page_plugin(tmp_path)
    make_distribution(tmp_path, "broken-plugin", "broken = broken_plugin.missing:Nothing")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_docs_plugin_passes_check_solver(tmp_path):
    name = install_page_plugin(tmp_path)
    assert name == "my-solver"
    readme = PLUGIN_PAGE.read_text(encoding="utf-8")
    assert f"mallocgame check-solver {name}" in readme
    r = run_cli("check-solver", name, env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [line.split()[1] for line in lines[:-1]] == list(conformance.CHECKS)
    assert all(line.startswith("ok ") for line in lines[:-1])
    assert lines[-1].startswith(f"{name}: all {len(conformance.CHECKS)} checks passed")
    # The plugin page shows this output: the same checks, in the same order.
    shown = re.findall(r"^ok (\S+) \(", readme, flags=re.M)
    assert shown == list(conformance.CHECKS)


def test_plugin_is_registered_listed_and_solves(plugin_path):
    env = {"PYTHONPATH": str(plugin_path)}
    listed = run_cli("solvers", env=env)
    assert listed.returncode == 0
    assert "my-solver" in listed.stdout and "First fit in start order" in listed.stdout
    assert "[plugin: my-solver]" in listed.stdout
    assert "broken" in listed.stdout and "greedy-xla" in listed.stdout
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "my-solver", env=env)
    assert r.returncode == 0 and r.stdout.startswith("my-solver: FEASIBLE"), r.stderr


def test_plugin_runs_in_process_and_is_imported_only_when_asked(plugin_path):
    from mallocgame.engine.registry import solver_entries

    assert "my-solver" in solver_entries()
    assert "my_solver" not in sys.modules
    results = conformance.check_solver("my-solver", checks=["protocol", "valid-answers"])
    assert [r.passed for r in results] == [True, True], results
    assert "my_solver" in sys.modules


def test_broken_plugin_gives_one_clear_line(plugin_path):
    env = {"PYTHONPATH": str(plugin_path)}
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "broken", env=env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "broken-plugin" in r.stderr and "failed to load" in r.stderr
    r = run_cli("check-solver", "broken", env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "broken-plugin" in r.stderr and "failed to load" in r.stderr
    ok = run_cli("solve", str(DATA / "layered150.json"), "--solver", "greedy-xla", env=env)
    assert ok.returncode == 0


OVERLAPPING_MODULE = textwrap.dedent('''
    """Every buffer at offset 0: overlapping answers (a deliberately wrong plugin)."""
    from mallocgame.problem.model import Solution, Status
    from mallocgame.engine.protocol import Solver


    class Overlapping(Solver):
        name = "overlapping"
        modes = frozenset({"map", "pack"})

        def solve(self, request):
            problem = request.problem
            return Solution(offsets=(0,) * problem.n, status=Status.FEASIBLE, mode=problem.mode)
''')


def test_check_solver_fails_a_wrong_plugin(tmp_path):
    make_distribution(tmp_path, "overlapping-plugin", "overlapping = overlapping_plugin:Overlapping",
                      {"overlapping_plugin.py": OVERLAPPING_MODULE})
    r = run_cli("check-solver", "overlapping", env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ok protocol (" in r.stdout
    failed = re.search(r"^FAIL valid-answers: (.*)$", r.stdout, flags=re.M)
    assert failed and "overlap" in failed.group(1), r.stdout
    assert re.search(rf"^overlapping: \d+ of {len(conformance.CHECKS)} checks failed \(valid-answers, ", r.stdout,
                     flags=re.M), r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_check_solver_unknown_solver_is_exit_2():
    r = run_cli("check-solver", "no-such-solver")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("error: unknown solver 'no-such-solver' (registered: ")
    assert r.stderr.count("\n") == 1 and "greedy-xla" in r.stderr


CRASHING_MODULE = textwrap.dedent('''
    """A solver that raises inside solve (for the CLI's error handling)."""
    from mallocgame.engine.protocol import Solver

    class Crash(Solver):
        name = "crash"
        modes = frozenset({"map"})

        def solve(self, request):
            raise RuntimeError("boom")
''')


def test_solver_that_raises_is_one_line_exit_1(tmp_path):
    make_distribution(tmp_path, "crash-plugin", "crash = crash_plugin.solver:Crash",
                      {"crash_plugin/__init__.py": "", "crash_plugin/solver.py": CRASHING_MODULE})
    env = {"PYTHONPATH": str(tmp_path)}
    out = tmp_path / "sol.csv"
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "crash", "-o", str(out), env=env)
    assert r.returncode == 1 and r.stderr.strip() == "error: solver 'crash' failed: RuntimeError: boom"
    assert not out.exists()
    r = run_cli("solve", str(DATA / "pack40.64.csv"), "--solver", "crash", "--mode", "pack", env=env)
    assert r.returncode == 2 and "does not support pack mode" in r.stderr  # without --mode its one mode is implied
    r = run_cli("check-solver", "crash", "--check", "valid-answers", env=env)
    assert r.returncode == 1 and "FAIL valid-answers: " in r.stdout and "solve raised RuntimeError: boom" in r.stdout


def test_entries_are_read_once_per_path_and_a_new_plugin_is_seen(tmp_path, monkeypatch):
    from mallocgame.engine import registry

    first = registry.solver_entries()
    assert registry.solver_entries() == first and "my-solver" not in first
    assert tuple(sys.path) in registry._ENTRIES  # cached: a portfolio asks several times within 0.2 s
    install_page_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "my-solver" in registry.solver_entries()


def test_a_builtin_is_found_without_scanning_every_distribution(monkeypatch):
    """``solve --solver greedy-xla`` reads the mallocgame distribution's entry points alone: the scan of every
    installed distribution (tens of milliseconds at start-up) is for plugin names only."""
    from mallocgame.engine import registry

    def no_scan(**kwargs):
        raise AssertionError("every installed distribution was scanned")

    monkeypatch.setattr(registry, "entry_points", no_scan)
    monkeypatch.setattr(registry, "_ENTRIES", {})
    monkeypatch.setattr(registry, "_OWN", {})
    assert registry.solver_entry("greedy-xla").distribution == "mallocgame"
    assert callable(registry.load_solver("msa").solve)


def test_a_plugin_never_takes_a_builtin_name(monkeypatch):
    from importlib.metadata import EntryPoint

    from mallocgame.engine import registry

    clash = EntryPoint("msa", "somewhere.else:Solver", registry.GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda **kwargs: [clash])
    monkeypatch.setattr(registry, "_ENTRIES", {})
    monkeypatch.setattr(registry, "_OWN", {})
    assert registry.solver_entries()["msa"].target == registry.solver_entry("msa").target != "somewhere.else:Solver"
