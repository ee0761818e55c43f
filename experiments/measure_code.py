"""The code-health numbers of issue 17, measured on the tree: long functions, imports inside functions, README.

Prints every function of more than ``--lines`` lines in the core and the card's packages, the
imports that sit inside functions (and how many of them are of the heavy optional dependencies the
rule allows there: :data:`mallocgame._heavy.HEAVY`, the declaration tests/test_import_rule.py enforces,
directly or through one of our modules that imports one at its top), and the README's length::

    python experiments/measure_code.py --out code_measures.md
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter

from _common import ROOT, Transcript, fenced, write_results

from mallocgame._heavy import HEAVY, functions, heavy_backed, imported, inner_imports

# Folder in the checkout -> installed package (pyproject.toml's package-dir).
PACKAGES = {"mallocgame": "mallocgame", "solvers": "mallocgame.solvers", "search": "mallocgame.search",
            "hybrid": "mallocgame.hybrid", "hardware": "mallocgame.hardware"}


def module_name(path) -> str:
    """The installed name of a source file of the package folders (``solvers/msa.py`` -> ``mallocgame.solvers.msa``)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=80)
    ap.add_argument("--out", default="code_measures.md")
    args = ap.parse_args()
    out = Transcript()
    long, kinds = [], Counter()
    files = {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}
    trees = {name: ast.parse(path.read_text()) for name, path in files.items()}
    backed = heavy_backed(trees)
    for name, tree in trees.items():
        for fn in functions(tree):
            n = fn.end_lineno - fn.lineno + 1
            if n > args.lines:
                long.append((n, f"{files[name].relative_to(ROOT)}:{fn.lineno}", fn.name))
            for imp in inner_imports(fn):
                targets = imported(imp, name, trees)
                kinds["heavy" if any(t.split(".")[0] in HEAVY for t in targets)
                      else "heavy-backed" if any(t in backed for t in targets)
                      else "ours" if any(t.split(".")[0] == "mallocgame" for t in targets) else "other"] += 1
    out(f"functions over {args.lines} lines: {len(long)}")
    for n, where, name in sorted(long, reverse=True):
        out(f"  {n:4d}  {where}  {name}")
    out(f"imports inside functions: {sum(kinds.values())} (heavy optional dependencies {kinds['heavy']} and "
        f"{kinds['heavy-backed']} of our modules that import one at their top; mallocgame's own {kinds['ours']}, "
        f"other {kinds['other']})")
    readme = (ROOT / "README.md").read_text().splitlines()
    out(f"README.md: {len(readme)} lines, longest {max(map(len, readme))} characters")
    write_results(args.out, "# Code-health numbers (issue 17)\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
