"""The value leaves' target in prefetch mode (search/muzero/value.py, "prefetch mode"): the labels are what a greedy
rollout from the leaf backs up relative to the reference episode, and the solver reads a prefetch value head only
from a checkpoint marked with that target."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.engine.runner import run_solver
from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.value import (
    PREFETCH_FEATURES,
    PREFETCH_GAME,
    PrefetchValue,
    label_prefetch_states,
    load_prefetch_head,
    prefetch_context_features,
)
from mallocgame.search.uct import greedy_profile

HW = PRESETS["tpuv4i"]


def _problem(n=40, seed=3):
    return layered_network(n, seed=seed, capacity_fraction=0.3).replace(mode="prefetch")


def _greedy_to_end(game) -> float:
    total = 0.0
    while not game.done:
        total += game.step(game.greedy_action())
    return total


def test_prefetch_target_is_a_hand_run_greedy_rollouts_relative_return():
    """Every label of a greedy walk (eps = 0) at every state is, child by child, 100 x (the return of a greedy
    rollout played step by step from the leaf - the reference episode's return still to come at the leaf's step) /
    the reference episode's return, at the state ``leaf_steps`` greedy steps after the child's move."""
    problem, leaf_steps = _problem(40, seed=3), 3
    rows: dict = {}
    features, labels = label_prefetch_states(problem, HW, np.random.default_rng(0), states=10**6, eps=0.0,
                                             leaf_steps=leaf_steps, rows=rows)
    start = Game(problem, HW, GameConfig(**PREFETCH_GAME))
    reference, rewards = start.clone(), []
    while not reference.done:
        rewards.append(reference.step(reference.greedy_action()))
    scale = float(sum(rewards))
    walk, expected, steps = start.clone(), [], []
    while not walk.done:
        for a in walk.legal_actions().tolist():
            leaf = walk.clone()
            leaf.step(int(a))
            for _ in range(leaf_steps):
                if not leaf.done:
                    leaf.step(leaf.greedy_action())
            if leaf.done:
                continue
            ref_to_go = float(sum(rewards[leaf.steps:]))
            expected.append(100.0 * (_greedy_to_end(leaf.clone()) - ref_to_go) / scale)
            steps.append(leaf.steps)
        walk.step(walk.greedy_action())
    assert scale > 0 and len(labels) == len(expected) > 10
    assert np.abs(np.asarray(expected)).max() > 1e-3  # some leaves end unlike the reference: the labels say something
    np.testing.assert_allclose(labels, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rows["step"], steps)
    assert features.shape == (len(labels), len(PREFETCH_FEATURES))


def test_prefetch_features_without_the_probe_are_the_same_but_next():
    problem = _problem(40, seed=4)
    game = Game(problem, HW, GameConfig(**PREFETCH_GAME))
    to_go, scale = greedy_profile(game)
    for _ in range(7):
        game.step(int(game.legal_actions()[-1]))
    full = prefetch_context_features(game, to_go, scale)
    cheap = prefetch_context_features(game, to_go, scale, probe=False)
    assert cheap[PREFETCH_FEATURES.index("next")] == 0.0
    keep = [i for i, name in enumerate(PREFETCH_FEATURES) if name != "next"]
    np.testing.assert_allclose(cheap[keep], full[keep], rtol=1e-5, atol=1e-6)
    assert full[PREFETCH_FEATURES.index("progress")] == pytest.approx(game.steps / (len(to_go) - 1))


@pytest.fixture(scope="module")
def prefetch_heads(tmp_path_factory):
    """A head trained on the labels of two tiny problems (marked), and a copy without the mark."""
    pytest.importorskip("torch")
    import torch

    from mallocgame.search.muzero.value import train_prefetch_head

    root = tmp_path_factory.mktemp("prefetch_heads")
    parts = [label_prefetch_states(_problem(50, seed=s), HW, np.random.default_rng(s), states=20, leaf_steps=4)
             for s in (1, 2)]
    data = root / "labels.npz"
    np.savez(data, context=np.concatenate([x for x, _ in parts]), y=np.concatenate([y for _, y in parts]),
             problem=np.concatenate([np.full(len(y), i) for i, (_, y) in enumerate(parts)]))
    marked = root / "marked.pt"
    summary = train_prefetch_head(str(data), str(marked), inputs=("ahead", "remaining", "progress"), hidden=4,
                                  epochs=3, seed=0)
    payload = torch.load(marked, weights_only=True)
    unmarked = root / "unmarked.pt"
    torch.save({k: v for k, v in payload.items() if k != "value_target"}, unmarked)
    return marked, unmarked, summary


def test_a_trained_prefetch_head_reads_its_inputs_with_the_searchs_reference(prefetch_heads):
    marked, _, summary = prefetch_heads
    head, why = load_prefetch_head(str(marked))
    assert head is not None and why == "" and summary["epochs"] == 3
    assert head.inputs == ("ahead", "remaining", "progress") and not head.probes
    assert np.all(head.w1[:, [PREFETCH_FEATURES.index("next"), PREFETCH_FEATURES.index("length")]] == 0.0)
    game = Game(_problem(40, seed=5), HW, GameConfig(**PREFETCH_GAME))
    values = PrefetchValue(head)
    assert values(game) == (0.0, None)  # no reference yet: the reference control
    to_go, scale = greedy_profile(game)
    values.set_reference(to_go, scale)
    for _ in range(5):
        game.step(game.greedy_action())
    y, prior = values(game)
    features = prefetch_context_features(game, to_go, scale)
    hidden = np.maximum(head.w1 @ features + head.b1, 0.0)
    assert prior is None and y == pytest.approx(float((head.w2 @ hidden + head.b2)[0]))
    assert values.calls == 2


def test_the_solver_reads_a_prefetch_head_only_from_a_marked_checkpoint(prefetch_heads, tmp_path):
    marked, unmarked, _ = prefetch_heads
    problem = _problem(60, seed=6)
    opts = {"leaf": "mixed", "leaf_steps": 4, "simulations": 3}
    read = run_solver("muzero", problem, HW, time_limit=120, seed=1, options=dict(opts, value_checkpoint=str(marked)))
    plain = run_solver("muzero", problem, HW, time_limit=120, seed=1,
                       options=dict(opts, value_checkpoint=str(unmarked)))
    assert read.valid and plain.valid
    assert read.stats["leaf_value"] == "prefetch head" and read.stats["value_head_calls"] > 0
    assert plain.stats["leaf_value"].startswith("reference (") and "not marked" in plain.stats["leaf_value"]
    assert "value_head_calls" not in plain.stats
    control = run_solver("muzero", problem, HW, time_limit=120, seed=1, options=dict(opts, leaf_value="reference"))
    assert control.stats["leaf_value"] == "reference" and control.objective == plain.objective  # y = 0 exactly
    with pytest.raises(ValueError, match="not found"):
        load_prefetch_head(str(tmp_path / "missing.pt"))


def test_without_a_shipped_prefetch_head_the_default_leaves_get_the_reference(monkeypatch, tmp_path):
    import mallocgame.solvers.muzero as muzero

    monkeypatch.setattr(muzero, "PREFETCH_VALUE_CHECKPOINT", tmp_path / "none.pt")
    rep = run_solver("muzero", _problem(60, seed=7), HW, time_limit=120, seed=1,
                     options={"leaf": "mixed", "simulations": 2})
    assert rep.valid and rep.stats["leaf_value"] == "reference (no value head for prefetch mode's game)"


def test_a_resumed_prefetch_labelling_run_is_the_same_as_one_run(tmp_path):
    from mallocgame.search.muzero.problems import Curriculum
    from mallocgame.search.muzero.value import generate_prefetch

    curriculum = Curriculum(min_size=30, max_size=50, layered_share=1.0)
    once, twice = tmp_path / "once.npz", tmp_path / "twice.npz"
    assert generate_prefetch(str(once), curriculum, seed=3, seconds=600, states=8, leaf_steps=4, problems=2) == 2
    assert generate_prefetch(str(twice), curriculum, seed=3, seconds=600, states=8, leaf_steps=4, problems=1) == 1
    assert generate_prefetch(str(twice), curriculum, seed=3, seconds=600, states=8, leaf_steps=4, problems=2) == 2
    a, b = np.load(once), np.load(twice)
    assert set(a.files) == {"context", "y", "problem", "step", "greedy", "kind", "n"} and len(np.unique(a["problem"])) == 2
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])
