"""The numbers of the solve engine's "What we found" measured on the tree: the words of time, the deadline rules
written by hand, the stages options pass, where the facts are fetched, the comparisons of answers, the msa
algorithm's home, the interference graph's readers, and what of a lab notebook is left in the product.

Every count is over the product's sources (``.py``, ``.pyx``, ``.pxi`` of the package folders,
:func:`measure_code.product_sources`), one line per count, with the method beside it:

* words of time: occurrences (case-insensitive substrings, as ``grep -oi``) of ``time_limit``, ``deadline``,
  ``until`` and ``budget``;
* deadline rules by hand: lines matching tests/test_request.py's pattern (``t0 +``, ``f * time_limit``,
  ``now + ... *``, ``deadline - now``, ``perf_counter``), and the uses of the `Budget` cuts (``part``, ``share``,
  ``search_part``, ``Budget.until``, ``Budget.start``);
* option stages: the central value table (``OPTION_RULES``), the filter by a solver's signature
  (``inspect.signature`` on a ``solve``), the solvers whose class declares ``Options``;
* ``session_for`` call sites (its definition aside), by file;
* ``better``: the functions that say whether an answer is better (``def better``, ``better_than``), and the lines
  that use each tolerance literal ``1e-9``, ``1e-12``, ``1e-15`` (any use, not only comparisons of answers);
* the msa algorithm's home: the lines of its modules;
* the graph's readers: the files that read ``interference_graph`` and those that import networkx;
* the notebook: issue numbers (tests/test_docstrings.py's pattern), p-values (``p = 0.0x``, ``p < 0.05``,
  ``p-value``), writes to ``Problem.derived``; the product's lines against experiments/ (measure_code's lines).

Usage::

    python experiments/measure_solve_engine.py --out solve_engine_numbers.md
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from _common import ROOT, Transcript, fenced, write_results
from measure_code import ISSUE_NUMBER, product_sources, size_lines

WORDS = ("time_limit", "deadline", "until", "budget")
HAND_RULES = re.compile(r"\bt0 \+|\btime_limit \*|\* time_limit\b|monotonic\(\) \+ [^\n]*\*|\bnow \+ [^\n]*[*/]"
                        r"|\bdeadline - now\b|perf_counter")
BUDGET_CUTS = {"part": re.compile(r"\.part\("), "share": re.compile(r"\.share\("),
               "search_part": re.compile(r"\.search_part\("), "Budget.until": re.compile(r"Budget\.until\("),
               "Budget.start": re.compile(r"Budget\.start\(")}
P_VALUE = re.compile(r"\bp\s*[<=]\s*0?\.\d|p-value", re.IGNORECASE)
TOLERANCES = ("1e-9", "1e-12", "1e-15")
MSA_HOME = ("mallocgame/algorithms/memory_space_assignment.py", "mallocgame/algorithms/_msa.pxi", "solvers/msa.py")


def lines_of(paths: list[Path]) -> dict[Path, list[str]]:
    return {p: p.read_text(encoding="utf-8").splitlines() for p in paths}


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def where(texts: dict[Path, list[str]], pattern: re.Pattern) -> list[tuple[str, int]]:
    """``(file, line number)`` of every line matching ``pattern``."""
    return [(rel(p), n) for p, lines in texts.items() for n, line in enumerate(lines, 1) if pattern.search(line)]


def by_file(hits: list[tuple[str, int]]) -> str:
    return ", ".join(f"{f} {n}" for f, n in Counter(f for f, _ in hits).most_common()) or "none"


def time_words(out: Transcript, texts: dict[Path, list[str]]) -> None:
    whole = "\n".join("\n".join(lines) for lines in texts.values()).lower()
    out("words of time (case-insensitive occurrences): " + ", ".join(f"{w} {whole.count(w)}" for w in WORDS))
    rules = where(texts, HAND_RULES)
    out(f"deadline rules by hand (lines): {len(rules)}: {by_file(rules)}")
    out("Budget cuts used: " + ", ".join(f"{name} {len(where(texts, pat))}" for name, pat in BUDGET_CUTS.items()))


def options_and_facts(out: Transcript, texts: dict[Path, list[str]]) -> None:
    out(f"OPTION_RULES (a central value table): {len(where(texts, re.compile(r'OPTION_RULES')))} lines; "
        f"inspect.signature (a filter by signature): {len(where(texts, re.compile(r'inspect.signature')))} lines")
    declaring = where(texts, re.compile(r"^    Options = \w"))
    out(f"solver classes declaring Options: {len(declaring)}: {by_file(declaring)}")
    calls = where(texts, re.compile(r"(?<!def )\bsession_for\("))
    below = [hit for hit in calls if hit[0].startswith(("solvers/", "hybrid/", "search/"))]
    out(f"session_for call sites: {len(calls)} in {len({f for f, _ in calls})} files ({by_file(calls)}); "
        f"in solvers/, hybrid/, search/: {len(below)}")
    derived = where(texts, re.compile(r"\.derived\b"))
    out(f"Problem.derived (lines naming it): {len(derived)}")


def comparisons(out: Transcript, texts: dict[Path, list[str]]) -> None:
    defs = where(texts, re.compile(r"def better(_than)?\("))
    out(f"better implementations: {len(defs)}: " + ", ".join(f"{f}:{n}" for f, n in defs))
    out("tolerance literals (lines, any use): " +
        ", ".join(f"{t} {len(where(texts, re.compile(re.escape(t) + r'(?![0-9])')))}" for t in TOLERANCES))


def homes(out: Transcript, texts: dict[Path, list[str]]) -> None:
    out("msa's home (lines): " + ", ".join(f"{p} {len((ROOT / p).read_text().splitlines())}" for p in MSA_HOME
                                           if (ROOT / p).exists()))
    readers = sorted({f for f, _ in where(texts, re.compile(r"interference_graph"))})
    out(f"files reading interference_graph: {len(readers)}: {', '.join(readers)}")
    nx = sorted({f for f, _ in where(texts, re.compile(r"^\s*(import networkx|from networkx)"))})
    out(f"files importing networkx: {len(nx)}: {', '.join(nx) or 'none'}")


def notebook(out: Transcript, texts: dict[Path, list[str]]) -> None:
    out(f"issue numbers in the product: {len(where(texts, ISSUE_NUMBER))}; "
        f"p-values: {len(where(texts, P_VALUE))}: {by_file(where(texts, P_VALUE))}")
    collected: list[str] = []
    size_lines(collected.append)  # measure_code's figures: its first two lines (the issue lines are counted above)
    for line in collected[:2]:
        out(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="solve_engine_numbers.md")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    out = Transcript()
    texts = lines_of(product_sources())
    out(f"product sources: {len(texts)} files")
    time_words(out, texts)
    options_and_facts(out, texts)
    comparisons(out, texts)
    homes(out, texts)
    notebook(out, texts)
    if not args.no_write:
        write_results(args.out, "# The solve engine's numbers, measured again\n\n" + fenced(out.text))


if __name__ == "__main__":
    main()
