"""The docstring examples: every module of the package folders with an example (``>>>``) is collected
by the root conftest.py under its installed ``mallocgame.*`` name, passes, and is never imported a
second time under its folder's name (``solvers.best_fit`` beside ``mallocgame.solvers.best_fit``)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

FOLDERS = ["mallocgame", "solvers", "search", "hybrid", "hardware"]
CARD_FOLDERS = FOLDERS[1:]  # reached from mallocgame/ through its links mallocgame/solvers -> ../solvers, ...

RUN = """
import json, sys, pytest
class Items:
    def pytest_collection_modifyitems(self, items):
        self.files = sorted({item.nodeid.split("::")[0] for item in items})
        self.names = sorted({item.name for item in items})
items = Items()
code = pytest.main(["-q", "-p", "no:cacheprovider", "--doctest-modules", *sys.argv[1:]], plugins=[items])
doubles = sorted(m for m in sys.modules if m.split(".")[0] in ("solvers", "search", "hybrid", "hardware"))
print(json.dumps({"code": int(code), "files": items.files, "names": items.names, "doubles": doubles}))
"""


def test_doctests_run_under_installed_names_once():
    proc = subprocess.run([sys.executable, "-c", RUN, "mallocgame"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stdout[-3000:]
    own = [p for p in (ROOT / "mallocgame").rglob("*.py") if p.relative_to(ROOT / "mallocgame").parts[0] not in CARD_FOLDERS]
    linked = [ROOT / "mallocgame" / p.relative_to(ROOT) for folder in CARD_FOLDERS for p in (ROOT / folder).rglob("*.py")]
    with_examples = sorted(str(p.relative_to(ROOT)) for p in own + linked if ">>>" in p.read_text(encoding="utf-8"))
    assert result["files"] == with_examples
    assert all(name.startswith("mallocgame.") for name in result["names"]), result["names"]
    assert result["doubles"] == []
