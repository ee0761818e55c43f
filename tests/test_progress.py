"""Live progress on stderr: ``solve --log`` prints one line per better answer (time, objective, bound, gap,
source) in the order found; on a terminal one status line is redrawn in place; nothing on a pipe or with
``--quiet``; ``--json`` stays one JSON document; the summary line names who found the answer."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import sys
import termios
import time

import pytest

from mallocgame.problem.units import format_percent
from tests.conftest import DATA, ROOT, run_cli
from tests.test_limit_kept import ENTRIES, STUBBORN
from tests.test_plugins import make_distribution

LOG_LINE = re.compile(r"^#(\d+) (\d+\.\d\d)s objective=(\S+) bound=(\S+) gap=(\S+) source=(.+)$")


def _log_lines(stderr: str) -> list[re.Match]:
    return [m for m in map(LOG_LINE.match, stderr.splitlines()) if m]


UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _quantity(text: str) -> float:
    """A number as a person reads it (``132.5µs``, ``9.633MiB``) back as seconds or bytes."""
    m = re.fullmatch(r"(-?[\d.]+)\s?([a-zA-Zµ]+)", text)
    assert m and m[2] in UNITS, text
    return float(m[1]) * UNITS[m[2]]


def test_log_prints_one_line_per_improvement_in_order():
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "lns", "--time-limit", "5", "--log",
                "--solver-option", "workers=1")
    assert r.returncode == 0, r.stderr
    lines = _log_lines(r.stderr)
    assert len(lines) >= 2, r.stderr  # the greedy baseline, then lns's own steps
    assert [int(m[1]) for m in lines] == list(range(1, len(lines) + 1))
    times = [float(m[2]) for m in lines]
    values = [_quantity(m[3]) for m in lines]
    assert times == sorted(times) and values == sorted(values) and len(set(values)) == len(values)  # map: up
    assert lines[0][6] == "baseline greedy-xla" and lines[-1][6] == "lns"
    final = json.loads(run_cli("solve", str(DATA / "layered150.json"), "--solver", "lns", "--time-limit", "5",
                               "--json", "--solver-option", "workers=1").stdout)
    assert values[-1] == pytest.approx(final["objective"], rel=1e-3)  # printed to 4 significant figures
    assert _quantity(lines[-1][4]) == pytest.approx(final["bound"], rel=1e-3)  # the bound and gap of the line
    assert lines[-1][5] == format_percent(final["gap"])


def test_json_stays_json_with_log():
    # (lns ends within 2 s here; the limit, counted from the command's start, leaves it that on a loaded machine)
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "lns", "--time-limit", "10", "--log", "--json",
                "--solver-option", "workers=1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["solver"] == "lns"
    assert _log_lines(r.stderr)


@pytest.mark.parametrize("flags", [(), ("--quiet",)])
def test_a_pipe_and_quiet_show_no_progress(flags):
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "lns", "--time-limit", "3",
                "--solver-option", "workers=1", *flags)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "\r" not in r.stdout and len(r.stdout.splitlines()) == 1


def test_log_and_quiet_together_are_refused():
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "lns", "--log", "--quiet")
    assert r.returncode == 2 and r.stderr == "error: --log and --quiet: choose one\n"


def test_portfolio_summary_names_the_member_that_won_and_its_log_the_members():
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "portfolio", "--time-limit", "5", "--json",
                "--log")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    winner = report["stats"]["winner"]
    assert winner and f" source={winner}" in r.stderr.splitlines()[-1]
    sources = [m[6] for m in _log_lines(r.stderr)]
    # the members that reported, and those stopped before they did (one that sent answers and was stopped when
    # another member proved its answer optimal is among the errors, not the reports)
    members = set(report["stats"]["members"]) | set(report["stats"]["errors"])
    assert sources[0].startswith("baseline ")  # built in the portfolio's process first
    assert any(s.split(":")[0] in members - {"greedy-xla"} for s in sources), (  # a member's, sent on
        sources, report["stats"]["members"], report["stats"]["errors"])


def _on_a_terminal(args: list[str], env: dict) -> bytes:
    """Run ``mallocgame ARGS`` with stdout and stderr on a pseudo-terminal 160 columns wide; all it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once (nothing of pytest's runs here)
        os.environ.update(env)
        os.chdir(ROOT)
        os.execvp(sys.executable, [sys.executable, "-m", "mallocgame.cli.main", *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))  # tqdm draws within the width
    out, until = b"", time.monotonic() + 60
    while time.monotonic() < until:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    os.waitpid(pid, 0)
    return out


def test_a_terminal_gets_one_status_line_redrawn_in_place(tmp_path):
    make_distribution(tmp_path, "stubborn-plugin", ENTRIES, {"stubborn_solver.py": STUBBORN})
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    out = _on_a_terminal(["solve", str(DATA / "layered150.json"), "--solver", "stubborn", "--time-limit", "1"], env)
    text = out.decode()
    frames = [f for f in text.split("\r") if f.strip()]
    status = [f for f in frames if f.startswith("stubborn: solving (map, limit 1s)")]
    assert len(status) >= 3, text  # redrawn as time passes, in place (carriage returns, no new lines)
    assert any(re.search(r"\[\d+\.\ds\]$", f) for f in status), text  # the elapsed time
    assert any("source=stubborn-own" in f and "gap=" in f for f in status), text  # the incumbent, bound, gap
    assert "\n" not in "".join(status)
    assert text.rstrip().splitlines()[-1].split("\r")[-1].startswith("stubborn: FEASIBLE ")  # then the summary
    quiet = _on_a_terminal(["solve", str(DATA / "layered150.json"), "--solver", "stubborn", "--time-limit", "1",
                            "--quiet"], env).decode()
    assert "solving" not in quiet and quiet.startswith("stubborn: FEASIBLE ")


def test_compare_log_prints_each_runs_improvements_and_quiet_prints_no_progress():
    args = ["compare", str(DATA / "layered150.json"), "--solvers", "lns,greedy-xla", "--time-limit", "3",
            "--solver-option", "lns:workers=1"]
    r = run_cli(*args, "--log")
    assert r.returncode == 0, r.stderr
    found = [re.match(r"^layered150 / lns (\d+\.\d\d)s objective=(\S+) source=(.+)$", line)
             for line in r.stderr.splitlines()]
    found = [m for m in found if m]
    assert len(found) >= 2, r.stderr
    times, values = [float(m[1]) for m in found], [float(m[2]) for m in found]  # map files, no --mode: numbers
    assert times == sorted(times) and values == sorted(values) and len(set(values)) == len(values)
    quiet = run_cli(*args, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and "[1/2]" not in quiet.stdout and "lns" in quiet.stdout
    assert "[1/2] layered150 / lns" in run_cli(*args).stderr  # the default on a pipe: a line per finished run


@pytest.mark.parametrize("args,what", [(["info", str(DATA / "layered150.json")], "info: "),
                                       (["suites", "quick"], "suites: reading quick"),
                                       (["import", "matmul", "--depth", "1", "--n", "64", "-o", "{tmp}/mm.json"],
                                        "import matmul: building the workload")])
def test_info_suites_and_import_show_what_runs_on_a_terminal_only(args, what, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    env = {"PYTHONPATH": str(ROOT)}
    shown = _on_a_terminal(args, env).decode()
    assert any(frame.startswith(what) for frame in shown.split("\r")), shown
    assert what not in _on_a_terminal([*args, "--quiet"], env).decode()
    piped = run_cli(*args)
    assert piped.returncode == 0 and what not in piped.stdout + piped.stderr


def test_train_shows_its_step_on_a_terminal_and_keeps_its_log_on_stdout(tmp_path):
    pytest.importorskip("torch")
    args = ["train", "--steps", "100000", "--time-limit", "2", "--games-per-iter", "1", "--updates-per-iter", "1",
            "--simulations", "2", "--min-size", "16", "--max-size", "16", "--batch-size", "4",
            "-o", str(tmp_path / "t.pt")]
    env = {"PYTHONPATH": str(ROOT)}
    shown = _on_a_terminal(args, env).decode()
    frames = [f for f in shown.split("\r") if f.strip()]
    assert any(re.match(r"train: step \d+ of 100000", f) for f in frames), shown
    assert "done: step" in shown
    quiet = _on_a_terminal([*args, "--quiet"], env).decode()
    assert "train: step" not in quiet and "done: step" in quiet
    piped = run_cli(*args)
    assert piped.returncode == 0, piped.stderr
    assert "train: step" not in piped.stdout + piped.stderr and "done: step" in piped.stdout


def test_executorch_shows_what_runs_on_a_terminal_only(tmp_path):
    pytest.importorskip("executorch.exir")
    from tests.test_executorch import MODEL_FILE

    (tmp_path / "models.py").write_text(MODEL_FILE)
    args = ["executorch", f"{tmp_path / 'models.py'}:cnn", "--input-shape", "1,3,8,8", "--time-limit", "1",
            "-o", str(tmp_path / "m.pte")]
    env = {"PYTHONPATH": str(ROOT)}
    shown = _on_a_terminal(args, env).decode()
    frames = [f for f in shown.split("\r") if f.strip()]
    assert any(f.startswith("executorch: ") for f in frames), shown
    assert "m.pte: arena " in shown
    quiet = _on_a_terminal([*args, "--quiet"], env).decode()
    assert "executorch: " not in quiet and "m.pte: arena " in quiet
    piped = run_cli(*args)
    assert piped.returncode == 0, piped.stderr
    assert "executorch: " not in piped.stdout + piped.stderr


@pytest.mark.parametrize("log,quiet,shows", [(False, True, False), (True, False, True), (False, False, False)])
def test_a_solve_whose_progress_shows_nothing_hands_no_callbacks(monkeypatch, log, quiet, shows):
    # stderr is not a terminal under pytest: without --log nothing is shown, so the solve path gets no callbacks
    from click.testing import CliRunner

    import mallocgame.cli.solve as solve_cli
    from mallocgame.engine.solving import solve_beside_bound

    handed = {}

    def spy(*args, **kwargs):
        handed.update(on_improvement=kwargs["on_improvement"], on_bound=kwargs["on_bound"])
        return solve_beside_bound(*args, **kwargs)

    monkeypatch.setattr(solve_cli, "solve_beside_bound", spy)
    flags = (["--log"] if log else []) + (["--quiet"] if quiet else [])
    result = CliRunner().invoke(solve_cli.solve, [str(DATA / "layered150.json"), "--solver", "greedy-xla",
                                                  "--time-limit", "2", *flags])
    assert result.exit_code == 0, result.output
    assert (handed["on_improvement"] is not None) == shows and (handed["on_bound"] is not None) == shows
