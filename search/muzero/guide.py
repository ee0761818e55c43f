"""The network as the prior of the guided UCT search (:class:`search.mcts.UCTSearch`, "Guided selection").

Used by the ``muzero`` solver and by expert-iteration training (:mod:`search.muzero.expert`), so
training plays exactly the deployed search. numpy only.
"""

from __future__ import annotations

import numpy as np


class NetworkPrior:
    """``prior(game, legal)``: the softmax of the network's policy logits over the legal actions.

    ``net`` is a :class:`~search.muzero.inference.NumpyNet`; ``calls`` counts network evaluations
    (the search never asks at a forced move).
    """

    def __init__(self, net):
        self.net = net
        self.calls = 0

    def __call__(self, game, legal: np.ndarray) -> np.ndarray:
        self.calls += 1
        obs = game.observation()
        logits = self.net.policy_logits(input_vector(game, obs, getattr(self.net, "features", "")),
                                        np.asarray(obs.actions, np.float32), np.asarray(obs.mask, bool))
        z = logits[legal].astype(np.float64)
        z = np.exp(z - z.max())
        return z / z.sum()


def input_vector(game, obs, features: str) -> np.ndarray:
    """The network's input vector for ``features`` ("" = the observation vector; see :mod:`search.muzero.encoder`)."""
    if not features:
        return np.asarray(obs.as_vector(), np.float32)
    from search.muzero import encoder

    if features != encoder.NAME:
        raise ValueError(f"unknown network input features {features!r} (known: {encoder.NAME})")
    return encoder.network_vector(game, obs)


def uniform_prior(game, legal: np.ndarray) -> np.ndarray:
    """The control: every legal action equally likely."""
    return np.full(len(legal), 1.0 / len(legal))
