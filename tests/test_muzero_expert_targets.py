"""Expert iteration's curriculum of model programs, network teacher, reanalyse, value and auxiliary targets."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mallocgame.inputs.suites import suite_entries  # noqa: E402
from mallocgame.search.game import Game, GameConfig  # noqa: E402
from mallocgame.search.muzero.problems import TRAIN_SEED_BASE, Curriculum, Recipe, build, realistic_workload  # noqa: E402
from mallocgame.search.uct import play_greedy  # noqa: E402

FIELDS = {"variant": "order", "k": 16, "order": "xla"}


def test_realistic_recipes_are_seeded_sized_and_never_a_suite_program():
    suite = {e.build().replace(capacity=None).buffers for e in suite_entries("realistic")}
    families = set()
    for seed in range(TRAIN_SEED_BASE, TRAIN_SEED_BASE + 25):
        limit = 60 + 17 * (seed % 20)
        a, b = realistic_workload(limit, seed), realistic_workload(limit, seed)
        assert a.buffers == b.buffers  # same seed, same program
        assert limit // 2 <= a.n <= limit
        assert a.buffers not in suite
        families.add(a.name.split("-")[0])
    assert len(families) >= 3
    problem, hw = build(Recipe("realistic", 200, TRAIN_SEED_BASE + 3, 0.3))
    assert problem.mode == "map" and 0 < problem.capacity < sum(b.size for b in problem.buffers)
    assert hw.name == "tpuv4i"


def test_curriculum_without_realistic_share_draws_the_old_stream():
    old = Curriculum(min_size=50, max_size=300, layered_share=0.6)
    mixed = Curriculum(min_size=50, max_size=300, layered_share=0.6, realistic_share=0.5)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    expected = []
    for _ in range(20):  # the pre-change sampler, written out
        kind = "layered" if b.random() < 0.6 else "intervals"
        n = int(b.integers(50, 301))
        seed = TRAIN_SEED_BASE + int(b.integers(0, 2**31 - 1))
        expected.append(Recipe(kind, n, seed, float(np.round(b.uniform(0.25, 0.6), 3))))
    assert [old.sample(a) for _ in range(20)] == expected
    kinds = {mixed.sample(np.random.default_rng(s)).kind for s in range(40)}
    assert kinds == {"realistic", "layered", "intervals"}


def _game(n=60, seed=5):
    problem, hw = build(Recipe("layered", n, TRAIN_SEED_BASE + seed, 0.3))
    return Game(problem, hw, GameConfig(**FIELDS))


def test_rebuilt_state_equals_the_state_reached():
    from mallocgame.search.muzero.expert import Origin, rebuild_state

    recipe = Recipe("intervals", 50, TRAIN_SEED_BASE + 11, 0.3)
    problem, hw = build(recipe)
    game = Game(problem, hw, GameConfig(**FIELDS))
    rng = np.random.default_rng(0)
    while game.steps < 30:
        legal = game.legal_actions()
        game.step(int(legal[rng.integers(len(legal))]))  # not the greedy's moves: a state only offsets can rebuild
    again = rebuild_state(Origin(recipe, game.offsets(),
                                 game.steps), FIELDS)
    assert again.steps == game.steps and again.current == game.current
    np.testing.assert_array_equal(again.offsets(), game.offsets())
    np.testing.assert_array_equal(again.legal_mask(), game.legal_mask())
    assert again.total_reward() == pytest.approx(game.total_reward())


def test_relative_value_is_the_teacher_gain_over_the_greedy_rollout():
    from mallocgame.search.muzero.expert import relative_value, teacher_search

    game = _game()
    for _ in range(10):
        game.step(game.greedy_action())
    rollout = game.clone()
    play_greedy(rollout)
    whole = _game()
    play_greedy(whole)
    assert relative_value(rollout.total_reward(), game, whole.total_reward()) == pytest.approx(0.0, abs=1e-9)
    target, best = teacher_search(game, 24, np.random.default_rng(0), "uniform")
    gain = relative_value(best.value, game, whole.total_reward())
    assert gain >= 0.0  # the search's first rollout is the greedy's own
    assert gain == pytest.approx(100 * (best.value - rollout.total_reward()) / whole.total_reward())
    assert target.sum() == pytest.approx(1.0) and game.steps == 10  # the state is left as it was


def test_network_teacher_follows_the_network_prior():
    from mallocgame.search.muzero.expert import teacher_search
    from mallocgame.search.muzero.guide import NetworkPrior

    class Prefers:
        """A stand-in network: all prior on one action (slow if legal)."""
        features = ""

        def policy_logits(self, vector, actions, mask):
            out = np.full(len(mask), -30.0)
            out[len(mask) - 1] = 30.0
            return out

    game = _game()
    while len(game.legal_actions()) < 2 or game.slow_action not in game.legal_actions():
        game.step(game.greedy_action())
    assert NetworkPrior(Prefers())(game, game.legal_actions()).max() > 0.99
    target, _ = teacher_search(game, 12, np.random.default_rng(0), "network", exploration=100.0, network=Prefers())
    assert int(np.argmax(target)) == game.slow_action
    with pytest.raises(ValueError, match="needs the network"):
        teacher_search(game, 4, np.random.default_rng(0), "network")


def _config(**kw):
    from mallocgame.search.muzero.expert import ExpertConfig

    base = dict(min_size=20, max_size=30, student_simulations=3, teacher_simulations=8, states_per_game=3,
                updates_per_game=2, batch_size=8, features="encoder/2", exploration=10.0, teacher_prior="network",
                realistic_share=0.5, reanalyse_per_game=2, value_weight=0.1, aux_weight=0.1)
    base.update(kw)
    return ExpertConfig(**base)


def test_value_and_aux_targets_are_recorded_and_trained(tmp_path):
    from mallocgame.search.muzero.expert import train

    state = train(str(tmp_path / "x.pt"), init=None, config=_config(), time_limit=120, max_games=2)
    values, aux = np.stack(state.replay["value"]), np.stack(state.replay["aux"])
    assert len(values) == len(state.replay["target"]) > 0
    assert (values >= -1e-6).all() and set(np.unique(aux)) <= {0.0, 1.0}
    assert state.net.config.aux and "aux_head.0.weight" in state.net.state_dict()
    before = {k: v.clone() for k, v in state.net.state_dict().items() if k.startswith(("aux_head", "value_head"))}
    from mallocgame.search.muzero.expert import learn
    learn(state)
    changed = [k for k, v in before.items() if not torch.equal(v, state.net.state_dict()[k])]
    assert any(k.startswith("aux_head") for k in changed) and any(k.startswith("value_head") for k in changed)
    assert all("reanalysed" in e for e in state.log)


def test_reanalyse_relabels_with_the_current_network_and_resume_continues_identically(tmp_path):
    from mallocgame.search.muzero.expert import reanalyse, rebuild_state, resume, teacher_search, train

    out = tmp_path / "x.pt"
    state = train(str(out), init=None, config=_config(), time_limit=120, max_games=2)
    again = resume(str(out), time_limit=120, max_games=3)
    straight = train(str(tmp_path / "y.pt"), init=None, config=_config(), time_limit=120, max_games=3)
    for key, tensor in straight.net.state_dict().items():
        assert torch.equal(tensor, again.net.state_dict()[key]), key
    assert [len(o.offsets) for o in again.origins] == [len(o.offsets) for o in straight.origins]

    # Change the network: reanalysed targets become the teacher's visits under the new prior.
    with torch.no_grad():
        for p in state.net.policy_head.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 3.0)
    old = [t.copy() for t in state.replay["target"]]
    everything = len(state.origins)
    state.config = _config(reanalyse_per_game=everything)
    report = reanalyse(state)
    assert report["reanalysed"] == everything
    from mallocgame.search.muzero.inference import NumpyNet
    net = NumpyNet.from_torch(state.net, "encoder/2")
    moved = 0
    for i, origin in enumerate(state.origins):
        game = rebuild_state(origin, state.game_fields)
        fresh, _ = teacher_search(game, 8, np.random.default_rng(123), "network", 10.0, network=net)
        # visits follow the prior and rollouts; only the order of unvisited ties uses the generator
        assert int(np.argmax(fresh)) == int(np.argmax(state.replay["target"][i])) or \
            np.isclose(np.sort(fresh)[-1], np.sort(fresh)[-2])
        moved += not np.allclose(old[i], state.replay["target"][i])
    assert moved > 0 and report["reanalyse_shift"] > 0


@pytest.mark.parametrize("bad,match", [({"realistic_share": 1.5}, "realistic-share"), ({"min_size": 300}, "sizes"),
                                       ({"teacher_prior": "oracle"}, "teacher prior"), ({"teacher": "x"}, "teacher"),
                                       ({"reanalyse_per_game": -1}, "reanalyse"), ({"teacher_simulations": 0}, "teacher")])
def test_bad_expert_options_are_refused_in_one_line(bad, match):
    with pytest.raises(ValueError, match=match):
        _config(**bad)


def test_training_script_reports_bad_options_in_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, str(root / "experiments" / "train_muzero_expert.py"), "--realistic-share", "2",
                          "--out", str(tmp_path / "x.pt")], capture_output=True, text=True, cwd=root)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == ["train_muzero_expert: realistic-share must be in [0, 1], got 2.0"]
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("kind", ["best", "mix"])
def test_best_episode_targets_follow_the_teachers_best_episode(tmp_path, kind):
    from mallocgame.search.muzero.expert import _label, answer_policy, teacher_search, train

    state = train(str(tmp_path / "x.pt"), config=_config(teacher_prior="relaxation", teacher_target=kind,
                                                          reanalyse_per_game=0), time_limit=120, max_games=1)
    targets = np.stack(state.replay["target"])
    np.testing.assert_allclose(targets.sum(1), 1.0, rtol=1e-6)
    assert (targets.max(1) >= (1.0 if kind == "best" else 0.5) - 1e-6).all()
    game = _game()
    for _ in range(5):
        game.step(game.greedy_action())
    target, _, _ = _label(state, game, np.random.default_rng(3), None, 1.0)
    visits, best = teacher_search(game, 8, np.random.default_rng(3), "relaxation", 10.0)
    move = answer_policy(game, best.offsets)
    np.testing.assert_allclose(target, move if kind == "best" else 0.5 * (visits + move))


def test_training_refuses_a_missing_output_directory_before_playing(tmp_path):
    from mallocgame.search.muzero.expert import train

    with pytest.raises(ValueError, match="does not exist"):
        train(str(tmp_path / "missing" / "x.pt"), config=_config(), time_limit=120, max_games=1)
