"""mallocgame as ExecuTorch's memory planner (mallocgame.integrations.executorch, ``mallocgame executorch``).

Each model is exported with our planner, written to a ``.pte``, loaded and run by
``executorch.runtime`` and compared with eager PyTorch; its arena
(``execution_plan[0].non_const_buffer_sizes``) is never larger than ExecuTorch greedy's on the
same program, and ExecuTorch's own verifier accepts the plan. Skipped only when executorch is
not importable (the dev extra installs it).
"""

from __future__ import annotations

import math
import re
import textwrap

import pytest

executorch_exir = pytest.importorskip("executorch.exir")
torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402
from executorch.exir.memory_planning import Verifier, greedy  # noqa: E402
from executorch.exir.tensor import TensorSpec  # noqa: E402

from mallocgame.integrations.executorch import (  # noqa: E402
    PlanningError,
    arena_sizes,
    planner,
    to_executorch,
)
from mallocgame.problem.model import InputError  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

nn = torch.nn
TIME_LIMIT = 3  # per arena: these small programs are planned in well under a second


class Residual(nn.Module):
    """A small CNN with a skip connection and batch norm."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1), nn.BatchNorm2d(16))
        self.c = nn.Conv2d(16, 32, 3, 2, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = self.a(x)
        y = torch.relu(y + self.b(y))
        return self.fc(torch.relu(self.c(y)).mean((2, 3)))


class Branches(nn.Module):
    """Inception-like branches of different widths."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1)
        self.b1 = nn.Sequential(nn.Conv2d(8, 64, 1), nn.ReLU(), nn.Conv2d(64, 8, 1))
        self.b2 = nn.Sequential(nn.Conv2d(8, 4, 3, 1, 1), nn.ReLU(), nn.Conv2d(4, 32, 3, 1, 1), nn.ReLU(),
                                nn.Conv2d(32, 8, 1))
        self.b3 = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(8, 16, 1))
        self.head = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        return self.head(torch.cat([self.b1(x), self.b2(x), self.b3(x)], 1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 128), nn.Tanh(), nn.Linear(128, 8))

    def forward(self, x):
        return self.net(x).softmax(-1)


class TransformerBlock(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.h = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(d // self.h))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


def _inputs(shape, seed=0):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)),)


MODELS = {
    "cnn": (Residual, (2, 3, 16, 16)),
    "branches": (Branches, (1, 3, 16, 16)),
    "mlp": (MLP, (4, 64)),
    "transformer": (TransformerBlock, (1, 16, 64)),
}


def _export(model, example):
    with torch.no_grad():
        return torch.export.export(model, example)


def _run_pte(path, example):
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(str(path)).load_method("forward")
    return method.execute(list(example))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_planned_program_runs_and_is_never_larger_than_greedy(name, tmp_path):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    example = _inputs(shape)
    with torch.no_grad():
        expected = model(*example)
    ours = planner("pack-search", time_limit=TIME_LIMIT, seed=0)
    program = to_executorch(_export(model, example), [ours])
    theirs = to_executorch(_export(model, example), [greedy])
    arena, greedy_arena = arena_sizes(program), arena_sizes(theirs)
    assert len(arena) == len(greedy_arena)
    assert sum(arena) <= sum(greedy_arena), (arena, greedy_arena)
    # the records say the same: our arena is the planned peak, never below max live
    assert sum(r.peak + r.reserved + r.padding for r in ours.records) == sum(arena)
    assert all(r.peak >= r.max_live > 0 for r in ours.records)
    # ExecuTorch's own check of the plan (run by the pass only for its greedy)
    ep = program.exported_program()
    Verifier(ep.graph_module, True, True, True, ep.graph_signature).verify_storage_reuse()
    path = tmp_path / f"{name}.pte"
    path.write_bytes(program.buffer)
    (out,) = _run_pte(path, example)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_transformer_block_beats_greedy_and_reaches_max_live():
    build, shape = MODELS["transformer"]
    torch.manual_seed(0)
    model = build().eval()
    ours = planner(time_limit=TIME_LIMIT, seed=0)
    program = to_executorch(_export(model, _inputs(shape)), [ours])
    greedy_arena = sum(arena_sizes(to_executorch(_export(model, _inputs(shape)), [greedy])))
    (record,) = ours.records
    assert record.greedy_peak == greedy_arena > record.max_live  # greedy's plan is not optimal here
    assert sum(arena_sizes(program)) == record.peak == record.max_live  # ours is


def test_beside_greedy_in_one_suite_and_cold_start():
    build, shape = MODELS["cnn"]
    torch.manual_seed(0)
    model = build().eval()
    example = _inputs(shape)
    cold = planner(time_limit=TIME_LIMIT, seed=0, warm_start_greedy=False)
    assert cold.__name__ == "mallocgame_pack-search"
    program = to_executorch(_export(model, example), [greedy, cold])
    assert sum(arena_sizes(program)) <= sum(arena_sizes(to_executorch(_export(model, example), [greedy])))
    assert cold.records and all(r.greedy_peak == 0 for r in cold.records)  # no warm start was computed


def _spec(n_floats, lifetime, mem_id=None):
    s = TensorSpec(torch.float32, torch.Size([n_floats]))
    s.lifetime = list(lifetime)
    s.mem_id = mem_id
    return s


class _Graph:  # what an algorithm reads of the graph module
    def __init__(self, reserved=None):
        self.input_mem_buffer_sizes = reserved


def _overlap(a, b):
    live = not (a.lifetime[1] < b.lifetime[0] or b.lifetime[1] < a.lifetime[0])
    addr = a.mem_offset < b.mem_offset + b.allocated_memory and b.mem_offset < a.mem_offset + a.allocated_memory
    return a.mem_id == b.mem_id and live and addr


def _apply(result):
    for spec, r in result.spec_dict.items():
        spec.mem_id, spec.mem_offset, spec.mem_obj_id = r.mem_id, r.mem_offset, r.mem_obj_id


def test_contract_mem_ids_reserved_bytes_padding_and_storage_backed_specs():
    specs = [_spec(10, (0, 2)), _spec(25, (1, 3)), _spec(7, (3, 5)), _spec(40, (4, 6)), _spec(5, (0, 6), mem_id=2),
             _spec(9, (2, 4), mem_id=2), _spec(0, (1, 1))]
    inner = _spec(4, (4, 5))  # an in-place result inside specs[3]'s storage, at byte 32
    inner.storage_base, inner.storage_base_offset = specs[3], 32
    specs.append(inner)
    g = greedy(16, specs, _Graph([0, 96]), None, 64)
    algo = planner(time_limit=2, seed=0)
    r = algo(16, specs, _Graph([0, 96]), None, 64)
    assert len(r.bufsizes) == len(g.bufsizes) == 3 and r.bufsizes[0] == 0
    assert sum(r.bufsizes) <= sum(g.bufsizes)
    _apply(r)
    for s in specs:
        assert s.mem_offset % 16 == 0 and s.alignment == 16
        assert s.mem_offset + s.allocated_memory + 64 <= r.bufsizes[s.mem_id]
    assert all(s.mem_offset >= 96 for s in specs if s.mem_id == 1)  # the reserved bytes stay free
    assert {s.mem_id for s in specs} == {1, 2} and inner.mem_id == 1
    assert inner.mem_offset == specs[3].mem_offset + 32 and inner.mem_obj_id == specs[3].mem_obj_id
    for i, a in enumerate(specs):
        for b in specs[i + 1:]:
            if inner in (a, b) and specs[3] in (a, b):
                continue
            assert not _overlap(a, b), (a.lifetime, b.lifetime)
            addr = (a.mem_id == b.mem_id and a.allocated_memory and b.allocated_memory
                    and a.mem_offset < b.mem_offset + b.allocated_memory
                    and b.mem_offset < a.mem_offset + a.allocated_memory)
            if addr:  # ExecuTorch's verifier: storage that overlaps shares a mem_obj_id
                assert a.mem_obj_id == b.mem_obj_id
    assert algo.records and {rec.mem_id for rec in algo.records} == {1, 2}


def test_reserved_bytes_are_rounded_up_to_the_alignment():
    specs = [_spec(10, (0, 2)), _spec(25, (1, 3))]
    r = planner(time_limit=1)(16, specs, _Graph([0, 100]), None, 0)
    _apply(r)
    assert min(s.mem_offset for s in specs) == 112 and r.bufsizes == [0, 112 + 48 + 112]


def test_a_spec_without_lifetime_lives_for_the_whole_program():
    specs = [_spec(10, (0, 2)), _spec(25, (3, 5)), _spec(4, (None, None))]
    r = planner(time_limit=1)(16, specs, _Graph(), None, 0)  # greedy cannot order None: planned without its hint
    _apply(r)
    whole = specs[2]
    for other in specs[:2]:  # it overlaps both in time: never in addresses
        assert (whole.mem_offset + whole.allocated_memory <= other.mem_offset
                or other.mem_offset + other.allocated_memory <= whole.mem_offset)
    assert r.bufsizes == [0, 112 + 16]


def test_no_overlapping_allocations_is_greedys_and_empty_specs():
    specs = [_spec(10, (0, 2)), _spec(25, (1, 3))]
    r = planner(time_limit=1)(16, specs, _Graph(), None, 0, allow_overlapping_allocations=False)
    g = greedy(16, specs, _Graph(), None, 0, allow_overlapping_allocations=False)
    assert r.bufsizes == g.bufsizes
    assert planner(time_limit=1)(16, [], _Graph(), None, 0).bufsizes == [0, 0]


def test_bad_arguments():
    with pytest.raises(InputError, match="unknown solver"):
        planner("nope")
    with pytest.raises(InputError, match="does not solve pack mode"):
        planner("msa")
    with pytest.raises(InputError, match="time_limit"):
        planner(time_limit=0)
    assert issubclass(PlanningError, RuntimeError)


MODEL_FILE = textwrap.dedent('''
    import torch
    def cnn():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                   torch.nn.Linear(8 * 6 * 6, 5))
''')


def test_cli_writes_a_program_that_runs(tmp_path, monkeypatch):
    from mallocgame.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(MODEL_FILE)
    r = CliRunner().invoke(main, ["executorch", "models.py:cnn", "--input-shape", "1,3,8,8", "--time-limit", "2",
                                  "--seed", "0", "-o", "m.pte"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    line = r.stdout.strip()
    assert line.startswith("m.pte: arena ") and "pack-search" in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith((".pte", ".tmp"))) == ["m.pte"]
    import importlib.util

    spec = importlib.util.spec_from_file_location("_et_models", tmp_path / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn((1, 3, 8, 8), generator=torch.Generator().manual_seed(0))
    (out,) = _run_pte(tmp_path / "m.pte", (x,))
    with torch.no_grad():
        torch.testing.assert_close(out, mod.cnn().eval()(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("args, message", [
    (["models.py:nope", "--input-shape", "1,3,8,8"], "has no attribute 'nope'"),
    (["models.py:cnn", "--input-shape", "1,a"], "--input-shape"),
    (["models.py:cnn"], "no example inputs"),
    (["missing.py:cnn", "--input-shape", "1,3,8,8"], "not found"),
    (["models.py:cnn", "--input-shape", "1,3,8,8", "--solver", "nope"], "unknown solver"),
    (["models.py:cnn", "--input-shape", "1,3,8,8", "--solver", "msa"], "does not solve pack mode"),
    (["models.py:cnn", "--input-shape", "1,3"], "torch.export failed"),
])
def test_cli_bad_input_is_one_line_exit_2(args, message, tmp_path, monkeypatch):
    from mallocgame.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(MODEL_FILE)
    r = CliRunner().invoke(main, ["executorch", *args, "-o", "m.pte"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "m.pte").exists()


def test_cli_without_executorch_is_one_line_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "models.py").write_text(MODEL_FILE)
    code = ("import sys; sys.modules['executorch'] = None\n"  # as if executorch were not installed
            "from mallocgame.cli.main import main\n"
            "main(['executorch', 'models.py:cnn', '--input-shape', '1,3,8,8', '-o', 'm.pte'], prog_name='mallocgame')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=os.environ.copy())
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "executorch is not installed" in lines[0] and "mallocgame[executorch]" in lines[0], lines
    assert not (tmp_path / "m.pte").exists()


class Branch(nn.Module):
    """torch.cond: ExecuTorch plans each branch as a submodule and reserves its arena in the parent's."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 32)

    def forward(self, x):
        h = self.a(x)
        y = torch.cond(h.sum() > 0, lambda h: (h.relu() * 2).sin(), lambda h: h.cos() + 1, (h,))
        return self.b(y) + x


def test_control_flow_submodules_keep_their_reserved_bytes(tmp_path):
    torch.manual_seed(0)
    model = Branch().eval()
    (x,) = _inputs((4, 32))
    ours = planner(time_limit=TIME_LIMIT, seed=0)
    program = to_executorch(_export(model, (x,)), [ours])
    greedy_arena = sum(arena_sizes(to_executorch(_export(model, (x,)), [greedy])))
    assert sum(arena_sizes(program)) <= greedy_arena
    reserved = [r.reserved for r in ours.records]
    assert len(ours.records) == 3 and reserved[:2] == [0, 0] and reserved[2] > 0  # two branches, then the parent
    path = tmp_path / "cond.pte"
    path.write_bytes(program.buffer)
    inputs = [100 * x, -100 * x]
    with torch.no_grad():
        assert {bool(model.a(i).sum() > 0) for i in inputs} == {True, False}  # both branches run
        for i in inputs:
            (out,) = _run_pte(path, (i,))
            torch.testing.assert_close(out, model(i), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- the docs' examples (docs/integrations.md)

DOCS = ROOT / "docs" / "integrations.md"


def test_docs_python_example_beats_greedy_and_runs(tmp_path, monkeypatch, capsys):
    """The marked Python example runs as written; its arena is below ExecuTorch greedy's and its program's output
    is eager PyTorch's; it prints what the page says it prints."""
    text = DOCS.read_text()
    m = re.search(r"<!-- executorch-example -->\s*```python\n(.*?)```\s*<!-- /executorch-example -->", text, re.S)
    assert m, "docs/integrations.md lost its marked ExecuTorch example"
    said = re.search(r"It prints `(arena [^`]*)` and `True`", text)
    assert said, "docs/integrations.md no longer says what its example prints"
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "__main__"}
    exec(compile(m.group(1), str(DOCS), "exec"), scope)
    assert capsys.readouterr().out.splitlines() == [said.group(1), "True"]
    model, x, program = scope["model"], scope["x"], scope["program"]
    arena = sum(arena_sizes(program))
    greedy_arena = sum(arena_sizes(to_executorch(_export(model, (x,)), [greedy])))
    (plan,) = scope["ours"].records
    assert arena == plan.peak == plan.max_live < greedy_arena == plan.greedy_peak  # the planner wins, and is optimal
    (out,) = _run_pte(tmp_path / "model.pte", (x,))  # the file the example wrote, run again here
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)


def test_docs_cli_example_beats_greedy_and_runs(tmp_path, monkeypatch):
    """The page's ``mallocgame executorch`` example prints what the page shows (the time aside), with an arena
    below greedy's, and its program runs right."""
    import importlib.util
    import shlex

    from mallocgame.cli.main import main

    block = re.search(r"cat > models.py <<'EOF'\n(.*?)\nEOF\n(mallocgame executorch [^\n]*)\n# ([^\n]*)\n",
                      DOCS.read_text(), re.S)
    assert block, "docs/integrations.md lost its mallocgame executorch example"
    source, command, shown = block.groups()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(source + "\n")
    r = CliRunner().invoke(main, shlex.split(command)[1:], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    printed = r.stdout.strip()

    def untimed(line):
        return re.sub(r"in [0-9.]+ s$", "in T s", line)

    assert untimed(printed) == untimed(shown)
    arena, greedy_arena = map(int, re.search(r"arena (\d+) bytes \(ExecuTorch greedy (\d+),", printed).groups())
    assert arena < greedy_arena
    spec = importlib.util.spec_from_file_location("_docs_models", tmp_path / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = shlex.split(command)
    build = getattr(mod, args[2].split(":")[1])  # mallocgame executorch FILE:CALLABLE ...
    x = torch.randn(tuple(int(d) for d in args[args.index("--input-shape") + 1].split(",")),
                    generator=torch.Generator().manual_seed(0))
    (out,) = _run_pte(tmp_path / args[args.index("-o") + 1], (x,))
    with torch.no_grad():
        torch.testing.assert_close(out, build().eval()(x), rtol=1e-5, atol=1e-5)
