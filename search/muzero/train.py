"""MuZero training: the unrolled loss and the self-play / learn loop (Schrittwieser et al. 2020, appendix G).

A loop of self-play games into a replay buffer and gradient steps on positions unrolled through
the dynamics; the loss sums policy, value, reward, legality and (EfficientZero) consistency
terms, and MuZero Reanalyse refreshes a share of each batch's targets with the current network.
Deterministic for a seed, and a resumed run continues bit for bit. The loss term by term,
reanalyse and determinism: docs/training.md, "Self-play training".
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from mallocgame.search.muzero import checkpoint as ckpt
from mallocgame.search.muzero.env import game_factory
from mallocgame.search.muzero.features import ObsArrays, obs_arrays, obs_dims
from mallocgame.search.muzero.models import NetworkEvaluator
from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig, parameter_count
from mallocgame.search.muzero.problems import Curriculum, Recipe
from mallocgame.search.muzero.replay import Batch, ReplayBuffer, rebuild
from mallocgame.search.muzero.search import SearchConfig
from mallocgame.search.muzero.selfplay import Agent, play_game


@dataclass(frozen=True)
class TrainConfig:
    games_per_iter: int = 4
    updates_per_iter: int = 16
    batch_size: int = 64
    unroll: int = 5  # K
    td_steps: int = 10  # n
    discount: float = 1.0
    learning_rate: float = 1e-3
    weight_decay: float = 1e-5
    replay_capacity: int = 20_000  # positions
    simulations: int = 8  # per self-play move
    search_method: str = "gumbel"
    model: str = "learned"  # self-play search model: "learned" (MuZero) or "simulator" (AlphaZero)
    rollout_depth: int = 0  # simulator only: greedy moves of the true game before the value head judges a leaf
    value_weight: float = 1.0
    reward_weight: float = 1.0
    legal_weight: float = 0.5
    latent: int = 64
    action_latent: int = 32
    hidden: int = 64
    value_scale: float = 10.0
    curriculum: Curriculum = field(default_factory=Curriculum)
    consistency_weight: float = 1.0  # EfficientZero's latent consistency (module docstring); 0 = off
    reanalyse_fraction: float = 0.25  # of each batch's positions searched again with the current network

    @property
    def reanalysed_per_batch(self) -> int:
        return int(round(self.reanalyse_fraction * self.batch_size))

    def search_config(self) -> SearchConfig:
        return SearchConfig(simulations=self.simulations, method=self.search_method, discount=self.discount,
                            root_noise=self.search_method == "puct", temperature=1.0 if self.search_method == "puct"
                            else 0.0)

    def reanalyse_search_config(self) -> SearchConfig:
        """Self-play's search without its noise: the fresh target depends on the weights only."""
        return SearchConfig(simulations=self.simulations, method=self.search_method, discount=self.discount,
                            root_noise=False, temperature=0.0, gumbel_scale=0.0)

    def as_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "TrainConfig":
        d = dict(d)
        d["curriculum"] = Curriculum(**d.get("curriculum", {}))
        # Saved before consistency and reanalyse existed: that run trained without them, so it resumes without them.
        d.setdefault("consistency_weight", 0.0)
        d.setdefault("reanalyse_fraction", 0.0)
        return TrainConfig(**d)


@dataclass
class TrainState:
    """Everything a resumed run needs; see :mod:`mallocgame.search.muzero.checkpoint`."""

    config: TrainConfig
    net: MuZeroNet
    optimizer: torch.optim.Optimizer
    rng: np.random.Generator
    replay: ReplayBuffer
    game_config: dict
    step: int = 0
    log: list[dict] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {"format": ckpt.FORMAT, "network": self.net.config.as_dict(), "game": dict(self.game_config),
                "model": self.net.state_dict(), "train": self.config.as_dict(),
                "optimizer": self.optimizer.state_dict(), "step": self.step, "rng": self.rng.bit_generator.state,
                "replay": self.replay.compact(), "games": self.replay.total_games, "log": list(self.log),
                "summary": self.log[-1] if self.log else {}}


def configure_torch() -> None:
    """One thread and deterministic kernels: reproducible and polite on a shared machine."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def _optimizer(net: MuZeroNet, config: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.Adam(net.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)


def new_state(config: TrainConfig, seed: int, make_game: Callable[[Recipe], Any], game_config: dict,
              probe: Recipe, init: dict[str, Any] | None = None) -> TrainState:
    """A fresh run: network shapes from the observation of ``make_game(probe)``.

    ``init``: a loaded checkpoint (e.g. a model-only export) whose weights the run starts from
    instead of the seeded initialisation; its network and game config must match this run's.
    """
    dims = obs_dims(make_game(probe).observation())
    net_config = NetworkConfig(dims.obs_dim, dims.action_features, dims.num_actions, config.latent,
                               config.action_latent, config.hidden, config.value_scale)
    net = MuZeroNet(net_config, torch.Generator().manual_seed(seed))
    if init is not None:
        if init.get("features"):
            raise ckpt.CheckpointError(f"init checkpoint reads features {init['features']!r}; self-play reads the plain "
                                       "observation (a network with input features is trained by expert iteration: "
                                       "experiments/train_muzero_expert.py, docs/training.md)")
        try:  # a checkpoint written before a field was added has its default: read it as the network it builds
            same_network = NetworkConfig(**dict(init.get("network", {}))) == net_config
        except TypeError:  # missing or unknown fields: another network
            same_network = False
        if not same_network or dict(init.get("game", {})) != dict(game_config):
            raise ckpt.CheckpointError(f"init checkpoint is another network or game ({init.get('network')}, "
                                       f"{init.get('game')}) than this run's ({net_config.as_dict()}, {game_config})")
        net.load_state_dict(init["model"])
    return TrainState(config=config, net=net, optimizer=_optimizer(net, config), rng=np.random.default_rng(seed),
                      replay=ReplayBuffer(config.replay_capacity, config.td_steps, config.discount),
                      game_config=dict(game_config))


def resume_state(payload: dict[str, Any], make_game: Callable[[Recipe], Any]) -> TrainState:
    """The :class:`TrainState` saved in a training checkpoint (replays stored games to rebuild observations)."""
    if "train" not in payload or "optimizer" not in payload:
        raise ckpt.CheckpointError("checkpoint has no training state (a model-only export cannot be resumed)")
    config = TrainConfig.from_dict(payload["train"])
    net = ckpt.network_from(payload).train()
    optimizer = _optimizer(net, config)
    optimizer.load_state_dict(payload["optimizer"])
    rng = np.random.default_rng()
    rng.bit_generator.state = payload["rng"]
    replay = ReplayBuffer(config.replay_capacity, config.td_steps, config.discount)
    for data in payload["replay"]:
        replay.add(rebuild(data, make_game))
    replay.total_games = int(payload.get("games", replay.total_games))
    return TrainState(config=config, net=net, optimizer=optimizer, rng=rng, replay=replay,
                      game_config=dict(payload["game"]), step=int(payload["step"]), log=list(payload.get("log", [])))


def resume(path: str) -> TrainState:
    """The training state saved in the checkpoint at ``path``, ready for :func:`train` (``mallocgame train
    --resume``). Raises :class:`~mallocgame.search.muzero.checkpoint.CheckpointError` (one line) for a missing,
    foreign or model-only file."""
    payload = ckpt.load(path)
    if "game" not in payload:
        raise ckpt.CheckpointError(f"{path}: checkpoint has no game config")
    return resume_state(payload, game_factory(payload["game"]))


def _scale_grad(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor + x.detach() * (1 - factor)


def loss(net: MuZeroNet, batch: Batch, config: TrainConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The MuZero loss of one batch (module docstring) and its parts, per position."""
    t = {k: torch.from_numpy(v) for k, v in batch.__dict__.items()}
    scale = net.config.value_scale
    K = t["played"].shape[1]
    state, emb = net.initial(t["vector"], t["actions"], t["mask"])
    parts = {"policy": 0.0, "value": 0.0, "reward": 0.0, "legal": 0.0, "consistency": 0.0}
    total = torch.zeros(())
    reward = torch.zeros(())  # set by the dynamics step before it is first used (k = 1)
    B = t["vector"].shape[0]
    targets = consistency_targets(net, t) if config.consistency_weight > 0 and K > 0 else None
    for k in range(K + 1):
        weight = 1.0 if k == 0 else 1.0 / K
        logits, value, legal = net.predict(state, emb)
        valid = t["valid"][:, k]
        mask = t["target_mask"][:, k]
        log_p = F.log_softmax(logits.masked_fill(~mask, -1e9), -1)
        policy = -(t["target_policy"][:, k] * log_p).sum(-1) * valid
        v = (value - scale * t["target_value"][:, k]) ** 2
        lg = F.binary_cross_entropy_with_logits(legal, mask.float(), reduction="none").mean(-1) * valid
        step_loss = policy.sum() + config.value_weight * v.sum() + config.legal_weight * lg.sum()
        parts["policy"] += float(policy.detach().sum()) * weight
        parts["value"] += float(v.detach().sum()) * weight
        parts["legal"] += float(lg.detach().sum()) * weight
        if k > 0:
            r = (reward - scale * t["target_reward"][:, k]) ** 2
            step_loss = step_loss + config.reward_weight * r.sum()
            parts["reward"] += float(r.detach().sum()) * weight
        total = total + weight * step_loss
        if k < K:
            state, emb, reward = net.recurrent(state, emb, t["played"][:, k])
            state, emb = _scale_grad(state, 0.5), _scale_grad(emb, 0.5)
            if targets is not None:
                c = consistency_loss(state, emb, targets[0][:, k], targets[1][:, k], t["valid"][:, k + 1])
                total = total + (config.consistency_weight / K) * c.sum()
                parts["consistency"] += float(c.detach().sum()) / K
    return total / B, {k: v / B for k, v in parts.items()}


def consistency_targets(net: MuZeroNet, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``h`` of the real observations at steps 1..K, without gradient: ``([B, K, L], [B, K, A, d])``."""
    nv, na, nm = t["next_vector"], t["next_actions"], t["next_mask"]
    B, K, A = nm.shape
    with torch.no_grad():
        s, e = net.initial(nv.reshape(B * K, -1), na.reshape(B * K, A, -1), nm.reshape(B * K, A))
    return s.reshape(B, K, -1), e.reshape(B, K, A, -1)


def consistency_loss(state: torch.Tensor, emb: torch.Tensor, target_state: torch.Tensor, target_emb: torch.Tensor,
                     valid: torch.Tensor) -> torch.Tensor:
    """Per position ``[B]``: ``1 - cos`` of the dynamics' latent and the target, mean of the state part and of
    the per-slot embeddings, times ``valid``. The targets are detached (stop-gradient)."""
    cs = F.cosine_similarity(state, target_state.detach(), dim=-1, eps=1e-8)
    ce = F.cosine_similarity(emb, target_emb.detach(), dim=-1, eps=1e-8).mean(-1)
    return (1.0 - 0.5 * (cs + ce)) * valid


def self_play(state: TrainState, make_game: Callable[[Recipe], Any]) -> dict[str, float]:
    """Play ``games_per_iter`` games with the current network; returns mean return, return / greedy's, moves."""
    cfg = state.config
    agent = Agent(state.net, cfg.search_config(), cfg.model, cfg.rollout_depth)
    played = []
    for _ in range(cfg.games_per_iter):
        recipe = cfg.curriculum.sample(state.rng)
        game = make_game(recipe)
        greedy = greedy_return(game.clone())
        played.append((play_game(game, agent, state.rng, recipe), greedy))
    return record_games(state, played)


def record_games(state: TrainState, played: list) -> dict[str, float]:
    """Add the ``(trajectory, greedy return)`` pairs to the replay buffer, in order, and put the
    network back in training mode; returns mean return, mean return / greedy's, moves."""
    returns, ratios, moves = [], [], 0
    for traj, greedy in played:
        state.replay.add(traj)
        returns.append(float(traj.rewards.sum()))
        ratios.append(returns[-1] / greedy if greedy > 0 else 1.0)
        moves += len(traj)
    state.net.train()
    return {"selfplay_return": float(np.mean(returns)), "vs_greedy": float(np.mean(ratios)), "moves": moves}


def greedy_return(game: Any) -> float:
    """Return of the game's own greedy policy from ``game`` (consumed); the yardstick in the logs."""
    while not game.done:
        game.step(game.greedy_action())
    return float(game.total_reward())


def tune(net: MuZeroNet, recipes: list[Recipe], make_game: Callable[[Recipe], Any]) -> dict[str, float]:
    """The network on the tuning ``recipes``, without search: each game played to the end by the policy's most
    likely legal move. Returns ``tune_vs_greedy`` (mean return / the game's greedy return), ``tune_value_mae``
    (mean absolute error of the value head against the return still to come at each position of those games: returns
    the network never trained on) and ``tune_value_base`` (the same error of predicting 0, the yardstick).
    Uses no random numbers, so training runs with and without it are the same run."""
    evaluator = NetworkEvaluator(net)
    ratios, errors, base = [], [], []
    for recipe in recipes:
        game = make_game(recipe)
        greedy = greedy_return(game.clone())
        values, rewards = [], []
        while not game.done:
            obs = obs_arrays(game.observation())
            _, logits, value, _ = evaluator.initial(obs)
            values.append(float(value))
            rewards.append(float(game.step(int(np.argmax(np.where(obs.mask, logits, -np.inf))))))
        to_come = np.cumsum(np.asarray(rewards, np.float64)[::-1])[::-1]
        errors.append(float(np.mean(np.abs(np.asarray(values) - to_come))) if rewards else 0.0)
        base.append(float(np.mean(np.abs(to_come))) if rewards else 0.0)
        total = float(game.total_reward())
        ratios.append(total / greedy if greedy > 0 else 1.0)
    return {"tune_vs_greedy": float(np.mean(ratios)), "tune_value_mae": float(np.mean(errors)),
            "tune_value_base": float(np.mean(base))}


def best_tuned(log: list[dict]) -> float | None:
    """The best ``tune_vs_greedy`` in a training log (None before the first tuning)."""
    scores = [e["tune_vs_greedy"] for e in log if "tune_vs_greedy" in e]
    return max(scores) if scores else None


def best_path(checkpoint_path: str) -> str:
    """Where :func:`train` keeps the model-only copy of the checkpoint best on the tuning recipes."""
    root, ext = os.path.splitext(checkpoint_path)
    return f"{root}.best{ext or '.pt'}"


def train(state: TrainState, until_step: int, make_game: Callable[[Recipe], Any], *,
          checkpoint_path: str | None = None, checkpoint_every: int = 0, deadline: float | None = None,
          on_log: Callable[[dict], None] | None = None,
          play: Callable[[TrainState, Callable[[Recipe], Any]], dict] | None = None,
          tuning: list[Recipe] | None = None, tune_every: int = 0) -> TrainState:
    """Train until ``state.step == until_step`` (or ``deadline``, checked between iterations).

    Saves to ``checkpoint_path`` every ``checkpoint_every`` iterations and at the end. ``play``
    replaces :func:`self_play` (``mallocgame.search.muzero.distributed.RaySelfPlay``: the games on Ray actors).
    Every ``tune_every`` iterations the network plays the ``tuning`` recipes (:func:`tune`; its figures join
    that iteration's log entry) and, when it is the best so far there, a model-only copy goes to
    :func:`best_path` of ``checkpoint_path``: checkpoints are chosen on the tuning recipes only.
    """
    configure_torch()
    cfg = state.config
    t0 = time.monotonic()
    acc: dict[str, float] = {}
    played: dict[str, float] = {}
    state.net.train()
    while state.step < until_step:
        if state.step % cfg.updates_per_iter == 0:
            if deadline is not None and time.monotonic() >= deadline:
                break
            state.net.eval()
            played = (play or self_play)(state, make_game)
            acc = {}
        positions = state.replay.sample_positions(state.rng, cfg.batch_size)
        if cfg.reanalysed_per_batch > 0:
            reanalyse(state, positions[:cfg.reanalysed_per_batch], make_game)
        batch = state.replay.batch(positions, cfg.unroll)
        total, parts = loss(state.net, batch, cfg)
        state.optimizer.zero_grad()
        total.backward()
        state.optimizer.step()
        state.step += 1
        for k, v in parts.items():
            acc[k] = acc.get(k, 0.0) + v / cfg.updates_per_iter
        if state.step % cfg.updates_per_iter == 0:
            entry = {"step": state.step, "games": state.replay.total_games, "positions": state.replay.positions,
                     **{k: round(v, 5) for k, v in played.items()}, **{k: round(v, 5) for k, v in acc.items()},
                     "seconds": round(time.monotonic() - t0, 1)}
            iteration = state.step // cfg.updates_per_iter
            if tuning and tune_every and iteration % tune_every == 0:
                best = best_tuned(state.log)
                state.net.eval()
                entry.update({k: round(v, 5) for k, v in tune(state.net, tuning, make_game).items()})
                state.net.train()
                if checkpoint_path and (best is None or entry["tune_vs_greedy"] > best):
                    ckpt.atomic_save(ckpt.model_only(
                        {"format": ckpt.FORMAT, "network": state.net.config.as_dict(), "game": dict(state.game_config),
                         "model": state.net.state_dict(), "step": state.step, "games": state.replay.total_games,
                         "summary": entry}), best_path(checkpoint_path))
                    entry["best"] = 1
            state.log.append(entry)
            if on_log:
                on_log(entry)
            if checkpoint_path and checkpoint_every and iteration % checkpoint_every == 0:
                ckpt.atomic_save(state.payload(), checkpoint_path)
    if checkpoint_path:
        ckpt.atomic_save(state.payload(), checkpoint_path)
    return state


def reanalyse(state: TrainState, positions: list[tuple[int, int]], make_game: Callable[[Recipe], Any]) -> int:
    """Search the stored ``positions`` again with the current network and write the fresh policy targets
    and root values back into the replay buffer (module docstring). Returns the positions searched."""
    cfg = state.config
    agent = Agent(state.net, cfg.reanalyse_search_config(), cfg.model, cfg.rollout_depth)
    rng = np.random.default_rng(0)  # unused: the reanalyse search has no noise
    done = set()
    fresh: dict[Recipe, Any] = {}  # a program of thousands of buffers takes seconds to build: once per batch
    for i, t in positions:
        if (i, t) in done:
            continue
        done.add((i, t))
        traj = state.replay.trajectories[i]
        obs = ObsArrays(traj.vectors[t], traj.action_feats[t], traj.masks[t])
        game = None
        if cfg.model == "simulator":  # the true game at move t: replay the recipe's first t moves
            if traj.recipe not in fresh:
                fresh[traj.recipe] = make_game(traj.recipe)
            game = fresh[traj.recipe].clone()
            for a in traj.actions[:t]:
                game.step(int(a))
        result = agent.search(game, rng, obs=obs)
        state.replay.set_targets(i, t, result.policy, result.value)
    return len(done)


def describe(state: TrainState) -> str:
    return (f"network: {parameter_count(state.net)} parameters, {state.net.config}; "
            f"game: {state.game_config}")


__all__ = ["TrainConfig", "TrainState", "new_state", "resume_state", "train", "loss", "self_play", "reanalyse", "tune",
           "consistency_loss"]
