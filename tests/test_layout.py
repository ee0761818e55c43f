"""The package layout: one package, ``mallocgame``, with the card's folders as its subpackages.

The folders solvers/, search/, hybrid/ and hardware/ sit at the top of the repository (the design
card fixes them) and install as ``mallocgame.solvers`` and so on (package-dir in pyproject.toml).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"mallocgame": "mallocgame", "mallocgame.hardware": "hardware", "mallocgame.solvers": "solvers",
           "mallocgame.search": "search", "mallocgame.hybrid": "hybrid"}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_package_dir_maps_the_card_folders():
    assert _setuptools()["package-dir"] == FOLDERS


def test_every_folder_with_an_init_is_a_listed_package():
    found = set()
    for package, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    assert found == set(_setuptools()["packages"])


def test_old_top_level_names_are_gone_and_new_ones_import(tmp_path):
    # Run from a neutral folder, so that the checkout's own top-level folders are not on sys.path.
    code = ("import importlib.util, mallocgame.search.game, mallocgame.solvers.greedy_xla, mallocgame.hybrid.lns, "
            "mallocgame.hardware.validator\n"
            "print([n for n in ('search', 'solvers', 'hybrid', 'hardware') if importlib.util.find_spec(n)])")
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # a checkout put on the path by hand puts its top-level folders there too: the child
        # sees the package alone instead, as an install shows it
        (tmp_path / "path").mkdir()
        (tmp_path / "path" / "mallocgame").symlink_to(ROOT / "mallocgame")
        env["PYTHONPATH"] = str(tmp_path / "path")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_an_install_puts_only_mallocgame_in_site_packages(tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # bin/ holds the console script.
    top = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info") and p.name not in {"__pycache__", "bin"}}
    assert top == {"mallocgame"}
    installed = target / "mallocgame"
    for sub in ("solvers/cpsat", "search/muzero/checkpoints", "hybrid", "hardware", "integrations"):
        assert (installed / sub / "__init__.py").is_file(), sub
    assert (installed / "search/muzero/checkpoints/default.pt").is_file()
    assert list((installed / "inputs/data").glob("*.json")), "the built-in examples' data must install"
    source = sorted(p.name for p in (ROOT / "mallocgame/inputs/data/xla").iterdir() if p.is_file())
    assert sorted(p.name for p in (installed / "inputs/data/xla").iterdir()) == source, "the xla suite must install"
    # the native engine (one extension module, every compiled loop) is compiled by the install (setup.py), not
    # left to a later step
    assert [p.name.split(".")[0] for p in installed.rglob("*.so")] == ["_native"], "the native engine must install"
    assert list(installed.glob("_native*.so")), "the native engine must install as mallocgame._native"


def test_every_cython_source_is_in_the_sdist_manifest():
    # setuptools packs only the generated C/C++ into an sdist; setup.py cythonizes the .pyx, so an sdist without
    # them does not build (seen: `python setup.py sdist` before MANIFEST.in had hardware/_copy_service.c only)
    import fnmatch

    patterns = [line.split()[1:] for line in (ROOT / "MANIFEST.in").read_text().splitlines()
                if line.startswith("include ")]
    sources = [p.relative_to(ROOT).as_posix() for folder in FOLDERS.values() for ext in ("*.pyx", "*.pxi")
               for p in (ROOT / folder).rglob(ext)]
    assert sources

    def included(source: str, pattern: str) -> bool:
        # as MANIFEST.in's include reads a pattern: a "*" stays within one folder (fnmatch's alone crosses "/")
        parts, wanted = source.split("/"), pattern.split("/")
        return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, wanted))

    assert not included("mallocgame/problem/_x.pxi", "mallocgame/*.pxi") and included("mallocgame/_x.pxi", "mallocgame/*.pxi")
    for source in sources:
        assert any(included(source, pattern) for group in patterns for pattern in group), source


def test_the_checkout_links_the_card_folders_under_mallocgame():
    # So that `import mallocgame.solvers` and plain `lint-imports` see the installed layout in the checkout.
    for folder in ("solvers", "search", "hybrid", "hardware"):
        link = ROOT / "mallocgame" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), folder
