"""``mallocgame import jax``: a JAX function compiled by XLA:CPU, imported as ``import hlo`` imports its text.

The shape parser needs no JAX; the rest is skipped only when jax is not importable (the dev
extra installs it).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from mallocgame.cli.importers import import_group
from mallocgame.importers.jax_program import ArgShape, parse_arg_shapes, parse_donate
from mallocgame.problem.model import InputError

FUNCTIONS = textwrap.dedent('''
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, w2):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2.astype(jnp.float32)).sum()

    def sgd_step(w1, w2, x, y):
        def loss(ws):
            return jnp.mean((jnp.tanh(x @ ws[0]) @ ws[1] - y) ** 2)
        g1, g2 = jax.grad(loss)((w1, w2))
        return w1 - 0.01 * g1, w2 - 0.01 * g2

    def rnn(h, xs, w):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return jax.lax.scan(cell, h, xs)

    not_a_function = 3

    def adam_step():
        # a factory: the function and example arguments that are pytrees (parameters, optimizer state, a batch)
        params = {"w1": jnp.zeros((16, 32)), "w2": jnp.zeros((32, 4))}
        state = {"m": params, "v": params}

        def step(params, state, batch):
            def loss(p):
                return jnp.mean((jnp.tanh(batch["x"] @ p["w1"]) @ p["w2"] - batch["y"]) ** 2)
            g = jax.grad(loss)(params)
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], g)
            v = jax.tree_util.tree_map(lambda v, g: 0.99 * v + 0.01 * g * g, state["v"], g)
            new = jax.tree_util.tree_map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, m, v)
            return new, {"m": m, "v": v}
        batch = {"x": jax.ShapeDtypeStruct((8, 16), jnp.float32), "y": jnp.zeros((8, 4))}
        return step, (params, state, batch)

    def not_a_pair():
        return 3

    def needs_an_argument(n):
        return mlp, ()
''')


def test_parse_arg_shapes():
    assert parse_arg_shapes("f32[8,128],bf16[512,512]") == [ArgShape("f32", (8, 128)), ArgShape("bf16", (512, 512))]
    assert parse_arg_shapes(" s32[] , pred[3]") == [ArgShape("s32", ()), ArgShape("pred", (3,))]
    for bad, msg in [("f32[8,", "not DTYPE"), ("x32[8]", "unknown dtype"), ("f32[0]", "positive"),
                     ("f32[8,,2]", "empty dimension"), ("", "not DTYPE"), ("f32(8)", "not DTYPE")]:
        with pytest.raises(InputError, match=msg):
            parse_arg_shapes(bad)
    assert parse_donate("2,0", 3) == (0, 2) and parse_donate(None, 1) == ()
    with pytest.raises(InputError, match="does not exist"):
        parse_donate("3", 3)
    with pytest.raises(InputError, match="indices"):
        parse_donate("a", 3)


@pytest.fixture
def fns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fns.py").write_text(FUNCTIONS)
    return tmp_path


CASES = [
    ("mlp", "f32[8,128],f32[128,256],bf16[256,64]", None),
    ("sgd_step", "f32[64,128],f32[128,16],f32[32,64],f32[32,16]", "0,1"),
    ("rnn", "f32[4,32],f32[12,4,32],f32[32,32]", None),  # a while loop, expanded
]


@pytest.mark.parametrize("fn, shapes, donate", CASES)
def test_import_jax_reproduces_import_hlo(fn, shapes, donate, fns):
    pytest.importorskip("jax")
    runner = CliRunner()
    args = ["jax", f"fns.py:{fn}", "--arg-shapes", shapes, "--save-hlo", f"{fn}.hlo.txt", "-o", "jax.json"]
    r = runner.invoke(import_group, args + (["--donate", donate] if donate else []))
    assert r.exit_code == 0, r.output
    text = (fns / f"{fn}.hlo.txt").read_text()
    assert text.startswith("HloModule ") and "is_scheduled=true" in text.splitlines()[0]
    if donate:
        assert "input_output_alias" in text.splitlines()[0]
    r2 = runner.invoke(import_group, ["hlo", f"{fn}.hlo.txt", "-o", "hlo.json", "--name", fn])
    assert r2.exit_code == 0, r2.output
    a, b = json.loads((fns / "jax.json").read_text()), json.loads((fns / "hlo.json").read_text())
    assert a == b
    assert a["name"] == fn and a["ops"] and a["buffers"]
    if donate:
        assert a["inplace"]  # the donated parameters hold their outputs
    assert r.stdout.split(":", 1)[1] == r2.stdout.split(":", 1)[1]  # the same summary line


def test_a_factory_gives_the_function_and_pytree_arguments(fns):
    # without --arg-shapes: SPEC names a factory returning (function, example arguments), pytrees welcome;
    # the import equals the HLO text's, donation indexes the top-level arguments
    pytest.importorskip("jax")
    runner = CliRunner()
    r = runner.invoke(import_group, ["jax", "fns.py:adam_step", "--donate", "0,1", "--save-hlo", "adam.hlo.txt",
                                     "-o", "jax.json"])
    assert r.exit_code == 0, r.output
    text = (fns / "adam.hlo.txt").read_text()
    assert "input_output_alias" in text.splitlines()[0]
    r2 = runner.invoke(import_group, ["hlo", "adam.hlo.txt", "-o", "hlo.json", "--name", "adam_step"])
    assert r2.exit_code == 0, r2.output
    a = json.loads((fns / "jax.json").read_text())
    assert a == json.loads((fns / "hlo.json").read_text()) and a["inplace"]
    ids = {b["id"] for b in a["buffers"]}
    assert len([b for b in a["buffers"] if b["kind"] == "input"]) == 2 + 4 + 2  # params, m and v, the batch
    assert len(ids) == len(a["buffers"])


@pytest.mark.parametrize("spec, message", [
    ("fns.py:not_a_pair", "returns (function, example arguments), got int"),
    ("fns.py:needs_an_argument", "zero-argument callable"),
    ("fns.py:mlp", "zero-argument callable"),  # a function, not a factory: --arg-shapes forgotten
])
def test_a_bad_factory_is_one_line_exit_2(spec, message, fns):
    pytest.importorskip("jax")
    r = CliRunner().invoke(import_group, ["jax", spec, "-o", "w.json"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (fns / "w.json").exists()


def test_python_api_matches_the_file(fns):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from mallocgame.importers.hlo import parse_hlo_text
    from mallocgame.importers.jax_program import compile_hlo_text, import_jax

    def f(x, w):
        return jnp.maximum(x @ w, 0.0).sum(0)

    p = import_jax(f, "f32[16,32],f32[32,8]")
    assert p.name == "f" and p.n > 0
    q = parse_hlo_text(compile_hlo_text(f, [ArgShape("f32", (16, 32)), ArgShape("f32", (32, 8))]), name="f").problem
    assert p.buffers == q.buffers and p.ops == q.ops


@pytest.mark.parametrize("args, message", [
    (["fns.py:mlp", "--arg-shapes", "f32[8,12"], "--arg-shapes"),
    (["fns.py:mlp", "--arg-shapes", "q8[3]"], "unknown dtype"),
    (["fns.py:nope", "--arg-shapes", "f32[8]"], "has no attribute 'nope'"),
    (["fns.py:not_a_function", "--arg-shapes", "f32[8]"], "is not callable"),
    (["missing.py:mlp", "--arg-shapes", "f32[8]"], "not found"),
    (["no_such_module_xyz:mlp", "--arg-shapes", "f32[8]"], "cannot import"),
    (["fns.py", "--arg-shapes", "f32[8]"], "expected 'module.path:function'"),
    (["fns.py:mlp", "--arg-shapes", "f32[8,128],f32[128,256],bf16[256,64]", "--donate", "7"], "does not exist"),
    (["fns.py:mlp", "--arg-shapes", "f32[8,128]"], "failed (TypeError"),  # too few arguments
    (["fns.py:mlp", "--arg-shapes", "f32[8,128],f32[64,256],bf16[256,64]"], "failed ("),  # shapes do not match
])
def test_bad_input_is_one_line_exit_2(args, message, fns):
    if args[0].startswith("fns.py:") and message not in ("--arg-shapes", "unknown dtype", "does not exist"):
        pytest.importorskip("jax")  # fns.py imports jax
    r = CliRunner().invoke(import_group, ["jax", *args, "-o", "w.json"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (fns / "w.json").exists()


def test_without_jax_is_one_line_exit_2(fns):
    import os
    import subprocess
    import sys

    code = ("import sys; sys.modules['jax'] = None\n"  # as if jax were not installed
            "from mallocgame.cli.main import main\n"
            "main(['import', 'jax', 'mod:fn', '--arg-shapes', 'f32[8]', '-o', 'w.json'], prog_name='mallocgame')")
    fn_file = fns / "mod.py"
    fn_file.write_text("def fn(x):\n    return x\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=fns,
                       env={**os.environ, "PYTHONPATH": str(fns)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "jax is not installed" in lines[0] and "mallocgame[jax]" in lines[0], lines
