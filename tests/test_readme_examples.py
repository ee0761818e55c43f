"""The README's examples tell the truth: every ``$ mallocgame ...`` line of its ```console blocks is run,
in a fresh folder per block (a later command reads the files an earlier one wrote), and what it prints on
stdout matches the README's lines field by field. Times are set aside (the ``wall=`` field); ``...`` in a
README line stands for any text. Progress on stderr is not compared."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
TIME_FIELDS = re.compile(r"\bwall=\S+")  # the one field that changes from run to run on the same answer


def console_blocks(text: str) -> list[list[tuple[str, list[str]]]]:
    """Each ```console block as ``[(command, [expected lines]), ...]`` (blank lines dropped)."""
    blocks = []
    for body in re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M):
        commands: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif line.strip():
                assert commands, f"README console block: output before any command: {line!r}"
                commands[-1][1].append(line)
        blocks.append(commands)
    return blocks


def line_pattern(expected: str) -> re.Pattern:
    """The printed lines ``expected`` stands for: its text exactly, any wall time, anything for ``...``."""
    marked = TIME_FIELDS.sub("wall=\0", expected)
    pattern = ".*".join(re.escape(part) for part in marked.split("..."))
    return re.compile(pattern.replace("wall=\0", r"wall=\S+"))


def matches(expected: list[str], printed: list[str]) -> bool:
    return len(expected) == len(printed) and all(line_pattern(e).fullmatch(p) for e, p in zip(expected, printed))


def run_mallocgame(command: str, cwd) -> subprocess.CompletedProcess:
    argv = shlex.split(command, comments=True)
    assert argv[0] == "mallocgame", f"README console block: not a mallocgame command: {command!r}"
    return subprocess.run([sys.executable, "-m", "mallocgame.cli.main", *argv[1:]], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ), timeout=600)


BLOCKS = console_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_console_examples():
    assert len(BLOCKS) >= 1 and all(BLOCKS)
    assert all(command.startswith("mallocgame ") for block in BLOCKS for command, _ in block)


@pytest.mark.parametrize("block", BLOCKS, ids=[block[0][0].split("#")[0].strip() for block in BLOCKS])
def test_every_console_example_prints_what_the_readme_says(block, tmp_path):
    for command, expected in block:
        r = run_mallocgame(command, tmp_path)
        printed = r.stdout.splitlines()
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (command, r.returncode, r.stderr)
        assert matches(expected, printed), (
            f"README is stale for `$ {command}`:\n  README:  " + "\n           ".join(expected)
            + "\n  printed: " + "\n           ".join(printed))


def test_the_comparison_sets_only_times_aside():
    printed = ["msa: FEASIBLE objective=145.2µs bound=151.5µs gap=4.14% placed=122/150 peak=9.600MiB wall=20.1ms"]
    assert matches(["msa: FEASIBLE objective=145.2µs bound=151.5µs gap=4.14% placed=122/150 peak=9.600MiB "
                    "wall=14ms"], printed)
    assert matches(["msa: FEASIBLE objective=145.2µs ... wall=14ms"], printed)
    # a field that differs, a line too many or too few, is a stale README
    assert not matches(["msa: FEASIBLE objective=143µs bound=151.5µs gap=4.14% placed=122/150 peak=9.600MiB "
                        "wall=20.1ms"], printed)
    assert not matches(["msa: FEASIBLE objective=145.2µs bound=151.5µs gap=10.59% ... wall=14ms"], printed)
    assert not matches([], printed) and not matches([printed[0], "ok"], printed)
