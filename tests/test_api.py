"""The Python API: the examples of the README and of docs/guide/python.md run as written, and each call keeps its
contract."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import mallocgame
from tests.conftest import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def marked_example(path) -> str:
    """The Python block between ``<!-- api-example -->`` and ``<!-- /api-example -->`` in ``path``."""
    text = path.read_text()
    m = re.search(r"<!-- api-example -->\s*```python\n(.*?)```\s*<!-- /api-example -->", text, re.S)
    assert m, f"{path.name} lost its marked API example"
    return m.group(1)


def run_example(path, tmp_path) -> str:
    script = tmp_path / "example.py"
    script.write_text(marked_example(path))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_readme_api_example_runs(tmp_path):
    out = run_example(ROOT / "README.md", tmp_path)
    assert "layered150 greedy-xla FEASIBLE" in out and "pack40 best-fit" in out
    assert "'pack-search', ('pack',)" in out


def test_docs_api_example_runs(tmp_path):
    out = run_example(ROOT / "docs" / "guide" / "python.md", tmp_path)
    assert "takes no option 'simulaitons'" in out and "x faster than all-slow" in out
    assert (tmp_path / "layered150.png").read_bytes()[:8] == PNG_MAGIC  # the answer drawn
    assert "layered150 greedy-xla FEASIBLE" in out and "pack40 best-fit" in out


def test_import_is_cheap_and_lazy():
    code = "import sys, mallocgame; print(any(m.startswith(('ortools', 'torch', 'solvers')) for m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
    assert {"load_problem", "solve", "validate", "compare", "list_solvers"} <= set(mallocgame.__all__)


def test_load_problem_applies_the_capacity_rule():
    p = mallocgame.load_problem("example:layered150", capacity="4MiB")
    assert p.capacity == 4 * 2**20 and p.mode == "map" and p.hardware is not None
    q = mallocgame.load_problem("example:pack40")
    assert (q.mode, q.capacity) == ("pack", 64)
    r = mallocgame.load_problem("example:layered150", capacity_fraction=0.5)
    assert r.capacity % 512 == 0 and r.capacity > 0
    with pytest.raises(mallocgame.InputError, match="example:nope"):
        mallocgame.load_problem("example:nope")


def test_solve_reports_and_validate_judges():
    p = mallocgame.load_problem("example:layered150")
    res = mallocgame.solve(p, "greedy-xla", time_limit=5)
    assert res.valid and res.status == "FEASIBLE" and 0 < res.objective <= res.bound
    assert res.gap == pytest.approx((res.bound - res.objective) / res.bound)
    assert mallocgame.validate(p, res.solution)
    assert mallocgame.validate(p, list(res.solution.offsets))
    bad = list(res.solution.offsets)
    b = p.buffers
    i, j = next((i, j) for i in range(p.n) for j in range(i + 1, p.n)
                if bad[i] is not None and bad[j] is not None and b[i].start < b[j].end and b[j].start < b[i].end)
    bad[j] = bad[i]  # two live-together buffers at one address
    verdict = mallocgame.validate(p, bad)
    assert not verdict and "overlap" in verdict.violation
    assert str(verdict).startswith("invalid: ")
    by_id = {buf.id: off for buf, off in zip(b, res.solution.offsets)}
    assert mallocgame.validate(p, by_id).value == pytest.approx(res.objective)
    assert not mallocgame.validate(p, None)


def test_unknown_option_and_bad_hint_are_refused():
    p = mallocgame.load_problem("example:pack40")
    with pytest.raises(mallocgame.InputError, match="its options"):
        mallocgame.solve(p, "greedy-xla", workers=2)
    with pytest.raises(mallocgame.InputError, match="hint is not a valid solution"):
        mallocgame.solve(p, "cpsat", hint=[0] * p.n, time_limit=1)


def test_solvers_lists_modes_without_importing():
    infos = {s.name: s for s in mallocgame.list_solvers()}
    assert infos["pack-search"].modes == ("pack",)
    assert infos["greedy-xla"].modes == ("map", "pack")
    assert infos["muzero"].distribution == "mallocgame"


def test_prefetch_answers_through_the_api(tmp_path):
    """A prefetch answer keeps its intervals, is judged as intervals, and can be handed on as a hint."""
    from mallocgame.formats.io import write_intervals_csv

    p = mallocgame.load_problem("example:layered150", mode="prefetch")
    res = mallocgame.solve(p, "msa", time_limit=5)
    assert res.valid and res.solution.intervals and res.solution.mode == "prefetch"
    verdict = mallocgame.validate(p, res.solution)
    assert verdict and verdict.value == pytest.approx(res.objective)
    path = tmp_path / "msa.csv"
    write_intervals_csv(path, p, res.solution.intervals)
    assert mallocgame.validate(p, path).value == pytest.approx(res.objective)
    broken = [iv.__class__(iv.buffer, iv.offset, iv.start, iv.end, None) for iv in res.solution.intervals
              if iv.copy_start is not None][:1]
    assert broken and not mallocgame.validate(p, broken)  # a prefetched weight cannot be produced in place
    again = mallocgame.solve(p, "mcts", time_limit=1, hint=res.solution)
    assert again.valid and again.objective >= res.objective - 1e-12 * abs(res.objective)


def test_report_fields_are_attributes_and_keys():
    """``result.report`` is a documented Report: its fields read as attributes and, by their JSON names, as keys."""
    import dataclasses

    from mallocgame.engine.report import Report

    p = mallocgame.load_problem("example:layered150")
    res = mallocgame.solve(p, "greedy-xla", time_limit=5)
    assert mallocgame.Report is Report and isinstance(res.report, Report)
    assert all(dataclasses.is_dataclass(c) for c in (mallocgame.Result, mallocgame.Report, mallocgame.Verdict))
    report = res.report
    assert report.speedup > 1 and report["speedup"] == report.speedup == report.as_json()["speedup"]
    assert report["placed"] == res.solution.placed and report["mode"] == "map" and "speedup" in report
    assert "offsets" in report and "spedup" not in report
    with pytest.raises(KeyError, match="'spedup': a Report has solver, mode, status"):
        report["spedup"]



@pytest.mark.parametrize("mode, example, solver, suffix", [
    ("map", "example:layered150", "greedy-xla", ".png"),
    ("pack", "example:pack40", "pack-search", ".svg"),
    ("prefetch", "example:layered150", "msa", ".png"),
])
def test_plot_draws_a_result_in_every_mode(mode, example, solver, suffix, tmp_path):
    import xml.etree.ElementTree as ET

    from matplotlib.image import imread

    p = mallocgame.load_problem(example, mode=mode)
    res = mallocgame.solve(p, solver, time_limit=5)
    assert res.valid
    path = mallocgame.plot(p, res, tmp_path / f"answer{suffix}")
    assert path == tmp_path / f"answer{suffix}" and [f.name for f in tmp_path.iterdir()] == [path.name]
    if suffix == ".png":
        assert path.read_bytes()[:8] == PNG_MAGIC
        pixels = imread(path)
        assert pixels.shape[0] > 300 and pixels.shape[1] > 800 and pixels.std() > 0.05  # a picture, not a blank
    else:
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        # the default title names the problem, the solver and what the answer achieves
        assert f"{p.name}: {solver}: {p.n}/{p.n} buffers placed, peak {res.report.peak} bytes" in path.read_text()


def test_plot_takes_any_answer_and_refuses_what_it_cannot_draw(tmp_path):
    p = mallocgame.load_problem("example:pack40")
    res = mallocgame.solve(p, "pack-search", time_limit=5)
    by_solution = mallocgame.plot(p, res.solution, tmp_path / "a.svg", title="by Solution")
    by_offsets = mallocgame.plot(p, list(res.solution.offsets), tmp_path / "b.svg", title="by offsets")
    assert "by Solution" in by_solution.read_text() and "by offsets" in by_offsets.read_text()
    overlapping = [0] * p.n  # drawn, and the title says why it is not valid
    assert "INVALID" in mallocgame.plot(p, overlapping, tmp_path / "c.svg").read_text()
    with pytest.raises(mallocgame.InputError, match=r"expected a \.png, \.svg or \.pdf"):
        mallocgame.plot(p, res, tmp_path / "d.txt")
    failed = mallocgame.Result("best-fit", "UNKNOWN", False, None, None, None, None, 0.1)
    with pytest.raises(mallocgame.InputError, match="best-fit found no valid answer"):
        mallocgame.plot(p, failed, tmp_path / "e.png")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["a.svg", "b.svg", "c.svg"]
