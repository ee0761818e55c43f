"""Tree search over a model of the game: pUCT (MuZero) and Gumbel root selection (Gumbel MuZero).

* pUCT with min-max value normalisation and root Dirichlet noise: Schrittwieser et al.
  2020, appendix B ("Search"); Q values are normalised by the min and max seen in the tree.
* Gumbel: Danihelka et al. 2022, "Policy improvement by planning with Gumbel". At the root,
  sample Gumbel noise g, keep the m actions with the highest ``g + logits`` and split the
  budget over them by sequential halving, ranking by ``g + logits + sigma(q)`` with
  ``sigma(q) = (c_visit + max_b N(b)) * c_scale * q`` on completed, normalised Q values; the
  policy target is ``softmax(logits + sigma(completed q))``. Inside the tree the action
  maximises ``pi'(a) - N(a) / (1 + sum N)`` (deterministic).

The search is written against a :class:`Model` (an object with ``root()`` and
``expand(state, action)``), so the same code plans with the learned MuZero dynamics and
with the true simulator (AlphaZero style); see :mod:`mallocgame.search.muzero.models`. Illegal actions
get zero prior and are never selected at any node (each :class:`Expansion` carries its
mask). All randomness (Dirichlet, Gumbel, action sampling) comes from the
``numpy.random.Generator`` passed in. numpy only; no torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class SearchConfig:
    simulations: int = 16
    method: str = "gumbel"  # "gumbel" | "puct"
    discount: float = 1.0
    # pUCT (MuZero appendix B)
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    root_noise: bool = False
    dirichlet_alpha: float = 0.3
    exploration_fraction: float = 0.25
    temperature: float = 0.0  # pUCT final action: 0 = most visited, else sample N^(1/T)
    # Gumbel MuZero
    max_considered: int = 16
    c_visit: float = 50.0
    c_scale: float = 0.1
    gumbel_scale: float = 1.0  # 0 turns the root Gumbel sampling off (deterministic top-m)
    max_depth: int = 64


@dataclass(frozen=True)
class Expansion:
    """What a model says about a node: ``logits``/``mask`` have shape ``[A]``.

    ``reward`` is that of the transition into this node (0 at the root); ``value`` the
    model's estimate of the return from here (0 when ``terminal``).
    """

    state: Any
    reward: float
    logits: np.ndarray
    value: float
    mask: np.ndarray
    terminal: bool = False


class Model(Protocol):
    def root(self) -> Expansion: ...

    def expand(self, state: Any, action: int) -> Expansion: ...


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one search from the root; arrays have shape ``[A]``.

    ``policy`` is the training target (visit distribution for pUCT, improved policy for
    Gumbel); ``q`` is NaN for unvisited actions; ``value`` the search's root value.
    """

    action: int
    policy: np.ndarray
    visits: np.ndarray
    q: np.ndarray
    value: float
    simulations: int


class Node:
    __slots__ = ("state", "logits", "prior", "mask", "value", "terminal", "visits", "value_sum", "reward",
                 "children")

    def __init__(self, exp: Expansion):
        self.state = exp.state
        self.mask = np.asarray(exp.mask, bool)
        self.logits = np.where(self.mask, np.asarray(exp.logits, np.float64), -np.inf)
        self.prior = _softmax(self.logits)
        self.value = 0.0 if exp.terminal else float(exp.value)
        self.terminal = exp.terminal
        A = self.mask.shape[0]
        self.visits = np.zeros(A, np.int64)
        self.value_sum = np.zeros(A, np.float64)
        self.reward = np.zeros(A, np.float64)
        self.children: dict[int, Node] = {}

    def q(self) -> np.ndarray:
        """Mean return of every action, ``[A]``; NaN where unvisited."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.visits > 0, self.value_sum / np.maximum(self.visits, 1), np.nan)

    def mixed_value(self) -> float:
        """v_mix of Gumbel MuZero (eq. 33): the network value mixed with the visited Q values."""
        n = self.visits.sum()
        if n == 0:
            return self.value
        visited = self.visits > 0
        p = self.prior[visited].sum()
        weighted = (self.prior[visited] * self.q()[visited]).sum() / max(p, 1e-12)
        return (self.value + n * weighted) / (1 + n)


class MinMax:
    """Running min and max of Q values in the tree (MuZero's normalisation)."""

    def __init__(self) -> None:
        self.low, self.high = math.inf, -math.inf

    def update(self, value: float) -> None:
        self.low, self.high = min(self.low, value), max(self.high, value)

    def normalise(self, q: np.ndarray) -> np.ndarray:
        if self.high > self.low:
            return (q - self.low) / (self.high - self.low)
        return np.full_like(q, 0.5)


def _softmax(logits: np.ndarray) -> np.ndarray:
    finite = np.isfinite(logits)
    if not finite.any():
        return np.zeros_like(logits)
    z = np.where(finite, logits - logits[finite].max(), -np.inf)
    e = np.exp(z)
    return e / e.sum()


def considered_visit_schedule(m: int, simulations: int) -> list[int]:
    """For each simulation, the visit count a root action must have to be chosen (sequential halving).

    Phase j keeps ``m / 2^j`` actions and gives each ``floor(n / (ceil(log2 m) * kept))`` (>= 1)
    more visits; actions are visited round-robin so all kept ones stay level.
    """
    if m <= 1:
        return list(range(simulations))
    phases = math.ceil(math.log2(m))
    schedule: list[int] = []
    level, kept = 0, m
    while len(schedule) < simulations:
        per = max(1, simulations // (phases * kept))
        for _ in range(per):
            schedule.extend([level] * kept)
            level += 1
        kept = max(2, kept // 2)
    return schedule[:simulations]


class TreeSearch:
    """One search from a root expansion; call :meth:`run`."""

    def __init__(self, model: Model, config: SearchConfig, rng: np.random.Generator):
        self.model, self.config, self.rng = model, config, rng
        self.minmax = MinMax()

    # -- completed, normalised Q values (Gumbel) -----------------------------------
    def _completed_q(self, node: Node) -> np.ndarray:
        q = node.q()
        completed = np.where(node.visits > 0, q, node.mixed_value())
        legal = node.mask
        # Normalised by the siblings' range, as in Gumbel MuZero (mctx's completed-by-mix-value).
        low, high = completed[legal].min(), completed[legal].max()
        out = (completed - low) / (high - low) if high > low else np.full_like(completed, 0.5)
        return np.where(legal, out, 0.0)

    def _sigma(self, node: Node, q_hat: np.ndarray) -> np.ndarray:
        c = self.config
        return (c.c_visit + node.visits.max()) * c.c_scale * q_hat

    def _improved_policy(self, node: Node) -> np.ndarray:
        return _softmax(np.where(node.mask, node.logits + self._sigma(node, self._completed_q(node)), -np.inf))

    # -- selection inside the tree --------------------------------------------------
    def _select_puct(self, node: Node, prior: np.ndarray) -> int:
        c = self.config
        total = node.visits.sum()
        c_total = c.pb_c_init + math.log((total + c.pb_c_base + 1) / c.pb_c_base)
        u = c_total * prior * math.sqrt(max(total, 1)) / (1 + node.visits)
        q = np.where(node.visits > 0, node.q(), node.mixed_value())
        score = self.minmax.normalise(q) + u
        return int(np.argmax(np.where(node.mask, score, -np.inf)))

    def _select_gumbel_interior(self, node: Node) -> int:
        pi = self._improved_policy(node)
        score = pi - node.visits / (1 + node.visits.sum())
        return int(np.argmax(np.where(node.mask, score, -np.inf)))

    # -- one simulation ------------------------------------------------------------
    def _simulate(self, root: Node, root_action: int) -> None:
        path: list[tuple[Node, int]] = []
        node, action = root, root_action
        while True:
            path.append((node, action))
            child = node.children.get(action)
            if child is None:
                exp = self.model.expand(node.state, action)
                child = Node(exp)
                node.children[action] = child
                node.reward[action] = exp.reward
                leaf_value = child.value
                break
            if child.terminal or len(path) >= self.config.max_depth:
                leaf_value = child.value
                break
            node = child
            action = (self._select_gumbel_interior(node) if self.config.method == "gumbel"
                      else self._select_puct(node, node.prior))
        g = leaf_value
        for parent, a in reversed(path):
            g = parent.reward[a] + self.config.discount * g
            parent.visits[a] += 1
            parent.value_sum[a] += g
            self.minmax.update(g)

    # -- the root ------------------------------------------------------------------
    def run(self, simulations: int | None = None) -> SearchResult:
        c = self.config
        n_sims = c.simulations if simulations is None else simulations
        root = Node(self.model.root())
        legal = np.flatnonzero(root.mask)
        if legal.size == 0:
            raise ValueError("search: the root has no legal action")
        if legal.size == 1 or n_sims <= 0:
            action = int(legal[0]) if legal.size == 1 else int(np.argmax(root.logits))
            policy = np.zeros_like(root.prior)
            policy[action] = 1.0
            return SearchResult(action, policy.astype(np.float32), root.visits, root.q(), root.value, 0)
        if c.method == "gumbel":
            action, policy = self._run_gumbel(root, n_sims)
        elif c.method == "puct":
            action, policy = self._run_puct(root, n_sims)
        else:
            raise ValueError(f"search: unknown method {c.method!r} (gumbel, puct)")
        value = (root.value + root.value_sum.sum()) / (1 + root.visits.sum())
        return SearchResult(action, policy.astype(np.float32), root.visits.copy(), root.q(), float(value), n_sims)

    def _run_puct(self, root: Node, n_sims: int) -> tuple[int, np.ndarray]:
        c = self.config
        prior = root.prior
        if c.root_noise:
            legal = np.flatnonzero(root.mask)
            noise = np.zeros_like(prior)
            noise[legal] = self.rng.dirichlet([c.dirichlet_alpha] * legal.size)
            prior = (1 - c.exploration_fraction) * prior + c.exploration_fraction * noise
        for _ in range(n_sims):
            self._simulate(root, self._select_puct(root, prior))
        visits = root.visits.astype(np.float64)
        policy = visits / visits.sum()
        if c.temperature > 0:
            w = np.where(visits > 0, visits ** (1.0 / c.temperature), 0.0)
            action = int(self.rng.choice(len(w), p=w / w.sum()))
        else:
            q = np.nan_to_num(root.q(), nan=-np.inf)
            action = int(np.lexsort((-root.prior, -q, -visits))[0])
        return action, policy

    def _run_gumbel(self, root: Node, n_sims: int) -> tuple[int, np.ndarray]:
        c = self.config
        A = root.mask.shape[0]
        gumbel = self.rng.gumbel(size=A) * c.gumbel_scale if c.gumbel_scale > 0 else np.zeros(A)
        base = np.where(root.mask, root.logits + gumbel, -np.inf)
        m = int(min(c.max_considered, root.mask.sum(), n_sims))
        considered = np.argsort(-base, kind="stable")[:m]
        schedule = considered_visit_schedule(m, n_sims)
        for level in schedule:
            score = base + self._sigma(root, self._completed_q(root))
            level_ok = considered[root.visits[considered] == level]
            pool = level_ok if level_ok.size else considered
            self._simulate(root, int(pool[np.argmax(score[pool])]))
        score = base + self._sigma(root, self._completed_q(root))
        most = considered[root.visits[considered] == root.visits[considered].max()]
        action = int(most[np.argmax(score[most])])
        return action, self._improved_policy(root)


def run_search(model: Model, config: SearchConfig, rng: np.random.Generator, *,
               simulations: int | None = None) -> SearchResult:
    """Search from ``model.root()`` with ``simulations`` (default ``config.simulations``)."""
    return TreeSearch(model, config, rng).run(simulations)
