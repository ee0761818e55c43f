"""The relaxation's fast set as search guidance: the ``encoder/2`` features and the hand-written control prior.

numpy only (no torch): the features and :class:`mallocgame.search.muzero.guide.RelaxationPrior` are read by the
``muzero`` solver at play time.
"""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.hardware.spec import PRESETS
from mallocgame.inputs.generate import layered_network, random_intervals
from mallocgame.problem.intervals import max_live


def _problem(kind: str, n: int = 40, seed: int = 2):
    if kind == "intervals":
        p = random_intervals(n, seed=seed, with_benefit=True)
        return p.replace(capacity=int(max_live(p) * 0.3), mode="map"), PRESETS["unit"]
    return layered_network(n, seed=seed, capacity_fraction=0.3), PRESETS["tpuv4i"]


@pytest.mark.parametrize("kind", ["intervals", "layered"])
def test_relaxation_set_is_the_bound_relaxations_choice_and_fits_the_capacity(kind):
    from mallocgame.bounds.bounds import no_fragmentation_relaxation
    from mallocgame.hardware.evaluator import Evaluator
    from mallocgame.problem.intervals import live_profile
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero.encoder import RELAX_GAP, relaxation_set

    problem, hw = _problem(kind)
    data = GameData(problem, hw)
    chosen = relaxation_set(data)
    assert relaxation_set(data) is chosen  # solved once per problem
    ev = Evaluator.of(problem, hw)
    expect = no_fragmentation_relaxation(problem, ev, (ev.benefits > 0) & (problem.arrays.size <= problem.capacity),
                                         rel_gap=RELAX_GAP)
    np.testing.assert_array_equal(chosen, expect.chosen)
    assert 0 < chosen.sum() < problem.n  # the capacity binds: the set is a real choice
    assert live_profile(problem, chosen)[1].max() <= problem.capacity


@pytest.mark.parametrize("kind", ["intervals", "layered"])
def test_a_big_relaxation_is_solved_as_its_lp_rounded_down(monkeypatch, kind):
    from mallocgame.bounds.bounds import no_fragmentation_relaxation
    from mallocgame.hardware.evaluator import Evaluator
    from mallocgame.problem.intervals import live_profile
    from mallocgame.search.game_data import GameData
    from mallocgame.search.muzero import encoder

    monkeypatch.setattr(encoder, "RELAX_MIP_NONZEROS", 0)  # every model is "big"
    problem, hw = _problem(kind)
    chosen = encoder.relaxation_set(GameData(problem, hw))
    ev = Evaluator.of(problem, hw)
    lp = no_fragmentation_relaxation(problem, ev, (ev.benefits > 0) & (problem.arrays.size <= problem.capacity),
                                     mip_nonzeros=0)
    assert lp.kind == "lp"
    np.testing.assert_array_equal(chosen, lp.chosen)
    assert chosen.any() and live_profile(problem, chosen)[1].max() <= problem.capacity


@pytest.mark.parametrize("kind", ["intervals", "layered"])
def test_relaxation_prior_and_features_follow_the_set(kind):
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.guide import RelaxationPrior

    problem, hw = _problem(kind, seed=4)
    game = Game(problem, hw, GameConfig(variant="order", k=8, order="xla"))
    chosen = encoder.relaxation_set(game.data)
    prior = RelaxationPrior(weight=0.9)
    asked = 0
    while not game.done:
        d, i = game.data, game.current
        feats = encoder.relaxation_features(game)
        assert feats[0] == float(chosen[i])
        near = d.index.query(d.start_l[i], d.end_l[i])
        undecided = [b for b in near if b != i and d.orders["xla"].position[b] > game.steps]
        assert feats[1] + feats[2] == pytest.approx(sum(int(d.size[b]) for b in undecided) / d.scale, rel=1e-5)
        vec = encoder.network_vector(game, game.observation(), encoder.NAME_RELAX)
        assert vec.shape == (game.observation().as_vector().shape[0] + encoder.extra_inputs(encoder.NAME_RELAX),)
        legal = game.legal_actions()
        if len(legal) > 1:
            p = prior(game, legal)
            assert p.sum() == pytest.approx(1.0) and (p > 0).all()
            want = game.greedy_action() if chosen[i] else game.slow_action
            assert legal[int(np.argmax(p))] == want and p.max() == pytest.approx(0.9)
            asked += 1
        game.step(game.greedy_action())
    assert asked > 0 and not encoder.relaxation_features(game).any()


def test_solver_relaxation_prior_is_valid_deterministic_and_map_mode_only():
    from mallocgame.engine.runner import run_solver

    problem, hw = _problem("layered", n=60, seed=7)
    runs = [run_solver("muzero", problem, hw, time_limit=30, seed=3, options={"prior": "relaxation", "simulations": 4})
            for _ in range(2)]
    assert all(r.valid for r in runs), runs[0].violation
    assert runs[0].stats["prior"] == "relaxation" and runs[0].stats["network_evaluations"] == 0
    assert runs[0].objective == runs[1].objective and runs[0].stats["prior_calls"] > 0
    pack = problem.replace(mode="pack", capacity=None)
    report = run_solver("muzero", pack, hw, time_limit=20, seed=0, options={"prior": "relaxation", "simulations": 2})
    assert report.valid and report.stats["prior"].startswith("uniform (the relaxation prior plays map mode only")


@pytest.mark.parametrize("prior", ["relaxation", "network", "network-relaxation-mean"])
def test_no_relaxation_set_in_time_plays_the_uniform_prior(monkeypatch, prior):
    import mallocgame.bounds.bounds as bounds
    from mallocgame.engine.runner import run_solver

    def nothing_found(problem, ev, candidates, **kwargs):
        return bounds.Relaxation(float(ev.benefits[candidates].sum()), "trivial", np.zeros(problem.n, bool), 0.0)

    monkeypatch.setattr(bounds, "no_fragmentation_relaxation", nothing_found)
    problem, hw = _problem("layered", n=40, seed=8)
    report = run_solver("muzero", problem, hw, time_limit=20, seed=0, options={"prior": prior, "simulations": 3})
    assert report.valid and report.stats["prior"] == "uniform (the relaxation found no fast set in its time)"
    assert report.stats["network_evaluations"] == 0


@pytest.mark.parametrize("how", ["mean", "product"])
def test_blended_prior_joins_the_network_and_the_relaxation(how):
    from mallocgame.search.game import Game, GameConfig
    from mallocgame.search.muzero import encoder
    from mallocgame.search.muzero.guide import BlendedPrior, RelaxationPrior

    problem, hw = _problem("layered", seed=5)
    game = Game(problem, hw, GameConfig(variant="order", k=8, order="xla"))
    chosen = encoder.relaxation_set(game.data)
    relax = RelaxationPrior(weight=0.9)

    def against_relaxation(game, legal):  # a "network" sure of the move the relaxation does not want
        want = game.greedy_action() if chosen[game.current] else game.slow_action
        p = np.full(len(legal), 0.01)
        p[np.flatnonzero(legal != want)[0]] = 1.0
        return p / p.sum()

    blend = BlendedPrior(against_relaxation, relax, how)
    asked = 0
    while not game.done:
        legal = game.legal_actions()
        if len(legal) > 2:
            p, q, r = against_relaxation(game, legal), relax(game, legal), blend(game, legal)
            assert r.sum() == pytest.approx(1.0) and (r > 0).all()
            want = game.greedy_action() if chosen[game.current] else game.slow_action
            if how == "mean":
                np.testing.assert_allclose(r, (p + q) / 2)
                assert r[np.flatnonzero(legal == want)[0]] >= 0.45  # the relaxation's move keeps half its weight
            else:
                np.testing.assert_allclose(r, p * q / (p * q).sum())
                assert np.argmax(r) == np.argmax(p * q)
            asked += 1
        game.step(game.greedy_action())
    assert asked > 0
    with pytest.raises(ValueError, match="unknown blend"):
        BlendedPrior(against_relaxation, relax, "max")


@pytest.mark.parametrize("prior", ["network-relaxation-mean", "network-relaxation-product"])
def test_solver_blended_prior_reads_the_network_is_valid_and_deterministic(prior):
    from mallocgame.engine.runner import run_solver

    problem, hw = _problem("layered", n=60, seed=7)
    runs = [run_solver("muzero", problem, hw, time_limit=30, seed=3, options={"prior": prior, "simulations": 4})
            for _ in range(2)]
    assert all(r.valid for r in runs), runs[0].violation
    assert runs[0].stats["prior"] == prior and runs[0].stats["network_evaluations"] > 0
    assert runs[0].objective == runs[1].objective and runs[0].stats["prior_calls"] > 0
    pack = problem.replace(mode="pack", capacity=None)
    report = run_solver("muzero", pack, hw, time_limit=20, seed=0, options={"prior": prior, "simulations": 2})
    assert report.valid and report.stats["prior"].startswith("uniform (no network trained for pack mode")
