"""A griffe extension for the API reference: the package-dir mapping of pyproject.toml.

The folders solvers/, search/, hybrid/ and hardware/ install as ``mallocgame.solvers`` and so on, but
griffe (the static reader behind mkdocstrings) looks for ``mallocgame.solvers`` inside the folder
mallocgame/ and does not find it. When griffe has loaded ``mallocgame``, this extension loads each
mapped folder and hangs it under ``mallocgame`` by its installed name. mkdocs.yml names this file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parents[1]


class PackageDirs(griffe.Extension):
    """Attach the mapped folders under ``mallocgame`` once griffe has loaded it."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.name != "mallocgame":
            return
        mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
        for package, folder in mapping.items():
            parent, _, name = package.rpartition(".")
            if parent != "mallocgame" or name in pkg.members:
                continue
            module = loader.load(ROOT / folder)
            pkg.set_member(name, module)
