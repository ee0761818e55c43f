"""The value leaves' one target (search/muzero/value.py, "What the search backs up"): what training labels is what a
value leaf backs up; the context head is read with the search's own reference episode."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network
from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.muzero.value import context_features, label_states, value_target
from mallocgame.search.uct import Episode, MCTSConfig, Node, UCTSearch, greedy_profile

HW = PRESETS["tpuv4i"]


def _problem(n=40, seed=3, capacity=0.3):
    return layered_network(n, seed=seed, capacity_fraction=capacity).replace(mode="map")


def _network():
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    return load_agent_network(str(VALUE_CHECKPOINT))


def test_the_training_target_is_what_a_value_leaf_backs_up():
    """Every label of a greedy walk (eps = 0) is the y of that child, and a value leaf reading that y backs up, for
    every child, exactly what a rollout leaf backs up: the target the head is trained on is the one the search
    reads."""
    net, fields = _network()
    problem = _problem(40, seed=3)
    rows: dict = {}
    _, labels = label_states(problem, HW, net, fields, np.random.default_rng(0), states=10**6, eps=0.0, rows=rows)
    start = Game(problem, HW, GameConfig(**fields))
    to_go, scale = greedy_profile(start)
    walk, expected, backed_up = start.clone(), [], 0
    while not walk.done:
        children = []
        for a in walk.legal_actions().tolist():
            child = walk.clone()
            child.step(int(a))
            if not child.done:
                children.append(int(a))
                expected.append(value_target(child, to_go, scale))
        if len(children) > 1:  # the search's view of this state: one simulation per child, value vs rollout
            q = {}
            for leaf in ("rollout", "value"):
                oracle = (lambda g: (value_target(g, to_go, scale), None)) if leaf == "value" else None
                search = UCTSearch(MCTSConfig(simulations=1, leaf=leaf), np.random.default_rng(0), leaf_value=oracle)
                search.set_reference(start)
                root = Node()
                for _ in children:
                    search.simulate(root, walk, math.inf, Episode(-math.inf, np.zeros(0, np.int64), ""))
                q[leaf] = {a: c.q() for a, c in root.children.items()}
            assert q["value"].keys() == q["rollout"].keys() and len(q["value"]) == len(children)
            for a in children:
                assert q["value"][a] == pytest.approx(q["rollout"][a], abs=1e-9)
            backed_up += 1
        walk.step(walk.greedy_action())
    np.testing.assert_allclose(labels, np.asarray(expected, np.float32), rtol=1e-6, atol=1e-6)
    assert backed_up > 0 and (labels != 0).any()
    assert rows["context"].shape == (len(labels), 4) and rows["greedy"].any() and not rows["greedy"].all()


def test_context_features_on_the_reference_path():
    """On the reference episode's own states the leaf is neither ahead nor behind, and the greedy's next reward is
    the reference's: ``[0, 100 to_go[t] / scale, t / T, 0]``; off it, ``ahead`` is the return beyond the reference's."""
    start = Game(_problem(), HW, GameConfig(variant="order", k=16, order="xla"))
    to_go, scale = greedy_profile(start)
    game = start.clone()
    length = len(to_go) - 1
    for _ in range(length // 2):
        game.step(game.greedy_action())
    t = game.steps
    np.testing.assert_allclose(context_features(game, to_go, scale), [0.0, 100 * to_go[t] / scale, t / length, 0.0],
                               atol=1e-5)
    while len(game.legal_actions()) < 2 or game.greedy_action() == game.slow_action:
        game.step(game.greedy_action())
    before = game.total_reward()
    slow = game.clone()
    slow.step(slow.slow_action)
    skipped = game.clone().step(game.greedy_action())  # the reference's reward for this step
    assert context_features(slow, to_go, scale)[0] == pytest.approx(100 * (slow.total_reward() - before - skipped)
                                                                     / scale, abs=1e-4)


@pytest.fixture(scope="module")
def context_network(tmp_path_factory):
    """A network with a ``context_value`` head trained on a few labelled small problems."""
    pytest.importorskip("torch")
    tmp_path = tmp_path_factory.mktemp("context")
    from mallocgame.search.muzero.problems import Curriculum
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.search.muzero.value import generate, train_context_head
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    net, fields = _network()
    data = tmp_path / "data.npz"
    generate(str(data), net, fields, Curriculum(min_size=30, max_size=60), seed=0, seconds=60, states=6, problems=5)
    out = tmp_path / "context.pt"
    summary = train_context_head(str(data), str(VALUE_CHECKPOINT), str(out), epochs=5, seed=0)
    context_net, _ = load_agent_network(str(out))
    return context_net, fields, np.load(data), summary


def test_context_head_is_saved_with_its_standardisation_folded_in(context_network):
    net, _, arrays, summary = context_network
    assert net.context_value is not None
    from mallocgame.search.muzero.value import split

    val = split(arrays["problem"])
    pred = net.context_value(np.concatenate([arrays["x"], arrays["context"]], 1)[val])[:, 0]
    # the numpy head on raw inputs is the trained head on standardised ones: the same validation error
    assert float(((pred - arrays["y"][val]) ** 2).mean()) == pytest.approx(summary["val_mse_shrunk"], rel=1e-3,
                                                                            abs=1e-6)
    assert 0.0 <= summary["shrink"] <= 1.0 and summary["val_mse_shrunk"] <= summary["val_mse_best"] + 1e-9
    assert set(arrays.files) >= {"x", "y", "problem", "context", "step", "greedy", "kind", "n"}


def test_context_head_takes_a_fixed_shrink_instead_of_the_validations(context_network, tmp_path):
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.search.muzero.value import train_context_head
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    _, _, arrays, _ = context_network
    data = tmp_path / "data.npz"
    np.savez(data, **arrays)
    inputs = np.concatenate([arrays["x"], arrays["context"]], 1)
    preds = {}
    for shrink in (1.0, 0.25):
        out = tmp_path / f"head{shrink}.pt"
        summary = train_context_head(str(data), str(VALUE_CHECKPOINT), str(out), epochs=5, seed=0, shrink=shrink)
        assert summary["shrink"] == shrink
        preds[shrink] = load_agent_network(str(out))[0].context_value(inputs)[:, 0]
    assert np.abs(preds[1.0]).max() > 0
    np.testing.assert_allclose(preds[0.25], 0.25 * preds[1.0], rtol=1e-4, atol=1e-6)  # the same head, scaled
    with pytest.raises(ValueError, match="not in"):
        train_context_head(str(data), str(VALUE_CHECKPOINT), str(tmp_path / "bad.pt"), epochs=1, shrink=1.5)


def test_context_head_reads_no_dropped_context_feature(context_network, tmp_path):
    from mallocgame.search.muzero.torchless import load_agent_network
    from mallocgame.search.muzero.value import CONTEXT_FEATURES, train_context_head
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    _, _, arrays, _ = context_network
    data = tmp_path / "data.npz"
    np.savez(data, **arrays)
    out = tmp_path / "head.pt"
    summary = train_context_head(str(data), str(VALUE_CHECKPOINT), str(out), epochs=5, seed=0, shrink=1.0,
                                 drop=("ahead",))
    assert summary["drop"] == ["ahead"]
    net = load_agent_network(str(out))[0]
    context = arrays["context"].copy()
    moved = context.copy()
    moved[:, CONTEXT_FEATURES.index("ahead")] -= 50.0  # far outside the training rows
    pred = net.context_value(np.concatenate([arrays["x"], context], 1))[:, 0]
    np.testing.assert_allclose(net.context_value(np.concatenate([arrays["x"], moved], 1))[:, 0], pred, atol=1e-6)
    moved[:, CONTEXT_FEATURES.index("remaining")] += 50.0  # a feature it reads does move it
    assert np.abs(net.context_value(np.concatenate([arrays["x"], moved], 1))[:, 0] - pred).max() > 1e-4
    with pytest.raises(ValueError, match="unknown context features"):
        train_context_head(str(data), str(VALUE_CHECKPOINT), str(tmp_path / "bad.pt"), epochs=1, drop=("behind",))


def test_network_value_reads_the_context_head_with_the_searchs_reference(context_network):
    from mallocgame.search.muzero.guide import input_vector
    from mallocgame.search.muzero.value import NetworkValue

    net, fields, _, _ = context_network
    start = Game(_problem(50, seed=4), HW, GameConfig(**fields))
    game = start.clone()
    for _ in range(10):
        game.step(game.greedy_action())
    values = NetworkValue(net)
    y_plain, _ = values(game)
    obs = game.observation()
    head_input = net.value_input(input_vector(game, obs, net.features), np.asarray(obs.actions, np.float32),
                                 np.asarray(obs.mask, bool))
    assert y_plain == 0.0  # no reference yet: the reference control, not the value head (another target)
    search = UCTSearch(MCTSConfig(simulations=2, leaf="value"), np.random.default_rng(0), leaf_value=values)
    search.run(start.clone(), budget=Budget.start(math.inf))
    assert values.to_go is search.to_go and values.scale == search.scale  # run handed its reference over
    y, _ = values(game)
    context = context_features(game, search.to_go, search.scale)
    assert y == pytest.approx(float(net.context_value(np.concatenate([head_input, context]))[0]), abs=1e-4)
    games = [game.clone() for _ in range(3)]
    for g, a in zip(games[1:], (0, -1)):
        g.step(int(g.legal_actions()[a]))
    for (yb, pb), g in zip(values.batch(games), games):  # the batched pass reads the same head
        ys, ps = values(g)
        assert yb == pytest.approx(ys, abs=1e-4)
        np.testing.assert_allclose(pb, ps, rtol=1e-4, atol=1e-6)


def test_value_leaves_read_no_head_trained_on_another_target():
    """default.pt's value head estimates the return to go of `mallocgame train`'s search, not ``y``: value leaves
    asked to read it get the reference control, and the statistics say why; value.pt is marked and read."""
    from mallocgame.engine.runner import run_solver
    from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, VALUE_CHECKPOINT

    problem = _problem(60, seed=5)
    opts = {"leaf": "value", "simulations": 4}
    other = run_solver("muzero", problem, HW, time_limit=120, seed=1, options=dict(opts, checkpoint=str(DEFAULT_CHECKPOINT)))
    marked = run_solver("muzero", problem, HW, time_limit=120, seed=1, options=dict(opts, checkpoint=str(VALUE_CHECKPOINT)))
    assert other.valid and marked.valid
    assert other.stats["leaf_value"].startswith("reference (the checkpoint's value head is not trained")
    assert marked.stats["leaf_value"] == "network"


def test_labelling_refuses_to_continue_a_file_without_the_context_arrays(tmp_path):
    from mallocgame.search.muzero.problems import Curriculum
    from mallocgame.search.muzero.value import generate

    old = tmp_path / "old.npz"
    np.savez(old, x=np.zeros((1, 96), np.float32), y=np.zeros(1, np.float32), problem=np.zeros(1, np.int64))
    net, fields = _network()
    with pytest.raises(ValueError, match="older labeller"):
        generate(str(old), net, fields, Curriculum(min_size=30, max_size=40), seed=0, seconds=5, problems=1)


def test_mallocgame_train_adds_a_value_leaf_head_the_leaves_read(tmp_path):
    """``mallocgame train --export --value-head-seconds`` labels the value leaves' target and adds a head trained on
    it: the export is marked and value leaves read it; a plain export is not read by them."""
    pytest.importorskip("torch")
    from click.testing import CliRunner

    from mallocgame.cli.train import train
    from mallocgame.engine.runner import run_solver
    from mallocgame.search.muzero.torchless import load_inference
    from mallocgame.search.muzero.value import VALUE_TARGET

    common = ["--steps", "1", "--games-per-iter", "1", "--updates-per-iter", "1", "--simulations", "2",
              "--batch-size", "8", "--min-size", "16", "--max-size", "24", "--quiet"]
    runner = CliRunner()
    bad = runner.invoke(train, common + ["-o", str(tmp_path / "a.pt"), "--value-head-seconds", "5"])
    assert bad.exit_code == 2 and "--value-head-seconds: needs --export" in bad.output
    runs = {}
    for name, extra in (("plain", []), ("headed", ["--value-head-seconds", "3"])):
        export = tmp_path / f"{name}.export.pt"
        result = runner.invoke(train, common + ["-o", str(tmp_path / f"{name}.pt"), "--export", str(export)] + extra)
        assert result.exit_code == 0, result.output
        net, payload = load_inference(str(export))
        runs[name] = (export, net, payload, result.output)
    export, net, payload, output = runs["headed"]
    assert payload.get("value_target") == VALUE_TARGET and net.context_value is not None
    assert "value leaves' head:" in output
    assert runs["plain"][2].get("value_target") is None and runs["plain"][1].context_value is None
    problem = _problem(40, seed=6)
    for name, read in (("headed", "network"), ("plain", "reference (the checkpoint's value head is not trained")):
        rep = run_solver("muzero", problem, HW, time_limit=120, seed=1,
                         options={"leaf": "value", "simulations": 3, "checkpoint": str(runs[name][0])})
        assert rep.valid and rep.stats["leaf_value"].startswith(read)


def test_finetune_trains_the_value_head_alone_and_marks_its_target(context_network, tmp_path):
    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero.value import VALUE_TARGET, finetune
    from mallocgame.solvers.muzero import VALUE_CHECKPOINT

    _, _, arrays, _ = context_network
    data = tmp_path / "data.npz"
    np.savez(data, **{k: arrays[k] for k in arrays.files})
    out, log = tmp_path / "head.pt", tmp_path / "log.jsonl"
    summary = finetune(str(data), str(VALUE_CHECKPOINT), str(out), epochs=3, seed=0, log=str(log))
    assert summary["epochs"] == 3 and len(log.read_text().splitlines()) == 3
    assert summary["val_mse_best"] == min(json.loads(line)["val_mse"] for line in log.read_text().splitlines())
    saved, shipped = ckpt.load(str(out)), ckpt.load(str(VALUE_CHECKPOINT))
    assert saved["value_target"] == VALUE_TARGET
    changed = {k for k in saved["model"] if not np.array_equal(np.asarray(saved["model"][k]),
                                                                np.asarray(shipped["model"][k]))}
    assert changed and all(k.startswith("value_head.") for k in changed)  # the policy stays the shipped one


def test_generate_draws_each_problem_s_recipe_once_with_the_same_labels(tmp_path, monkeypatch):
    """generate drew each problem's recipe twice (in the run's loop and again in its labeller): once now, and the
    labels of a seed are those of its problems as `recipe_of` defines them."""
    from mallocgame.search.muzero import value as value_module
    from mallocgame.search.muzero.problems import Curriculum, build

    def label(problem, hw, rng, rows):  # a cheap labeller that reads the problem and the run's generator
        y = rng.random(3) + float(sum(b.size for b in problem.buffers))
        rows.update(context=np.zeros((3, 1)), step=np.arange(3), greedy=np.zeros(3, bool))
        return np.full((3, 1), problem.n, np.float32), y

    curriculum = Curriculum(min_size=30, max_size=60)
    drawn = []
    recipe_of = value_module.recipe_of
    monkeypatch.setattr(value_module, "recipe_of", lambda *a: drawn.append(a[1:]) or recipe_of(*a))
    runs = []
    for name in ("a.npz", "b.npz"):
        value_module.generate(str(tmp_path / name), None, {}, curriculum, seed=3, seconds=60, problems=3, label=label)
        runs.append(np.load(tmp_path / name))
    assert drawn == [(3, 0), (3, 1), (3, 2)] * 2  # once per problem and run
    assert all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0].files)  # the same seed: the same labels
    for index in range(3):
        problem, hw = build(recipe_of(curriculum, 3, index))
        x, y = label(problem, hw, np.random.default_rng([3, index, 1]), {})
        rows = runs[0]["problem"] == index
        assert np.array_equal(runs[0]["y"][rows], y) and np.array_equal(runs[0]["x"][rows], x)
        assert set(runs[0]["kind"][rows]) == {recipe_of(curriculum, 3, index).kind}
