"""The network as the prior of the guided UCT search (:class:`mallocgame.search.uct.UCTSearch`, "Guided selection").

Used by the ``muzero`` solver and by expert-iteration training (:mod:`mallocgame.search.muzero.expert`), so
training plays exactly the deployed search. numpy only.
"""

from __future__ import annotations

import numpy as np

from mallocgame.search.muzero import encoder
from mallocgame.search.muzero.inference import compiled_forward


class NetworkPrior:
    """``prior(game, legal)``: the softmax of the network's policy logits over the legal actions.

    ``net`` is a :class:`~mallocgame.search.muzero.inference.NumpyNet`, run by its compiled forward pass
    (:func:`~mallocgame.search.muzero.inference.compiled_forward`: logits and softmax in one call); ``calls`` counts
    network evaluations (the search never asks at a forced move).
    """

    def __init__(self, net):
        self.net = net
        self.forward = compiled_forward(net)
        self.calls = 0

    def __call__(self, game, legal: np.ndarray) -> np.ndarray:
        self.calls += 1
        vectors, actions, masks = encoder.leaf_inputs([game], getattr(self.net, "features", ""), self.net)
        if self.forward is not None:
            return self.forward.prior(vectors[0], actions[0], masks[0], legal)
        logits = self.net.policy_logits(vectors[0], actions[0], masks[0])
        z = logits[legal].astype(np.float64)
        z = np.exp(z - z.max())
        return z / z.sum()


def input_vector(game, obs, features: str, net=None) -> np.ndarray:
    """The network's input vector for ``features`` ("" = the observation vector; see :mod:`mallocgame.search.muzero.encoder`);
    ``net``: the network, whose graph encoder features ``encoder/3`` read."""
    if not features:
        return np.asarray(obs.as_vector(), np.float32)
    if features not in encoder.NAMES:
        raise ValueError(f"unknown network input features {features!r} (known: {', '.join(encoder.NAMES)})")
    return encoder.network_vector(game, obs, features, net)


def uniform_prior(game, legal: np.ndarray) -> np.ndarray:
    """The control: every legal action equally likely."""
    return np.full(len(legal), 1.0 / len(legal))


class RelaxationPrior:
    """A hand-written prior from the no-fragmentation relaxation (a control: no learning).

    At a buffer in the relaxation's fast set (:func:`mallocgame.search.muzero.encoder.relaxation_set`),
    ``weight`` goes to the greedy's hole; at one outside it, to slow memory; the rest is shared
    evenly over the other legal actions.
    """

    def __init__(self, weight: float = 0.95):
        self.weight = weight

    def __call__(self, game, legal: np.ndarray) -> np.ndarray:
        chosen = encoder.relaxation_set(game.data)[game.current]
        target = game.greedy_action() if chosen else game.slow_action
        hit = np.flatnonzero(legal == target)
        if len(hit) == 0 or len(legal) == 1:
            return np.full(len(legal), 1.0 / len(legal))
        p = np.full(len(legal), (1.0 - self.weight) / (len(legal) - 1))
        p[hit[0]] = self.weight
        return p


#: How :class:`BlendedPrior` joins the network's prior with the relaxation's.
BLENDS = ("mean", "product")


class BlendedPrior:
    """The network's prior joined with the relaxation's (:class:`RelaxationPrior`), so neither alone decides.

    ``how="mean"``: ``(p_net + p_relax) / 2``, every move keeps at least half of what either gives it;
    ``how="product"``: ``p_net * p_relax`` renormalised (a product of experts, Hinton 2002: high only where
    both agree). Why: where the network's prior leads the search away from answers the relaxation's prior finds,
    a blend keeps the relaxation's moves in view (docs/results.md, "muzero's defaults"). ``calls`` counts network
    evaluations, as :class:`NetworkPrior`'s.

    >>> import numpy as np
    >>> blend = BlendedPrior(lambda game, legal: np.array([0.9, 0.1]), lambda game, legal: np.array([0.1, 0.9]))
    >>> blend(None, np.array([0, 1])).round(3).tolist()
    [0.5, 0.5]
    """

    def __init__(self, network, relaxation, how: str = "mean"):
        if how not in BLENDS:
            raise ValueError(f"unknown blend {how!r} (known: {', '.join(BLENDS)})")
        self.network, self.relaxation, self.how = network, relaxation, how

    @property
    def calls(self) -> int:
        return getattr(self.network, "calls", 0)

    def __call__(self, game, legal: np.ndarray) -> np.ndarray:
        p, q = self.network(game, legal), self.relaxation(game, legal)
        if self.how == "mean":
            return (p + q) / 2.0
        r = p * q
        return r / r.sum()
