"""Readers and writers: round trips, and one clear line for every kind of bad input."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.formats.io import (
    capacity_from_name,
    load_problem,
    problem_csv_text,
    read_solution_csv,
    workload_dict,
    write_solution_csv,
    write_workload_json,
)
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.problem.model import BufferTable, InputError, OpTable, Solution, Status
from tests.conftest import BENCHMARKS, needs_benchmarks


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_csv_round_trip_with_benefit(tmp_path):
    p = random_intervals(30, seed=2, with_benefit=True)
    path = write(tmp_path, "r.100.csv", problem_csv_text(p))
    q = load_problem(path)
    assert q.capacity == 100
    assert [(b.id, b.start, b.end, b.size, b.benefit) for b in q.buffers] == \
           [(b.id, b.start, b.end, b.size, b.benefit) for b in p.buffers]


def test_a_spreadsheets_csv_reads_as_the_plain_one(tmp_path):
    # saved by a spreadsheet: a UTF-8 byte-order mark, CRLF line ends, the header in capitals, spaces after commas
    p = random_intervals(20, seed=4, with_benefit=True)
    text = problem_csv_text(p)
    plain = load_problem(write(tmp_path, "plain.64.csv", text))
    head, rest = text.split("\n", 1)
    styled = "\ufeff" + head.upper().replace(",", ", ") + "\r\n" + rest.replace("\n", "\r\n")
    path = tmp_path / "styled.64.csv"
    path.write_bytes(styled.encode("utf-8"))
    read = load_problem(str(path))
    assert [(b.id, b.start, b.end, b.size, b.benefit) for b in read.buffers] == \
           [(b.id, b.start, b.end, b.size, b.benefit) for b in plain.buffers]
    bom_json = tmp_path / "w.json"
    write_workload_json(str(bom_json), p)
    bom_json.write_bytes(b"\xef\xbb\xbf" + bom_json.read_bytes())
    assert load_problem(str(bom_json)).n == p.n


def test_minimallocs_other_column_names_alignment_and_gaps(tmp_path):
    # MiniMalloc's converter reads buffer/buffer_id for id, begin/start for lower, an inclusive `end` for upper,
    # an alignment column and a gaps column: so does this reader (gaps kept as live, with a warning)
    plain = load_problem(write(tmp_path, "p.64.csv", "id,lower,upper,size\na,0,3,8\nb,2,5,16\n"))
    for header, rows in [("buffer,start,end,size", "a,0,2,8\nb,2,4,16\n"),
                         ("buffer_id,begin,upper,size", "a,0,3,8\nb,2,5,16\n")]:
        other = load_problem(write(tmp_path, "o.64.csv", f"{header}\n{rows}"))
        assert [(b.id, b.start, b.end, b.size) for b in other.buffers] == \
               [(b.id, b.start, b.end, b.size) for b in plain.buffers]
    aligned = load_problem(write(tmp_path, "a.64.csv", "id,lower,upper,size,alignment\na,0,3,8,4\nb,2,5,16,\n"))
    assert [b.alignment for b in aligned.buffers] == [4, 1]
    back = load_problem(write(tmp_path, "back.64.csv", problem_csv_text(aligned)))  # the writer keeps the column
    assert [(b.id, b.alignment) for b in back.buffers] == [("a", 4), ("b", 1)]
    with pytest.warns(UserWarning, match="column 'gaps'"):
        gapped = load_problem(write(tmp_path, "g.64.csv", "id,lower,upper,size,gaps\na,0,9,8,2-4 6-7\nb,2,5,16,\n"))
    assert [(b.start, b.end) for b in gapped.buffers] == [(0, 9), (2, 5)]
    with pytest.raises(InputError, match="column 'lower' given twice \\(start, lower\\)"):
        load_problem(write(tmp_path, "d.64.csv", "id,start,lower,upper,size\na,0,0,3,8\n"))
    with pytest.raises(InputError, match="row 2, field 'alignment'"):
        load_problem(write(tmp_path, "x.64.csv", "id,lower,upper,size,alignment\na,0,3,8,four\n"))


def test_gaps_in_minimalloc_form_are_read_and_others_refused(tmp_path):
    # MiniMalloc's gaps: LOWER-UPPER[@FROM:TO], space-separated, inside the buffer's life (an `end` column's
    # gaps end inclusively, like its lives); kept as live time with a warning, anything else is one line
    with pytest.warns(UserWarning, match="column 'gaps'"):
        p = load_problem(write(tmp_path, "g.64.csv", "id,lower,upper,size,gaps\na,0,9,8,0-4@0:8  6-9\nb,2,5,16,2-3\n"))
    assert [(b.start, b.end) for b in p.buffers] == [(0, 9), (2, 5)]
    with pytest.warns(UserWarning, match="column 'gaps'"):
        p = load_problem(write(tmp_path, "e.64.csv", "id,start,end,size,gaps\na,0,8,8,6-8\n"))
    assert [(b.start, b.end) for b in p.buffers] == [(0, 9)]
    for cell, reason in [("zz", "expected space-separated LOWER-UPPER gaps"), ("2-4,", "expected space-separated"),
                         ("2-4@8", "expected space-separated"), ("-1-3", "expected space-separated"),
                         ("2.5-4", "expected space-separated"), ("4-4", "gap '4-4' is not a time span inside"),
                         ("5-3", "gap '5-3' is not"), ("0-10", "gap '0-10' is not a time span inside the buffer's "
                                                           "life [0, 9)")]:
        text = f'id,lower,upper,size,gaps\nok,0,9,8,1-2\na,0,9,8,"{cell}"\n'
        with pytest.raises(InputError, match=re.escape(f"row 3, field 'gaps': {reason}")):
            load_problem(write(tmp_path, "bad.64.csv", text))


def test_blank_lines_between_records_are_passed_over_unparsed(tmp_path):
    # a header and millions of blank lines (a compression bomb's payload) is one scan, not millions of
    # empty records for the csv module; the rows keep their line numbers
    import csv

    import mallocgame.formats.io as mio

    handed = []

    class Counting(mio._RecordLines):
        def __next__(self):
            handed.append(super().__next__())
            return handed[-1]

    text = "id,lower,upper,size\n" + "\n" * 2_000_000 + " , ,\r\n" * 1000 + "a,0,2,8\n" + "\r\n" * 10 + "b,1,x,8\n"
    lines = Counting(text)
    records = []
    for raw in csv.reader(lines):
        records.append((lines.record_line, raw))
        lines.between_records = True
    assert records == [(1, ["id", "lower", "upper", "size"]), (2_001_002, ["a", "0", "2", "8"]),
                       (2_001_013, ["b", "1", "x", "8"])]
    assert handed == ["id,lower,upper,size\n", "a,0,2,8\n", "b,1,x,8\n"]
    with pytest.raises(InputError, match="row 2001013, field 'upper'"):
        load_problem(write(tmp_path, "blank.64.csv", text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b,c", ",", '"', "\n", "\r", "\r\n", " ", "\t", "\u2028"]),
                max_size=40).map("".join))
def test_records_are_the_csv_modules_less_its_blank_ones(text):
    import csv
    import io

    import mallocgame.formats.io as mio

    reader = csv.reader(io.StringIO(text, newline=""))
    want, line = [], 1
    for raw in reader:
        want.append((line, raw))
        line = reader.line_num + 1
    got = list(mio._csv_records("x.csv", text))

    def blank(record):  # what every reader skips
        return not record[1] or all(not c.strip() for c in record[1])

    assert [r for r in got if not blank(r)] == [r for r in want if not blank(r)]
    assert got[:1] == want[:1]  # the header, blank or not

def test_gzipped_inputs_read_as_the_plain_ones(tmp_path, monkeypatch):
    # dumps are often kept gzipped: NAME.CAPACITY.csv.gz and .json.gz read as their plain files (the capacity from
    # the name too); a broken or bomb-sized gzip is one line
    import gzip

    p = layered_network(60, seed=1)
    plain_csv = write(tmp_path, "r.100.csv", problem_csv_text(p))
    (tmp_path / "r.100.csv.gz").write_bytes(gzip.compress(Path(plain_csv).read_bytes()))
    a, b = load_problem(plain_csv), load_problem(str(tmp_path / "r.100.csv.gz"))
    assert (a.name, a.capacity, a.buffers) == (b.name, b.capacity, b.buffers) and b.capacity == 100
    write_workload_json(str(tmp_path / "w.json"), p)
    (tmp_path / "w.json.gz").write_bytes(gzip.compress((tmp_path / "w.json").read_bytes()))
    assert load_problem(str(tmp_path / "w.json.gz")).ops == load_problem(str(tmp_path / "w.json")).ops
    (tmp_path / "cut.csv.gz").write_bytes(gzip.compress(b"id,lower,upper,size\n")[:12])
    with pytest.raises(InputError, match="cut.csv.gz: not a valid gzip file"):
        load_problem(str(tmp_path / "cut.csv.gz"))
    monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", "100")
    with pytest.raises(InputError, match=r"r.100.csv.gz: decompresses to more than 100 bytes \(100 B\), the cap"):
        load_problem(str(tmp_path / "r.100.csv.gz"))


def test_the_decompressed_size_cap_is_256_mib_or_the_environment_s(tmp_path, monkeypatch):
    import gzip

    from mallocgame.formats.io import DEFAULT_MAX_DECOMPRESSED, max_decompressed

    monkeypatch.delenv("MALLOCGAME_MAX_DECOMPRESSED", raising=False)
    assert DEFAULT_MAX_DECOMPRESSED == 256 * 2**20 == max_decompressed()
    text = "id,lower,upper,size\n" + "".join(f"b{k},{k},{k + 2},8\n" for k in range(100))
    assert len(text) < 2048
    padded = text + "\n" * (2048 - len(text))  # exactly 2 KiB: at the cap, not past it
    (tmp_path / "at.csv.gz").write_bytes(gzip.compress(padded.encode()))
    (tmp_path / "over.csv.gz").write_bytes(gzip.compress((padded + "\n").encode()))
    monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", "2KiB")
    assert max_decompressed() == 2048
    assert load_problem(str(tmp_path / "at.csv.gz")).n == 100
    with pytest.raises(InputError, match=r"over.csv.gz: decompresses to more than 2,048 bytes \(2 KiB\), the cap on "
                                         r"a compressed input \(set MALLOCGAME_MAX_DECOMPRESSED to read a larger one\)"):
        load_problem(str(tmp_path / "over.csv.gz"))
    monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", "1GiB")
    assert max_decompressed() == 2**30 and load_problem(str(tmp_path / "over.csv.gz")).n == 100
    for bad in ("lots", "-5", "0", "1.5"):
        monkeypatch.setenv("MALLOCGAME_MAX_DECOMPRESSED", bad)
        with pytest.raises(InputError, match="^MALLOCGAME_MAX_DECOMPRESSED: "):
            load_problem(str(tmp_path / "at.csv.gz"))


def test_json_round_trip_keeps_ops_and_capacity(tmp_path):
    p = layered_network(80, seed=3)
    path = tmp_path / "w.json"
    write_workload_json(path, p)
    q = load_problem(str(path))
    assert q.ops == p.ops and q.buffers == p.buffers and q.capacity == p.capacity
    assert workload_dict(q)["format"] == "mallocgame.workload/1"


def test_solution_csv_round_trip(tmp_path):
    p = random_intervals(10, seed=1)
    offsets = tuple(None if i % 3 == 0 else 8 * i for i in range(10))
    path = tmp_path / "sol.csv"
    write_solution_csv(path, p, Solution(offsets=offsets, status=Status.FEASIBLE))
    assert tuple(read_solution_csv(str(path), p)) == offsets
    header = path.read_text().splitlines()[0]
    assert header == "id,lower,upper,size,offset"


def test_capacity_from_name():
    assert capacity_from_name("x/A.1048576.csv") == 1048576
    assert capacity_from_name("plain.csv") is None


@needs_benchmarks()
def test_reads_minimalloc_benchmark():
    p = load_problem(str(BENCHMARKS / "minimalloc" / "K.1048576.csv"))
    assert p.n == 454 and p.capacity == 1048576


BAD_CSV = [
    ("empty.csv", "", "empty file"),
    ("header.csv", "id,lower,upper,size\n", "no buffers"),
    ("nocol.csv", "id,lower,size\na,0,4\n", "missing column 'upper'"),
    ("nonnum.csv", "id,lower,upper,size\na,0,x,4\n", "row 2, field 'upper'"),
    ("zero.csv", "id,lower,upper,size\na,0,2,0\n", "row 2, field 'size'"),
    ("neg.csv", "id,lower,upper,size\na,0,2,-3\n", "size must be positive"),
    ("order.csv", "id,lower,upper,size\na,0,2,4\nb,5,5,4\n", "row 3, field 'upper'"),
    ("dup.csv", "id,lower,upper,size\na,0,2,4\na,1,3,4\n", "duplicate id 'a'"),
    ("fields.csv", "id,lower,upper,size\na,0,2\n", "row 2: expected 4 fields"),
]


@pytest.mark.parametrize("name,text,reason", BAD_CSV, ids=[b[0] for b in BAD_CSV])
def test_bad_csv_gives_one_line(tmp_path, name, text, reason):
    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as err:
        load_problem(path)
    message = str(err.value)
    assert "\n" not in message and path in message and reason in message


def workload(**changes):
    doc = {"format": "mallocgame.workload/1", "name": "w",
           "ops": [{"id": "op0", "kind": "matmul", "flops": 10.0, "operands": [{"buffer": "b0", "access": "read", "bytes": 8}]},
                   {"id": "op1", "kind": "add", "flops": 1.0, "operands": [{"buffer": "b0", "access": "read", "bytes": 8}]}],
           "buffers": [{"id": "b0", "size": 8, "start": 0, "end": 2, "alignment": 1, "kind": "activation"}],
           "inplace": []}
    doc.update(changes)
    return doc


BAD_JSON = [
    ("format", lambda: workload(format="other/1"), "field 'format'"),
    ("unknown-buffer", lambda: workload(ops=[{"id": "o", "operands": [{"buffer": "zz", "bytes": 1}]}]), "unknown buffer 'zz'"),
    ("outside-life", lambda: workload(ops=[{"id": "o", "operands": []}, {"id": "p", "operands": []},
                                           {"id": "q", "operands": [{"buffer": "b0", "bytes": 1}]}]), "outside its live range"),
    ("size", lambda: workload(buffers=[{"id": "b0", "size": 0, "start": 0, "end": 2}]), "field 'size'"),
    ("missing", lambda: workload(buffers=[{"id": "b0", "start": 0, "end": 2}]), "missing field 'size'"),
    ("kind", lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "kind": "nope"}]), "field 'kind'"),
    ("inplace", lambda: workload(inplace=[["b0", "b9"]]), "inplace[0]"),
]


@pytest.mark.parametrize("name,make,reason", BAD_JSON, ids=[b[0] for b in BAD_JSON])
def test_bad_json_gives_one_line(tmp_path, name, make, reason):
    path = write(tmp_path, f"{name}.json", json.dumps(make()))
    with pytest.raises(InputError) as err:
        load_problem(path)
    assert "\n" not in str(err.value) and reason in str(err.value) and path in str(err.value)


def test_truncated_json(tmp_path):
    path = write(tmp_path, "t.json", json.dumps(workload())[:40])
    with pytest.raises(InputError, match="invalid JSON"):
        load_problem(path)


def test_missing_file():
    with pytest.raises(InputError, match="file not found"):
        load_problem("/nonexistent/x.csv")


def test_hint_for_other_problem_is_rejected(tmp_path):
    p = random_intervals(5, seed=1)
    q = random_intervals(5, seed=2)
    path = tmp_path / "sol.csv"
    write_solution_csv(path, q, Solution(offsets=(None,) * 5, status=Status.FEASIBLE))
    with pytest.raises(InputError, match="different problem"):
        read_solution_csv(str(path), p)


# Ids that once did not come back (issue 19, item 8): padded (the CSV reader stripped them), longer
# than the csv module's 131,072-character field limit, with a comma, a quote and a line break, a tab,
# non-ASCII text.
AWKWARD_IDS = [" a ", "x" * 200_000, 'q,"\n', "tab\tid", "\u00fc\u540d", "\r\n."]


@pytest.mark.parametrize("awkward", AWKWARD_IDS, ids=["padded", "long", "quoted", "tab", "non-ascii", "line-break"])
def test_awkward_ids_round_trip_through_every_writer_and_reader(tmp_path, awkward):
    from mallocgame.formats.io import (
        intervals_csv_text,
        read_intervals_csv,
        read_workload_json,
    )
    from mallocgame.formats.lift import map_intervals

    base = layered_network(12, seed=3)
    ids = {b.id: (awkward if k == 2 else b.id) for k, b in enumerate(base.buffers)}
    p = base.replace(buffers=tuple(dataclasses.replace(b, id=ids[b.id]) for b in base.buffers),
                     ops=tuple(dataclasses.replace(op, operands=tuple(dataclasses.replace(o, buffer=ids[o.buffer])
                                                                      for o in op.operands))
                               for op in base.ops))
    write_workload_json(tmp_path / "w.json", p)
    q = read_workload_json(str(tmp_path / "w.json"))
    assert [b.id for b in q.buffers] == [b.id for b in p.buffers]
    assert load_problem(write(tmp_path, "p.csv", problem_csv_text(p))).buffers[2].id == awkward
    offsets = tuple(None if i % 2 else 64 * i for i in range(p.n))
    write_solution_csv(tmp_path / "sol.csv", q, Solution(offsets=offsets, status=Status.FEASIBLE))
    assert tuple(read_solution_csv(str(tmp_path / "sol.csv"), q)) == offsets
    intervals = map_intervals(q, list(offsets))
    back = read_intervals_csv(write(tmp_path, "iv.csv", intervals_csv_text(q, intervals)), q)
    assert sorted(back, key=repr) == sorted(intervals, key=repr) and any(iv.buffer == 2 for iv in back)


def test_awkward_ids_round_trip_through_solve_and_validate(tmp_path):
    import subprocess
    import sys

    bufs = [{"id": i, "size": 64, "start": k % 3, "end": k % 3 + 2} for k, i in enumerate(AWKWARD_IDS)]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"format": "mallocgame.workload/1", "buffers": bufs, "capacity": 192}))
    cli = [sys.executable, "-m", "mallocgame.cli.main"]
    solved = subprocess.run(cli + ["solve", str(path), "--solver", "greedy-xla", "-o", str(tmp_path / "s.csv")],
                            capture_output=True, text=True)
    assert solved.returncode == 0, solved.stderr
    checked = subprocess.run(cli + ["validate", str(path), str(tmp_path / "s.csv")], capture_output=True, text=True)
    assert checked.returncode == 0 and checked.stdout.startswith("ok:"), checked.stderr


def test_lone_surrogate_id_is_refused_with_its_place(tmp_path):
    path = tmp_path / "w.json"
    path.write_text('{"format": "mallocgame.workload/1", "buffers": [{"id": "z", "size": 8, "start": 0, "end": 2},'
                    ' {"id": "s\\ud800", "size": 8, "start": 0, "end": 2}]}')
    with pytest.raises(InputError, match=r"buffers\[1\], field 'id': not valid Unicode text \(lone surrogate U\+D800\)"):
        load_problem(str(path))


@pytest.mark.parametrize("blank", [" ", "\r", "\t\n"])
def test_blank_ids_are_refused_by_both_readers(tmp_path, blank):
    doc = {"format": "mallocgame.workload/1", "buffers": [{"id": blank, "size": 8, "start": 0, "end": 2}]}
    with pytest.raises(InputError, match=r"buffers\[0\], field 'id': empty id"):
        load_problem(write(tmp_path, "w.json", json.dumps(doc)))
    with pytest.raises(InputError, match=r"row 2, field 'id': empty id"):
        load_problem(write(tmp_path, "p.csv", problem_csv_text(random_intervals(1, seed=0)).replace("b0", f'"{blank}"')))


def test_csv_field_limit_is_restored_after_reading(tmp_path):
    import csv

    before = csv.field_size_limit()
    load_problem(write(tmp_path, "p.csv", "id,lower,upper,size\n" + "y" * 200_000 + ",0,2,8\n"))
    assert csv.field_size_limit() == before


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(tmp_path):
    """SIGKILL mid-write leaves ``.NAME.PID.XXXX.tmp`` (issue 19, item 8); the next write of NAME removes it,
    and leaves alone the temp file of a writer that still runs."""
    import signal
    import subprocess
    import sys

    from mallocgame.formats.io import atomic_write_text

    out = tmp_path / "out.csv"
    writer = ("import sys, time\nfrom mallocgame.formats.io import atomic_output\n"
              "with atomic_output(sys.argv[1]) as fh:\n    fh.write('x' * 1000); fh.flush(); print('open', flush=True)\n"
              "    time.sleep(60)\n")
    killed = subprocess.Popen([sys.executable, "-c", writer, str(out)], stdout=subprocess.PIPE, text=True)
    alive = subprocess.Popen([sys.executable, "-c", writer, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert killed.stdout.readline() == "open\n" and alive.stdout.readline() == "open\n"
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        left = sorted(p.name for p in tmp_path.glob(".out.csv.*.tmp"))
        assert len(left) == 2 and any(f".{killed.pid}." in n for n in left)
        atomic_write_text(out, "done\n")
        assert out.read_text() == "done\n"
        assert [p.name for p in tmp_path.glob(".out.csv.*.tmp")] == [n for n in left if f".{alive.pid}." in n]
    finally:
        alive.kill()
        alive.wait()


class _FullDisk:
    """A file object whose data never fits: every write raises ENOSPC with no file name, as a real write does."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, data):
        import errno
        import os

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def test_a_full_disk_error_names_the_output_and_leaves_nothing(tmp_path, monkeypatch):
    import os

    import mallocgame.formats.io as io_module
    from mallocgame.formats.io import atomic_write_text

    real = os.fdopen
    monkeypatch.setattr(io_module.os, "fdopen", lambda *a, **k: _FullDisk(real(*a, **k)))
    with pytest.raises(OSError) as err:
        atomic_write_text(tmp_path / "out.csv", "x")
    assert err.value.filename == str(tmp_path / "out.csv") and "No space left" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_suites_export_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import os

    from click.testing import CliRunner

    import mallocgame.formats.io as io_module
    from mallocgame.cli.main import main

    real = os.fdopen
    monkeypatch.setattr(io_module.os, "fdopen", lambda *a, **k: _FullDisk(real(*a, **k)))
    result = CliRunner().invoke(main, ["suites", "quick", "--export", str(tmp_path / "exp")])
    assert result.exit_code == 2
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(f"error: {tmp_path / 'exp'}") and line.endswith("No space left on device"), result.output


PLAIN_AND_AWKWARD_CSV = [
    "id,lower,upper,size\na,0,2,4\nb,1,3,8\n",
    "ID,Lower,Upper,Size,alignment,benefit\na,0,2,4,8,1.5\nb,1,3,8,,\nc,2,5,1,2,0\n",
    "buffer,start,end,size\na,0,2,4\nb,1,3,8\n",  # MiniMalloc's names, `end` inclusive
    "id,lower,upper,size,gaps\na,0,4,4,\nb,1,3,8,\n",
    "id,lower,upper,size,gaps\na,0,4,4,1-2\nb,1,3,8,\n",  # gaps: the warning
    "id,lower,upper,size\na, 0 ,2,4\n b ,1,3,8\n",  # spaces around numbers and in ids
    "id,lower,upper,size\na,0.0,2,4e1\nb,1,3,8\n",  # numbers the checking loop converts
    "id,lower,upper,size\r\na,0,2,4\r\nb,1,3,8\r\n",
    "id,lower,upper,size\na,0,2,4\n\nb,1,3,8\n\n",
    'id,lower,upper,size\n"a,1",0,2,4\nb,1,3,8\n',
    "id,lower,upper,size,extra\na,0,2,4,x\nb,1,3,8,y\n",
    "id,lower,upper,size\na,0,2,4\n,1,3,8\n",
    "id,lower,upper,size\na,0,2,4\na,1,3,8\n",
    "id,lower,upper,size\na,0,2,4\nb,1,3\n",
    "id,lower,upper,size\na,0,2,-4\n",
    "id,lower,upper,size\na,3,2,4\n",
    "id,lower,upper,size\na,0,2,4611686018427387905\n",
    "id,lower,upper,size\na,0,2,4611686018427387904\nb,0,2,4611686018427387904\n",
    "id,lower,upper,size,benefit\na,0,2,4,nan\n",
    "id,lower,upper,size,benefit\na,0,2,4,-1\n",
    "id,lower,upper,size,alignment\na,0,2,4,0\n",
    "id,lower,upper,size\na,0,2,1_000\n",
    "id,lower,upper,upper,size\na,0,2,3,4\n",
]


def _read_both(path):
    """``read_csv`` of ``path`` as it is and with its column-wise fast path off: ``(problem or error, arrays)``."""
    import warnings

    import mallocgame.formats.io as io_module

    out = []
    for fast in (True, False):
        saved = io_module._fast_csv_buffers
        if not fast:
            io_module._fast_csv_buffers = lambda path, text: None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                problem = io_module.read_csv(path)[0]
            arrays = dataclasses.asdict(problem.arrays)
            out.append((problem, {k: (v.dtype, v.tolist()) for k, v in arrays.items()}, [str(w.message) for w in caught]))
        except InputError as exc:
            out.append(("error", str(exc)))
        finally:
            io_module._fast_csv_buffers = saved
    return out


@pytest.mark.parametrize("text", PLAIN_AND_AWKWARD_CSV)
def test_csv_fast_path_reads_what_the_checking_loop_reads(tmp_path, text):
    path = str(tmp_path / "p.csv")
    Path(path).write_bytes(text.encode())
    fast, checked = _read_both(path)
    assert repr(fast) == repr(checked)


def test_csv_fast_path_matches_the_checking_loop_on_the_benchmarks_and_bad_inputs():
    paths = sorted(Path(__file__).parent.joinpath("bad_inputs").glob("*.csv"))
    if BENCHMARKS.is_dir():
        paths += sorted(BENCHMARKS.rglob("*.csv"))[:40]
    assert paths
    for path in paths:
        fast, checked = _read_both(str(path))
        assert repr(fast) == repr(checked), path


def test_a_plain_csv_is_read_column_wise_with_its_arrays(tmp_path):
    from mallocgame.formats.io import read_csv

    problem = random_intervals(300, seed=3)
    path = str(tmp_path / "r.csv")
    Path(path).write_text(problem_csv_text(problem))
    read = read_csv(path)[0]
    # parsed in bulk: the buffers are columns and the arrays are those columns, no buffer object made
    assert isinstance(read.buffers, BufferTable) and read.arrays.size is read.buffers.size
    assert not read.buffers.materialized
    assert read.buffers == problem.buffers
    assert read.arrays.size.tolist() == [b.size for b in problem.buffers]
    assert read.replace(mode="pack").arrays is read.arrays


def _workload_both(path):
    """``read_workload_json`` of ``path`` as it is (the columnar reader first), with the columnar reader off (the
    compact decoding) and with both off (the checking loops): each a problem or an error."""
    import mallocgame.formats.io as io_module

    out = []
    for off in ((), ("_columnar_workload",), ("_columnar_workload", "_compact_workload")):
        saved = {name: getattr(io_module, name) for name in off}
        for name in off:
            setattr(io_module, name, lambda path, data: None)
        try:
            out.append(io_module.read_workload_json(path))
        except InputError as exc:
            out.append(("error", str(exc)))
        finally:
            for name, fn in saved.items():
                setattr(io_module, name, fn)
    return out


def _op(t, *operands, **fields):
    return {"id": f"op{t}", "kind": "add", "flops": 1.0, "operands": list(operands), **fields}


AWKWARD_WORKLOADS = [
    lambda: workload(),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "read"}), _op(1)]),  # bytes: the buffer's size
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "benefit": 3}]),
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "benefit": float("nan")}]),
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "benefit": -1.0}]),
    lambda: workload(buffers=[{"id": " ", "size": 8, "start": 0, "end": 2}], ops=[_op(0), _op(1)]),
    lambda: workload(buffers=[{"id": 7, "size": 8, "start": 0, "end": 2}], ops=[_op(0), _op(1)]),
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2}, {"id": "b0", "size": 8, "start": 0, "end": 2}]),
    lambda: workload(buffers=[{"id": "b0", "size": 8.0, "start": 0, "end": 2}]),
    lambda: workload(buffers=[{"id": "b0", "size": True, "start": 0, "end": 2}]),
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 3}]),
    lambda: workload(buffers=[{"id": "b0", "size": 2**62, "start": 0, "end": 2},
                              {"id": "b1", "size": 2**62, "start": 0, "end": 2}]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "read", "bytes": 8}), _op(1, extra=1)]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "copy", "bytes": 8}), _op(1)]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "read", "bytes": -8}), _op(1)]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "read", "bytes": 8}), _op(1, kind=3)]),
    lambda: workload(ops=[_op(0), _op(1, {"buffer": "b0", "access": "write", "bytes": 8}, control_deps=["op0"])]),
    lambda: workload(ops=[_op(0), _op(1, control_deps=[{"buffer": "b0", "access": "read", "bytes": 8}])]),
    lambda: workload(name={"id": "b9", "size": 8, "start": 0, "end": 2}),
    lambda: workload(name={"buffer": "b0", "access": "read", "bytes": 8}),
    lambda: workload(inplace=[[{"id": "b9", "size": 8, "start": 0, "end": 2}, "b0"]]),
    lambda: workload(capacity=64, original_order=["op1", "op0"]),
    lambda: workload(capacity=0),
    lambda: {**workload(), "buffers": [{"id": "b0", "size": 8, "start": 0, "end": 2},
                                      {"id": "b1", "size": 4, "start": 0, "end": 1}], "inplace": [["b0", "b1"]]},
    lambda: {"buffer": "b0", "access": "read", "bytes": 8},
    lambda: workload(buffers=[]),
    # what the columnar reader's typed records refuse or default: each as the checking loops read it
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "benefit": None}]),
    lambda: workload(buffers=[{"id": "b0", "size": 2**63, "start": 0, "end": 2}]),
    lambda: workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "kind": "tensor"}]),
    lambda: workload(ops=[{"operands": [{"buffer": "b0"}]}, {"id": None}]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": 5}), _op(1)]),
    lambda: workload(ops=[_op(0, {"buffer": "b0", "access": "write", "bytes": 2**63}), _op(1)]),
    lambda: workload(ops=[_op(0, {"buffer": "b9", "access": "read"}), _op(1)]),
    lambda: workload(ops=[_op(0), _op(1, control_deps=None)]),
    lambda: workload(ops=[_op(0, flops=-1.0), _op(1)]),
    lambda: workload(ops=[_op(0), _op(0)]),
    lambda: {**workload(), "format": "mallocgame.workload/2"},
    lambda: {**workload(), "extra": {"anything": [1, 2]}},
    lambda: workload(ops=[{"operands": [{"buffer": "b0"}]}, {}]),  # ids, access and bytes by default
]


@pytest.mark.parametrize("doc", [
    workload(),
    workload(ops=[{"operands": [{"buffer": "b0"}]}, {}]),
    workload(buffers=[{"id": "b0", "size": 8, "start": 0, "end": 2, "benefit": 3}]),
    {**workload(), "extra": {"anything": [1, 2]}, "capacity": 64},
])
def test_well_formed_workloads_take_the_columnar_reader(tmp_path, doc):
    problem = load_problem(write(tmp_path, "w.json", json.dumps(doc)))
    assert isinstance(problem.buffers, BufferTable) and isinstance(problem.ops, OpTable)


@pytest.mark.parametrize("k", range(len(AWKWARD_WORKLOADS)))
def test_workload_compact_decoding_reads_what_the_checking_loop_reads(tmp_path, k):
    path = write(tmp_path, "w.json", json.dumps(AWKWARD_WORKLOADS[k]()))
    columnar, compact, checked = _workload_both(path)
    assert repr(columnar) == repr(compact) == repr(checked)
    assert columnar == checked


def test_workload_compact_decoding_matches_on_the_bundled_and_bad_inputs(tmp_path):
    paths = sorted(Path(__file__).parent.joinpath("bad_inputs").glob("*.json"))
    paths += sorted(Path(__file__).parents[1].joinpath("mallocgame", "inputs", "data").glob("*.json"))
    generated = tmp_path / "layered.json"
    write_workload_json(generated, layered_network(400, seed=2))
    paths.append(generated)
    for path in paths:
        columnar, compact, checked = _workload_both(str(path))
        assert repr(columnar) == repr(compact) == repr(checked), path


def test_a_workload_is_decoded_without_a_dictionary_per_buffer(tmp_path, monkeypatch):
    import mallocgame.formats.io as io_module

    path = tmp_path / "layered.json"
    write_workload_json(path, layered_network(300, seed=1))
    made = []
    real = io_module._CompactObjects.__call__
    monkeypatch.setattr(io_module._CompactObjects, "__call__", lambda self, raw: made.append(real(self, raw)) or made[-1])
    monkeypatch.setattr(io_module, "_columnar_workload", lambda path, data: None)  # the compact decoding's turn
    problem = io_module.read_workload_json(path)
    assert [b for b in made if type(b).__name__ == "Buffer"] == list(problem.buffers)


def test_a_workload_is_read_into_columns_without_an_object_per_buffer_or_op(tmp_path, monkeypatch):
    import mallocgame.formats.io as io_module

    path = tmp_path / "layered.json"
    made = layered_network(2_000, seed=4)
    write_workload_json(path, made)
    problem = io_module.read_workload_json(path)
    assert isinstance(problem.buffers, BufferTable) and isinstance(problem.ops, OpTable)
    assert not problem.buffers.materialized and not problem.ops.materialized
    # the columns hold what the objects say, and the objects (made when asked for) are the checking loops'
    monkeypatch.setattr(io_module, "_columnar_workload", lambda path, data: None)
    monkeypatch.setattr(io_module, "_compact_workload", lambda path, text: None)
    checked = io_module.read_workload_json(path)
    assert type(checked.buffers) is tuple and type(checked.ops) is tuple
    for column in ("size", "start", "end", "alignment"):
        assert getattr(problem.arrays, column).tolist() == getattr(checked.arrays, column).tolist()
    for column in ("op_of", "buf_of", "nbytes", "write", "flops", "transcendentals", "fixed_bytes"):
        assert getattr(problem.op_arrays, column).tolist() == getattr(checked.op_arrays, column).tolist(), column
    assert problem.index == checked.index and problem.fingerprint == checked.fingerprint
    for column in ("ptr", "ops", "reads", "writes", "defining", "output"):  # touches from the columns
        assert getattr(problem.touches, column).tolist() == getattr(checked.touches, column).tolist(), column
    assert not problem.buffers.materialized and not problem.ops.materialized
    assert problem == checked and hash(problem.buffers) == hash(checked.buffers)
    assert problem.buffers[7] == checked.buffers[7] and problem.ops[-1] == checked.ops[-1]
    assert list(problem.ops) == list(checked.ops) and problem.buffers[3:9] == checked.buffers[3:9]


def test_a_large_workload_is_described_from_its_columns(tmp_path):
    """`info`'s facts (max live, components, the evaluator, the bounds, the bound cache's key) read the columns:
    no buffer or op object is made."""
    from mallocgame.cli.common import load_prepared
    from mallocgame.cli.info import _info_facts

    path = tmp_path / "layered.json"
    write_workload_json(path, layered_network(20_000, seed=5))
    problem, spec = load_prepared(str(path), mode=None, capacity=None, capacity_fraction=None, hardware=None,
                                  oversized_ok=True)
    facts = _info_facts(problem, spec)
    assert facts["buffers"] == problem.n > 20_000 and facts["bound"] > 0
    from mallocgame.hardware.validator import peak, validate

    assert validate(problem, [None] * problem.n) is None  # all slow: valid in map mode
    assert peak(problem, [0] * problem.n) == int(problem.arrays.size.max())
    assert isinstance(problem.buffers, BufferTable) and isinstance(problem.ops, OpTable)
    assert not problem.buffers.materialized and not problem.ops.materialized


def test_table_problems_pickle_and_compare_as_tuples(tmp_path):
    import pickle

    path = tmp_path / "layered.json"
    made = layered_network(500, seed=6)
    write_workload_json(path, made)
    problem = load_problem(path)
    again = pickle.loads(pickle.dumps(problem))
    assert isinstance(again.buffers, BufferTable) and again == problem
    assert again.buffers == tuple(made.buffers) and tuple(made.buffers) == again.buffers
    assert again.replace(mode="pack").arrays.size is again.arrays.size is again.buffers.size  # the columns, shared


@pytest.mark.parametrize("where", ["x", "buffers", "capacity", "name"])
def test_a_deeply_nested_workload_is_one_error_line_or_read(tmp_path, where):
    deep = "[" * 200_000 + "]" * 200_000
    text = '{"format": "mallocgame.workload/1", "buffers": [{"id": "a", "size": 8, "start": 0, "end": 1}], ' \
           f'"{where}": {deep}}}'
    path = write(tmp_path, "deep.json", text)
    columnar, compact, checked = _workload_both(path)
    assert repr(columnar) == repr(compact) == repr(checked)
