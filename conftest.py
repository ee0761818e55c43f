"""Docstring examples as tests, each module imported under its installed ``mallocgame.*`` name.

The folders solvers/, search/, hybrid/ and hardware/ install as ``mallocgame.solvers`` and so on
(package-dir in pyproject.toml), and in the checkout ``mallocgame/solvers`` and the others are links
to them, so ``testpaths`` reaches them through ``mallocgame/``. Left to itself, pytest's doctest collection would name
``solvers/best_fit.py`` ``solvers.best_fit`` (the folder walk from the checkout's root) and import a
second copy of the module beside ``mallocgame.solvers.best_fit``. This hook collects the doctests of
every module of the package folders that holds an example (``>>>``), importing it by its installed
name, so a module is never imported twice. It runs for the folders listed in ``testpaths`` (so
``python -m pytest`` runs them) and for ``python -m pytest --doctest-modules mallocgame`` alike; the
docs' "Development" page says how to mark an example that cannot run here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule
from _pytest.main import Dir

ROOT = Path(__file__).resolve().parent
# Installed package -> folder in the checkout: the package-dir mapping of pyproject.toml.
FOLDERS = {"mallocgame": "mallocgame", "mallocgame.hardware": "hardware", "mallocgame.solvers": "solvers",
           "mallocgame.search": "search", "mallocgame.hybrid": "hybrid"}


def installed_name(path: Path) -> str | None:
    """The ``mallocgame.*`` module name of a source file of the package folders, else None."""
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    folder, *rest = rel.with_suffix("").parts
    package = {v: k for k, v in FOLDERS.items()}.get(folder)
    if package is None or not rest:
        return None
    if rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join([package, *rest])


class InstalledDoctestModule(DoctestModule):
    """pytest's doctest collector, importing the module by its installed name."""

    def _getobj(self):
        return importlib.import_module(installed_name(self.path))


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent):
    # A plain folder, not a pytest Package: a Package imports its __init__.py under the folder's name
    # (``search``) to look for setup functions.
    if installed_name(path / "__init__.py") is not None or path.resolve() in {ROOT / f for f in FOLDERS.values()}:
        return Dir.from_parent(parent, path=path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent):
    collected = yield
    if file_path.suffix != ".py" or installed_name(file_path) is None:
        return collected
    # pytest's own doctest module (--doctest-modules) would import the file under a second name.
    collected = [c for c in collected if not isinstance(c, DoctestModule)]
    if ">>>" in file_path.read_text(encoding="utf-8"):
        collected.append(InstalledDoctestModule.from_parent(parent, path=file_path))
    return collected


@pytest.fixture(autouse=True)
def own_bound_cache(tmp_path_factory, monkeypatch):
    """Every test and doctest gets an empty bound cache of its own (mallocgame.bounds.bound_cache), never the
    user's ``~/.cache/mallocgame``; the commands a test runs inherit it through the environment."""
    monkeypatch.setenv("MALLOCGAME_CACHE_DIR", str(tmp_path_factory.mktemp("bound-cache")))
    monkeypatch.delenv("MALLOCGAME_NO_CACHE", raising=False)
