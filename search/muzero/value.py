"""The value network at the leaves of the guided UCT search: targets, the leaf evaluator, data.

**What the search backs up.** With ``MCTSConfig.leaf="value"`` a leaf at step ``t`` (state ``s``) is worth
``ref[t] + scale / 100 x y(s)``: ``ref[t]`` is the return still to come after step ``t`` in the *reference
episode* (the greedy episode from the search's start, which :meth:`mallocgame.search.uct.UCTSearch.run` plays
anyway as its first incumbent; :func:`mallocgame.search.uct.greedy_profile`), ``scale`` that episode's whole
return, and ``y(s)`` the network's estimate of the **value target relative to the greedy continuation**

    y(s) = 100 x (greedy return to go from s - ref[t]) / scale

(percent of the problem's greedy episode, so normalised per problem: the same units on a 100-buffer and a
10,000-buffer program). Its true value is what a greedy rollout from ``s`` would back up, so a leaf's value
estimates the return of the whole episode, as a rollout does: siblings, and leaves at any depth, are compared
on the same quantity. ``y = 0`` (``leaf_value="reference"``, no network) assumes the future goes as in the
reference episode: the search then sees only the rewards of the decisions it made (a myopic control).

**The one target.** ``y`` above is the value leaves' target, the only one they read: what a rollout leaf would
back up, in the reference episode's per-problem units. Both trainers of a leaf head label exactly it, with
:func:`value_target` (a greedy rollout to the end): :func:`finetune` (the ``value_head`` on the frozen network's
inputs) and :func:`train_context_head` (a ``context_value`` head that reads the leaf's :func:`context_features`,
its place relative to the reference episode, too). Their checkpoints carry :data:`VALUE_TARGET`; the ``value_head``
of ``mallocgame train`` estimates another quantity (the return still to come under its own search, from n-step
targets in its reward units), so value leaves never read a checkpoint without the mark (the muzero solver gives
them the reference, ``y = 0``, and says so in ``stats["leaf_value"]``); ``mallocgame train --export X
--value-head-seconds S`` labels ``y`` with :func:`generate` under the trained network and adds a
:func:`train_context_head` head to ``X``, marked.

**Data** (:func:`label_problem`): a training problem (:mod:`mallocgame.search.muzero.problems`, seeds >=
``TRAIN_SEED_BASE``), its reference episode, then a walk that follows the greedy with a random legal move
with probability ``eps``; at ``states`` steps of the walk every child of the state (one move each, as the
search's leaves are) is labelled with ``y`` by a greedy rollout to the end. The features are the value
head's input under the frozen network (:meth:`~mallocgame.search.muzero.inference.NumpyNet.value_input`), so
fine-tuning moves the value head only and the policy stays the shipped one. :func:`finetune` and
:func:`train_context_head` (torch, imported lazily) train a head by MSE; ``experiments/train_value_head.py`` runs
the labelling and either.

**Prefetch mode** (the section at the end): the same target ``y``, with the same mark rule, read by a
:class:`PrefetchHead`, a small MLP over the leaf's :func:`prefetch_context_features` alone (its place relative to the
reference episode; no network: prefetch mode's default search plays a uniform prior). :func:`label_prefetch_states`
labels, on a walk as above, every child played on by the mixed leaf's greedy steps, at the state the leaf is valued
at (``experiments/label_prefetch_value.py``); :func:`train_prefetch_head` trains and marks a head;
:class:`PrefetchValue` is the prefetch leaves' evaluator, which the muzero solver builds only from a checkpoint of
kind :data:`PREFETCH_HEAD_KIND` marked :data:`VALUE_TARGET` (:func:`load_prefetch_head`; otherwise ``y = 0``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.muzero import encoder
from mallocgame.search.muzero.guide import input_vector
from mallocgame.search.muzero.inference import compiled_forward
from mallocgame.search.muzero.problems import Curriculum, Recipe, build
from mallocgame.search.muzero.torchless import UnsupportedCheckpoint
from mallocgame.search.muzero.torchless import read as read_checkpoint
from mallocgame.search.uct import PREFETCH_K, greedy_profile
from mallocgame.search.uct import reference_value as reference_value  # the control without a network (re-exported)

#: The mark of a checkpoint whose value leaves' head estimates ``y`` (module docstring): its ``context_value``
#: head where it has one (:func:`train_context_head`), else its ``value_head`` (:func:`finetune`). Value leaves read
#: no other head (``mallocgame train``'s ``value_head`` estimates the return to go of its own search, another
#: target).
VALUE_TARGET = "relative-greedy/1"


def reads_value_target(net) -> bool:
    """Whether ``net``'s value heads estimate the value leaves' target ``y`` (:data:`VALUE_TARGET`)."""
    return getattr(net, "value_target", "") == VALUE_TARGET


def value_target(game, to_go: np.ndarray, scale: float) -> float:
    """``y`` of ``game``'s state (module docstring): greedy rollout from a clone; ``to_go`` and ``scale`` from
    :func:`~mallocgame.search.uct.greedy_profile` of the problem's start."""
    rollout = game.clone()
    start = rollout.total_reward()
    rollout.greedy_rollout(math.inf)  # one call: the compiled games play it natively
    return 100.0 * ((rollout.total_reward() - start) - float(to_go[game.steps])) / (scale if scale > 0 else 1.0)


class NetworkValue:
    """The leaf evaluator of the guided search: ``(y, prior over the legal actions)`` from one pass of the
    network (:meth:`~mallocgame.search.muzero.inference.NumpyNet.evaluate`), or of a group of games from one batched
    pass (:meth:`batch`); ``calls`` counts the states valued, ``passes`` the network passes. A network with a
    ``context_value`` head reads the leaf's :func:`context_features` too, relative to the reference episode the
    search hands over (:meth:`set_reference`) and values the leaves by that head alone (its ``value_head`` may
    estimate another target): before a reference is handed over such a network's leaves get ``y = 0``."""

    def __init__(self, net):
        self.net = net
        # the passes run compiled (inference.compiled_forward) wherever the network is a NumpyNet
        self.forward = compiled_forward(net) or net
        self.calls = 0
        self.passes = 0
        self.to_go: np.ndarray | None = None
        self.scale = 0.0

    def set_reference(self, to_go: np.ndarray, scale: float) -> None:
        """The search's reference episode (:func:`~mallocgame.search.uct.greedy_profile`): the return to come after
        each step and the episode's return."""
        self.to_go, self.scale = to_go, scale

    def _context(self, game) -> np.ndarray | None:
        if self.to_go is None or getattr(self.net, "context_value", None) is None:
            return None
        return context_features(game, self.to_go, self.scale)

    def __call__(self, game) -> tuple[float, np.ndarray]:
        self.calls += 1
        self.passes += 1
        vectors, actions, masks = encoder.leaf_inputs([game], getattr(self.net, "features", ""), self.net)
        mask = masks[0]
        context = self._context(game)
        logits, value = self.forward.evaluate(vectors[0], actions[0], mask, context)
        if context is None and getattr(self.net, "context_value", None) is not None:
            value = 0.0  # no reference yet: the context head cannot be read, and the value head is not its target
        z = logits[np.flatnonzero(mask)].astype(np.float64)
        z = np.exp(z - z.max())
        return value, z / z.sum()

    def batch(self, games: list) -> list[tuple[float, np.ndarray]]:
        """``self(game)`` of every game in ``games`` from one batched network pass
        (:meth:`~mallocgame.search.muzero.inference.NumpyNet.evaluate_batch`); ``calls`` counts each game."""
        if len(games) == 1:  # one example: the unbatched pass has less overhead than a batch of one
            return [self(games[0])]
        self.calls += len(games)
        self.passes += 1
        if all(g.data is games[0].data for g in games):  # one problem: the inputs in one batch
            vectors, actions, masks = encoder.leaf_inputs(games, getattr(self.net, "features", ""), self.net)
        else:
            vectors, actions, masks = (np.concatenate(parts) for parts in zip(*(
                encoder.leaf_inputs([g], getattr(self.net, "features", ""), self.net) for g in games)))
        contexts = [self._context(g) for g in games]
        logits, values = self.forward.evaluate_batch(vectors, actions, masks,
                                                 None if contexts[0] is None else np.asarray(contexts))
        if contexts[0] is None and getattr(self.net, "context_value", None) is not None:
            values = np.zeros(len(games))  # as in __call__: no reference yet
        # every row's softmax over its legal actions at once (the illegal ones at -inf add zeros to the sums)
        z = np.where(masks, logits, -np.inf).astype(np.float64)
        z = np.exp(z - z.max(1, keepdims=True))
        priors = (z / z.sum(1, keepdims=True))[masks]
        ends = np.cumsum(masks.sum(1)).tolist()
        return [(value, priors[start:end]) for value, start, end in zip(values.tolist(), [0] + ends[:-1], ends)]


def label_problem(recipe: Recipe, net, game_fields: dict, rng: np.random.Generator, *, states: int = 16,
                  eps: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[m, L + d]`` and targets ``y`` ``[m]`` of one training problem (module docstring, "Data")."""
    problem, hw = build(recipe)
    return label_states(problem, hw, net, game_fields, rng, states=states, eps=eps)


#: The names of :func:`context_features`' columns, in order.
CONTEXT_FEATURES = ("ahead", "remaining", "progress", "next")


def context_features(game, to_go: np.ndarray, scale: float) -> np.ndarray:
    """The state's place relative to the reference episode, per problem normalised (percent of ``scale``, fractions
    of the episode): ``[ahead, remaining, progress, next]`` -- the return so far beyond the reference's at the same
    step, the reference's return still to come, the steps played over the reference's, and the reward of the
    greedy's next move beyond the reference's next reward (one greedy step from a clone)."""
    t = game.steps
    unit = 100.0 / (scale if scale > 0 else 1.0)
    ref_to_go = float(to_go[t]) if t < len(to_go) else 0.0
    ref_next = ref_to_go - (float(to_go[t + 1]) if t + 1 < len(to_go) else 0.0)
    nxt = 0.0
    if not game.done:
        probe = game.clone()
        nxt = probe.step(probe.greedy_action()) - ref_next
    return np.asarray([unit * (game.total_reward() - (scale - ref_to_go)), unit * ref_to_go,
                       t / max(len(to_go) - 1, 1), unit * nxt], np.float32)


def walk_children(game: Game, to_go: np.ndarray, rng: np.random.Generator, *, states: int, eps: float = 0.05):
    """The leaves the labellers label, as a generator of ``(child, greedy)``: every child (one legal move each,
    not at the episode's end) of ``states`` states of a walk from ``game`` (left unchanged) that follows the greedy,
    a random legal move with probability ``eps``; the states are steps drawn by ``rng`` from the reference
    episode's (``to_go`` ``[steps + 1]``, :func:`mallocgame.search.uct.greedy_profile`), and ``greedy`` says
    whether the child's move was the greedy's. The walk goes on after a state's children are taken."""
    length = len(to_go) - 1
    picks = set(rng.choice(length, size=min(states, length), replace=False).tolist()) if length > 0 else set()
    walk = game.clone()
    while not walk.done:
        legal = walk.legal_actions()
        if walk.steps in picks:
            best = walk.greedy_action()
            for a in legal.tolist():
                child = walk.clone()
                child.step(int(a))
                if not child.done:
                    yield child, int(a) == best
        action = int(legal[rng.integers(len(legal))]) if rng.random() < eps else walk.greedy_action()
        walk.step(action)


def label_states(problem, hw, net, game_fields: dict, rng: np.random.Generator, *, states: int = 16,
                 eps: float = 0.05, rows: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`label_problem` of a given problem and hardware: features and targets of the children of ``states``
    states of a walk that follows the greedy (a random move with probability ``eps``). ``rows``, if given, gets
    per labelled child its :func:`context_features` (``"context"``), step (``"step"``) and whether its move was
    the greedy's (``"greedy"``)."""
    data = GameData(problem, hw)
    game = Game(problem, hw, GameConfig(**game_fields), data=data)
    to_go, scale = greedy_profile(game)
    xs, ys, context, steps, greedy = [], [], [], [], []
    for child, is_greedy in walk_children(game, to_go, rng, states=states, eps=eps):
        obs = child.observation()
        xs.append(net.value_input(input_vector(child, obs, net.features, net),
                                  np.asarray(obs.actions, np.float32), np.asarray(obs.mask, bool)))
        ys.append(value_target(child, to_go, scale))
        if rows is not None:
            context.append(context_features(child, to_go, scale))
            steps.append(child.steps)
            greedy.append(is_greedy)
    if rows is not None:
        rows.update(context=np.asarray(context, np.float32).reshape(-1, 4), step=np.asarray(steps, np.int64),
                    greedy=np.asarray(greedy, bool))
    width = net.value_head.w1.shape[0]
    return (np.asarray(xs, np.float32).reshape(-1, width), np.asarray(ys, np.float32))


def recipe_of(curriculum: Curriculum, seed: int, index: int) -> Recipe:
    """The ``index``-th training problem of a run (its own generator: a resumed run draws the same ones)."""
    return curriculum.sample(np.random.default_rng([seed, index]))


def generate(out: str, net, game_fields: dict, curriculum: Curriculum, *, seed: int, seconds: float,
             log: str | None = None, states: int = 16, save_every: float = 60.0, problems: int | None = None,
             label=None, columns: tuple[str, ...] = ()) -> int:
    """Label problems ``0, 1, ...`` (:func:`recipe_of`) for ``seconds`` (and at most up to problem ``problems``: a
    run is reproduced exactly by its count) into the ``.npz`` ``out`` (saved every ``save_every`` seconds and at
    the end, by a temporary file and a rename; an existing file is continued). Its arrays: ``x`` (value-head
    inputs), ``y`` (targets), ``problem`` (the problem's index), ``context`` (:func:`context_features`), ``step``,
    ``greedy`` (the child's move was the greedy's), ``kind`` (the recipe's kind) and ``n`` (buffers), a row each.
    ``label(problem, hw, rng, rows) -> (x, y)``, if given, labels a problem instead of :func:`label_states` (its
    ``rows`` get ``context``, ``step``, ``greedy`` and the extra ``columns``, a row each; the n-step targets of
    :mod:`mallocgame.search.muzero.nstep`). Returns the problems labelled."""
    names = ("x", "y", "problem", "context", "step", "greedy", "kind", "n", *columns)

    def label_one(index: int, recipe: Recipe) -> tuple[dict[str, np.ndarray], int]:
        rows: dict = {}
        problem, hw = build(recipe)
        rng = np.random.default_rng([seed, index, 1])
        if label is None:
            x, y = label_states(problem, hw, net, game_fields, rng, states=states, rows=rows)
        else:
            x, y = label(problem, hw, rng, rows)
        return {"x": x, "y": y, **{k: rows[k] for k in ("context", "step", "greedy", *columns)}}, problem.n

    return _label_into(out, names, curriculum, seed=seed, seconds=seconds, log=log, save_every=save_every,
                       problems=problems, label_one=label_one)


def _label_into(out: str, names: tuple[str, ...], curriculum: Curriculum, *, seed: int, seconds: float,
                log: str | None, save_every: float, problems: int | None, label_one) -> int:
    """The labelling run of :func:`generate` and :func:`generate_prefetch`: problems ``0, 1, ...`` (:func:`recipe_of`)
    for ``seconds`` and up to ``problems``, each drawn once and labelled by ``label_one(index, recipe) -> (arrays, n)``
    (a row each; the run adds ``problem``, ``kind`` and ``n``), into the ``.npz`` ``out`` with the arrays ``names``:
    continued from the problem after its last if it exists, saved every ``save_every`` seconds and at the end by a
    temporary file and a rename; a line per problem to ``log``. Returns the problems labelled."""
    path = Path(out)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in names}
    if path.exists():
        old = np.load(path)
        missing = [k for k in names if k not in old.files]
        if missing:
            raise ValueError(f"{out}: written by an older labeller (no {', '.join(missing)}); label into a new file")
        for k in names:
            parts[k].append(old[k])
    done = int(parts["problem"][0].max()) + 1 if parts["problem"] and len(parts["problem"][0]) else 0
    t0 = last = time.monotonic()
    logf = open(log, "a") if log else None

    def save():
        np.savez(str(path) + ".tmp.npz", **{k: np.concatenate(v) for k, v in parts.items() if v})
        Path(str(path) + ".tmp.npz").replace(path)

    try:
        while time.monotonic() - t0 < seconds and (problems is None or done < problems):
            recipe = recipe_of(curriculum, seed, done)
            tp = time.monotonic()
            arrays, n = label_one(done, recipe)
            y = arrays["y"]
            arrays.update(problem=np.full(len(y), done, np.int64), kind=np.full(len(y), recipe.kind, "<U10"),
                          n=np.full(len(y), n, np.int64))
            for k in names:
                parts[k].append(arrays[k])
            if logf:
                logf.write(json.dumps({"problem": done, "recipe": recipe.as_dict(), "n": n, "labels": len(y),
                                       "y_mean": round(float(y.mean()), 4) if len(y) else None,
                                       "y_abs_max": round(float(np.abs(y).max()), 4) if len(y) else None,
                                       "seconds": round(time.monotonic() - tp, 2)}) + "\n")
                logf.flush()
            done += 1
            if time.monotonic() - last >= save_every:
                save()
                last = time.monotonic()
        save()
    finally:
        if logf:
            logf.close()
    return done


def split(problem_ids: np.ndarray, share: float = 0.15) -> np.ndarray:
    """bool mask of the validation rows: the last ``share`` of the problems (whole problems, never rows of one)."""
    last = int(problem_ids.max()) + 1 if len(problem_ids) else 0
    return problem_ids >= last - max(1, int(round(share * last)))


def finetune(data: str, init: str, out: str, *, seconds: float = 300.0, epochs: int = 100, seed: int = 0,
             learning_rate: float = 3e-4, weight_decay: float = 1e-3, fresh: bool = True,
             log: str | None = None) -> dict:
    """Train ``init``'s value head alone by MSE on the ``.npz`` ``data`` of :func:`generate` (the other weights, so
    the policy, are those of ``init``): re-initialised from ``seed`` (``fresh``; the shipped head, trained on
    another target, starts further off than y = 0: docs/results.md, "muzero's defaults") or from ``init``'s, AdamW. The
    epoch with the lowest validation MSE (:func:`split`) is saved to ``out`` as a model-only checkpoint marked
    ``value_target = "relative-greedy/1"``. Returns the summary (validation MSE of ``y = 0``, of the training
    rows' mean, of the initial head and of the saved one)."""
    import torch  # lazily: the solver and the CLI never pay for it

    from mallocgame.search.muzero import checkpoint as ckpt

    torch.set_num_threads(1)
    torch.manual_seed(seed)  # the fresh head's initial weights
    payload = ckpt.load(init)
    arrays = np.load(data)
    val = split(arrays["problem"])
    x, y = torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"])
    w = {k: payload["model"][f"value_head.{k}"].clone() for k in ("0.weight", "0.bias", "2.weight", "2.bias")}
    head = torch.nn.Sequential(torch.nn.Linear(w["0.weight"].shape[1], w["0.weight"].shape[0]), torch.nn.ReLU(),
                               torch.nn.Linear(w["0.weight"].shape[0], 1))
    if not fresh:
        head.load_state_dict(w)
    opt = torch.optim.AdamW(head.parameters(), lr=learning_rate, weight_decay=weight_decay)
    tr, va = torch.from_numpy(~val), torch.from_numpy(val)

    def mse(rows) -> float:
        with torch.no_grad():
            return float(((head(x[rows]).squeeze(-1) - y[rows]) ** 2).mean())

    summary = {"rows": int(len(y)), "train_rows": int(tr.sum()), "val_rows": int(va.sum()),
               "val_mse_zero": float((y[va] ** 2).mean()), "val_mse_mean": float(((y[va] - y[tr].mean()) ** 2).mean()),
               "val_mse_init": mse(va), "fresh": fresh, "learning_rate": learning_rate, "weight_decay": weight_decay}
    best, best_state, epoch = _fit(head, opt, x[tr], y[tr], mse, tr, va, seconds=seconds, epochs=epochs, seed=seed,
                                   log=log)
    model = dict(payload["model"])
    model.update({f"value_head.{k}": v for k, v in (best_state or head.state_dict()).items()})
    summary.update(val_mse_best=best, epochs=epoch + 1)
    ckpt.atomic_save(dict(ckpt.model_only(payload), model=model, value_target=VALUE_TARGET,
                          summary=summary), out)
    return summary


def _fit(head, opt, xt, yt, mse, tr, va, *, seconds: float, epochs: int, seed: int,
         log: str | None) -> tuple[float, dict | None, int]:
    """Minibatch (256 rows) MSE epochs of ``head`` on the training rows ``xt`` ``[rows, inputs]``, ``yt`` ``[rows]``
    until ``epochs`` or ``seconds`` have passed, each epoch's training and validation MSE (``mse(tr)``,
    ``mse(va)``) appended to the JSON-lines ``log``. Returns the best validation MSE, the head's state at that epoch
    (``None`` if no epoch ran) and the last epoch (-1 if none)."""
    import torch  # lazily: the solver and the CLI never pay for it

    best, best_state, t0, epoch = math.inf, None, time.monotonic(), -1
    gen = torch.Generator().manual_seed(seed)
    logf = open(log, "a") if log else None
    try:
        for epoch in range(epochs):
            if time.monotonic() - t0 > seconds:
                break
            for idx in torch.randperm(len(yt), generator=gen).split(256):
                loss = ((head(xt[idx]).squeeze(-1) - yt[idx]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            entry = {"epoch": epoch, "train_mse": round(mse(tr), 5), "val_mse": round(mse(va), 5)}
            if entry["val_mse"] < best:
                best, best_state = entry["val_mse"], {k: v.detach().clone() for k, v in head.state_dict().items()}
            if logf:
                logf.write(json.dumps(entry) + "\n")
                logf.flush()
    finally:
        if logf:
            logf.close()
    return best, best_state, epoch


def _head_setup(x: np.ndarray, targets: np.ndarray, val: np.ndarray, used: np.ndarray, *, hidden: int,
                learning_rate: float, weight_decay: float):
    """What both leaf heads' trainers fit: the inputs ``x`` ``[m, F]`` standardised on the training rows (``~val``)
    where ``used`` ``[F]`` (zero elsewhere), a one-hidden-layer ReLU MLP with its AdamW optimiser, the training and
    validation masks and the MSE over a mask. Returns ``(mean, std, z, y, head, opt, tr, va, mse)``."""
    import torch

    mean = np.where(used, x[~val].mean(0), 0.0).astype(np.float32)
    std = np.where(used, x[~val].std(0) + 1e-6, 1.0).astype(np.float32)
    z = torch.from_numpy(np.where(used, (x - mean) / std, 0.0).astype(np.float32))
    y = torch.from_numpy(targets.astype(np.float32))
    head = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    opt = torch.optim.AdamW(head.parameters(), lr=learning_rate, weight_decay=weight_decay)
    tr, va = torch.from_numpy(~val), torch.from_numpy(val)

    def mse(rows) -> float:
        with torch.no_grad():
            return float(((head(z[rows]).squeeze(-1) - y[rows]) ** 2).mean())

    return mean, std, z, y, head, opt, tr, va, mse


def train_context_head(data: str, init: str, out: str, *, inputs: str = "both", seconds: float = 300.0,
                       epochs: int = 200, seed: int = 0, hidden: int = 32, learning_rate: float = 1e-3,
                       weight_decay: float = 1e-3, log: str | None = None, shrink: float | None = None,
                       drop: tuple[str, ...] = ()) -> dict:
    """Train the value leaves' ``context_value`` head by MSE on the ``.npz`` ``data`` of :func:`generate`: an MLP
    (``hidden`` units) over the value head's input under ``init``'s frozen network and the leaf's
    :func:`context_features` (``inputs="both"``) or over the context features alone (``"context"``: the other
    inputs' weights are 0); ``drop`` names context features (:data:`CONTEXT_FEATURES`) it does not read either
    (weight 0: a feature whose range on other programs lies outside the training rows' is not extrapolated).
    Inputs are standardised by the training rows' mean and spread, folded into the first
    layer. The epoch with the lowest validation MSE (:func:`split`: the last problems, never a held-out one),
    its output scaled by the factor in [0, 1] with the lowest validation MSE (towards ``y = 0``: a head that knows
    little says little; ``shrink``, if given, is the factor instead: one chosen on the training problems by other
    means, such as leave-one-problem-out), is saved to ``out`` as ``init``'s network plus the head, marked
    :data:`VALUE_TARGET`. Returns the summary (validation MSE of ``y = 0``, of the training rows' mean, of the best
    epoch and of the saved head, ``val_mse_shrunk``; ``shrink``, the factor)."""
    import torch  # lazily: the solver and the CLI never pay for it

    from mallocgame.search.muzero import checkpoint as ckpt

    if shrink is not None and not 0.0 <= shrink <= 1.0:
        raise ValueError(f"shrink {shrink} is not in [0, 1]")
    unknown = set(drop) - set(CONTEXT_FEATURES)
    if unknown:
        raise ValueError(f"unknown context features {', '.join(sorted(unknown))} (known: {', '.join(CONTEXT_FEATURES)})")
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    payload = ckpt.load(init)
    arrays = np.load(data)
    val = split(arrays["problem"])
    x = np.concatenate([arrays["x"], arrays["context"]], 1).astype(np.float32)
    width, ctx_width = arrays["x"].shape[1], arrays["context"].shape[1]
    used = np.ones(x.shape[1], bool) if inputs == "both" else np.arange(x.shape[1]) >= width
    for name in drop:
        used[width + CONTEXT_FEATURES.index(name)] = False
    mean, std, z, y, head, opt, tr, va, mse = _head_setup(x, arrays["y"], val, used, hidden=hidden,
                                                          learning_rate=learning_rate, weight_decay=weight_decay)

    summary = {"rows": int(len(y)), "train_rows": int(tr.sum()), "val_rows": int(va.sum()), "inputs": inputs,
               "drop": list(drop),
               "hidden": hidden, "val_mse_zero": float((y[va] ** 2).mean()),
               "val_mse_mean": float(((y[va] - y[tr].mean()) ** 2).mean())}
    best, best_state, epoch = _fit(head, opt, z[tr], y[tr], mse, tr, va, seconds=seconds, epochs=epochs, seed=seed,
                                   log=log)
    state = best_state or head.state_dict()
    head.load_state_dict(state)
    with torch.no_grad():  # the head shrunk towards y = 0 by the factor in [0, 1] best on the validation rows
        pred = head(z[va]).squeeze(-1)
    if shrink is None:
        shrink = float(min(max(float((pred * y[va]).sum() / max(float((pred * pred).sum()), 1e-12)), 0.0), 1.0))
    w1 = state["0.weight"].numpy() * np.where(used, 1.0 / std, 0.0)[None, :]  # standardisation folded in
    b1 = state["0.bias"].numpy() - w1 @ mean
    model = dict(payload["model"])
    model.update({"context_value.0.weight": torch.from_numpy(w1.astype(np.float32)),
                  "context_value.0.bias": torch.from_numpy(b1.astype(np.float32)),
                  "context_value.2.weight": shrink * state["2.weight"].clone(),
                  "context_value.2.bias": shrink * state["2.bias"].clone()})
    summary.update(val_mse_best=best, epochs=epoch + 1, context_width=ctx_width, shrink=shrink,
                   val_mse_shrunk=float(((shrink * pred - y[va]) ** 2).mean()))
    ckpt.atomic_save(dict(ckpt.model_only(payload), model=model, value_target=VALUE_TARGET,
                          summary=summary), out)
    return summary


# --- prefetch mode: the same target, read by a head over the leaf's context alone ---------------------------------
#: The prefetch game the muzero solver plays (``solvers/muzero.py``: k = PREFETCH_K per copy window, two windows,
#: greedy-xla's order): the only game a prefetch value head is read on.
PREFETCH_GAME = {"variant": "prefetch", "k": PREFETCH_K, "order": "xla", "windows": 2}
#: What a prefetch value head reads, in this order (:func:`prefetch_context_features`).
PREFETCH_FEATURES = ("ahead", "remaining", "progress", "next", "length", "scale", "density")
#: The kind of a prefetch value head's checkpoint (its ``kind`` field): a context-only MLP, no network.
PREFETCH_HEAD_KIND = "prefetch-context-value/1"


def prefetch_context_features(game, to_go: np.ndarray, scale: float, probe: bool = True) -> np.ndarray:
    """What a prefetch leaf reads (:data:`PREFETCH_FEATURES`): :func:`context_features` (its place relative to the
    reference episode); ``length``, the decisions the state has left beyond the reference's at the same step, as a
    fraction of the reference's length (a copy decided fast or slow may change the decisions still to come); and two
    of the problem's own: ``scale``, the reference episode's return (the game's normalised reward: the share of the
    program's benefit the greedy gets), and ``density``, the reference episode's decisions per buffer.
    ``probe=False`` leaves ``next`` 0 (it costs a clone of the game and a greedy step)."""
    if probe:
        ahead, remaining, progress, nxt = context_features(game, to_go, scale).tolist()
    else:
        t = game.steps
        unit = 100.0 / (scale if scale > 0 else 1.0)
        remaining = unit * (float(to_go[t]) if t < len(to_go) else 0.0)
        ahead, progress, nxt = unit * game.total_reward() - (100.0 - remaining), t / max(len(to_go) - 1, 1), 0.0
    steps = max(len(to_go) - 1, 1)
    length = (int(game.decisions_left) - max(len(to_go) - 1 - game.steps, 0)) / steps
    return np.asarray([ahead, remaining, progress, nxt, length, scale, steps / max(game.data.n, 1)], np.float32)


def label_prefetch_states(problem, hw, rng: np.random.Generator, *, states: int = 32, eps: float = 0.05,
                          leaf_steps: int = 64, rows: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[m, len(PREFETCH_FEATURES)]`` and targets ``y`` ``[m]`` of a prefetch-mode problem: at ``states``
    steps of a walk that follows the greedy (a random move with probability ``eps``) every child of the state (one
    move each), played on by ``leaf_steps`` greedy steps as a mixed leaf of the search is, is labelled with ``y``
    (:func:`value_target`, a greedy rollout to the end) and its :func:`prefetch_context_features`, both at the state
    the leaf is valued at. ``rows``, if given, gets per row its step (``"step"``) and whether the child's move was
    the greedy's (``"greedy"``)."""
    game = Game(problem, hw, GameConfig(**PREFETCH_GAME))
    to_go, scale = greedy_profile(game)
    xs, ys, steps, greedy = [], [], [], []
    for leaf, is_greedy in walk_children(game, to_go, rng, states=states, eps=eps):
        if leaf_steps:
            leaf.greedy_rollout(leaf.steps + leaf_steps)
        if leaf.done:
            continue
        xs.append(prefetch_context_features(leaf, to_go, scale))
        ys.append(value_target(leaf, to_go, scale))
        steps.append(leaf.steps)
        greedy.append(is_greedy)
    if rows is not None:
        rows.update(step=np.asarray(steps, np.int64), greedy=np.asarray(greedy, bool))
    return np.asarray(xs, np.float32).reshape(-1, len(PREFETCH_FEATURES)), np.asarray(ys, np.float32)


def generate_prefetch(out: str, curriculum: Curriculum, *, seed: int, seconds: float, log: str | None = None,
                      states: int = 32, leaf_steps: int = 64, save_every: float = 0.0,
                      problems: int | None = None) -> int:
    """:func:`generate` in prefetch mode: problems ``0, 1, ...`` of ``curriculum`` (:func:`recipe_of`; training
    seeds) turned to prefetch mode, labelled by :func:`label_prefetch_states`, into the ``.npz`` ``out`` (continued if
    it exists; saved by a temporary file and a rename, by default after every problem: one program may take minutes
    to compile, and a run stopped then keeps every problem before it). Its arrays, a row each: ``context`` (the
    features), ``y``, ``problem``, ``step``, ``greedy``, ``kind``, ``n``. Returns the problems labelled."""
    names = ("context", "y", "problem", "step", "greedy", "kind", "n")

    def label_one(index: int, recipe: Recipe) -> tuple[dict[str, np.ndarray], int]:
        problem, hw = build(recipe)
        rows: dict = {}
        x, y = label_prefetch_states(problem.replace(mode="prefetch"), hw, np.random.default_rng([seed, index, 1]),
                                     states=states, leaf_steps=leaf_steps, rows=rows)
        return {"context": x, "y": y, "step": rows["step"], "greedy": rows["greedy"]}, problem.n

    return _label_into(out, names, curriculum, seed=seed, seconds=seconds, log=log, save_every=save_every,
                       problems=problems, label_one=label_one)


class PrefetchHead:
    """A prefetch value head: ``y`` of leaves from their :func:`prefetch_context_features` ``[m, F]`` by a one-hidden-
    layer ReLU MLP (numpy; its inputs' standardisation folded into the first layer). ``inputs`` names the features it
    reads; the others have zero weights."""

    def __init__(self, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, inputs: tuple[str, ...]):
        self.w1, self.b1 = np.asarray(w1, np.float64), np.asarray(b1, np.float64)
        self.w2, self.b2 = np.asarray(w2, np.float64), np.asarray(b2, np.float64)
        self.inputs = tuple(inputs)
        self.probes = "next" in self.inputs  # whether its features need the greedy probe (a clone and a step)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        hidden = np.maximum(np.asarray(features, np.float64) @ self.w1.T + self.b1, 0.0)
        return (hidden @ self.w2.T + self.b2)[:, 0]


def load_prefetch_head(path: str) -> tuple[PrefetchHead | None, str]:
    """``(head, "")`` from a prefetch value head's checkpoint (:func:`train_prefetch_head`), read without torch, or
    ``(None, why not)`` for a head without the :data:`VALUE_TARGET` mark or of another game (value leaves read no head
    trained on another target). A missing or unreadable file, or one of another kind, raises ``ValueError`` (one
    line)."""
    if not Path(path).is_file():
        raise ValueError(f"{path}: prefetch value head not found")
    try:
        payload = read_checkpoint(path)
    except UnsupportedCheckpoint as exc:
        raise ValueError(f"{path}: not a readable prefetch value head ({exc})") from None
    if not isinstance(payload, dict) or payload.get("kind") != PREFETCH_HEAD_KIND:
        raise ValueError(f"{path}: not a {PREFETCH_HEAD_KIND} checkpoint")
    w = payload.get("head") or {}
    inputs = tuple(payload.get("inputs") or ())
    if (set(w) != {"w1", "b1", "w2", "b2"} or np.shape(w["w1"])[1:] != (len(PREFETCH_FEATURES),)
            or not inputs or not set(inputs) <= set(PREFETCH_FEATURES)):
        raise ValueError(f"{path}: its head does not read the features {', '.join(PREFETCH_FEATURES)}")
    if payload.get("value_target") != VALUE_TARGET:
        return None, f"{path}: its head is not marked {VALUE_TARGET} (not trained on the value leaves' target)"
    if dict(payload.get("game") or {}) != PREFETCH_GAME:
        return None, f"{path}: its head is trained on another game ({payload.get('game')})"
    return PrefetchHead(w["w1"], w["b1"], w["w2"], w["b2"], inputs), ""


class PrefetchValue:
    """The leaf evaluator of prefetch mode: ``(y, None)`` of a leaf from a :class:`PrefetchHead` over its
    :func:`prefetch_context_features` relative to the reference episode the search hands over (:meth:`set_reference`;
    before that, ``y = 0``); no prior. ``calls`` counts the states valued."""

    def __init__(self, head: PrefetchHead):
        self.head = head
        self.calls = 0
        self.to_go: np.ndarray | None = None
        self.scale = 0.0

    def set_reference(self, to_go: np.ndarray, scale: float) -> None:
        """The search's reference episode (:func:`~mallocgame.search.uct.greedy_profile`)."""
        self.to_go, self.scale = to_go, scale

    def __call__(self, game) -> tuple[float, None]:
        self.calls += 1
        if self.to_go is None:
            return 0.0, None
        features = prefetch_context_features(game, self.to_go, self.scale, probe=self.head.probes)
        return float(self.head(features[None, :])[0]), None


def train_prefetch_head(data: str, out: str, *, inputs: tuple[str, ...] = PREFETCH_FEATURES, hidden: int = 16,
                        seconds: float = 300.0, epochs: int = 150, seed: int = 0, learning_rate: float = 1e-3,
                        weight_decay: float = 1e-3, log: str | None = None) -> dict:
    """Train a prefetch value head by MSE on the ``.npz`` ``data`` of :func:`generate_prefetch`, as
    :func:`train_context_head` trains its head (standardised ``inputs``, the others weighted 0; AdamW; the epoch with
    the lowest validation MSE, :func:`split`; its output shrunk towards ``y = 0`` by the factor in [0, 1] best on the
    validation rows) and save it to ``out`` marked :data:`VALUE_TARGET` (kind :data:`PREFETCH_HEAD_KIND`, game
    :data:`PREFETCH_GAME`). Returns the summary (validation MSE of ``y = 0``, of the best epoch, of the saved head)."""
    import torch  # lazily: the solver and the CLI never pay for it

    from mallocgame.search.muzero import checkpoint as ckpt

    unknown = set(inputs) - set(PREFETCH_FEATURES)
    if unknown:
        raise ValueError(f"unknown prefetch features {', '.join(sorted(unknown))} (known: {', '.join(PREFETCH_FEATURES)})")
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    arrays = np.load(data)
    val = split(arrays["problem"])
    x = arrays["context"].astype(np.float32)
    used = np.asarray([name in inputs for name in PREFETCH_FEATURES])
    mean, std, z, y, head, opt, tr, va, mse = _head_setup(x, arrays["y"], val, used, hidden=hidden,
                                                          learning_rate=learning_rate, weight_decay=weight_decay)

    summary = {"rows": int(len(y)), "train_rows": int(tr.sum()), "val_rows": int(va.sum()), "inputs": list(inputs),
               "hidden": hidden, "val_mse_zero": float((y[va] ** 2).mean())}
    best, best_state, epoch = _fit(head, opt, z[tr], y[tr], mse, tr, va, seconds=seconds, epochs=epochs, seed=seed,
                                   log=log)
    state = best_state or head.state_dict()
    head.load_state_dict(state)
    with torch.no_grad():
        pred = head(z[va]).squeeze(-1)
    shrink = float(min(max(float((pred * y[va]).sum() / max(float((pred * pred).sum()), 1e-12)), 0.0), 1.0))
    w1 = state["0.weight"].numpy() * np.where(used, 1.0 / std, 0.0)[None, :]  # standardisation folded in
    b1 = state["0.bias"].numpy() - w1 @ mean
    summary.update(val_mse_best=best, epochs=epoch + 1, shrink=shrink,
                   val_mse_shrunk=float(((shrink * pred - y[va]) ** 2).mean()))
    weights = {"w1": torch.from_numpy(w1.astype(np.float32)), "b1": torch.from_numpy(b1.astype(np.float32)),
               "w2": shrink * state["2.weight"].clone(), "b2": shrink * state["2.bias"].clone()}
    ckpt.atomic_save({"kind": PREFETCH_HEAD_KIND, "value_target": VALUE_TARGET, "game": dict(PREFETCH_GAME),
                      "inputs": list(inputs), "head": weights, "summary": summary}, out)
    return summary
