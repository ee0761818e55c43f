"""Analytic workloads: FLOPs, bytes, live ranges and prefetch windows checked against hand-computed numbers;
the built-in suites and `mallocgame suites`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.formats.io import parse_workload, workload_dict
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs import workloads as w
from mallocgame.inputs.suites import SUITES, benchmarks_dir, resolve_inputs, suite_entries
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import InputError
from mallocgame.problem.units import format_bytes
from tests.conftest import needs_benchmarks, run_cli


def by_id(problem):
    return {b.id: b for b in problem.buffers}


def test_tiny_transformer_flops_and_bytes_by_hand():
    # 1 layer, hidden 8, 2 heads, seq 4, batch 1, ffn 16, bf16.
    p = w.transformer_encoder(layers=1, hidden=8, heads=2, seq=4, batch=1, ffn=16)
    flops = {op.id: op.flops for op in p.ops}
    assert flops["op.l0.attn.q"] == 2 * 4 * 8 * 8 == 512
    assert flops["op.l0.attn.scores"] == 2 * 1 * 4 * 4 * 8 == 256  # 2*B*S*S*d
    assert flops["op.l0.attn.softmax"] == 5 * (1 * 2 * 4 * 4) == 160  # 5 per element of [B, h, S, S]
    assert flops["op.l0.attn.context"] == 256
    assert flops["op.l0.ln1"] == 9 * 4 * 8 == 288  # add (1) + layernorm (8) per element
    assert flops["op.l0.ffn1"] == 2 * 4 * 8 * 16 + 8 * 4 * 16 == 1536  # matmul + fused GELU
    assert flops["op.l0.ffn2"] == 2 * 4 * 16 * 8 == 1024
    assert w.total_flops(p) == 3 * 512 + 256 + 160 + 256 + 512 + 288 + 1536 + 1024 + 288 == 5856
    b = by_id(p)
    assert b["l0.attn.q.w"].size == 8 * 8 * 2 and b["l0.attn.q.w"].kind == "weight"
    assert b["l0.attn.scores"].size == 2 * 4 * 4 * 2  # [B, heads, S, S] bf16
    assert b["l0.ffn1"].size == 4 * 16 * 2 and b["l0.ln2"].kind == "output"
    q_op = next(op for op in p.ops if op.id == "op.l0.attn.q")
    assert {(o.buffer, o.access, o.bytes) for o in q_op.operands} == {
        ("x", "read", 64), ("l0.attn.q.w", "read", 128), ("l0.attn.q", "write", 64)}
    # Softmax may reuse the dying scores buffer.
    assert ("l0.attn.scores", "l0.attn.softmax") in p.inplace


def test_bert_base_flops_match_the_formula():
    p = w.bert_base(batch=1)
    B, S, d, f, L, h = 1, 128, 768, 3072, 12, 12
    per_layer = (4 * 2 * B * S * d * d + 2 * 2 * B * S * d * f + 2 * 2 * B * S * S * d
                 + 5 * B * h * S * S + 2 * 9 * B * S * d + 8 * B * S * f)
    embed, pooler = 10 * B * S * d, 2 * B * d * d + B * d
    assert w.total_flops(p) == L * per_layer + embed + pooler == 22_420_194_048
    assert sum(op.kind == "softmax" for op in p.ops) == 12
    assert sum(op.kind == "matmul" for op in p.ops) == 12 * 6 + 1
    weights = [b for b in p.buffers if b.kind == "weight"]
    assert sum(b.size for b in weights if b.id.startswith("l")) == 12 * (4 * d * d + 2 * d * f) * 2
    # Batch 8 scales activations and FLOPs, not weights.
    p8 = w.bert_base(batch=8)
    assert by_id(p8)["l0.attn.scores"].size == 8 * by_id(p)["l0.attn.scores"].size == 8 * 12 * 128 * 128 * 2
    assert by_id(p8)["l0.ffn1.w"].size == by_id(p)["l0.ffn1.w"].size == 768 * 3072 * 2
    # The embedding table stays in HBM: the lookup reads B*S*d elements of it as fixed bytes.
    assert p.ops[0].kind == "gather" and p.ops[0].fixed_bytes == 128 * 768 * 2


def test_mlp_inference_live_ranges_and_capacity_by_hand():
    p = w.mlp([4, 8, 2], batch=2)
    flops = [op.flops for op in p.ops]
    assert flops == [2 * 2 * 4 * 8 + 2 * 8, 2 * 2 * 8 * 2]  # fc1 with fused ReLU, fc2
    b = by_id(p)
    assert (b["x"].size, b["fc1.w"].size, b["fc1"].size, b["fc2.w"].size, b["fc2"].size) == (16, 64, 32, 32, 8)
    assert [(b[k].start, b[k].end) for k in ("x", "fc1.w", "fc1", "fc2")] == [(0, 1), (0, 1), (0, 2), (1, 2)]
    assert max_live(p) == 16 + 64 + 32 + 32  # at op 0 (fc2.w is prefetched during op 0)
    capped = w.with_capacity(p, 0.5, align=8)
    assert capped.capacity == 72


def test_prefetch_window_counts_back_the_copy_time():
    # Each op reads and writes 1000 bytes at 1 MB/s: 2 ms per op. A 3000-byte weight copied at
    # 1 MB/s takes 3 ms, so for a use at op 3 (starting at 6 ms) the copy starts at 3 ms, in op 1.
    hw = PRESETS["test"].replace(peak_flops=1e30, slow_bw=1e6, copy_bw=1e6)
    p = w.Program("prefetch", dtype_bytes=1)
    x = p.input("x", (1000,))
    for k in range(3):
        x = p.op("elementwise", f"a{k}", [x], (1000,), 0)
    weight = p.weight("w", (3000,))
    p.op("matmul", "use", [x, weight], (1000,), 0)
    problem = p.build(hardware=hw)
    assert (by_id(problem)["w"].start, by_id(problem)["w"].end) == (1, 4)


def test_mlp_training_step_by_hand():
    p = w.mlp([4, 8, 2], batch=2, training=True)
    kinds = [op.id for op in p.ops]
    assert kinds == ["op.fc1", "op.fc1.relu", "op.fc2", "op.xent", "op.d.fc2>fc1.relu", "op.d.fc2>fc2.w",
                     "op.fc2.w.sgd", "op.d.fc1.relu>fc1", "op.d.fc1>fc1.w", "op.fc1.w.sgd"]
    expected = [128, 16, 64, 5 * 4, 64, 64, 2 * 16, 16, 128, 2 * 32]
    assert [op.flops for op in p.ops] == expected
    b = by_id(p)
    # The ReLU output is saved for the backward pass: live from op 1 to the weight gradient at op 5.
    assert (b["fc1.relu"].start, b["fc1.relu"].end) == (1, 6)
    assert b["fc1.w.new"].kind == "output" and b["x"].kind == "input"


def test_convolutions_by_hand_and_resnet18_macs():
    p = w.Program("conv")
    x = p.input("x", (1, 4, 4, 3))
    y = p.conv(x, 2, "c", k=3)
    z = p.conv(y, 0, "dw", k=3, stride=2, depthwise=True, act=None)
    prob = p.build()
    assert prob.ops[0].flops == 2 * 1 * 4 * 4 * 2 * 9 * 3 + 1 * 4 * 4 * 2  # conv + fused ReLU
    assert prob.ops[1].flops == 2 * 1 * 2 * 2 * 2 * 9 and z.shape == (1, 2, 2, 2)
    assert by_id(prob)["c.w"].size == 3 * 3 * 3 * 2 * 2
    r18 = w.resnet([(64, 2), (128, 2), (256, 2), (512, 2)], batch=1)
    macs = sum(op.flops for op in r18.ops if op.kind == "conv") / 2
    assert macs == pytest.approx(1.81e9, rel=0.02)  # the usual 1.8 GMACs of ResNet-18 (convs only)


@pytest.mark.parametrize("dist", w.SIZE_DISTRIBUTIONS)
def test_size_distributions_differ_and_are_seeded(dist):
    import numpy as np

    a = w.sample_sizes(dist, 2000, np.random.default_rng(3))
    assert (a % w.ALIGN == 0).all() and (a > 0).all()
    assert (a == w.sample_sizes(dist, 2000, np.random.default_rng(3))).all()
    spread = np.percentile(a, 95) / np.percentile(a, 50)
    assert spread < 1.6 if dist == "uniform" else spread > 3
    with pytest.raises(ValueError):
        w.sample_sizes("zipf", 3, np.random.default_rng(0))


def test_realistic_suite_is_valid_and_tight():
    entries = suite_entries("realistic")
    assert len(entries) >= 20
    kinds = " ".join(e.name for e in entries)
    for family in ("mlp", "resnet", "mobilenet", "bert-base-b1", "bert-base-b8", "gpt2"):
        assert family in kinds
    for e in entries:
        p = e.build()
        assert p.name == e.name and p.has_ops and p.mode == "map"
        live = max_live(p)
        assert p.capacity < live and p.capacity == min(int(live * 0.4) // 512 * 512, 128 * 2**20)
        parse_workload(e.name, workload_dict(p))  # every op touches its buffers inside their live ranges


def test_quick_suite_and_entry_selection():
    quick = suite_entries("quick")
    assert 3 <= len(quick) <= 6
    picked = resolve_inputs(["realistic:bert-base-b1,mlp-4x2048-b32"])
    assert [e.name for e in picked] == ["bert-base-b1", "mlp-4x2048-b32"]
    with pytest.raises(InputError, match="no entry 'nope'"):
        resolve_inputs(["realistic:nope"])
    with pytest.raises(InputError, match="not a suite"):
        resolve_inputs(["nosuchsuite"])


def test_a_folder_is_its_problem_files(tmp_path):
    # `mallocgame compare DIR`: the folder's .csv / .json files (gzipped too), by name; nothing else in it
    import gzip

    from mallocgame.formats.io import problem_csv_text
    from mallocgame.inputs.generate import layered_network

    p = layered_network(30, seed=0)
    (tmp_path / "b.64.csv").write_text(problem_csv_text(p))
    (tmp_path / "a.64.csv.gz").write_bytes(gzip.compress(problem_csv_text(p).encode()))
    (tmp_path / "notes.txt").write_text("not a problem")
    hlo = Path(__file__).parent / "data" / "cnn_fwd.hlo.txt"
    (tmp_path / "cnn.hlo.txt").write_text(hlo.read_text())
    (tmp_path / "sub").mkdir()
    entries = resolve_inputs([str(tmp_path)])
    assert [e.name for e in entries] == ["a", "b", "cnn"]
    assert entries[0].build().buffers == entries[1].build().buffers
    assert entries[2].build().has_ops  # scheduled HLO text, imported
    with pytest.raises(InputError, match="no .csv, .json or .hlo.txt problem files"):
        resolve_inputs([str(tmp_path / "sub")])


def test_benchmarks_folder_resolution(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="--benchmarks DIR"):
        benchmarks_dir(str(tmp_path / "missing"))
    (tmp_path / "minimalloc").mkdir()
    assert benchmarks_dir(str(tmp_path)) == tmp_path
    assert benchmarks_dir(str(tmp_path / "minimalloc")) == tmp_path
    monkeypatch.setenv("MALLOCGAME_BENCHMARKS", str(tmp_path))
    assert benchmarks_dir() == tmp_path
    with pytest.raises(InputError, match="A.1048576.csv"):  # the folder is there, the files are not
        suite_entries("minimalloc")


@needs_benchmarks()
def test_minimalloc_suite_lists_the_eleven_files():
    entries = suite_entries("minimalloc")
    assert [e.name for e in entries] == list("ABCDEFGHIJK")
    p = entries[0].build()
    assert p.capacity == 1048576 and not p.has_ops


def test_suites_command_lists_every_suite(tmp_path):
    r = run_cli("suites", "--benchmarks", str(tmp_path / "none"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["suite", "count", "description"]
    for name in SUITES:
        assert any(line.split()[0] == name for line in lines[1:])
    realistic = next(line for line in lines if line.startswith("realistic"))
    assert int(realistic.split()[1]) >= 20
    # The pack suites say plainly where they looked when the files are not there.
    assert "not available" in next(line for line in lines if line.startswith("minimalloc"))
    r = run_cli("suites", "quick")
    assert r.returncode == 0 and "encoder-tiny-b4" in r.stdout and "capacity 40% of max live" in r.stdout
    r = run_cli("suites", "nope")
    assert r.returncode == 2 and r.stderr.startswith("error: unknown suite") and len(r.stderr.splitlines()) == 1


def test_suites_xla_lists_the_recorded_facts_without_building_a_program(monkeypatch):
    """``suites xla`` prints the manifest's facts (reading the nine programs takes a minute); they are what
    building the programs gives (checked here on the four that build in about a second)."""
    from click.testing import CliRunner

    import mallocgame.inputs.suites as suites
    from mallocgame.cli.main import main

    entries = suite_entries("xla")
    assert len(entries) == 9 and all(e.facts is not None for e in entries)
    for e in entries:
        if e.name in ("gpt2-tiny-train-adam", "resnet20-cifar-train", "vit-s16-b8", "mixer-s16-b8"):
            assert suites.facts_of(e.build()) == e.facts, e.name

    def no_build(*args, **kwargs):
        raise AssertionError("a program was read to list the suite")

    monkeypatch.setattr(suites, "read_hlo_file", no_build)
    out = CliRunner().invoke(main, ["suites", "xla"])
    assert out.exit_code == 0, out.output
    tiny = next(line for line in out.output.splitlines() if line.startswith("gpt2-tiny-train-adam"))
    facts = next(e.facts for e in entries if e.name == "gpt2-tiny-train-adam")
    assert tiny.split()[1:5] == ["318", "305", format_bytes(facts["max_live"]), format_bytes(facts["capacity"])]
    assert tiny.split()[3] == "38.17MiB"  # the recorded max live, in a person's units


def test_recorded_facts_must_be_whole():
    from mallocgame.inputs.suites import recorded_facts

    good = {"buffers": 3, "ops": 2, "max_live": 10, "capacity": None}
    assert recorded_facts(good) == good
    for bad in (None, [], {**good, "ops": 2.5}, {**good, "buffers": True}, {**good, "max_live": None},
                {k: v for k, v in good.items() if k != "ops"}, {**good, "extra": 1}, {**good, "ops": -1}):
        assert recorded_facts(bad) is None, bad
