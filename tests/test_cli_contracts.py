"""The promises of the command line (issue 8, item 4), each checked through the real CLI in a subprocess.

-o/--output and --time-limit everywhere ('-' = stdout), --json on info/solve/validate, --capacity with
units and --capacity-fraction, solver options never silently ignored, the degenerate-capacity warning,
--minimize-peak without a capacity, solver modes and n/a rows, progress lines, stamped results JSON,
missing checkpoints as bad input, usage errors exit 2.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timezone

import pytest

from mallocgame.problem.units import parse_bytes
from tests.conftest import run_cli

LAYERED = "example:layered150"  # map mode, tpuv4i hardware (alignment 512), capacity 10105344
PACK = "example:pack40"  # pack mode, capacity 64 == max live bytes (tight)


def one_error_line(r, *words: str) -> str:
    """Exit 2 with exactly one stderr line (no traceback) containing ``words``; returns the line."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def csv_records(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def stamped(doc: dict) -> None:
    assert doc["version"] and doc["version"][0].isdigit()
    when = datetime.fromisoformat(doc["timestamp"])
    assert when.utcoffset() == timezone.utc.utcoffset(None)
    assert abs((datetime.now(timezone.utc) - when).total_seconds()) < 600


@pytest.fixture(scope="module")
def layered_solution(tmp_path_factory):
    path = tmp_path_factory.mktemp("sol") / "layered.csv"
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


# ---------------------------------------------------------------------------- -o / --output, '-' = stdout

def test_solve_output_dash_prints_the_csv_and_the_summary_on_stderr():
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "-o", "-")
    assert r.returncode == 0, r.stderr
    rows = csv_records(r.stdout)
    assert len(rows) == 150 and set(rows[0]) >= {"id", "offset"}
    assert sum(row["offset"] != "" for row in rows) == 113
    assert r.stderr.startswith("greedy-xla: FEASIBLE") and "placed=113/150" in r.stderr


def test_solve_report_dash_and_json_share_stdout_only_once():
    r = run_cli("solve", PACK, "--solver", "best-fit", "--json", "-o", "-")
    one_error_line(r, "-o -", "--json", "stdout")


def test_compare_output_dash_is_clean_csv_and_the_table_goes_to_stderr(tmp_path):
    r = run_cli("compare", LAYERED, "--solvers", "greedy-xla,best-fit", "--time-limit", "1", "-o", "-")
    assert r.returncode == 0, r.stderr
    rows = csv_records(r.stdout)
    assert [(row["input"], row["solver"]) for row in rows] == [("layered150", "greedy-xla"), ("layered150", "best-fit")]
    assert "greedy-xla: valid 1/1" in r.stderr and "runs on 1 inputs" in r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--output", "--out"])
def test_compare_output_and_its_out_alias_write_csv_and_json(tmp_path, flag):
    out = tmp_path / "r.csv"
    r = run_cli("compare", PACK, "--solvers", "pack-search", "--time-limit", "1", flag, str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert csv_records(out.read_text())[0]["status"] == "OPTIMAL" and out.with_suffix(".json").exists()
    assert f"wrote {out}" in r.stdout


def test_import_output_dash_prints_the_workload():
    r = run_cli("import", "matmul", "--depth", "1", "--n", "64", "-o", "-")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["format"] == "mallocgame.workload/1" and len(doc["buffers"]) == 29
    assert r.stderr.startswith("stdout: ops=29 buffers=29")


def test_play_output_dash_prints_only_the_solution():
    r = run_cli("play", LAYERED, "--policy", "greedy", "-o", "-")
    assert r.returncode == 0, r.stderr
    rows = csv_records(r.stdout)
    assert len(rows) == 150 and "offset" in rows[0]
    assert "done:" in r.stderr and "valid" in r.stderr


def test_plot_refuses_stdout(layered_solution):
    one_error_line(run_cli("plot", LAYERED, str(layered_solution), "-o", "-"), "-o", "stdout")


def test_train_time_limit_with_its_time_budget_alias_and_no_stdout_checkpoint(tmp_path):
    one_error_line(run_cli("train", "--time-budget", "-1"), "--time-limit")  # the alias is the same option
    one_error_line(run_cli("train", "-o", "-"), "--output", "stdout")
    out = tmp_path / "t.pt"
    r = run_cli("train", "--steps", "100000", "--time-limit", "0.1", "--games-per-iter", "1", "--updates-per-iter", "1",
                "--simulations", "2", "--min-size", "16", "--max-size", "16", "--batch-size", "4", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and "done: step" in r.stdout


# ---------------------------------------------------------------------------- --json

def test_info_json_is_one_object():
    r = run_cli("info", LAYERED, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    stamped(doc)
    assert doc["buffers"] == 150 and doc["mode"] == "map" and doc["capacity"] == 10105344
    assert doc["bound"] > 0 and doc["max_live_bytes"] > doc["capacity"]


def test_solve_json_is_one_stamped_object_with_offsets_by_id():
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    stamped(doc)
    assert doc["valid"] and doc["solver"] == "greedy-xla" and doc["placed"] == 113
    assert len(doc["offsets"]) == 150 and sum(v is not None for v in doc["offsets"].values()) == 113
    assert r.stderr.startswith("greedy-xla: FEASIBLE")  # the summary line stays off stdout


def test_solve_json_without_a_solution_still_prints_the_object_and_exits_1():
    r = run_cli("solve", PACK, "--solver", "greedy-xla", "--json")  # greedy overflows the tight instance
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["valid"] is False and doc["offsets"] is None and doc["violation"]


def test_validate_json_valid_and_invalid(layered_solution, tmp_path):
    r = run_cli("validate", LAYERED, str(layered_solution), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    stamped(doc)
    assert doc["valid"] and doc["violation"] is None and doc["placed"] == 113 and doc["value"] > 0
    r = run_cli("validate", LAYERED, str(layered_solution), "--json", "--capacity", "1MiB")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["valid"] is False and "capacity" in doc["violation"]


def test_solve_report_file_is_stamped(tmp_path):
    rep = tmp_path / "rep.json"
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "--report", str(rep))
    assert r.returncode == 0, r.stderr
    doc = json.loads(rep.read_text())
    stamped(doc)
    assert doc["solver"] == "greedy-xla" and "in0" in doc["offsets"]


# ---------------------------------------------------------------------------- --capacity units, --capacity-fraction

@pytest.mark.parametrize("text, expected", [("1.5GiB", 3 * 2**29), ("512KB", 512_000), ("3000000", 3_000_000)])
def test_capacity_units_on_info(text, expected):
    r = run_cli("info", LAYERED, "--capacity", text, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["capacity"] == expected


def test_capacity_units_on_solve_validate_plot_compare_play(layered_solution, tmp_path):
    r = run_cli("solve", LAYERED, "--solver", "greedy-xla", "--capacity", "4MiB", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["capacity"] == 4 * 2**20
    r = run_cli("validate", LAYERED, str(layered_solution), "--capacity", "10MiB", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["capacity"] == 10 * 2**20
    r = run_cli("compare", LAYERED, "--solvers", "greedy-xla", "--time-limit", "1", "--capacity", "4MiB", "-o", "-")
    assert r.returncode == 0 and csv_records(r.stdout)[0]["capacity"] == str(4 * 2**20)
    r = run_cli("play", LAYERED, "--policy", "greedy", "--quiet", "--capacity", "4MiB")
    assert r.returncode == 0 and "valid" in r.stdout
    pytest.importorskip("matplotlib")
    r = run_cli("plot", LAYERED, str(layered_solution), "--capacity", "10MiB", "-o", str(tmp_path / "p.png"))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["info", "solve", "validate", "plot", "compare", "play"])
def test_bad_capacity_is_one_line_exit_2(command, layered_solution, tmp_path):
    args = {
        "info": ["info", LAYERED],
        "solve": ["solve", LAYERED, "--solver", "greedy-xla"],
        "validate": ["validate", LAYERED, str(layered_solution)],
        "plot": ["plot", LAYERED, str(layered_solution), "-o", str(tmp_path / "p.png")],
        "compare": ["compare", LAYERED, "--solvers", "greedy-xla"],
        "play": ["play", LAYERED, "--policy", "greedy"],
    }[command]
    one_error_line(run_cli(*args, "--capacity", "4XB"), "--capacity", "4XB")


@pytest.fixture(scope="module")
def layered_max_live():
    return json.loads(run_cli("info", LAYERED, "--json").stdout)["max_live_bytes"]


@pytest.mark.parametrize("command", ["info", "solve", "validate", "plot"])
def test_capacity_fraction_and_its_exclusion(command, layered_solution, layered_max_live, tmp_path):
    args = {
        "info": ["info", LAYERED, "--json"],
        "solve": ["solve", LAYERED, "--solver", "greedy-xla", "--json"],
        "validate": ["validate", LAYERED, str(layered_solution), "--json"],
        "plot": ["plot", LAYERED, str(layered_solution), "-o", str(tmp_path / "p.png")],
    }[command]
    one_error_line(run_cli(*args, "--capacity-fraction", "0.5", "--capacity", "4MiB"), "exclude each other")
    one_error_line(run_cli(*args, "--capacity-fraction", "nope"), "--capacity-fraction")
    if command == "plot":
        pytest.importorskip("matplotlib")
    r = run_cli(*args, "--capacity-fraction", "0.3")
    if command == "validate":  # the solution used 10101248 bytes: more than 30% of the max live
        assert r.returncode == 1 and "capacity" in json.loads(r.stdout)["violation"]
    else:
        assert r.returncode == 0, r.stderr
    if command in ("info", "solve"):  # rounded down to the tpuv4i alignment
        assert json.loads(r.stdout)["capacity"] == int(layered_max_live * 0.3) // 512 * 512


# ---------------------------------------------------------------------------- solver options

def test_solve_solver_option_is_passed_and_a_misspelt_one_is_an_error():
    r = run_cli("solve", LAYERED, "--solver", "mcts", "--time-limit", "1", "--solver-option", "simulations=2",
                "--json")
    assert r.returncode == 0, r.stderr
    line = one_error_line(run_cli("solve", LAYERED, "--solver", "mcts", "--solver-option", "simulaitons=5"),
                          "simulaitons", "mcts")
    assert "its options:" in line and "simulations" in line


@pytest.mark.parametrize("flag", [["--workers", "2"], ["--simulations", "4"]])
def test_solve_flag_the_solver_does_not_take_is_an_error(flag):
    one_error_line(run_cli("solve", LAYERED, "--solver", "greedy-xla", *flag), flag[0], "greedy-xla",
                   "its options: none")


def test_compare_option_no_solver_takes_is_an_error_but_one_some_take_is_fine():
    line = one_error_line(run_cli("compare", LAYERED, "--solvers", "greedy-xla,best-fit", "--solver-option",
                                  "nosuch=1"), "nosuch")
    assert "greedy-xla" in line and "best-fit" in line
    one_error_line(run_cli("compare", LAYERED, "--solvers", "greedy-xla,mcts", "--solver-option", "greedy-xla:k=3"),
                   "greedy-xla", "'k'")
    r = run_cli("compare", LAYERED, "--solvers", "greedy-xla,mcts", "--time-limit", "1", "--solver-option",
                "simulations=2", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert all(row["valid"] == "true" for row in csv_records(r.stdout))


# ---------------------------------------------------------------------------- capacity warnings

@pytest.mark.parametrize("capacity, words", [("1GiB", "trivial"), ("256", "below the alignment 512")])
def test_degenerate_capacity_gives_one_warning_line(capacity, words):
    r = run_cli("info", LAYERED, "--capacity", capacity)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning:") and words in lines[0]


def test_no_warning_for_an_ordinary_or_tight_capacity():
    for problem in (LAYERED, PACK):
        r = run_cli("info", problem)
        assert r.returncode == 0 and r.stderr == ""
    # map mode at exactly the max live bytes (MiniMalloc's hard set): fitting every buffer is a packing problem,
    # not a trivial one
    r = run_cli("info", PACK, "--mode", "map")
    assert r.returncode == 0 and r.stderr == "", r.stderr


# ---------------------------------------------------------------------------- --minimize-peak

def test_minimize_peak_drops_the_capacity_and_says_so(tmp_path):
    sol = tmp_path / "s.csv"
    r = run_cli("solve", PACK, "--solver", "best-fit", "--minimize-peak", "-o", str(sol))  # no minimize_peak option
    assert r.returncode == 0, r.stderr
    assert "capacity=none" in r.stdout and "--minimize-peak" in r.stdout
    peak = parse_bytes(r.stdout.split("peak=")[1].split()[0])  # 79B: below 1 KiB a byte count is exact
    assert peak > 64  # above the file name's capacity, and not rejected for it
    assert run_cli("validate", PACK, str(sol)).returncode == 1
    assert run_cli("validate", PACK, str(sol), "--capacity", str(peak)).returncode == 0
    r = run_cli("solve", PACK, "--solver", "best-fit", "--minimize-peak", "--hardware", "test", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["capacity"] is None
    one_error_line(run_cli("solve", PACK, "--solver", "best-fit", "--minimize-peak", "--capacity", "100"),
                   "--minimize-peak")


# ---------------------------------------------------------------------------- modes

def test_solvers_lists_modes_without_importing_solvers():
    r = run_cli("solvers", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0
    modes = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()}
    assert modes["muzero"] == "map,pack,prefetch" and modes["pack-search"] == "pack" and modes["select-pack"] == "map,pack"
    assert modes["greedy-xla"] == "map,pack"
    for module in ("mallocgame.solvers.greedy_xla", "mallocgame.hybrid.select_pack", "mallocgame.hybrid.lns",
                   "mallocgame.solvers.muzero", "ortools", " torch"):
        assert module not in r.stderr


def test_compare_shows_a_missing_mode_as_n_a_without_running_it():
    r = run_cli("compare", PACK, LAYERED, "--solvers", "pack-search,greedy-xla", "--time-limit", "1", "-o", "-")
    assert r.returncode == 0, r.stderr
    recs = {(row["input"], row["solver"]): row for row in csv_records(r.stdout)}
    na = recs[("layered150", "pack-search")]
    assert na["status"] == "n/a" and na["valid"] == "" and na["seconds"] == ""
    assert recs[("pack40", "pack-search")]["valid"] == "true"
    assert "pack-search: valid 1/1 (1 n/a)" in r.stderr
    assert "[3/4] layered150 / pack-search: n/a" in r.stderr  # its progress line
    assert "does not support" not in r.stderr  # not listed under "not valid"


# ---------------------------------------------------------------------------- progress

def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    pytest.importorskip("matplotlib")
    r = run_cli("compare", LAYERED, PACK, "--solvers", "greedy-xla,pack-search", "--time-limit", "1",
                "--plot", str(tmp_path / "pics"))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert re.fullmatch(r"\[1/4\] layered150 / greedy-xla: FEASIBLE [0-9.]+(ns|µs|ms|s)", lines[0]), lines[0]
    assert any(line.startswith("[4/4] pack40 / pack-search: OPTIMAL") for line in lines)
    assert any(line.startswith("[pictures 2/2] pack40") for line in lines)
    assert "\r" not in r.stderr  # no bar
    r = run_cli("compare", LAYERED, "--solvers", "greedy-xla", "--time-limit", "1", "--no-progress")
    assert r.returncode == 0 and r.stderr == ""


# ---------------------------------------------------------------------------- results JSON

def test_compare_json_is_stamped_with_offsets_by_buffer_id(tmp_path):
    out = tmp_path / "r.csv"
    r = run_cli("compare", PACK, LAYERED, "--solvers", "greedy-xla", "--time-limit", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    stamped(doc)
    assert doc["format"] == "mallocgame.compare/1"
    by_input = {res["input"]: res for res in doc["results"]}
    assert by_input["pack40"]["offsets"] is None  # greedy overflows the tight pack instance: no answer
    offsets = by_input["layered150"]["offsets"]
    assert isinstance(offsets, dict) and len(offsets) == 150 and "in0" in offsets
    assert all(v is None or isinstance(v, int) for v in offsets.values())


# ---------------------------------------------------------------------------- checkpoints, usage

def test_missing_or_unreadable_checkpoint_is_bad_input(tmp_path):
    one_error_line(run_cli("solve", LAYERED, "--solver", "muzero", "--time-limit", "1",
                           env={"MALLOCGAME_MUZERO_CHECKPOINT": "/nope"}), "/nope", "not found")
    garbage = tmp_path / "g.pt"
    garbage.write_text("not a checkpoint")
    one_error_line(run_cli("solve", LAYERED, "--solver", "muzero", "--time-limit", "1",
                           env={"MALLOCGAME_MUZERO_CHECKPOINT": str(garbage)}), str(garbage))
    one_error_line(run_cli("compare", LAYERED, "--solvers", "greedy-xla,muzero", "--time-limit", "1",
                           env={"MALLOCGAME_MUZERO_CHECKPOINT": "/nope"}), "/nope")
    one_error_line(run_cli("train", "--resume", "/nope"), "--resume", "/nope")


@pytest.mark.parametrize("args", [["solve", LAYERED], ["compare", LAYERED, "--solvers", "greedy-xla", "--jobs", "x"],
                                  ["info"], ["nosuchcommand"]])
def test_click_usage_errors_exit_2(args):
    assert run_cli(*args).returncode == 2


# ---------------------------------------------------------------------------- HLO text as a problem file

def test_an_hlo_file_is_a_problem_file_and_its_notes_are_warning_lines(tmp_path):
    # solve/info/compare read scheduled HLO text (gzipped too) as `import hlo` would; an importer's note is one
    # `warning:` line, not Python's file:line report
    import gzip

    from tests.test_importers import CARRIED_LOOP

    hlo = tmp_path / "carried.hlo.txt.gz"
    hlo.write_bytes(gzip.compress(CARRIED_LOOP.replace(', backend_config={"known_trip_count":{"n":"3"}}', "")
                                  .encode()))
    r = run_cli("solve", str(hlo), "--solver", "msa", "--mode", "prefetch", "--capacity-fraction", "0.5",
                "--time-limit", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("msa: ")
    notes = [line for line in r.stderr.splitlines() if "unknown trip count" in line]
    assert len(notes) == 1 and notes[0].startswith("warning: ") and "HloImportWarning" not in r.stderr
    r = run_cli("info", str(hlo))
    assert r.returncode == 0 and "problem: carried" in r.stdout, r.stderr
