"""Issue 19: a plugin solver raising ``SystemExit(7)`` made ``solve`` exit 7 silently; it is the
solver's failure: one line naming it, exit 1 (no solution), as any other exception of a solver."""

from __future__ import annotations

from tests.conftest import DATA, run_cli
from tests.test_plugins import make_distribution

EXITER = '''
from mallocgame.engine.protocol import Solver


class Exiter(Solver):
    name = "exiter"
    modes = frozenset({"map", "pack"})

    def solve(self, request):
        raise SystemExit(7)
'''


def test_a_solver_raising_system_exit_is_a_solver_failure(tmp_path):
    make_distribution(tmp_path, "exit-plugin", "exiter = exit_solver:Exiter", {"exit_solver.py": EXITER})
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "exiter", "--time-limit", "1",
                env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr == "error: solver 'exiter' failed: RuntimeError: it raised SystemExit(7)\n" and r.stdout == ""
