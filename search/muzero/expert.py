"""Expert iteration for the guided UCT search (issue 10, "training that matches play").

Loop, one game at a time:

1. draw a training problem from the curriculum (:class:`search.muzero.problems.Curriculum`:
   layered programs and random intervals, sizes ``min_size..max_size``, capacities
   ``min_capacity..max_capacity`` of the max live bytes; seeds >= ``TRAIN_SEED_BASE``, so
   never an evaluation problem);
2. the **student** plays it with exactly the deployed search: :class:`search.mcts.UCTSearch`
   guided by the current network (:class:`search.muzero.guide.NetworkPrior`),
   ``student_simulations`` per move, greedy rollouts to the end, tree reuse;
3. on ``states_per_game`` of the states the student reached with more than one legal move, a
   **teacher** gives the policy target: a search from that state (``teacher="search"``: plain UCT,
   or pUCT on the relaxation prior, with ``teacher_simulations`` simulations), its root visit
   distribution; or (``teacher="answer"``) a stronger solver's answer to the whole problem, computed
   once per game, as a one-hot target (:func:`answer_policy`): DAgger (Ross et al., AISTATS 2011),
   the expert's labels on the states the student reaches;
4. ``updates_per_game`` Adam steps of cross-entropy between the masked policy logits and the
   targets, on batches drawn from a replay of the last ``replay_capacity`` labelled states.

Only the representation and policy head are trained (the guided search uses no value). One
process, one torch thread. A checkpoint (format ``mallocgame.muzero/1``, so the solver reads it
as it reads any) is written every ``checkpoint_seconds`` and at the end, with the optimiser, the
replay, the generator state and the log; :func:`resume` takes its path and continues. Each
checkpoint also leaves a model-only snapshot ``<out>.g<games>.pt`` for choosing the best on the
tuning problems.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from search.muzero import checkpoint as ckpt
from search.muzero.networks import MuZeroNet, NetworkConfig

FORMAT = ckpt.FORMAT


@dataclass(frozen=True)
class ExpertConfig:
    seed: int = 0
    min_size: int = 30
    max_size: int = 200
    layered_share: float = 0.6
    min_capacity: float = 0.2
    max_capacity: float = 0.6
    student_simulations: int = 16
    teacher_simulations: int = 96
    states_per_game: int = 6
    updates_per_game: int = 8
    batch_size: int = 128
    learning_rate: float = 5e-4
    replay_capacity: int = 30_000
    checkpoint_seconds: float = 180.0
    features: str = ""  # the network's input: "" = the game's observation vector, "encoder/1|2" = search.muzero.encoder
    exploration: float = 1.0  # the pUCT constant of the student's search (the solver's ``exploration``)
    teacher_prior: str = "uniform"  # "uniform": plain UCT teaches; "relaxation": pUCT on search.muzero.guide.RelaxationPrior
    teacher: str = "search"  # "search": the teacher search above; "answer": a solver's answer (``teacher_answer``)
    teacher_exploration: float | None = None  # the relaxation teacher's pUCT constant (None: ``exploration``)


class _State:
    """Everything a run needs to continue: network, optimiser, generator, replay, counters, log."""

    def __init__(self, config: ExpertConfig, net: MuZeroNet, game_fields: dict, rng: np.random.Generator,
                 teacher_answer: "TeacherAnswer | None" = None):
        if config.teacher not in ("search", "answer"):
            raise ValueError(f"unknown teacher {config.teacher!r} (known: search, answer)")
        if config.teacher == "answer" and teacher_answer is None:
            raise ValueError("teacher 'answer' needs a teacher_answer function (problem, hardware) -> offsets")
        self.config, self.net, self.game_fields, self.rng = config, net, dict(game_fields), rng
        self.teacher_answer = teacher_answer
        self.opt = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
        self.games = self.step = 0
        self.seconds = 0.0
        self.replay: dict[str, list[np.ndarray]] = {"vector": [], "actions": [], "mask": [], "target": []}
        self.log: list[dict] = []

    def payload(self) -> dict[str, Any]:
        r = {k: torch.from_numpy(np.stack(v)) if v else torch.zeros(0) for k, v in self.replay.items()}
        return {"format": FORMAT, "network": self.net.config.as_dict(), "game": dict(self.game_fields),
                "features": self.config.features,
                "model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
                "expert": {"config": asdict(self.config), "games": self.games, "step": self.step,
                           "seconds": self.seconds, "rng": json.dumps(self.rng.bit_generator.state),
                           "log": json.dumps(self.log)},
                "replay": r, "step": self.step, "games": self.games,
                "summary": self.log[-1] if self.log else {}}


def _curriculum(config: ExpertConfig):
    from search.muzero.problems import Curriculum

    return Curriculum(min_size=config.min_size, max_size=config.max_size, layered_share=config.layered_share,
                      min_capacity_fraction=config.min_capacity, max_capacity_fraction=config.max_capacity)


def teacher_policy(game, simulations: int, rng: np.random.Generator, prior: str = "uniform",
                   exploration: float = 1.0) -> np.ndarray:
    """Root visit distribution ``[num_actions]`` of the teacher's search with ``simulations`` from ``game``
    (not changed): plain UCT (``prior="uniform"``), or pUCT on the relaxation prior with ``exploration``."""
    from search.mcts import Episode, MCTSConfig, Node, UCTSearch
    from search.muzero.guide import RelaxationPrior

    if prior == "relaxation":
        search = UCTSearch(MCTSConfig(simulations=simulations, exploration=exploration), rng, prior=RelaxationPrior())
    elif prior == "uniform":
        search = UCTSearch(MCTSConfig(simulations=simulations), rng)
    else:
        raise ValueError(f"unknown teacher prior {prior!r} (known: uniform, relaxation)")
    root, best = Node(), Episode(-math.inf, np.zeros(0, np.int64), "")
    for _ in range(simulations):
        best = search.simulate(root, game, math.inf, best)
    target = np.zeros(game.num_actions, np.float32)
    for a, child in root.children.items():
        target[a] = child.visits
    return target / target.sum()


#: ``teacher_answer(problem, hardware) -> offsets`` int64 ``[n]`` (-1 slow): a stronger solver's answer,
#: given by the caller (search may not import solvers or hybrid; experiments/train_muzero_expert.py
#: passes select-pack).
TeacherAnswer = Callable[[Any, Any], np.ndarray]


def answer_policy(game, answer: np.ndarray) -> np.ndarray:
    """One-hot target ``[num_actions]``: the move of the fixed-order ``game``'s current buffer that
    follows ``answer`` (offsets ``[n]``, -1 slow): slow where the answer has it slow; else the offered
    hole at the answer's offset, failing that the greedy's hole (the answer's layout differs from the
    game's so far), and slow when nothing fits."""
    target = np.zeros(game.num_actions, np.float32)
    off = int(answer[game.current])
    legal = game.legal_actions()
    if off < 0:
        action = game.slow_action if game.slow_action in legal else game.greedy_action()
    else:
        holes = game.holes()
        action = next((j for j, h in enumerate(holes) if h[0] == off), game.greedy_action())
    target[action] = 1.0
    return target


def play_and_label(state: _State) -> dict[str, Any]:
    """One game of the loop in the module docstring; returns its log entry (no gradient step)."""
    from search.game import Game, GameConfig
    from search.game_data import GameData
    from search.mcts import MCTSConfig, UCTSearch, play_greedy
    from search.muzero.guide import NetworkPrior, input_vector
    from search.muzero.inference import NumpyNet
    from search.muzero.problems import build

    c = state.config
    recipe = _curriculum(c).sample(state.rng)
    problem, hw = build(recipe)
    game_cfg = GameConfig(**state.game_fields)
    data = GameData(problem, hw)
    greedy = Game(problem, hw, game_cfg, data=data)
    play_greedy(greedy)
    answer = np.asarray(state.teacher_answer(problem, hw), np.int64) if c.teacher == "answer" else None
    prior = NetworkPrior(NumpyNet.from_torch(state.net, c.features))
    reached: list = []
    student = UCTSearch(MCTSConfig(simulations=c.student_simulations, exploration=c.exploration),
                        np.random.default_rng(int(state.rng.integers(2**63))), prior=prior)
    game = Game(problem, hw, game_cfg, data=data)
    result = student.run(game, deadline=math.inf, before_move=lambda g: reached.append(g.clone()))
    picks = state.rng.choice(len(reached), size=min(c.states_per_game, len(reached)), replace=False) \
        if reached else []
    agree = 0
    teacher_rng = np.random.default_rng(int(state.rng.integers(2**63)))
    for j in sorted(int(p) for p in picks):
        g = reached[j]
        target = answer_policy(g, answer) if answer is not None else \
            teacher_policy(g, c.teacher_simulations, teacher_rng, c.teacher_prior,
                           c.exploration if c.teacher_exploration is None else c.teacher_exploration)
        obs = g.observation()
        legal = np.flatnonzero(obs.mask)
        agree += int(legal[np.argmax(prior(g, legal))] == int(np.argmax(target)))
        for key, value in (("vector", input_vector(g, obs, c.features)), ("actions", obs.actions), ("mask", obs.mask),
                           ("target", target)):
            state.replay[key].append(np.asarray(value, np.float32 if key != "mask" else bool))
    for key in state.replay:
        del state.replay[key][:-c.replay_capacity]
    base = greedy.total_reward()
    return {"game": state.games + 1, "kind": recipe.kind, "n": recipe.n, "capacity": recipe.capacity_fraction,
            "labelled": len(picks), "agree": agree, "vs_greedy": result.best.value / base if base > 0 else 1.0,
            "network_calls": prior.calls}


def learn(state: _State) -> float:
    """``updates_per_game`` steps of policy cross-entropy on replay batches; the mean loss."""
    c = state.config
    n = len(state.replay["target"])
    if n == 0:
        return float("nan")
    losses = []
    state.net.train()
    for _ in range(c.updates_per_game):
        idx = state.rng.integers(0, n, size=min(c.batch_size, n))
        vector = torch.from_numpy(np.stack([state.replay["vector"][i] for i in idx]))
        actions = torch.from_numpy(np.stack([state.replay["actions"][i] for i in idx]))
        mask = torch.from_numpy(np.stack([state.replay["mask"][i] for i in idx]))
        target = torch.from_numpy(np.stack([state.replay["target"][i] for i in idx]))
        s, emb = state.net.initial(vector, actions, mask)
        logits, _, _ = state.net.predict(s, emb)
        logp = F.log_softmax(logits.masked_fill(~mask, -1e9), -1)
        loss = -(target * logp).sum(-1).mean()
        state.opt.zero_grad()
        loss.backward()
        state.opt.step()
        state.step += 1
        losses.append(loss.item())
    state.net.eval()
    return float(np.mean(losses))


def _save(state: _State, out: Path) -> None:
    payload = state.payload()
    ckpt.atomic_save(payload, str(out))
    ckpt.atomic_save(ckpt.model_only(payload), str(out.with_suffix(f".g{state.games}.pt")))


def _loop(state: _State, out: Path, time_limit: float, log_path: Path | None, max_games: int | None) -> _State:
    torch.set_num_threads(1)
    t0 = time.monotonic()
    last_save = t0
    log_file = open(log_path, "a") if log_path else None
    try:
        while time.monotonic() - t0 < time_limit and (max_games is None or state.games < max_games):
            tg = time.monotonic()
            entry = play_and_label(state)
            entry["loss"] = learn(state)
            state.games += 1
            state.seconds += time.monotonic() - tg
            entry.update(step=state.step, positions=len(state.replay["target"]), seconds=round(state.seconds, 1))
            state.log.append(entry)
            if log_file:
                log_file.write(json.dumps(entry) + "\n")
                log_file.flush()
            if time.monotonic() - last_save >= state.config.checkpoint_seconds:
                _save(state, out)
                last_save = time.monotonic()
        _save(state, out)
    finally:
        if log_file:
            log_file.close()
    return state


def train(out: str, *, init: str | None = None, config: ExpertConfig = ExpertConfig(), time_limit: float = 600.0,
          log_path: str | None = None, max_games: int | None = None,
          teacher_answer: TeacherAnswer | None = None) -> _State:
    """A new run writing checkpoints to ``out``; weights start from checkpoint ``init`` if given.
    ``teacher_answer`` gives the targets when ``config.teacher == "answer"``."""
    from search.game import GameConfig, observation_dims

    torch.manual_seed(config.seed)
    if init is not None:
        payload = ckpt.load(init)
        if str(payload.get("features") or "") != config.features:
            raise ckpt.CheckpointError(f"{init}: its network reads features {payload.get('features') or 'plain'!r}, "
                                       f"not {config.features or 'plain'!r}")
        net, game_fields = ckpt.network_from(payload), dict(payload["game"])
    else:
        from search.muzero import encoder

        game_fields = {"variant": "order", "k": 16, "order": "xla"}
        dims = observation_dims(GameConfig(**game_fields))
        extra = encoder.extra_inputs(config.features)
        net = MuZeroNet(NetworkConfig(dims["obs_dim"] + extra, dims["action_features"], dims["num_actions"]),
                        torch.Generator().manual_seed(config.seed)).eval()
    state = _State(config, net, game_fields, np.random.default_rng(config.seed), teacher_answer)
    return _loop(state, Path(out), time_limit, Path(log_path) if log_path else None, max_games)


def resume(path: str, *, time_limit: float = 600.0, out: str | None = None, log_path: str | None = None,
           max_games: int | None = None, teacher_answer: TeacherAnswer | None = None) -> _State:
    """Continue the run whose checkpoint is at ``path`` (writing to ``out``, default the same path);
    a run taught by answers needs the same ``teacher_answer`` again."""
    payload = ckpt.load(path)
    if "expert" not in payload:
        raise ckpt.CheckpointError(f"{path}: not an expert-iteration training checkpoint")
    e = payload["expert"]
    config = ExpertConfig(**e["config"])  # its features too
    rng = np.random.default_rng()
    rng.bit_generator.state = json.loads(e["rng"])
    state = _State(config, ckpt.network_from(payload), payload["game"], rng, teacher_answer)
    state.opt.load_state_dict(payload["optimizer"])
    state.games, state.step, state.seconds = int(e["games"]), int(e["step"]), float(e["seconds"])
    state.log = json.loads(e["log"])
    for key, tensor in payload["replay"].items():
        state.replay[key] = list(tensor.numpy()) if tensor.dim() > 1 else []
    return _loop(state, Path(out or path), time_limit, Path(log_path) if log_path else None, max_games)
