"""Expert iteration for the guided UCT search: training that matches play.

One game at a time: draw a training problem from the curriculum, let the student (the deployed
guided UCT with the current network) play it, have a teacher (a search from the student's
states, or a stronger solver's answer) give policy targets, reanalyse earlier states with the
teacher as it is now, and train the policy (and optionally value and auxiliary heads) on a
replay of the labelled states; checkpoints resume. Step by step, with the targets and the
heads: docs/training.md, "Expert iteration".
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from mallocgame.runtime.budget import Budget
from mallocgame.search.game import Game, GameConfig, observation_dims
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import ANSWER_ORDER
from mallocgame.search.muzero import checkpoint as ckpt
from mallocgame.search.muzero import encoder
from mallocgame.search.muzero.graph_encoder import base_features, csr_adjacency
from mallocgame.search.muzero.guide import NetworkPrior, RelaxationPrior, input_vector
from mallocgame.search.muzero.inference import NumpyNet
from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig, sparse_adjacency
from mallocgame.search.muzero.problems import Curriculum, Recipe, build
from mallocgame.search.uct import (
    GUIDED_RULES,
    PREFETCH_K,
    Episode,
    MCTSConfig,
    Node,
    UCTSearch,
    answer_start,
    play_greedy,
)

if TYPE_CHECKING:
    from mallocgame.search.uct import Episode

FORMAT = ckpt.FORMAT
TEACHER_PRIORS = ("uniform", "relaxation", "network")
TEACHER_TARGETS = ("visits", "best", "mix")
MODES = ("map", "prefetch")
#: The buffer orders of map mode's fixed-order game a run trains in: greedy-xla's, or the order of the best fallback
#: answer, the game the solvers' ``start="answer"`` plays (:func:`mallocgame.search.uct.answer_start`).
ORDERS = ("xla", ANSWER_ORDER)
#: The time limit of the request whose fallback answers give the answer's order (the solvers' usual limit).
ANSWER_SECONDS = 10.0
#: The game each mode trains on: map mode's fixed-order game in greedy-xla's order (``default.pt``), and the
#: prefetch game exactly as the ``muzero`` solver plays it (``solvers/muzero.py``: k = PREFETCH_K per copy window,
#: two windows, greedy-xla's order), so a checkpoint's ``game`` fields match and the solver uses it.
GAME_FIELDS = {"map": {"variant": "order", "k": 16, "order": "xla"},
               "prefetch": {"variant": "prefetch", "k": PREFETCH_K, "order": "xla", "windows": 2}}


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
    features: str = ""  # the network's input: "" = the game's observation vector, "encoder/1|2|3" = search.muzero.encoder
    exploration: float = 1.0  # the pUCT constant of the student's search (the solver's ``exploration``)
    teacher_prior: str = "uniform"  # "uniform": plain UCT teaches; "relaxation": pUCT on search.muzero.guide.RelaxationPrior
    teacher: str = "search"  # "search": the teacher search above; "answer": a solver's answer (``teacher_answer``)
    teacher_exploration: float | None = None  # the teacher search's pUCT constant (None: ``exploration``)
    realistic_share: float = 0.0  # of the curriculum: model programs of random architecture
    xla_share: float = 0.0  # of the curriculum, drawn first: XLA-compiled JAX programs of random architecture
    torch_share: float = 0.0  # of the curriculum, drawn next: torch-exported programs of random architecture
    reanalyse_per_game: int = 0  # earlier labelled states relabelled by the current teacher, per game
    value_weight: float = 0.0  # loss weight of the value target relative to the greedy rollout
    aux_weight: float = 0.0  # loss weight of the auxiliary target (ends in fast memory)
    teacher_target: str = "visits"  # "visits": the search's root visits; "best": the move of its best episode;
    #                                 "mix": the mean of the two
    mode: str = "map"  # "prefetch": the curriculum's programs in prefetch mode, played in the prefetch game
    selection: str = "puct"  # the student's selection rule (search/uct.py, "Guided selection"; the solver's default
    #                          is "untried-uct")
    prior_power: float = 1.0  # with selection "untried-uct": the power of k * p(a) (the solver's default is 2)
    commit: str = "visits"  # the student's commitment rule (the solver commits "max" in prefetch mode)
    order: str | None = None  # map mode's game: "xla" (greedy-xla's order) or "answer" (start="answer"'s game,
    #                           ORDERS); None: the initial checkpoint's (fresh weights: greedy-xla's)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r} (known: {', '.join(MODES)})")
        if self.selection not in GUIDED_RULES:
            raise ValueError(f"unknown selection rule {self.selection!r} (known: {', '.join(GUIDED_RULES)})")
        if self.commit not in ("visits", "max"):
            raise ValueError(f"unknown commit rule {self.commit!r} (known: visits, max)")
        if self.mode == "prefetch":
            # the prefetch game needs programs with ops (random intervals have none); the answer teacher and
            # reanalyse rebuild states from offsets, which only the fixed-order game of map mode has
            if self.layered_share < 1.0 and self.realistic_share < 1.0:
                raise ValueError("mode prefetch: layered-share must be 1 (random intervals have no ops)")
            if self.reanalyse_per_game > 0 or self.features:
                raise ValueError("mode prefetch: no reanalyse, the plain observation (features '')")
        if self.order is not None and (self.order not in ORDERS or self.mode != "map"):
            raise ValueError(f"order {self.order!r}: map mode's game plays one of {', '.join(ORDERS)}")
        if self.teacher not in ("search", "answer"):
            raise ValueError(f"unknown teacher {self.teacher!r} (known: search, answer)")
        if self.teacher_target not in TEACHER_TARGETS:
            raise ValueError(f"unknown teacher target {self.teacher_target!r} (known: {', '.join(TEACHER_TARGETS)})")
        if self.teacher_prior not in TEACHER_PRIORS:
            raise ValueError(f"unknown teacher prior {self.teacher_prior!r} (known: {', '.join(TEACHER_PRIORS)})")
        for name in ("layered_share", "realistic_share", "xla_share", "torch_share", "min_capacity", "max_capacity"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")
        if not 1 <= self.min_size <= self.max_size or self.min_capacity > self.max_capacity:
            raise ValueError(f"sizes {self.min_size}..{self.max_size} and capacities {self.min_capacity}.."
                             f"{self.max_capacity} must be non-empty ranges")
        for name in ("student_simulations", "teacher_simulations", "batch_size", "replay_capacity"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        for name in ("states_per_game", "updates_per_game", "reanalyse_per_game", "value_weight", "aux_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")

    @property
    def extra_targets(self) -> bool:
        return self.value_weight > 0 or self.aux_weight > 0


class _State:
    """Everything a run needs to continue: network, optimiser, generator, replay, counters, log."""

    def __init__(self, config: ExpertConfig, net: MuZeroNet, game_fields: dict, rng: np.random.Generator,
                 teacher_answer: "TeacherAnswer | None" = None):
        if config.teacher == "answer" and teacher_answer is None:
            raise ValueError("teacher 'answer' needs a teacher_answer function (problem, hardware) -> offsets")
        self.config, self.net, self.game_fields, self.rng = config, net, dict(game_fields), rng
        self.teacher_answer = teacher_answer
        self.opt = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
        self.games = self.step = 0
        self.seconds = 0.0
        self.replay: dict[str, list[np.ndarray]] = {key: [] for key in REPLAY_KEYS}
        # features encoder/3: per game, the problem's graph the replay's states refer to (:func:`_graph_record`)
        self.graphs: dict[int, dict[str, np.ndarray]] = {}
        self.adjacency: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # its CSR, built when first trained on
        self.origins: list[Origin | None] = []  # per replay entry, where it was reached (for reanalyse)
        self.log: list[dict] = []

    def payload(self) -> dict[str, Any]:
        r = {k: torch.from_numpy(np.stack(v)) if v else torch.zeros(0) for k, v in self.replay.items()}
        return {"format": FORMAT, "network": self.net.config.as_dict(), "game": dict(self.game_fields),
                "origins": _pack_origins(self.origins),
                "features": self.config.features,
                "model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
                "expert": {"config": asdict(self.config), "games": self.games, "step": self.step,
                           "seconds": self.seconds, "rng": json.dumps(self.rng.bit_generator.state),
                           "log": json.dumps(self.log)},
                "replay": r, "step": self.step, "games": self.games,
                "graphs": {str(g): {k: torch.from_numpy(v) for k, v in rec.items()} for g, rec in self.graphs.items()},
                "summary": self.log[-1] if self.log else {}}


REPLAY_KEYS = ("vector", "actions", "mask", "target", "value", "aux", "graph", "buffer", "steps")
# the last three place an encoder/3 state in its problem's graph: the game (key of ``graphs``), the current
# buffer and the decisions made (the undecided buffers are those later in the order); -1, 0, 0 otherwise
_INTEGER_KEYS = ("graph", "buffer", "steps")


@dataclass(frozen=True)
class Origin:
    """Where a labelled state was reached: the problem's recipe and the offsets ``[n]`` decided so far
    (-1 slow or undecided), enough to rebuild the state in the fixed-order game (:func:`rebuild_state`)."""

    recipe: "Recipe"
    offsets: np.ndarray
    steps: int


def _pack_origins(origins: list) -> dict:
    known = [o for o in origins if o is not None]
    entries = [None if o is None else [list(dataclasses.astuple(o.recipe)), o.steps, len(o.offsets)] for o in origins]
    return {"recipes": json.dumps(entries),
            "offsets": torch.from_numpy(np.concatenate([o.offsets for o in known]) if known else np.zeros(0, np.int64))}


def _unpack_origins(packed: dict | None, count: int) -> list:
    if not packed:  # a checkpoint from before reanalyse
        return [None] * count
    flat, at, out = packed["offsets"].numpy(), 0, []
    for item in json.loads(packed["recipes"]):
        if item is None:
            out.append(None)
            continue
        recipe, steps, n = item
        out.append(Origin(Recipe(*recipe), flat[at:at + n].astype(np.int64), int(steps)))
        at += n
    return out


def _curriculum(config: ExpertConfig):
    return Curriculum(min_size=config.min_size, max_size=config.max_size, layered_share=config.layered_share,
                      min_capacity_fraction=config.min_capacity, max_capacity_fraction=config.max_capacity,
                      realistic_share=config.realistic_share, xla_share=config.xla_share,
                      torch_share=config.torch_share)


def teacher_search(game, simulations: int, rng: np.random.Generator, prior: str = "uniform",
                   exploration: float = 1.0, network=None) -> tuple[np.ndarray, "Episode"]:
    """The teacher's search with ``simulations`` from ``game`` (not changed): plain UCT
    (``prior="uniform"``), or pUCT with ``exploration`` on the relaxation prior or on ``network``'s
    (a :class:`~mallocgame.search.muzero.inference.NumpyNet`, ``prior="network"``).

    Returns the root visit distribution ``[num_actions]`` and the best complete episode it saw."""
    target, best, _ = _teacher_root(game, simulations, rng, prior, exploration, network)
    return target, best


def _teacher_root(game, simulations: int, rng: np.random.Generator, prior: str = "uniform",
                  exploration: float = 1.0, network=None) -> tuple[np.ndarray, "Episode", Node]:
    """:func:`teacher_search`, and the root of its tree."""
    if prior == "relaxation":
        search = UCTSearch(MCTSConfig(simulations=simulations, exploration=exploration), rng, prior=RelaxationPrior())
    elif prior == "network":
        if network is None:
            raise ValueError("teacher prior 'network' needs the network")
        search = UCTSearch(MCTSConfig(simulations=simulations, exploration=exploration), rng,
                           prior=NetworkPrior(network))
    elif prior == "uniform":
        search = UCTSearch(MCTSConfig(simulations=simulations), rng)
    else:
        raise ValueError(f"unknown teacher prior {prior!r} (known: {', '.join(TEACHER_PRIORS)})")
    root, best = Node(), Episode(-math.inf, np.zeros(0, np.int64), "")
    for _ in range(simulations):
        best = search.simulate(root, game, math.inf, best)
    target = np.zeros(game.num_actions, np.float32)
    for a, child in root.children.items():
        target[a] = child.visits
    return target / target.sum(), best, root


def best_root_move(game, root: Node) -> np.ndarray:
    """One-hot ``[num_actions]``: the root move whose subtree holds the best return the search saw (the first move
    of its best complete episode; the move the solver commits with ``commit="max"``, as in prefetch mode)."""
    target = np.zeros(game.num_actions, np.float32)
    target[max(root.children.items(), key=lambda kv: (kv[1].reward + kv[1].best, kv[1].visits))[0]] = 1.0
    return target


def relative_value(best_value: float, game, greedy_total: float) -> float:
    """The value target relative to the greedy rollout: ``100 x (best_value - greedy rollout from
    game) / greedy_total`` (percent of the whole problem's greedy episode; ``game`` not changed)."""
    rollout = game.clone()
    play_greedy(rollout)
    return 100.0 * (best_value - rollout.total_reward()) / (greedy_total if greedy_total > 0 else 1.0)


def rebuild_state(origin: Origin, game_fields: dict, start=None):
    """The fixed-order game of ``origin.recipe`` after its first ``origin.steps`` decisions,
    replayed by following ``origin.offsets`` (:func:`answer_policy`); ``start``: that game before
    any decision, if the caller built it (it is not changed)."""
    if start is None:
        start = Game(*build(origin.recipe), GameConfig(**game_fields))
    game = start.clone()
    while game.steps < origin.steps:
        game.step(int(np.argmax(answer_policy(game, origin.offsets))))
    return game


#: ``teacher_answer(problem, hardware) -> answer``: a stronger solver's answer, given by the caller (search may not
#: import solvers or hybrid): in map mode offsets int64 ``[n]`` (-1 slow; experiments/train_muzero_expert.py passes
#: select-pack's), in prefetch mode the answer's fast intervals (``FastInterval`` rows;
#: experiments/train_prefetch_net.py passes msa's or the portfolio's).
TeacherAnswer = Callable[[Any, Any], np.ndarray]


def stays_by_buffer(intervals) -> dict[int, list]:
    """A prefetch answer's fast intervals grouped by buffer index, in time order (what
    :meth:`~mallocgame.search.game_prefetch.PrefetchGame.answer_action` reads)."""
    stays: dict[int, list] = {}
    for iv in sorted(intervals, key=lambda iv: (iv.buffer, iv.start)):
        stays.setdefault(int(iv.buffer), []).append(iv)
    return stays


def answer_policy(game, answer) -> np.ndarray:
    """One-hot target ``[num_actions]``: the move of ``game``'s current decision that follows ``answer``.

    The fixed-order game of map mode (``answer`` offsets ``[n]``, -1 slow): slow where the answer has
    the buffer slow; else the offered hole at the answer's offset, failing that the greedy's hole (the
    answer's layout differs from the game's so far), and slow when nothing fits. The prefetch game
    (``answer`` from :func:`stays_by_buffer`): :meth:`PrefetchGame.answer_action` at the game's best fit, not
    the answer's offsets (followed at its offsets, the portfolio's answer ends below the game's greedy playout,
    at the best fit above it: experiments/results/prefetch_teacher_follow.md)."""
    target = np.zeros(game.num_actions, np.float32)
    if isinstance(answer, dict):
        target[game.answer_action(answer, follow_offsets=False)] = 1.0
        return target
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
    c = state.config
    recipe = _curriculum(c).sample(state.rng)
    problem, hw = build(recipe)
    if c.mode == "prefetch":
        problem = problem.replace(mode="prefetch")
    game_cfg = GameConfig(**state.game_fields)
    data = GameData(problem, hw) if c.mode == "map" else None  # the prefetch game builds (and caches) its own
    if game_cfg.order == ANSWER_ORDER:  # the solver's start="answer": its fallback answers set the order on data
        game_cfg, data, _ = answer_start(problem, hw, game_cfg, data, time_limit=ANSWER_SECONDS)
    greedy = Game(problem, hw, game_cfg, data=data)
    play_greedy(greedy)
    answer = state.teacher_answer(problem, hw) if c.teacher == "answer" else None
    if answer is not None:
        answer = np.asarray(answer, np.int64) if c.mode == "map" else stays_by_buffer(answer)
    numpy_net = NumpyNet.from_torch(state.net, c.features)
    prior = NetworkPrior(numpy_net)
    reached: list = []
    student = UCTSearch(MCTSConfig(simulations=c.student_simulations, exploration=c.exploration, guided=c.selection,
                                   prior_power=c.prior_power, commit=c.commit),
                        np.random.default_rng(int(state.rng.integers(2**63))), prior=prior)
    game = Game(problem, hw, game_cfg, data=data)
    result = student.run(game, budget=Budget.start(math.inf), before_move=lambda g: reached.append(g.clone()))
    picks = state.rng.choice(len(reached), size=min(c.states_per_game, len(reached)), replace=False) \
        if reached else []
    agree = 0
    teacher_rng = np.random.default_rng(int(state.rng.integers(2**63)))
    base = greedy.total_reward()
    for j in sorted(int(p) for p in picks):
        g = reached[j]
        if answer is not None:
            target, value, aux = answer_policy(g, answer), 0.0, 0.0
        else:
            target, value, aux = _label(state, g, teacher_rng, numpy_net, base)
        obs = g.observation()
        legal = np.flatnonzero(obs.mask)
        agree += int(legal[np.argmax(prior(g, legal))] == int(np.argmax(target)))
        _remember(state, g, obs, target, value, aux,
                  Origin(recipe, g.offsets(), g.steps))
    n = problem.n if recipe.kind in ("realistic", "xla") else recipe.n  # a model program's n is only a cap
    return {"game": state.games + 1, "kind": recipe.kind, "n": n, "capacity": recipe.capacity_fraction,
            "labelled": len(picks), "agree": agree, "vs_greedy": result.best.value / base if base > 0 else 1.0,
            "network_calls": prior.calls}


def _label(state: _State, game, rng: np.random.Generator, numpy_net, greedy_total: float):
    """The teacher's targets at ``game``: policy ``[num_actions]``, relative value, auxiliary (0/1)."""
    c = state.config
    target, best, root = _teacher_root(game, c.teacher_simulations, rng, c.teacher_prior,
                                       c.exploration if c.teacher_exploration is None else c.teacher_exploration,
                                       network=numpy_net if c.teacher_prior == "network" else None)
    if c.teacher_target != "visits":  # the move of the best complete episode the teacher saw (hindsight)
        # the fixed-order game follows the episode's offsets; the prefetch game's episode is rows of intervals,
        # so there it is the root move whose subtree holds that episode's return
        best_move = answer_policy(game, best.offsets) if c.mode == "map" else best_root_move(game, root)
        target = best_move if c.teacher_target == "best" else 0.5 * (target + best_move)
    if not c.extra_targets:  # the greedy rollout costs a game's length: only when trained on
        return target, 0.0, 0.0
    return target, relative_value(best.value, game, greedy_total), float(best.offsets[game.current] >= 0)


def _graph_record(data, order: str) -> dict[str, np.ndarray]:
    """What training needs of a problem's graph for features ``encoder/3``: the graph encoder's inputs ``x``
    (:func:`mallocgame.search.muzero.graph_encoder.base_features`) and ``weight`` (size / scale), the live ranges
    (the interference graph's edges are rebuilt from them) and each buffer's place in the game's order."""
    x, _ = base_features(data)
    return {"x": x.astype(np.float32), "weight": (data.size / data.scale).astype(np.float32),
            "start": np.asarray(data.start, np.int64), "end": np.asarray(data.end, np.int64),
            "position": np.asarray(data.orders[order].position, np.int64)}


def _remember(state: _State, game, obs, target, value: float, aux: float, origin: Origin) -> None:
    c = state.config
    where = (-1, 0, 0)
    if c.features == encoder.NAME_GRAPH:  # the learned encodings are filled in at each training step
        vector = encoder.static_vector(game, obs)
        graph = state.games + 1
        if graph not in state.graphs:
            state.graphs[graph] = _graph_record(game.data, game.config.order)
        where = (graph, game.current, game.steps)
    else:
        vector = input_vector(game, obs, c.features)
    for key, item in (("vector", vector), ("actions", obs.actions), ("mask", obs.mask), ("target", target),
                      ("value", np.float32(value)), ("aux", np.float32(aux))) + tuple(zip(_INTEGER_KEYS, where)):
        dtype = bool if key == "mask" else np.int64 if key in _INTEGER_KEYS else np.float32
        state.replay[key].append(np.asarray(item, dtype))
    state.origins.append(origin if c.reanalyse_per_game > 0 else None)
    for key in state.replay:
        del state.replay[key][:-c.replay_capacity]
    del state.origins[:-c.replay_capacity]
    if state.graphs and len(state.graphs) > 1:  # graphs no state refers to any more go
        kept = {int(g) for g in state.replay["graph"]}
        for g in [g for g in state.graphs if g not in kept]:
            del state.graphs[g]
            state.adjacency.pop(g, None)


def learned_inputs(state: _State, idx: np.ndarray, vector: torch.Tensor) -> torch.Tensor:
    """The ``encoder/3`` input vectors of replay entries ``idx`` (stored ``vector [B, D]`` with zeros in the learned
    slots): the graph encoder runs over the block-diagonal union of their problems' graphs (one sparse matmul per
    round) and its output fills the slots, the current buffer's row and the mean over the undecided buffers that
    overlap it (:func:`mallocgame.search.muzero.encoder.learned_slots`); differentiable in the encoder's weights."""
    graphs = [int(state.replay["graph"][i]) for i in idx]
    offset, xs, weights, indptrs, indices = {}, [], [], [np.zeros(1, np.int64)], []
    total = edges = 0
    for g in sorted(set(graphs)):
        record = state.graphs[g]
        if g not in state.adjacency:
            state.adjacency[g] = csr_adjacency(record["start"], record["end"])
        indptr, near = state.adjacency[g]
        offset[g] = total
        xs.append(record["x"]), weights.append(record["weight"])
        indptrs.append(indptr[1:] + edges), indices.append(near + total)
        total += len(record["x"])
        edges += len(near)
    adjacency = sparse_adjacency(np.concatenate(indptrs), np.concatenate(indices), total)
    h = state.net.graph_encoder(torch.from_numpy(np.concatenate(xs)), adjacency,
                                torch.from_numpy(np.concatenate(weights)))
    current, rows, cols, vals = [], [], [], []
    for b, (g, i) in enumerate(zip(graphs, idx)):
        cur, steps = int(state.replay["buffer"][i]), int(state.replay["steps"][i])
        indptr, near = state.adjacency[g]
        around = near[indptr[cur]:indptr[cur + 1]]
        undecided = around[state.graphs[g]["position"][around] > steps]
        current.append(offset[g] + cur)
        rows.extend([b] * len(undecided)), cols.extend((undecided + offset[g]).tolist())
        vals.extend([1.0 / max(len(undecided), 1)] * len(undecided))
    mean = torch.sparse.mm(torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.int64).reshape(2, -1),
                                                   torch.tensor(vals, dtype=torch.float32), (len(idx), total),
                                                   check_invariants=True), h)
    at_current, at_mean = encoder.learned_slots(state.net.config.obs_dim - encoder.extra_inputs(encoder.NAME_GRAPH))
    return torch.cat([vector[:, :at_current.start], h[torch.tensor(current, dtype=torch.int64)],
                      vector[:, at_current.stop:at_mean.start], mean, vector[:, at_mean.stop:]], 1)


def reanalyse(state: _State) -> dict[str, float]:
    """Relabel ``reanalyse_per_game`` earlier states with the teacher as it is now (module docstring,
    step 4); returns how many and the mean total-variation change of their policy targets."""
    c = state.config
    known = [i for i, o in enumerate(state.origins) if o is not None]
    if c.reanalyse_per_game <= 0 or c.teacher != "search" or not known:
        return {}
    picks = state.rng.choice(len(known), size=min(c.reanalyse_per_game, len(known)), replace=False)
    rng = np.random.default_rng(int(state.rng.integers(2**63)))
    numpy_net = NumpyNet.from_torch(state.net, c.features)
    shifts = []
    for p in sorted(int(p) for p in picks):
        i = known[p]
        start = Game(*build(state.origins[i].recipe), GameConfig(**state.game_fields))
        game = rebuild_state(state.origins[i], state.game_fields, start)
        if c.extra_targets:  # the whole problem's greedy episode normalises the value target
            play_greedy(start)
        target, value, aux = _label(state, game, rng, numpy_net, start.total_reward())
        shifts.append(0.5 * float(np.abs(target - state.replay["target"][i]).sum()))
        state.replay["target"][i] = target.astype(np.float32)
        state.replay["value"][i] = np.float32(value)
        state.replay["aux"][i] = np.float32(aux)
    return {"reanalysed": len(shifts), "reanalyse_shift": round(float(np.mean(shifts)), 4)}


def learn(state: _State) -> float:
    """``updates_per_game`` steps on replay batches (policy cross-entropy, plus the value and
    auxiliary terms when weighted); the mean loss."""
    c = state.config
    n = len(state.replay["target"])
    if n == 0:
        return float("nan")
    losses = []
    state.net.train()
    for _ in range(c.updates_per_game):
        idx = state.rng.integers(0, n, size=min(c.batch_size, n))

        def column(key: str) -> torch.Tensor:
            return torch.from_numpy(np.stack([state.replay[key][i] for i in idx]))

        mask, target, vector = column("mask"), column("target"), column("vector")
        if c.features == encoder.NAME_GRAPH:
            vector = learned_inputs(state, idx, vector)
        s, emb = state.net.initial(vector, column("actions"), mask)
        logits, value, _ = state.net.predict(s, emb)
        logp = F.log_softmax(logits.masked_fill(~mask, -1e9), -1)
        loss = -(target * logp).sum(-1).mean()
        if c.value_weight > 0:
            loss = loss + c.value_weight * ((value - column("value")) ** 2).mean()
        if c.aux_weight > 0:
            loss = loss + c.aux_weight * F.binary_cross_entropy_with_logits(state.net.auxiliary(s, emb), column("aux"))
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
    for path in (out, log_path):  # before the games, not at the first save
        if path is not None and not path.parent.is_dir():
            raise ValueError(f"cannot write {path}: directory {path.parent} does not exist")
    torch.set_num_threads(1)
    t0 = time.monotonic()
    last_save = t0
    log_file = open(log_path, "a") if log_path else None
    try:
        while time.monotonic() - t0 < time_limit and (max_games is None or state.games < max_games):
            tg = time.monotonic()
            entry = play_and_label(state)
            entry.update(reanalyse(state))
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
    """A new run writing checkpoints to ``out``; weights start from checkpoint ``init`` if given (its game must be
    of ``config.mode``; fresh weights play :data:`GAME_FIELDS`; ``config.order`` replaces the game's order).
    ``teacher_answer`` gives the targets when ``config.teacher == "answer"``."""
    torch.manual_seed(config.seed)
    if init is not None:
        payload = ckpt.load(init)
        inherited = str(payload.get("features") or "")
        if config.features == encoder.NAME_GRAPH and inherited == encoder.NAME_RELAX:
            net = graph_network_from(payload, aux=config.aux_weight > 0, seed=config.seed)
        elif inherited != config.features:
            raise ckpt.CheckpointError(f"{init}: its network reads features {payload.get('features') or 'plain'!r}, "
                                       f"not {config.features or 'plain'!r}")
        else:
            net = _network(payload, aux=config.aux_weight > 0, seed=config.seed)
        game_fields = dict(payload["game"])
        if (game_fields.get("variant") == "prefetch") != (config.mode == "prefetch"):
            raise ckpt.CheckpointError(f"{init}: its network plays the game {game_fields}, not {config.mode} "
                                       f"mode's {GAME_FIELDS[config.mode]}")
    else:
        game_fields = dict(GAME_FIELDS[config.mode])
        dims = observation_dims(GameConfig(**game_fields))
        extra = encoder.extra_inputs(config.features)
        net = MuZeroNet(NetworkConfig(dims["obs_dim"] + extra, dims["action_features"], dims["num_actions"],
                                      aux=config.aux_weight > 0, **_graph_fields(config.features)),
                        torch.Generator().manual_seed(config.seed)).eval()
    if config.order is not None:  # the run's order, whatever order the initial weights played
        game_fields["order"] = config.order
    if game_fields.get("order") == ANSWER_ORDER and config.reanalyse_per_game > 0:
        # reanalyse rebuilds a state from its recipe in the game's order, which the answer's order is not
        raise ValueError("order answer: no reanalyse")
    state = _State(config, net, game_fields, np.random.default_rng(config.seed), teacher_answer)
    return _loop(state, Path(out), time_limit, Path(log_path) if log_path else None, max_games)


def _graph_fields(features: str) -> dict:
    """The :class:`NetworkConfig` fields of the graph encoder ``features`` needs (two rounds of ``3 x BASE``)."""
    if features != encoder.NAME_GRAPH:
        return {}
    return {"graph_rounds": 2, "graph_inputs": encoder.BASE, "graph_dim": encoder.ENCODING}


def graph_network_from(payload: dict, *, aux: bool, seed: int) -> MuZeroNet:
    """An ``encoder/3`` network that starts as the ``encoder/2`` network of checkpoint ``payload``: its weights (the
    two input vectors have the same layout), and a graph encoder that computes ``encoder/2``'s fixed encoding
    (:meth:`~mallocgame.search.muzero.networks.GraphEncoder.reproduce_fixed_means`), so both give the same policy
    until training moves them; a fresh auxiliary head (seeded) when ``aux`` and it has none."""
    net_config = NetworkConfig(**payload["network"])
    net_config = dataclasses.replace(net_config, aux=net_config.aux or aux, **_graph_fields(encoder.NAME_GRAPH))
    net = MuZeroNet(net_config, torch.Generator().manual_seed(seed))
    missing, unexpected = net.load_state_dict(payload["model"], strict=False)
    if unexpected or any(not k.startswith(("aux_head.", "graph_encoder.")) for k in missing):
        raise ckpt.CheckpointError(f"checkpoint weights do not fit the network: missing {missing}, unexpected {unexpected}")
    net.graph_encoder.reproduce_fixed_means()
    return net.eval()


def _network(payload: dict, *, aux: bool, seed: int) -> MuZeroNet:
    """The checkpoint's network, given a fresh auxiliary head (seeded) when ``aux`` and it has none."""
    net_config = NetworkConfig(**payload["network"])
    if not aux or net_config.aux:
        return ckpt.network_from(payload)
    net = MuZeroNet(dataclasses.replace(net_config, aux=True), torch.Generator().manual_seed(seed))
    missing, unexpected = net.load_state_dict(payload["model"], strict=False)
    if unexpected or any(not k.startswith("aux_head.") for k in missing):
        raise ckpt.CheckpointError(f"checkpoint weights do not fit the network: missing {missing}, unexpected {unexpected}")
    return net.eval()


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
        state.replay[key] = list(tensor.numpy()) if tensor.numel() > 0 else []
    count = len(state.replay["target"])
    for key in ("value", "aux"):  # checkpoints from before these targets
        if len(state.replay[key]) != count:
            state.replay[key] = [np.float32(0.0)] * count
    for key, empty in zip(_INTEGER_KEYS, (-1, 0, 0)):  # checkpoints from before features encoder/3
        if len(state.replay[key]) != count:
            state.replay[key] = [np.int64(empty)] * count
    state.graphs = {int(g): {k: v.numpy() for k, v in rec.items()} for g, rec in payload.get("graphs", {}).items()}
    state.origins = _unpack_origins(payload.get("origins"), count)
    return _loop(state, Path(out or path), time_limit, Path(log_path) if log_path else None, max_games)
