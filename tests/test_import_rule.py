"""Imports sit at the top of the module, but for the heavy optional dependencies (issue 17).

:data:`mallocgame._heavy.HEAVY` declares those dependencies (with their import times); an import
inside a function is allowed only when it imports one of them, directly or through one of our
own modules that imports one at its top (:func:`mallocgame._heavy.heavy_backed`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from mallocgame._heavy import HEAVY, functions, heavy_backed, inner_imports, is_heavy

ROOT = Path(__file__).resolve().parents[1]
# Folder in the checkout -> installed package (pyproject.toml's package-dir).
PACKAGES = {"mallocgame": "mallocgame", "solvers": "mallocgame.solvers", "search": "mallocgame.search",
            "hybrid": "mallocgame.hybrid", "hardware": "mallocgame.hardware"}


def module_name(path: Path) -> str:
    """The installed name of a source file of the package folders (``solvers/msa.py`` -> ``mallocgame.solvers.msa``)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_trees() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package: name -> (file, parsed source); the links under mallocgame/ are not walked twice."""
    found = {}
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = (path, ast.parse(path.read_text(), filename=str(path)))
    return found


def offences(found: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """``file:line: import`` for every import inside a function that is not of a heavy dependency."""
    trees = {name: tree for name, (_, tree) in found.items()}
    backed = heavy_backed(trees)
    bad = []
    for name, (path, tree) in sorted(found.items()):
        for fn in functions(tree):
            for node in inner_imports(fn):
                if not is_heavy(node, name, trees, backed):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)} (in {fn.name})")
    return sorted(bad)


def test_imports_inside_functions_are_only_of_heavy_dependencies():
    found = package_trees()
    assert len(found) > 100 and "mallocgame.solvers.msa" in found and "mallocgame.search.muzero.train" in found
    bad = offences(found)
    assert not bad, (f"{len(bad)} import(s) inside functions of modules that are not heavy ({sorted(HEAVY)}): "
                     "move them to the top of the module\n" + "\n".join(bad))


def test_the_rule_flags_a_planted_import():
    found = package_trees()
    planted = ast.parse("import ast\n\ndef f():\n    import json\n    from mallocgame import model\n"
                        "    import torch\n    from ortools.sat.python import cp_model\n"
                        "    from mallocgame.search.muzero import train\n    return json\n")
    found["mallocgame.planted"] = (ROOT / "mallocgame" / "planted.py", planted)
    assert [line for line in offences(found) if "planted" in line] == [
        "mallocgame/planted.py:4: import json (in f)", "mallocgame/planted.py:5: from mallocgame import model (in f)"]


def test_our_torch_modules_count_as_heavy_and_the_torchless_ones_do_not():
    trees = {name: tree for name, (_, tree) in package_trees().items()}
    backed = heavy_backed(trees)
    assert {"mallocgame.search.muzero.train", "mallocgame.search.muzero.checkpoint",
            "mallocgame.search.muzero.networks"} <= backed
    assert not backed & {"mallocgame", "mallocgame.problem.model", "mallocgame.cli.main", "mallocgame.solvers.muzero",
                         "mallocgame.search.muzero.torchless", "mallocgame.bounds.bounds"}
