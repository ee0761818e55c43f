"""experiments/ keeps only what today's claims stand on, and says where each piece is.

experiments/README.md is the index of the scripts (docs/experiments.md shows it); docs/results.md names the record
behind each claim. A record is kept when a page of docs/, the index, a test or the product names it, or when a
record so kept names it (a summary names the CSV of its runs); every script is in the index; every record a
results entry names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
RESULTS = EXPERIMENTS / "results"
INDEX = EXPERIMENTS / "README.md"
PRODUCT_FOLDERS = ("mallocgame", "solvers", "search", "hybrid", "hardware")
# A record named on its own in backticks: `name.md` or `experiments/results/name.md`.
CITED_RECORD = re.compile(r"`(?:experiments/results/)?([A-Za-z0-9_.-]+\.(?:md|csv|jsonl|json|txt|png))`")


def records() -> dict[str, Path]:
    """Every file under experiments/results/, by its path there."""
    return {p.relative_to(RESULTS).as_posix(): p for p in sorted(RESULTS.rglob("*")) if p.is_file()}


def naming_texts() -> list[str]:
    """The texts whose mention keeps a record: the docs pages, the index, the tests and the product's sources."""
    paths = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "experiments.md"]  # that page includes INDEX
    paths += [INDEX, *(ROOT / "tests").rglob("*.py")]
    paths += [p for folder in PRODUCT_FOLDERS for p in (ROOT / folder).rglob("*.py")]
    return [p.read_text(encoding="utf-8") for p in paths]


def named_in(text: str, files: dict[str, Path]) -> set[str]:
    """The records ``text`` names, by file name (or by their folder, for a folder of pictures)."""
    return {rel for rel in files if Path(rel).name in text or (
        "/" in rel and f"results/{rel.rsplit('/', 1)[0]}/" in text)}


def kept_records() -> set[str]:
    """The records the naming texts name, and those the named records name in turn."""
    files = records()
    kept = set().union(*(named_in(text, files) for text in naming_texts()))
    todo = [rel for rel in kept if rel.endswith(".md")]
    while todo:
        more = named_in(files[todo.pop()].read_text(encoding="utf-8"), files) - kept
        kept |= more
        todo += [rel for rel in more if rel.endswith(".md")]
    return kept


def test_every_record_is_named_where_a_reader_finds_it():
    unnamed = sorted(set(records()) - kept_records())
    assert not unnamed, ("records no page, index, test or kept record names (superseded ones go; git keeps them): "
                         + ", ".join(unnamed))


def test_every_script_is_in_the_index():
    index = INDEX.read_text(encoding="utf-8")
    scripts = sorted(p.name for p in EXPERIMENTS.iterdir() if p.suffix in (".py", ".sh") and p.name != "_common.py")
    assert scripts, "no scripts found"
    missing = [name for name in scripts if f"`{name}`" not in index]
    assert not missing, f"scripts missing from experiments/README.md: {missing}"


def test_every_record_a_results_entry_names_exists():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    cited = set(CITED_RECORD.findall(text))
    assert len(cited) > 50, "the pattern no longer finds the results entries' records"
    elsewhere = {p.name for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(name for name in cited if name not in elsewhere and not (RESULTS / name).exists()
                     and not any(RESULTS.rglob(name)))
    assert not missing, f"docs/results.md names records that do not exist: {missing}"


def test_a_record_is_kept_by_a_kept_record_naming_it(tmp_path):
    files = {"summary.md": tmp_path / "summary.md", "runs.csv": tmp_path / "runs.csv",
             "old.md": tmp_path / "old.md", "schedule/a.png": tmp_path / "a.png"}
    files["summary.md"].write_text("Every run is in `runs.csv`; pictures in results/schedule/.")
    assert named_in(files["summary.md"].read_text(), files) == {"runs.csv", "schedule/a.png"}
    assert named_in("docs name `summary.md` only", files) == {"summary.md"}
