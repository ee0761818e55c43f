"""Importers: XLA HLO text, torch.export, AlphaTensor-style matmul programs, and their CLI.

The HLO fixtures (``tests/data/*.hlo.txt``) and XLA's own numbers for them
(``*.expected.json``) were made by ``experiments/make_hlo_fixtures.py`` with JAX; these
tests read the committed files and never import JAX.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mallocgame.cli.importers import import_group
from mallocgame.importers import import_workload, summarize
from mallocgame.importers.hlo import HloImportWarning, load_hlo, parse_hlo_text, parse_shape, xla_style_max_live
from mallocgame.importers.matmul import (
    _transpose_c,
    build_program,
    check_factorization,
    import_matmul,
    naive,
    run_program,
    strassen,
)
from mallocgame.io import parse_workload, read_workload_json, workload_dict
from mallocgame.model import InputError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HLO_FIXTURES = ["transformer_fwd", "transformer_scan_fwd", "transformer_train", "cnn_fwd"]


def roundtrip(problem):
    """Write the problem as workload JSON, read it back with the project's reader."""
    data = json.loads(json.dumps(workload_dict(problem)))
    back = parse_workload("roundtrip.json", data)
    assert back.fingerprint == problem.fingerprint
    assert [(o.id, o.kind, o.flops, o.operands) for o in back.ops] == \
        [(o.id, o.kind, o.flops, o.operands) for o in problem.ops]
    assert back.inplace == problem.inplace
    return back


def check_live_ranges(problem):
    """start = first op touching the buffer, end = last op touching it + 1."""
    first, last = {}, {}
    for t, op in enumerate(problem.ops):
        for o in op.operands:
            first.setdefault(o.buffer, t)
            last[o.buffer] = t
    for b in problem.buffers:
        assert (b.start, b.end) == (first[b.id], last[b.id] + 1), b


# --------------------------------------------------------------------------- HLO

@pytest.fixture(scope="module")
def hlo_imports():
    return {name: load_hlo(DATA / f"{name}.hlo.txt") for name in HLO_FIXTURES}


@pytest.mark.parametrize("name", HLO_FIXTURES)
def test_hlo_fixture_roundtrips_and_matches_xla_flops(hlo_imports, name):
    imp = hlo_imports[name]
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    assert imp.warnings == []
    roundtrip(imp.problem)
    check_live_ranges(imp.problem)
    assert imp.problem.mode == "map" and imp.problem.capacity is None
    # XLA counts a while body once; the scanned model is compared with the same math unrolled
    ref = expected.get("reference_flops", expected["cost_analysis"])
    assert imp.flops == pytest.approx(ref["flops"], rel=0.01)
    assert imp.transcendentals == pytest.approx(ref["transcendentals"], rel=0.01)
    # the workload's op FLOPs are FLOPs + transcendentals
    assert summarize(imp.problem).flops == pytest.approx(imp.flops + imp.transcendentals)


@pytest.mark.parametrize("name", HLO_FIXTURES)
def test_hlo_max_live_matches_xla_live_ranges(hlo_imports, name):
    """Counted as XLA does (parameters whole program, outputs to the end): within 0.1%."""
    imp = hlo_imports[name]
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    xla = expected["live_range_report"]["max_live_bytes"]
    assert xla_style_max_live(imp.problem) == pytest.approx(xla, rel=0.001)
    # the project's tight live ranges can only lower it
    assert summarize(imp.problem).max_live_bytes <= xla_style_max_live(imp.problem)


def test_hlo_unrolled_flops_are_exact(hlo_imports):
    for name in ("transformer_fwd", "transformer_train", "cnn_fwd"):
        expected = json.loads((DATA / f"{name}.expected.json").read_text())["cost_analysis"]
        assert hlo_imports[name].flops == expected["flops"]
        assert hlo_imports[name].transcendentals == expected["transcendentals"]


def test_hlo_while_loop_is_expanded_per_iteration(hlo_imports):
    unrolled = hlo_imports["transformer_fwd"].problem
    scanned = hlo_imports["transformer_scan_fwd"].problem
    dots = lambda p: sum(op.kind == "dot" for op in p.ops)  # noqa: E731
    assert dots(scanned) == dots(unrolled) == 12
    ids = [op.id for op in scanned.ops]
    assert any(i.startswith("while/0/") for i in ids) and any(i.startswith("while/1/") for i in ids)
    assert not any(i.startswith("while/2/") and "/cond/" not in i for i in ids)  # only the exit test
    # the stacked weights are carried through the loop unchanged: one buffer, live across both iterations
    w1 = next(b for b in scanned.buffers if b.id.startswith("stacked__w1__"))
    assert w1.kind == "input"
    users = [t for t, op in enumerate(scanned.ops) if any(o.buffer == w1.id for o in op.operands)]
    assert len(users) == 2 and users[0] < users[1]
    # the dynamic-slice fusion reads one layer's slice of it, not all of it
    read = [o.bytes for t in users for o in scanned.ops[t].operands if o.buffer == w1.id]
    assert read == [w1.size // 2] * 2


def test_hlo_trip_count_sources():
    text = (DATA / "transformer_scan_fwd.hlo.txt").read_text()
    assert ',"known_trip_count":{"n":"2"}' in text
    unknown = text.replace(',"known_trip_count":{"n":"2"}', "")
    with pytest.warns(HloImportWarning, match="unknown trip count; imported one iteration"):
        one = parse_hlo_text(unknown, "unknown.hlo.txt")
    full = load_hlo(DATA / "transformer_scan_fwd.hlo.txt")
    assert one.flops == pytest.approx(full.flops / 2, rel=0.01)
    frontend = unknown.replace("body=%wide.region_0.15,", 'body=%wide.region_0.15, frontend_attributes={trip_count="2"},')
    assert parse_hlo_text(frontend, "frontend.hlo.txt").flops == full.flops


def test_hlo_scaled_loop_mode():
    text = (DATA / "transformer_scan_fwd.hlo.txt").read_text()
    with pytest.warns(HloImportWarning, match="scaled by 2"):
        imp = parse_hlo_text(text, "scan.hlo.txt", max_expanded_ops=10)
    full = load_hlo(DATA / "transformer_scan_fwd.hlo.txt")
    assert imp.flops == pytest.approx(full.flops, rel=1e-3)
    assert len(imp.problem.ops) < len(full.problem.ops)
    roundtrip(imp.problem)


def test_hlo_aliases_make_no_ops_and_no_buffers(hlo_imports):
    for imp in hlo_imports.values():
        kinds = {op.kind for op in imp.problem.ops}
        assert not kinds & {"bitcast", "tuple", "get-tuple-element", "parameter", "constant"}
    text = """HloModule m, is_scheduled=true
ENTRY %main (p: f32[4,4]) -> (f32[16], f32[4,4]) {
  %p = f32[4,4]{1,0} parameter(0)
  %b = f32[16]{0} bitcast(%p)
  %n = f32[16]{0} negate(%b)
  %t = (f32[16]{0}, f32[4,4]{1,0}) tuple(%n, %p)
  %g = f32[16]{0} get-tuple-element(%t), index=0
  %e = f32[16]{0} exponential(%g)
  ROOT %r = (f32[16]{0}, f32[4,4]{1,0}) tuple(%e, %p)
}
"""
    p = parse_hlo_text(text, "alias.hlo.txt").problem
    assert [op.id for op in p.ops] == ["n", "e"]
    assert [o.buffer for o in p.ops[0].operands] == ["p", "n"]   # negate reads the parameter through the bitcast
    assert [o.buffer for o in p.ops[1].operands] == ["n", "e"]   # exp reads negate's buffer through tuple/gte
    kinds = {b.id: b.kind for b in p.buffers}
    assert kinds == {"p": "input", "n": "activation", "e": "output"}
    assert p.inplace == (("n", "e"),)  # n dies at exp, same size, element-wise
    roundtrip(p)


def test_hlo_inplace_pairs_are_dying_same_size_operands(hlo_imports):
    for imp in hlo_imports.values():
        p = imp.problem
        by_id = {b.id: b for b in p.buffers}
        assert p.inplace
        for src, dst in p.inplace:
            assert by_id[src].size == by_id[dst].size
            assert by_id[src].end == by_id[dst].start + 1  # src's last use is the op that writes dst
            assert by_id[src].kind == "activation"


def test_hlo_async_pairs_and_header_without_parameters():
    text = """HloModule m, is_scheduled=true

ENTRY %main {
  %p = f32[1024]{0} parameter(0)
  %cs = (f32[1024]{0:S(1)}, f32[1024]{0}, u32[]) copy-start(%p)
  %n = f32[1024]{0} negate(%p)
  %cd = f32[1024]{0:S(1)} copy-done(%cs)
  %as = ((f32[1024]{0}), f32[1024]{0}, s32[]) async-start(%n), calls=%wrapped
  %ad = f32[1024]{0} async-done(%as), calls=%wrapped
  ROOT %a = f32[1024]{0} add(%cd, %ad)
}

%wrapped (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  ROOT %e = f32[1024]{0} exponential(%x)
}
"""
    r = parse_hlo_text(text, "async.hlo.txt")
    assert r.warnings == []
    ops = {op.id: [(o.buffer, o.access) for o in op.operands] for op in r.problem.ops}
    assert list(ops) == ["cs", "n", "as", "a"]   # the *-done halves are aliases, not ops
    assert ops["cs"] == [("p", "read"), ("cs#0", "write")]
    assert ops["as"] == [("n", "read"), ("as#1", "write")]
    assert ops["a"] == [("cs#0", "read"), ("as#1", "read"), ("a", "write")]
    assert r.transcendentals == 1024  # async-start costs its called computation
    roundtrip(r.problem)


def test_hlo_shapes_and_dtypes():
    s, _ = parse_shape("(f32[2,3]{1,0}, bf16[4], pred[], s8[10], (f64[2], s4[3]), token[])")
    assert [leaf.nbytes for _, leaf in s.leaves()] == [24, 8, 1, 10, 16, 2, 0]
    assert s.nbytes == 61
    assert parse_shape("f32[<=8,4]{1,0:T(8,128)}")[0].dims == (8, 4)
    text = """HloModule m, is_scheduled=true
ENTRY %main (a: bf16[8,16], b: bf16[16,4]) -> (bf16[8,4], pred[8,4]) {
  %a = bf16[8,16]{1,0} parameter(0)
  %b = bf16[16,4]{1,0} parameter(1)
  %d = bf16[8,4]{1,0} dot(bf16[8,16]{1,0} %a, bf16[16,4]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = pred[8,4]{1,0} compare(%d, %d), direction=GT
  ROOT %t = (bf16[8,4]{1,0}, pred[8,4]{1,0}) tuple(%d, %c)
}
"""
    r = parse_hlo_text(text, "dtypes.hlo.txt")  # operands printed with their shapes (older XLA) work too
    sizes = {b.id: b.size for b in r.problem.buffers}
    assert sizes == {"a": 256, "b": 128, "d": 64, "c": 32}
    assert r.flops == 2 * 8 * 4 * 16 + 32


def test_hlo_convolution_flops_count_valid_positions():
    # 3x3 SAME conv on 4x4: border outputs see fewer real inputs (XLA counts only those)
    text = """HloModule m, is_scheduled=true
ENTRY %main (x: f32[1,4,4,2], w: f32[3,3,2,5]) -> f32[1,4,4,5] {
  %x = f32[1,4,4,2]{3,2,1,0} parameter(0)
  %w = f32[3,3,2,5]{3,2,1,0} parameter(1)
  ROOT %c = f32[1,4,4,5]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""
    r = parse_hlo_text(text, "conv.hlo.txt")
    valid_1d = sum(sum(1 for k in range(3) if 0 <= o + k - 1 < 4) for o in range(4))  # 10 of 12
    assert r.flops == 2 * 2 * 5 * valid_1d * valid_1d


def test_hlo_unknown_instruction_is_a_zero_flop_op_with_a_warning():
    text = """HloModule m, is_scheduled=true
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %x = f32[8]{0} frobnicate(%a), some_attr={1,2}
  ROOT %y = f32[8]{0} add(%x, %x)
}
"""
    with pytest.warns(HloImportWarning, match="unknown instruction 'frobnicate'"):
        r = parse_hlo_text(text, "unknown.hlo.txt")
    op = r.problem.ops[0]
    assert (op.id, op.kind, op.flops) == ("x", "frobnicate", 0.0)
    assert [(o.buffer, o.access) for o in op.operands] == [("a", "read"), ("x", "write")]
    assert r.warnings and "line 4" in r.warnings[0]


def test_hlo_not_scheduled_is_rejected(tmp_path):
    text = (DATA / "cnn_fwd.hlo.txt").read_text().replace("is_scheduled=true", "is_scheduled=false", 1)
    path = tmp_path / "x.hlo.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=r"x\.hlo\.txt: line 1: HLO module is not scheduled") as exc:
        load_hlo(path)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("cut", [0.05, 0.3, 0.6, 0.9, 0.99])
def test_hlo_truncated_file_is_rejected(tmp_path, cut):
    text = (DATA / "transformer_fwd.hlo.txt").read_text()
    path = tmp_path / "cut.hlo.txt"
    path.write_text(text[: int(len(text) * cut)])
    with pytest.raises(InputError, match="cut.hlo.txt") as exc:
        load_hlo(path)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("text, reason", [
    ("", "empty file"),
    ("hello world\n", "not HLO text"),
    ("HloModule m, is_scheduled=true\n", "no ENTRY computation"),
    ("HloModule m, is_scheduled=true\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\nrandom garbage\n",
     "unexpected text outside a computation"),
    ("HloModule m, is_scheduled=true\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] add(%x, %y)\n}\n", "before it is defined"),
    ("HloModule m, is_scheduled=true\nENTRY %e () -> f32[] {\n  ROOT %c = q77[] constant(1)\n}\n", "unknown element type"),
    ("HloModule m, is_scheduled=true\nENTRY %e () -> f32[] {\n  %c = f32[] constant(1)\n  this is not hlo\n}\n",
     "not an HLO instruction"),
])
def test_hlo_garbage_is_rejected(tmp_path, text, reason):
    path = tmp_path / "bad.hlo.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=reason):
        load_hlo(path)


# --------------------------------------------------------------------------- matmul

@pytest.mark.parametrize("depth", [1, 2])
def test_strassen_program_is_correct_and_has_r_to_the_d_products(depth):
    prog = build_program(strassen(), depth=depth, size=4 * 2 ** depth)
    assert sum(s.kind == "matmul" for s in prog.steps) == 7 ** depth
    rng = np.random.default_rng(depth)
    A, B = rng.standard_normal((prog.size, prog.size)), rng.standard_normal((prog.size, prog.size))
    np.testing.assert_allclose(run_program(prog, A, B), A @ B, atol=1e-9)
    p = import_matmul(depth=depth, size=64 * 2 ** depth)
    roundtrip(p)
    check_live_ranges(p)
    block = 64
    products = [op for op in p.ops if op.kind == "matmul"]
    assert len(products) == 7 ** depth
    assert all(op.flops == 2 * block ** 3 for op in products)
    kinds = {b.kind for b in p.buffers}
    assert kinds == {"input", "output", "activation"}
    assert sum(b.kind == "input" for b in p.buffers) == 2 * 4 ** depth
    s = summarize(p)
    assert s.ops == len(p.ops) and s.max_live_bytes > 0
    # Strassen: 18 block additions per level (10 operand sums, 8 output accumulations)
    adds = sum(op.flops for op in p.ops if op.kind != "matmul")
    elems = [(64 * 2 ** (depth - lvl - 1)) ** 2 for lvl in range(depth)]
    assert adds == sum(7 ** lvl * 18 * e for lvl, e in enumerate(elems))


def test_naive_factorization_and_both_c_layouts():
    for n in (2, 3):
        fz = check_factorization(naive(n))
        assert fz.rank == n ** 3 and fz.layout == "alphatensor"
    s = strassen()
    row_major = np.stack([s[0], s[1], _transpose_c(s[2], 2)])
    fz = check_factorization(row_major)
    assert fz.layout == "row-major"
    prog = build_program(fz, depth=2, size=8)
    A, B = np.arange(64.0).reshape(8, 8), np.eye(8) * 2 + 1
    np.testing.assert_allclose(run_program(prog, A, B), A @ B)


def test_matmul_factorization_files(tmp_path):
    good = tmp_path / "s.npy"
    np.save(good, strassen())
    assert len(import_matmul(str(good), size=32).ops) == len(import_matmul(None, size=32).ops)
    uvw = tmp_path / "s.npz"
    np.savez(uvw, u=strassen()[0], v=strassen()[1], w=strassen()[2])
    assert summarize(import_matmul(str(uvw), size=32)).flops == summarize(import_matmul(size=32)).flops
    keyed = tmp_path / "many.npz"
    np.savez(keyed, **{"2,2,2": strassen(), "3,3,3": naive(3)})
    assert sum(op.kind == "matmul" for op in import_matmul(f"{keyed}:3,3,3", size=9).ops) == 27
    with pytest.raises(InputError, match="pick one with FILE.npz:KEY"):
        import_matmul(str(keyed))


def test_matmul_bad_factorizations(tmp_path):
    wrong_shape = tmp_path / "shape.npy"
    np.save(wrong_shape, np.zeros((3, 5, 7)))
    with pytest.raises(InputError, match=r"shape\.npy: expected shape \[3, n\*n, R\]"):
        import_matmul(str(wrong_shape))
    np.save(wrong_shape, np.zeros((2, 4, 7)))
    with pytest.raises(InputError, match="expected an array of shape"):
        import_matmul(str(wrong_shape))
    broken = strassen()
    broken[2, 0, 0] = 0  # drop M1 from C11
    bad = tmp_path / "bad.npy"
    np.save(bad, broken)
    with pytest.raises(InputError, match="not a factorization of the 2x2 matrix multiplication tensor") as exc:
        import_matmul(str(bad))
    assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match="must be a positive multiple"):
        import_matmul(size=30, depth=2)
    (tmp_path / "junk.npy").write_text("not numpy")
    with pytest.raises(InputError, match="cannot read"):
        import_matmul(str(tmp_path / "junk.npy"))


# --------------------------------------------------------------------------- CLI

def test_cli_commands_write_workloads(tmp_path):
    runner = CliRunner()
    out = tmp_path / "hlo.json"
    r = runner.invoke(import_group, ["hlo", str(DATA / "cnn_fwd.hlo.txt"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.count("\n") == 1 and "ops=10" in r.output and "max_live_bytes=" in r.output
    assert read_workload_json(out).n == 16
    out = tmp_path / "mm.json"
    r = runner.invoke(import_group, ["matmul", "--depth", "2", "--n", "256", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert sum(op.kind == "matmul" for op in read_workload_json(out).ops) == 49


@pytest.mark.parametrize("args, message", [
    (["hlo", "MISSING.hlo.txt"], "file not found"),
    (["matmul", "--factorization", "MISSING.npy"], "file not found"),
    (["matmul", "--n", "30", "--depth", "2"], "multiple of n**depth"),
    (["torch", "no_such_module_xyz:f", "--input-shape", "1,2"], "cannot import"),
])
def test_cli_bad_input_exits_2_without_output(tmp_path, args, message):
    out = tmp_path / "w.json"
    r = CliRunner().invoke(import_group, args + ["-o", str(out)])
    assert r.exit_code == 2
    assert message in r.output and r.output.startswith("error: ") and r.output.count("\n") == 1
    assert not out.exists()


def test_cli_unscheduled_hlo(tmp_path):
    bad = tmp_path / "u.hlo.txt"
    bad.write_text("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
    r = CliRunner().invoke(import_group, ["hlo", str(bad), "-o", str(tmp_path / "w.json")])
    assert r.exit_code == 2 and "not scheduled" in r.output
    assert not (tmp_path / "w.json").exists()


def test_importers_do_not_import_torch():
    code = ("import sys, mallocgame.importers, mallocgame.cli.importers, mallocgame.importers.hlo, mallocgame.importers.matmul, "
            "mallocgame.importers.torch_export; mallocgame.importers.import_workload('matmul', size=8); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_dispatch_unknown_importer():
    with pytest.raises(InputError, match="unknown importer"):
        import_workload("onnx", "x")


# --------------------------------------------------------------------------- torch

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@needs_torch
def test_torch_mlp_linear_flops_weights_modes_and_roundtrip():
    from mallocgame.importers.torch_export import import_torch
    spec = f"{DATA / 'torch_models.py'}:mlp"
    use = import_torch(spec, ["4,32"])
    roundtrip(use)
    check_live_ranges(use)
    assert [op.kind for op in use.ops] == ["linear", "relu", "linear"]
    assert use.ops[0].flops == 2 * 4 * 32 * 64 and use.ops[2].flops == 2 * 4 * 64 * 10
    assert use.ops[1].flops == 4 * 64
    weights = {b.id: b for b in use.buffers if b.kind == "weight"}
    assert set(weights) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert weights["0.weight"].size == 64 * 32 * 4
    assert (weights["2.weight"].start, weights["2.weight"].end) == (2, 3)   # first to last use
    assert use.inplace == (("linear", "relu"),)
    assert [b.kind for b in use.buffers if b.id == "linear_1"] == ["output"]
    # the same model exported in-process, and the other weight modes
    import torch

    from mallocgame.importers.torch_export import export_module, import_exported
    ep = export_module(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)),
                       [torch.randn(4, 32)])
    program = import_exported(ep, weights="program")
    assert all((b.start, b.end) == (0, 3) for b in program.buffers if b.kind == "weight")
    roundtrip(program)
    none = import_exported(ep, weights="none")
    assert not any(b.kind == "weight" for b in none.buffers)
    assert summarize(none).flops == summarize(use).flops
    assert summarize(none).max_live_bytes < summarize(use).max_live_bytes <= summarize(program).max_live_bytes


@needs_torch
def test_torch_cnn_conv_flops_and_views_alias_their_base():
    from mallocgame.importers.torch_export import import_torch
    p = import_torch(f"{DATA / 'torch_models.py'}:cnn")  # (module, example_inputs) pair
    roundtrip(p)
    check_live_ranges(p)
    kinds = [op.kind for op in p.ops]
    assert kinds == ["conv2d", "relu", "conv2d", "relu", "linear"]   # flatten is a view: no op
    assert p.ops[0].flops == 2 * (2 * 8 * 16 * 16) * 3 * 9
    assert p.ops[2].flops == 2 * (2 * 16 * 8 * 8) * 8 * 9
    assert p.ops[4].flops == 2 * 2 * 1024 * 10
    linear_reads = [o.buffer for o in p.ops[4].operands if o.access == "read"]
    assert "relu_1" in linear_reads           # reads the flattened tensor's base buffer
    assert not any(b.id.startswith("flatten") for b in p.buffers)


@needs_torch
def test_torch_module_spec_cli_and_bad_specs(tmp_path):
    out = tmp_path / "relu.json"
    r = CliRunner().invoke(import_group, ["torch", "torch.nn:ReLU", "--input-shape", "2,3",
                                          "--weights", "program", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "ops=1 buffers=2" in r.output
    p = read_workload_json(out)
    assert [op.kind for op in p.ops] == ["relu"] and p.ops[0].flops == 6
    from mallocgame.importers.torch_export import import_torch
    with pytest.raises(InputError, match="must return an nn.Module"):
        import_torch("builtins:dict", ["1"])
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                   "        raise RuntimeError('boom')\ndef make():\n    return M()\n")
    with pytest.raises(InputError, match="torch.export failed.*boom"):
        import_torch(f"{bad}:make", ["2"])
    with pytest.raises(InputError, match="expected comma-separated integers"):
        import_torch(f"{bad}:make", ["a,b"])
