"""The held-out protocol (experiments/heldout.py, issue 21 item 1): fixed, fresh, never trained on, confirmation gated."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from mallocgame.search.muzero.problems import (
    TRAIN_SEED_BASE,
    XLA_HELD_OUT_WIDTHS,
    XLA_MODELS,
    Curriculum,
    xla_architecture,
    xla_widths,
)
from tests.conftest import ROOT, experiment_module

H = experiment_module("heldout")


def test_generated_set_is_the_one_fixed_before_any_run():
    assert H.digest(H.generated_recipes()) == H.HELDOUT_DIGEST


def test_generated_set_covers_every_family_and_the_sizes():
    recipes = H.generated_recipes()
    assert {r.kind for r in recipes} == set(H.GENERATED_KINDS)
    for kind in H.GENERATED_KINDS:
        sizes = {r.n for r in recipes if r.kind == kind}
        assert min(sizes) == 150 and max(sizes) == 2000
    seeds = [r.seed for r in recipes]
    assert len(set(seeds)) == len(seeds)
    assert not set(seeds) & H.USED_SEEDS
    assert max(seeds) < TRAIN_SEED_BASE


@pytest.mark.parametrize("realistic_share", [0.0, 0.3])
def test_no_training_curriculum_seed_is_a_held_out_or_confirmation_seed(realistic_share):
    held = H.all_seeds()
    lo, hi = H.CONFIRM_SEED_BASE, H.CONFIRM_SEED_BASE + 2 * H.CONFIRM_SEED_SPAN
    cur = Curriculum(min_size=16, max_size=2000, realistic_share=realistic_share)
    for stream in range(5):
        rng = np.random.default_rng(stream)
        seeds = np.array([cur.sample(rng).seed for _ in range(4000)])
        assert seeds.min() >= TRAIN_SEED_BASE
        assert not set(seeds.tolist()) & held
        assert not ((seeds >= lo) & (seeds < hi)).any()


def test_confirmation_refuses_without_the_chosen_checkpoints_hash(tmp_path):
    ckpt = tmp_path / "chosen.pt"
    ckpt.write_bytes(b"weights of the chosen network")
    for bad in (None, "", "abc", "0" * 64, H.file_sha256(ckpt).upper()):
        with pytest.raises(ValueError):
            H.confirmation_recipes(ckpt, bad)
    recipes = H.confirmation_recipes(ckpt, H.file_sha256(ckpt))
    assert {r.kind for r in recipes} == set(H.GENERATED_KINDS)
    seeds = {r.seed for r in recipes}
    assert not seeds & H.all_seeds() and not seeds & H.USED_SEEDS
    assert all(H.CONFIRM_SEED_BASE <= s < H.CONFIRM_SEED_BASE + 2 * H.CONFIRM_SEED_SPAN for s in seeds)
    other = tmp_path / "other.pt"
    other.write_bytes(b"another network")
    assert {r.seed for r in H.confirmation_recipes(other, H.file_sha256(other))} != seeds


def test_no_package_module_imports_the_held_out_protocol():
    pattern = re.compile(r"^\s*(from|import)\s+\S*heldout", re.M)
    for folder in ("mallocgame", "search", "solvers", "hybrid", "hardware"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not pattern.search(path.read_text()), path


def test_imported_programs_are_map_problems_at_the_fixed_capacities():
    held = H.held_out(("hlo",))
    names = {h.label.split(":", 1)[1].rsplit("-c", 1)[0] for h in held if h.family == "hlo"}
    assert names == {p.name.removesuffix(".hlo.txt") for p in H.hlo_files()} and names
    assert names == set(H.HELDOUT_HLO) and "linalg_solve" not in names  # a fixture added later is not held out
    assert len(held) >= 2 * len(names)
    for h in held:
        assert h.problem.mode == "map" and h.problem.capacity is not None and h.problem.n > 0


def test_prefetch_set_is_the_one_fixed_before_any_run_and_fresh():
    recipes = H.prefetch_recipes()
    assert H.digest(recipes) == H.PREFETCH_DIGEST
    assert {r.kind for r in recipes} == set(H.PREFETCH_KINDS)  # the families with ops only
    seeds = [r.seed for r in recipes]
    assert len(set(seeds)) == len(seeds) and not set(seeds) & (H.all_seeds() | H.USED_SEEDS)
    assert max(seeds) < H.CONFIRM_SEED_BASE and max(seeds) < TRAIN_SEED_BASE
    small = H.held_out_prefetch(("small",))
    assert len(small) == len(recipes) and all(h.problem.mode == "prefetch" and h.problem.has_ops for h in small)
    in_order = sorted(recipes, key=lambda r: (r.n, H.GENERATED_KINDS.index(r.kind)))
    for h, (problem, _) in zip(small, (H.build(r) for r in in_order)):
        assert h.problem.capacity == problem.capacity  # the held-out capacity, not the hardware's


@pytest.mark.parametrize("script, checkpoint", [("heldout_muzero_mcts.py", "default.pt"),
                                                ("heldout_prefetch.py", "prefetch.pt")])
def test_the_confirmation_run_refuses_a_hash_not_the_chosen_networks(tmp_path, script, checkpoint):
    # each held-out script's --confirmation draws from its network's SHA-256 only: one line, a non-zero exit,
    # nothing run or written
    import subprocess

    r = subprocess.run([sys.executable, str(ROOT / "experiments" / script), "--confirmation",
                        "0" * 64, "--csv", str(tmp_path / "c.csv"), "--out", str(tmp_path / "c.md")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT / "experiments")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("--confirmation: ") and f"{checkpoint} has SHA-256" in r.stderr, r.stderr
    assert not (tmp_path / "c.csv").exists()


def test_the_xla_curriculum_never_draws_a_width_of_the_xla_suite_or_the_hlo_fixtures():
    drawn = [xla_architecture(TRAIN_SEED_BASE + i) for i in range(3000)]
    assert {model for model, _ in drawn} == set(XLA_MODELS)
    for model, args in drawn:
        assert not xla_widths(model, args) & XLA_HELD_OUT_WIDTHS, (model, args)
    # the suite's own programs: their widths are the ones the grids avoid
    suite = {"gpt2": (128, 768, 1024), "lstm": (256,), "resnet20": (16,), "vit": (384,), "mixer": (512,)}
    assert set(w for ws in suite.values() for w in ws) <= XLA_HELD_OUT_WIDTHS


@pytest.mark.parametrize("xla_share", [0.0, 0.5])
def test_an_xla_share_draws_xla_programs_and_share_0_replays_the_old_stream(xla_share):
    old = Curriculum(min_size=16, max_size=600, realistic_share=0.3)
    new = Curriculum(min_size=16, max_size=600, realistic_share=0.3, xla_share=xla_share)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    drawn_old = [old.sample(a) for _ in range(400)]
    drawn_new = [new.sample(b) for _ in range(400)]
    share = sum(r.kind == "xla" for r in drawn_new) / len(drawn_new)
    if xla_share == 0:
        assert drawn_new == drawn_old
    else:
        assert 0.4 < share < 0.6 and all(r.seed >= TRAIN_SEED_BASE for r in drawn_new)


def test_a_candidate_network_is_a_named_muzero_contestant_compared_with_the_others(tmp_path):
    ckpt = tmp_path / "run.g100.pt"
    ckpt.write_bytes(b"weights")
    contestants, pairs = H.with_candidate({"mcts": ("mcts", {})}, (("a", "b"),), f"xla21={ckpt}", ("mcts", "muzero"))
    assert contestants["xla21"] == ("muzero", {"checkpoint": str(ckpt)}) and contestants["mcts"] == ("mcts", {})
    assert pairs == (("a", "b"), ("xla21", "mcts"), ("xla21", "muzero"))
    assert H.with_candidate({"m": 1}, (), None, ("m",)) == ({"m": 1}, ())
    for bad in ("xla21", f"={ckpt}", "xla21=", f"mcts={ckpt}", f"x={tmp_path / 'missing.pt'}"):
        with pytest.raises(SystemExit):
            H.with_candidate({"mcts": ("mcts", {})}, (), bad, ("mcts",))


def test_a_summary_without_budgets_takes_the_csvs_own(tmp_path):
    # --summary-only of a t60 CSV without --budgets once printed no line at all; it now summarises what the CSV holds
    import shutil
    import subprocess

    csv_path = tmp_path / "runs.csv"
    shutil.copy(ROOT / "experiments" / "results" / "heldout_xla21_t60_c.csv", csv_path)
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "heldout_muzero_mcts.py"), "--summary-only",
                        "--contestants", "mcts,muzero", "--csv", str(csv_path), "--out", str(tmp_path / "s.md")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT / "experiments")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "s.md").read_text()
    assert "budget t60 torch      (16 problems, 36-377 buffers)" in text and "muzero vs mcts 2/11/3" in text


def test_each_contestant_builds_its_own_fallbacks():
    """The held-out loop hands every contestant a problem whose baselines nobody built yet (as a forked child of
    ``mallocgame solve`` starts), so an equal-wall-time run does not give the second contestant the first one's
    msa answer free of time."""
    from mallocgame.engine.session import session_for
    from mallocgame.hardware.spec import PRESETS
    from mallocgame.inputs.generate import layered_network

    runs = experiment_module("heldout_muzero_mcts")
    problem = layered_network(60, seed=3, capacity_fraction=0.3).replace(mode="prefetch")
    hw = PRESETS["tpuv4i"]
    assert [b.name for b in session_for(problem, hw).baselines()]  # the first contestant built them
    own = runs.own_copy(problem, hw)
    assert own == problem and own is not problem
    assert session_for(own, hw).built() == []  # none handed on
    assert session_for(own, hw).prefetch_evaluator is not session_for(problem, hw).prefetch_evaluator
    from mallocgame.problem.model import derived_facts

    assert ("prefetch_evaluator", hw) in derived_facts(own)  # warmed before the clock, as the CLI does before the fork


def test_a_summary_reads_a_run_split_over_several_csvs_and_refuses_a_run_counted_twice(tmp_path):
    runs = experiment_module("heldout_muzero_mcts")
    results = ROOT / "experiments" / "results"
    a, b = results / "heldout_prefetch_t60_own_a.csv", results / "heldout_prefetch_t60_own_b.csv"
    path, names, rows = runs.read_csvs(f"{a},{b}", summary_only=True)
    assert path == a and names == f"{a.name}, {b.name}"
    assert len(rows) == len(runs.read_rows(a)) + len(runs.read_rows(b)) > 0
    assert {r["problem"] for r in runs.read_rows(b)} <= {r["problem"] for r in rows}
    with pytest.raises(SystemExit, match="is also in"):
        runs.read_csvs(f"{a},{b},{a}", summary_only=True)  # a's runs would be counted twice
    with pytest.raises(SystemExit, match="summary-only"):
        runs.read_csvs(f"{a},{b}", summary_only=False)  # a run appends to one CSV
    with pytest.raises(SystemExit, match="no such file"):
        runs.read_csvs(f"{a},{tmp_path / 'missing.csv'}", summary_only=True)
