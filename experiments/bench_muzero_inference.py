"""Inference at engine speed (issue 40 item 2): microseconds per leaf, batched, and simulations per second.

    nice python experiments/bench_muzero_inference.py [--sizes 3000 10000] [--seconds 10] [--out PATH]

On generated ``layered`` programs (map mode, 30% of the max live bytes, tpuv4i; seed ``--seed``) it plays the
value network's game (``value.pt``: the fixed-order game in greedy-xla's order, k = 16) along a walk that leaves
the greedy's move with probability 0.3, collects the states with a choice (up to ``--states``), and reports

* the network alone, numpy (``NumpyNet``, the reference) and compiled (``ForwardNet``,
  ``search/muzero/_forward.pxi``) side by side: microseconds per leaf of ``evaluate`` (one example per call, the
  unbatched search's pass) and of ``evaluate_batch`` at batch sizes 1, 16 and 64 (the issue's goal: <= 10 us per
  leaf batched), and the largest difference of their logits and values;
* a whole leaf, the numpy pass and the compiled one: the game's observation and the network's input vector
  (``guide.input_vector``) of every state plus the pass, by ``NetworkValue.__call__`` one at a time and
  ``NetworkValue.batch`` at 1, 16 and 64;
* the default muzero's prior call at a node (``NetworkPrior`` of ``default.pt``, one state a call), the numpy
  pass and the compiled one;
* one greedy rollout to the end from the start (what a rollout leaf costs at most);
* by engine, side by side: the leaf's inputs (``encoder.leaf_inputs``) and the whole leaf (``NetworkValue.batch``)
  at batch 1, 16 and 64 on the native states (compiled, ``search/_order_leaf.pxi``) and on the same states on the
  Python engine (the reference), the default search's prior call on each, and whether both give the same floats;
* simulations per second of ``mcts``, the default ``muzero`` (rollout leaves), ``muzero leaf=value``
  (batched value leaves, ``leaf_batch`` 16) and ``muzero leaf=auto`` (the rule of ``search/uct.py``'s ``auto_leaf``:
  which it played, and the two costs it measured) at ``--seconds`` wall time with no cap on simulations
  (``simulations`` 10^9), each in this process by :func:`mallocgame.engine.runner.run_solver` (validated), seed 0;
  the default ``muzero`` and ``muzero leaf=value`` also with the numpy pass (the compiled one switched off:
  ``numpy pass``).

Every timing is the best of ``--repeats`` runs (the machine is shared: the best is the least disturbed).
Writes ``experiments/results/bench_muzero_inference.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
from _common import Transcript, write_results

from mallocgame.engine.runner import run_solver
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import OrderGame
from mallocgame.search.muzero import encoder, guide, value
from mallocgame.search.muzero.guide import NetworkPrior, input_vector
from mallocgame.search.muzero.inference import compiled_forward
from mallocgame.search.muzero.problems import Recipe, build
from mallocgame.search.muzero.torchless import load_agent_network
from mallocgame.search.muzero.value import NetworkValue
from mallocgame.solvers.muzero import DEFAULT_CHECKPOINT, VALUE_CHECKPOINT

BATCHES = (1, 16, 64)
CONTESTANTS = {"mcts": ("mcts", {}), "muzero": ("muzero", {}), "muzero, numpy pass": ("muzero", {}),
               "muzero leaf=value": ("muzero", {"leaf": "value"}), "muzero leaf=value, numpy pass": ("muzero", {"leaf": "value"}),
               "muzero leaf=auto": ("muzero", {"leaf": "auto"})}


@contextlib.contextmanager
def numpy_pass():
    """The search's evaluators built inside run the numpy reference pass (``NumpyNet``), not the compiled one."""
    saved = guide.compiled_forward, value.compiled_forward
    guide.compiled_forward = value.compiled_forward = lambda net: None
    try:
        yield
    finally:
        guide.compiled_forward, value.compiled_forward = saved


def best_of(repeats: int, fn) -> float:
    """The least of ``repeats`` timings (seconds) of ``fn()``."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def walk_states(game: Game, count: int, seed: int, twin: Game | None = None) -> list[Game]:
    """Up to ``count`` states with a choice along the walk; with ``twin`` (the same game on the other engine,
    played with the same moves) the pairs ``(state, twin's state)``."""
    rng = np.random.default_rng(seed)
    states = []
    while not game.done and len(states) < count:
        legal = game.legal_actions()
        if len(legal) > 1:
            states.append(game.clone() if twin is None else (game.clone(), twin.clone()))
        action = int(legal[rng.integers(len(legal))]) if rng.random() < 0.3 else game.greedy_action()
        game.step(action)
        if twin is not None:
            twin.step(action)
    return states


def per_leaf_us(states, repeats: int, fn_batch) -> dict[int, float]:
    """Microseconds per leaf of ``fn_batch(group)`` over ``states`` in groups of each batch size."""
    out = {}
    for b in BATCHES:
        groups = [states[i:i + b] for i in range(0, len(states) - b + 1, b)]
        seconds = best_of(repeats, lambda: [fn_batch(g) for g in groups])
        out[b] = 1e6 * seconds / (len(groups) * b)
    return out


def bench(n: int, args, t: Transcript) -> None:
    net, fields = load_agent_network(str(VALUE_CHECKPOINT))
    problem, hw = build(Recipe("layered", n, args.seed, 0.3))
    data = GameData(problem, hw)
    if net.features == encoder.NAME_RELAX:
        encoder.relaxation_set(data)  # solved once per problem before any search reads it
    game = Game(problem, hw, GameConfig(**fields), data=data)
    rollout = game.clone()
    rollout_s = best_of(1, lambda: rollout.greedy_rollout(float("inf")))
    pairs = walk_states(game, args.states, args.seed, twin=OrderGame(problem, hw, GameConfig(**fields), data=data))
    states, python_states = [a for a, _ in pairs], [b for _, b in pairs]
    obs = [g.observation() for g in states]
    vectors = np.asarray([input_vector(g, o, net.features) for g, o in zip(states, obs)], np.float32)
    actions = np.asarray([o.actions for o in obs], np.float32)
    masks = np.asarray([o.mask for o in obs], bool)
    t(f"\n## layered, {problem.n} buffers ({len(states)} states with a choice; "
          f"{masks.sum(1).mean():.2f} legal of {masks.shape[1]} actions on average)\n")
    forward = compiled_forward(net)
    index = np.arange(len(states))
    passes, leaves = {}, {}
    for name, fn in (("numpy", net), ("compiled", forward)):
        single = 1e6 * best_of(args.repeats, lambda: [fn.evaluate(v, a, m) for v, a, m in zip(vectors, actions, masks)]
                               ) / len(states)
        passes[name] = single, per_leaf_us(list(index), args.repeats,
                                           lambda g: fn.evaluate_batch(vectors[g], actions[g], masks[g]))
        leaf_value = NetworkValue(net)
        leaf_value.forward = fn
        leaves[name] = (1e6 * best_of(args.repeats, lambda: [leaf_value(g) for g in states]) / len(states),
                        per_leaf_us(states, args.repeats, leaf_value.batch))
    want, got = net.evaluate_batch(vectors, actions, masks), forward.evaluate_batch(vectors, actions, masks)
    logit_diff = float(np.abs(np.where(masks, got[0] - want[0], 0.0)).max())
    value_diff = float(np.abs(got[1] - want[1]).max())
    features = 1e6 * best_of(args.repeats, lambda: [input_vector(g, g.observation(), net.features) for g in states]
                             ) / len(states)
    observe = 1e6 * best_of(args.repeats, lambda: [g.observation() for g in states]) / len(states)
    t("| us per leaf | one at a time | batch 1 | batch 16 | batch 64 |")
    t("|---|---:|---:|---:|---:|")
    for name in passes:
        single, batched = passes[name]
        t(f"| network pass alone, {name} | {single:.1f} | " + " | ".join(f"{batched[b]:.1f}" for b in BATCHES) + " |")
    for name in leaves:
        single, batched = leaves[name]
        t(f"| whole leaf (observation + input vector + pass), {name} pass | {single:.1f} | "
          + " | ".join(f"{batched[b]:.1f}" for b in BATCHES) + " |")
    t(f"\ncompiled against numpy pass on these {len(states)} states: largest difference of the legal logits "
      f"{logit_diff:.2g}, of the values {value_diff:.2g} (values {float(np.abs(want[1]).min()):.3g} to "
      f"{float(np.abs(want[1]).max()):.3g})")
    prior_net, _ = load_agent_network(str(DEFAULT_CHECKPOINT))
    legal = [g.legal_actions() for g in states]
    priors = {}
    for name in ("numpy", "compiled"):
        prior = NetworkPrior(prior_net)
        if name == "numpy":
            prior.forward = None
        priors[name] = 1e6 * best_of(args.repeats, lambda: [prior(g, a) for g, a in zip(states, legal)]) / len(states)
    compiled_prior, numpy_prior = NetworkPrior(prior_net), NetworkPrior(prior_net)
    numpy_prior.forward = None
    agree = all(int(np.argmax(compiled_prior(g, a))) == int(np.argmax(numpy_prior(g, a))) for g, a in zip(states, legal))
    t("\nthe default muzero's prior at a node (NetworkPrior of default.pt, one state per call: inputs + policy logits "
      "+ softmax): " + ", ".join(f"{name} pass {us:.1f} us" for name, us in priors.items())
      + f"; the most likely action the same on every state: {'yes' if agree else 'NO'}")
    t(f"\nof a whole leaf: the observation {observe:.1f} us, observation + input vector {features:.1f} us; "
          f"one greedy rollout from the start {1e3 * rollout_s:.2f} ms ({problem.n} steps)\n")
    engines(states, python_states, net, args, t)
    if args.seconds <= 0:
        return
    t(f"| at {args.seconds:g} s | simulations | per second | network passes | value | answer from | auto: played, "
      "leaf / rollout us |")
    t("|---|---:|---:|---:|---:|---|---|")
    for name, (solver, opts) in CONTESTANTS.items():
        with numpy_pass() if "numpy pass" in name else contextlib.nullcontext():
            rep = run_solver(solver, problem, hw, time_limit=args.seconds, seed=0,
                             options={**opts, "simulations": 10**9})
        st = rep.stats
        passes = st.get("leaf_passes", st.get("network_evaluations", 0))
        t(f"| {name} | {st.get('simulations', 0)} | {st.get('simulations', 0) / rep.seconds:.0f} | {passes} | "
              f"{rep.objective:.6g} | {st.get('answer_from', '')} | "
              + (f"{st['leaf_played']}, {st['leaf_cost_us']} / {st['rollout_cost_us']} |" if "leaf_played" in st else " |")
              + ("" if rep.valid else " INVALID"))


def engines(states: list, python_states: list, net, args, t: Transcript) -> None:
    """The leaf's inputs and the whole leaf on the compiled path (native states: ``encoder.leaf_inputs`` in one
    call of ``search/_order_leaf.pxi``) and on the Python reference (the same states on the Python engine),
    side by side, at batch 1, 16 and 64; the default search's prior call on each; and whether both give the
    same floats."""
    same = all(np.array_equal(a, b) for a, b in zip(encoder.leaf_inputs(states, net.features, net),
                                                    encoder.leaf_inputs(python_states, net.features, net)))
    rows, priors = {}, {}
    for name, group in (("Python", python_states), ("compiled", states)):
        rows[f"inputs (observation + input vector), {name}"] = per_leaf_us(
            group, args.repeats, lambda g: encoder.leaf_inputs(g, net.features, net))
        value = NetworkValue(net)
        rows[f"whole leaf (NetworkValue.batch), {name}"] = per_leaf_us(group, args.repeats, value.batch)
        prior, legal = NetworkPrior(net), [g.legal_actions() for g in group]
        priors[name] = 1e6 * best_of(args.repeats, lambda: [prior(g, a) for g, a in zip(group, legal)]) / len(group)
    t("| us per leaf, by engine | batch 1 | batch 16 | batch 64 |")
    t("|---|---:|---:|---:|")
    for name, us in rows.items():
        t(f"| {name} | " + " | ".join(f"{us[b]:.1f}" for b in BATCHES) + " |")
    t("\nthe default muzero's prior at a node (NetworkPrior, one state per call: inputs + policy logits + softmax): "
      + ", ".join(f"{name} {us:.1f} us" for name, us in priors.items()))
    t(f"\ncompiled and Python inputs identical (vectors, action features, masks) on all {len(states)} states: "
      f"{'yes' if same else 'NO'}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3000, 10000])
    ap.add_argument("--states", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0, help="wall time of each solver run (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="bench_muzero_inference.md")
    args = ap.parse_args()
    t = Transcript()
    t("# muzero inference: us per leaf and simulations per second\n")
    for n in args.sizes:
        bench(n, args, t)
    write_results(args.out, t.text)


if __name__ == "__main__":
    main()
