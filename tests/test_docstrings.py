"""The product code speaks of what is: no lab notebook in its docstrings and comments.

Measurements, their dates, significance tests, win/tie/loss tables and issue numbers belong in
docs/results.md and the records of experiments/ (docs/architecture.md, "What the product code says");
the product's docstrings and comments say what a thing is and cite those pages. The scan reads every
source of the package folders (mallocgame/ and the card's solvers/, search/, hybrid/, hardware/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT_FOLDERS = ("mallocgame", "solvers", "search", "hybrid", "hardware")
SOURCE_SUFFIXES = {".py", ".pyx", ".pxi"}

# One pattern per kind of lab-notebook text, each with what it stands for.
NOTEBOOK_PATTERNS = {
    "an issue number": re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE),
    "a p-value": re.compile(r"\bp\s*(?:=|<|<=|≈|~)\s*0?\.\d", re.IGNORECASE),
    "a significance test": re.compile(r"\b(?:sign test|wilcoxon|(?:not |statistically )significant)\b",
                                      re.IGNORECASE),
    "a win/tie/loss table": re.compile(r"\b(?:W/T/L|wins?/ties?/loss(?:es)?)\b|\b\d+/\d+/\d+ \((?:W|p\b)",
                                       re.IGNORECASE),
    "a dated measurement": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}


def product_sources() -> list[Path]:
    """Every hand-written source file of the package folders (generated C++ is not read)."""
    return sorted(p for folder in PRODUCT_FOLDERS for p in (ROOT / folder).rglob("*")
                  if p.suffix in SOURCE_SUFFIXES and p.is_file() and not p.is_symlink())


def notebook_lines(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, line)`` for every line of ``text`` that holds lab-notebook text."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in NOTEBOOK_PATTERNS.items():
            if pattern.search(line):
                found.append((number, kind, line.strip()))
    return found


@pytest.mark.parametrize("line, kind", [
    ("# the deadline of issue 18", "an issue number"),
    ("chosen by the 12/48/19 run (p = 0.93)", "a p-value"),
    ("beats mcts at 16 simulations (p<0.05)", "a p-value"),
    ("one-sided sign test over 30 problems", "a significance test"),
    ("ahead at equal wall time, not significant", "a significance test"),
    ("against mcts 22/35/5 (W/T/L) at 10 s", "a win/tie/loss table"),
    ("12/48/19 (W/T/L)", "a win/tie/loss table"),
    ("0.78 s to import (2026-12-05)", "a dated measurement"),
])
def test_each_kind_of_notebook_text_is_caught(line, kind):
    assert [k for _, k, _ in notebook_lines(line)] == [kind]


@pytest.mark.parametrize("line", [
    "Sizes are int64 (numpy, OR-Tools); 1024/2048/4096 are the widths of the suite.",
    "UCT (Kocsis & Szepesvari, ECML 2006) keeps the untried-first rule.",
    "p = problem.arrays  # the columns",
    "A tie goes to the first; the smallest arena wins.",
    "Every number is shown with four significant figures.",
])
def test_ordinary_text_is_not_caught(line):
    assert notebook_lines(line) == []


def test_the_scan_reads_the_card_folders():
    names = {p.relative_to(ROOT).as_posix() for p in product_sources()}
    assert {"solvers/muzero.py", "hybrid/portfolio.py", "search/uct.py", "hardware/validator.py",
            "mallocgame/engine/session.py"} <= names


def test_product_code_holds_no_lab_notebook():
    found = [f"{path.relative_to(ROOT)}:{number}: {kind}: {line}"
             for path in product_sources()
             for number, kind, line in notebook_lines(path.read_text(encoding="utf-8"))]
    assert not found, ("measurements, issue numbers and test statistics go to docs/results.md:\n"
                       + "\n".join(found))
