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

**Data** (:func:`label_problem`): a training problem (:mod:`mallocgame.search.muzero.problems`, seeds >=
``TRAIN_SEED_BASE``), its reference episode, then a walk that follows the greedy with a random legal move
with probability ``eps``; at ``states`` steps of the walk every child of the state (one move each, as the
search's leaves are) is labelled with ``y`` by a greedy rollout to the end. The features are the value
head's input under the frozen network (:meth:`~mallocgame.search.muzero.inference.NumpyNet.value_input`), so
fine-tuning moves the value head only and the policy stays the shipped one. :func:`finetune` (torch, imported
lazily) trains the head by MSE; ``experiments/train_value_head.py`` runs both.
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
from mallocgame.search.muzero.problems import Curriculum, Recipe, build
from mallocgame.search.uct import greedy_profile


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
    pass (:meth:`batch`); ``calls`` counts the states valued, ``passes`` the network passes."""

    def __init__(self, net):
        self.net = net
        self.calls = 0
        self.passes = 0

    def __call__(self, game) -> tuple[float, np.ndarray]:
        self.calls += 1
        self.passes += 1
        obs = game.observation()
        mask = np.asarray(obs.mask, bool)
        logits, value = self.net.evaluate(input_vector(game, obs, getattr(self.net, "features", ""), self.net),
                                          np.asarray(obs.actions, np.float32), mask)
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
        features = getattr(self.net, "features", "")
        observations = [game.observation() for game in games]
        if features in encoder.NAMES and all(g.data is games[0].data for g in games):  # one problem: batched inputs
            vectors = encoder.network_vectors(games, observations, features, self.net)
        else:
            vectors = np.asarray([input_vector(g, o, features, self.net) for g, o in zip(games, observations)],
                                 np.float32)
        masks = np.asarray([o.mask for o in observations], bool)
        logits, values = self.net.evaluate_batch(vectors, np.asarray([o.actions for o in observations], np.float32),
                                                 masks)
        out = []
        for row, mask, value in zip(logits, masks, values.tolist()):
            z = row[np.flatnonzero(mask)].astype(np.float64)
            z = np.exp(z - z.max())
            out.append((value, z / z.sum()))
        return out


def reference_value(game) -> tuple[float, None]:
    """The control without a network: ``y = 0`` (the future as in the reference episode), no prior."""
    return 0.0, None


def label_problem(recipe: Recipe, net, game_fields: dict, rng: np.random.Generator, *, states: int = 16,
                  eps: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[m, L + d]`` and targets ``y`` ``[m]`` of one training problem (module docstring, "Data")."""
    problem, hw = build(recipe)
    return label_states(problem, hw, net, game_fields, rng, states=states, eps=eps)


def label_states(problem, hw, net, game_fields: dict, rng: np.random.Generator, *, states: int = 16,
                 eps: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """:func:`label_problem` of a given problem and hardware: features and targets of the children of ``states``
    states of a walk that follows the greedy (a random move with probability ``eps``)."""
    data = GameData(problem, hw)
    game = Game(problem, hw, GameConfig(**game_fields), data=data)
    to_go, scale = greedy_profile(game)
    length = len(to_go) - 1
    picks = set(rng.choice(length, size=min(states, length), replace=False).tolist())
    xs, ys = [], []
    walk = game.clone()
    while not walk.done:
        legal = walk.legal_actions()
        if walk.steps in picks:
            for a in legal.tolist():
                child = walk.clone()
                child.step(int(a))
                if child.done:
                    continue
                obs = child.observation()
                xs.append(net.value_input(input_vector(child, obs, net.features, net),
                                          np.asarray(obs.actions, np.float32), np.asarray(obs.mask, bool)))
                ys.append(value_target(child, to_go, scale))
        action = int(legal[rng.integers(len(legal))]) if rng.random() < eps else walk.greedy_action()
        walk.step(action)
    width = net.value_head.w1.shape[0]
    return (np.asarray(xs, np.float32).reshape(-1, width), np.asarray(ys, np.float32))


def recipe_of(curriculum: Curriculum, seed: int, index: int) -> Recipe:
    """The ``index``-th training problem of a run (its own generator: a resumed run draws the same ones)."""
    return curriculum.sample(np.random.default_rng([seed, index]))


def generate(out: str, net, game_fields: dict, curriculum: Curriculum, *, seed: int, seconds: float,
             log: str | None = None, states: int = 16, save_every: float = 60.0, problems: int | None = None) -> int:
    """Label problems ``0, 1, ...`` (:func:`recipe_of`) for ``seconds`` (and at most up to problem ``problems``: a
    run is reproduced exactly by its count) into the ``.npz`` ``out`` (saved every ``save_every`` seconds and at
    the end; an existing file is continued). Returns the problems labelled."""
    path = Path(out)
    xs, ys, ids = [], [], []
    if path.exists():
        old = np.load(path)
        xs, ys, ids = [old["x"]], [old["y"]], [old["problem"]]
    done = int(ids[0].max()) + 1 if ids and len(ids[0]) else 0
    t0 = last = time.monotonic()
    logf = open(log, "a") if log else None

    def save():
        np.savez(str(path) + ".tmp.npz", x=np.concatenate(xs) if xs else np.zeros((0, 0), np.float32),
                 y=np.concatenate(ys) if ys else np.zeros(0, np.float32),
                 problem=np.concatenate(ids) if ids else np.zeros(0, np.int64))
        Path(str(path) + ".tmp.npz").replace(path)

    try:
        while time.monotonic() - t0 < seconds and (problems is None or done < problems):
            recipe = recipe_of(curriculum, seed, done)
            tp = time.monotonic()
            x, y = label_problem(recipe, net, game_fields, np.random.default_rng([seed, done, 1]), states=states)
            xs.append(x), ys.append(y), ids.append(np.full(len(y), done, np.int64))
            if logf:
                logf.write(json.dumps({"problem": done, "recipe": recipe.as_dict(), "labels": len(y),
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
    best, best_state, t0 = math.inf, None, time.monotonic()
    gen = torch.Generator().manual_seed(seed)
    xt, yt = x[tr], y[tr]
    logf = open(log, "a") if log else None
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
    if logf:
        logf.close()
    model = dict(payload["model"])
    model.update({f"value_head.{k}": v for k, v in (best_state or head.state_dict()).items()})
    summary.update(val_mse_best=best, epochs=epoch + 1)
    ckpt.atomic_save(dict(ckpt.model_only(payload), model=model, value_target="relative-greedy/1",
                          summary=summary), out)
    return summary
