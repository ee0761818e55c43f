"""The workload JSON's compiled scanner (``mallocgame._native.json_buffer_columns``/``json_op_columns``, the
``native`` engine) against the msgspec reader it speeds up (``MALLOCGAME_ENGINE=python``): the same problem or
the same one-line error on plain, odd and bad inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from mallocgame._native import json_buffer_columns, json_op_columns
from mallocgame.cli.main import main as cli
from mallocgame.formats.io import _JSON_TOP, load_problem, write_workload_json
from mallocgame.inputs.generate import layered_network
from mallocgame.problem.model import BUFFER_KINDS, InputError

BAD_INPUTS = Path(__file__).parent / "bad_inputs"
FORMAT = "mallocgame.workload/1"


def _facts(problem) -> tuple:
    """Everything the reader decides, as plain values (floats by their repr, which round-trips)."""
    return (problem.name, problem.capacity, problem.inplace, problem.control_deps, problem.original_order,
            type(problem.buffers).__name__, type(problem.ops).__name__, repr(list(problem.buffers)),
            repr(list(problem.ops)))


def _read(path: Path, monkeypatch, engine: str) -> tuple:
    monkeypatch.setenv("MALLOCGAME_ENGINE", engine)
    try:
        return "problem", _facts(load_problem(path))
    except InputError as exc:
        return "error", str(exc)


def _both(path: Path, monkeypatch) -> tuple:
    native = _read(path, monkeypatch, "native")
    assert native == _read(path, monkeypatch, "python")
    return native


def _doc(buffers: list, ops: list | None = None, **extra) -> dict:
    doc = {"format": FORMAT, "name": "t", "buffers": buffers, **extra}
    if ops is not None:
        doc["ops"] = ops
    return doc


def _b(i: str, size: int, start: int, end: int, **extra) -> dict:
    return {"id": i, "size": size, "start": start, "end": end, **extra}


def _op(i: str | None, *operands: dict, **extra) -> dict:
    return {**({} if i is None else {"id": i}), "operands": list(operands), **extra}


PLAIN = {
    "no ops": _doc([_b("a", 64, 0, 2), _b("b", 32, 1, 3, alignment=16, kind="weight", benefit=1.5)]),
    "ops": _doc([_b("a", 64, 0, 2), _b("b", 32, 1, 2)],
                [_op("x", {"buffer": "a", "access": "write", "bytes": 64}, flops=1e9, kind="matmul"),
                 _op("y", {"buffer": "a"}, {"buffer": "b", "access": "write"}, transcendentals=3, fixed_bytes=7)]),
    "op ids and kinds left out": _doc([_b("a", 8, 0, 2)], [_op(None, {"buffer": "a"}), _op(None)]),
    "no ops listed": _doc([_b("a", 8, 0, 1)], []),
    "unicode ids": _doc([_b("größe→λ", 8, 0, 1), _b("日本", 8, 0, 1)], [_op("ü", {"buffer": "日本"})]),
    "numbers of every shape": _doc([_b("a", 8, 0, 1, benefit=0), _b("b", 8, 0, 1, benefit=2.5e-3),
                                    _b("c", 8, 0, 1, benefit=1E+2), _b("d", 8, 0, 1, benefit=123456789012345)],
                                   [_op("o", {"buffer": "a"}, flops=-0.0, transcendentals=1.7976931348623157e308)]),
    "negative and zero values": _doc([_b("a", -8, 0, 1), _b("b", 0, 0, 1)]),
    "a buffer past the last op": _doc([_b("a", 8, 0, 3)], [_op("o", {"buffer": "a"})]),
    "an operand outside its buffer's life": _doc([_b("a", 8, 1, 2)], [_op("o", {"buffer": "a"}), _op("p")]),
    "duplicate ids": _doc([_b("a", 8, 0, 1), _b("a", 8, 0, 1)]),
    "inplace and capacity": _doc([_b("a", 8, 0, 1), _b("b", 8, 1, 2)], [_op("o", {"buffer": "a"}),
                                                                         _op("p", {"buffer": "b"})],
                                 inplace=[["a", "b"]], capacity=64),
}

# each sends the scanner back to the reference (it returns None), which accepts it or names the bad field
ODD = {
    "an escape in an id": '{"format": "%s", "buffers": [{"id": "a\\u00e9\\"", "size": 8, "start": 0, "end": 1}]}' % FORMAT,
    "a null benefit": _doc([_b("a", 8, 0, 1, benefit=None)]),
    "an unknown key": _doc([_b("a", 8, 0, 1, colour="red")]),
    "a size written 8.0": _doc([_b("a", 8.0, 0, 1)]),
    "a size of 19 digits": _doc([_b("a", 10**18, 0, 1)]),
    "a size past 2**64": _doc([_b("a", 2**70, 0, 1)]),
    "an unknown kind": _doc([_b("a", 8, 0, 1, kind="cache")]),
    "an id that is a number": _doc([_b(7, 8, 0, 1)]),
    "no end": _doc([{"id": "a", "size": 8, "start": 0}]),
    "flops of 20 digits": _doc([_b("a", 8, 0, 1)], [_op("o", {"buffer": "a"}, flops=10**19)]),
    "flops past a double": json.dumps(_doc([_b("a", 8, 0, 1)], [_op("o", {"buffer": "a"}, flops=1.5)])).replace(
        "1.5", "1e400"),
    "control deps": _doc([_b("a", 8, 0, 2)], [_op("o", {"buffer": "a"}), _op("p", control_deps=["o"])]),
    "an unknown operand": _doc([_b("a", 8, 0, 1)], [_op("o", {"buffer": "z"})]),
    "an access of 'both'": _doc([_b("a", 8, 0, 1)], [_op("o", {"buffer": "a", "access": "both"})]),
    "an empty op": _doc([_b("a", 8, 0, 1)], [{}]),
    "an op id that is an object": _doc([_b("a", 8, 0, 1)], [_op({"x": 1}, {"buffer": "a"})]),
    "buffers that are not a list": _doc({"a": 1}),
    "an id not in UTF-8": b'{"format": "%s", "buffers": [{"id": "a\xff", "size": 8, "start": 0, "end": 1}]}' % FORMAT.encode(),
    "an operand not in UTF-8": json.dumps(_doc([_b("a", 8, 0, 1)], [_op("o", {"buffer": "a"})])).encode().replace(
        b'"buffer": "a"', b'"buffer": "a\xff"'),
    "no buffers": _doc([]),
}


def _write(tmp_path: Path, doc: dict | str | bytes, indent=None, name: str = "w.json") -> Path:
    path = tmp_path / name
    if isinstance(doc, bytes):
        path.write_bytes(doc)
        return path
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=indent, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(PLAIN))
@pytest.mark.parametrize("indent", [None, 2])
def test_plain_documents_are_scanned_and_read_as_the_reference_reads_them(name, indent, tmp_path, monkeypatch):
    """A plain document, compact or indented: the scanner reads it (not None) and the problem, or the error line,
    is the reference's."""
    path = _write(tmp_path, PLAIN[name], indent)
    assert json_buffer_columns(_JSON_TOP.decode(path.read_bytes()).buffers, BUFFER_KINDS) is not None
    _both(path, monkeypatch)


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_documents_go_to_the_reference(name, tmp_path, monkeypatch):
    """The scanner declines what is not of its plain shape (None), and both engines give the same answer."""
    path = _write(tmp_path, ODD[name])
    top = _JSON_TOP.decode(path.read_bytes())
    declined = json_buffer_columns(top.buffers, BUFFER_KINDS) is None
    if not declined:
        ids = [b["id"] for b in json.loads(bytes(top.buffers))]
        sizes = np.array([b["size"] for b in json.loads(bytes(top.buffers))], np.int64)
        declined = json_op_columns(top.ops, dict(zip(ids, range(len(ids)))), sizes) is None
    assert declined
    _both(path, monkeypatch)


def test_the_scanner_reads_the_columns_the_reference_reads():
    """The scanner's columns, field by field, on a list with every optional field present or not."""
    raw = (b' [ {"kind": "weight", "end": 3, "id": "w", "size": 10, "start": 1, "alignment": 4, "benefit": 0.1},'
           b'\n\t{"id":"x","size":1,"start":0,"end":1} ]\r\n')
    ids, size, start, end, alignment, benefit, kind = json_buffer_columns(raw, BUFFER_KINDS)
    assert ids == ["w", "x"] and size.tolist() == [10, 1] and start.tolist() == [1, 0] and end.tolist() == [3, 1]
    assert alignment.tolist() == [4, 1] and kind.tolist() == [1, 0] and benefit[0] == 0.1 and np.isnan(benefit[1])
    ops = (b'[{"operands": [{"buffer": "x", "access": "write"}, {"bytes": 3, "buffer": "w"}], "flops": 2.5},'
           b' {"id": "b", "kind": "copy", "operands": []}]')
    ids, kinds, flops, trans, fixed, counts, buf, write, nbytes = json_op_columns(ops, {"w": 0, "x": 1}, size)
    assert ids == ["op0", "b"] and kinds == ["op", "copy"] and flops.tolist() == [2.5, 0.0] and counts.tolist() == [2, 0]
    assert buf.tolist() == [1, 0] and write.tolist() == [True, False] and nbytes.tolist() == [1, 3]
    assert trans.tolist() == [0.0, 0.0] and fixed.tolist() == [0, 0] and write.dtype == bool


@pytest.mark.parametrize("seed", range(3))
def test_a_generated_workload_reshuffled_reads_the_same(seed, tmp_path, monkeypatch):
    """A generated workload (2,000 buffers) with its keys in a random order and random whitespace: the scanner
    reads it and both engines give the same problem."""
    write_workload_json(tmp_path / "g.json", layered_network(2000, seed=seed))
    doc = json.loads((tmp_path / "g.json").read_text())
    rng = random.Random(seed)
    for record in doc["buffers"] + doc["ops"]:
        items = list(record.items())
        rng.shuffle(items)
        record.clear()
        record.update(items)
    path = _write(tmp_path, doc, indent=rng.choice([None, 1, "\t"]), name="shuffled.json")
    kind, facts = _both(path, monkeypatch)
    assert kind == "problem" and facts[5] == "BufferTable" and facts[7].count("Buffer(") >= 2000


BAD_JSON = sorted(p.name for p in BAD_INPUTS.glob("*.json"))


@pytest.mark.parametrize("name", BAD_JSON)
def test_every_bad_input_json_gives_the_same_line_and_exit_with_both_engines(name, monkeypatch, capsys, tmp_path):
    """``mallocgame info`` on each JSON file of tests/bad_inputs/: the same exit code and output with both
    engines; a refused file exits 2 with one line."""
    runs = []
    for engine in ("python", "native"):
        monkeypatch.setenv("MALLOCGAME_ENGINE", engine)
        monkeypatch.setenv("MALLOCGAME_CACHE_DIR", str(tmp_path / engine))
        with pytest.raises(SystemExit) as stop:
            cli.main(["info", str(BAD_INPUTS / name), "--quiet"], prog_name="mallocgame")
        out, err = capsys.readouterr()
        runs.append((stop.value.code, out, err))
    assert runs[0] == runs[1]
    code, out, err = runs[1]
    if code not in (0, None):
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
