"""The code-health numbers measured on the tree: long functions, imports inside functions, README, the product
against experiments/.

Prints every function of more than ``--lines`` lines in the core and the card's packages, the
imports that sit inside functions (and how many of them are of the heavy optional dependencies the
rule allows there: :data:`mallocgame._heavy.HEAVY`, the declaration tests/test_import_rule.py enforces,
directly or through one of our modules that imports one at its top), the README's length, the lines of
the product's sources (``.py``, ``.pyx``, ``.pxi`` of the package folders) against the lines of every text file
under experiments/, the files and lines of experiments/results/, and the issue numbers ("issue 18") left in
the product's sources (tests/test_docstrings.py keeps them at zero)::

    python experiments/measure_code.py --out code_measures.md
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

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


SOURCE_SUFFIXES = (".py", ".pyx", ".pxi")
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def text_lines(path: Path) -> int | None:
    """The lines of a text file; ``None`` for a binary one (a picture)."""
    try:
        return len(path.read_text(encoding="utf-8").splitlines())
    except UnicodeDecodeError:
        return None


def product_sources() -> list[Path]:
    """The hand-written sources of the package folders (symlinked folders are not followed twice)."""
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*"))
            if p.suffix in SOURCE_SUFFIXES and p.is_file()]


def size_lines(out: Transcript) -> None:
    """The product's lines against experiments/, the results records, and the issue numbers in the product."""
    product = product_sources()
    product_lines = sum(text_lines(p) or 0 for p in product)
    experiment_files = [p for p in sorted((ROOT / "experiments").rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    experiment_lines = sum(text_lines(p) or 0 for p in experiment_files)
    out(f"product: {len(product)} source files, {product_lines} lines; experiments/: {len(experiment_files)} files, "
        f"{experiment_lines} lines ({experiment_lines / product_lines:.2f}x the product)")
    results = [p for p in experiment_files if (ROOT / "experiments" / "results") in p.parents]
    data = [p for p in results if p.suffix in (".csv", ".json", ".jsonl")]
    out(f"experiments/results/: {len(results)} files, {sum(text_lines(p) or 0 for p in results)} lines "
        f"(of which {len(data)} data files, csv/json/jsonl, {sum(text_lines(p) or 0 for p in data)} lines); "
        f"experiments/*.py: {len(list((ROOT / 'experiments').glob('*.py')))} scripts")
    issues = [(p, n) for p in product for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if ISSUE_NUMBER.search(line)]
    out(f"issue numbers in the product's sources: {len(issues)}")
    for p, n in issues:
        out(f"  {p.relative_to(ROOT)}:{n}")


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
    size_lines(out)
    write_results(args.out, "# Code-health numbers\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
