"""Inference of a :class:`~mallocgame.search.muzero.networks.MuZeroNet` in numpy, one example or a batch.

The tree search evaluates one node at a time, or a batch of leaves at once (:meth:`NumpyNet.evaluate_batch`,
the value leaves of ``search/uct.py``); at those sizes PyTorch's per-call dispatch costs more than the
arithmetic, so the search uses this copy of the weights instead. Same functions as the module docstring of
:mod:`mallocgame.search.muzero.networks`; results agree with the torch forward pass to float32 rounding (a test checks it). The
torch module stays the one that is trained and saved. Imports no torch.

The search itself runs the compiled twin of the passes it asks for (:func:`compiled_forward`:
``search/muzero/_forward.pxi``, the same results to float32 rounding); this module is its reference.
"""

from __future__ import annotations

import numpy as np

from mallocgame._native import ForwardNet
from mallocgame.search.muzero.graph_encoder import NumpyGraphEncoder


def _layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


class _MLP:
    """Linear -> ReLU -> Linear with weights ``w1 [H, in]``, ``w2 [out, H]``."""

    def __init__(self, w1, b1, w2, b2):
        self.w1, self.b1, self.w2, self.b2 = w1.T.copy(), b1, w2.T.copy(), b2

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = x @ self.w1 + self.b1
        np.maximum(h, 0.0, out=h)
        return h @ self.w2 + self.b2


class NumpyNet:
    """h, g and f for single examples: ``vector [D]``, ``actions [A, F]``, ``mask [A]``."""

    HEADS = ("action_embed", "represent", "action_context", "dynamics_state", "dynamics_actions", "reward_head",
             "policy_head", "value_head")

    def __init__(self, state_dict: dict[str, np.ndarray], value_scale: float):
        for name in self.HEADS:
            setattr(self, name, _MLP(*(np.asarray(state_dict[f"{name}.{i}.{p}"], np.float32)
                                       for i, p in ((0, "weight"), (0, "bias"), (2, "weight"), (2, "bias")))))
        self.value_scale = value_scale
        self.features = ""  # the input vector: "" = the game's observation vector, else search.muzero.encoder.NAME
        self.value_target = ""  # what the value heads estimate (search.muzero.value.VALUE_TARGET, or "": the return to go)
        # the value leaves' head over the value head's input and the leaf's context features
        # (search.muzero.value, "What the search backs up"), where the checkpoint has one
        self.context_value = (_MLP(*(np.asarray(state_dict[f"context_value.{i}.{p}"], np.float32)
                                     for i, p in ((0, "weight"), (0, "bias"), (2, "weight"), (2, "bias"))))
                              if "context_value.0.weight" in state_dict else None)
        # the learned per-buffer encodings of features "encoder/3" (None without a graph encoder)
        self.graph = NumpyGraphEncoder.from_state_dict({k: np.asarray(v) for k, v in state_dict.items()
                                                         if k.startswith("graph_encoder.")})

    @classmethod
    def from_torch(cls, net, features: str = "") -> "NumpyNet":
        out = cls({k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}, net.config.value_scale)
        out.features = features
        return out

    def initial(self, vector: np.ndarray, actions: np.ndarray, mask: np.ndarray):
        """-> ``(state [L], embeddings [A, d])``."""
        A = actions.shape[0]
        is_slow = np.zeros((A, 1), np.float32)
        is_slow[-1] = 1.0
        phi = self.action_embed(np.concatenate([actions, is_slow], -1))
        m = mask.astype(np.float32)[:, None]
        mean = (phi * m).sum(0) / max(float(m.sum()), 1.0)
        peak = np.maximum(np.where(m > 0, phi, -1e4).max(0), -1e3)
        state = _layer_norm(self.represent(np.concatenate([vector, mean, peak])))
        emb = _layer_norm(self.action_context(np.concatenate([phi, np.broadcast_to(state, (A, state.shape[0]))], -1)))
        return state, emb

    def recurrent(self, state: np.ndarray, emb: np.ndarray, action: int):
        """-> ``(state' [L], embeddings' [A, d], scaled reward)``."""
        A = emb.shape[0]
        chosen = emb[action]
        sa = np.concatenate([state, chosen])
        reward = float(self.reward_head(sa)[0])
        new_state = _layer_norm(state + self.dynamics_state(sa))
        ctx = np.broadcast_to(np.concatenate([new_state, chosen]), (A, new_state.shape[0] + chosen.shape[0]))
        new_emb = _layer_norm(emb + self.dynamics_actions(np.concatenate([emb, ctx], -1)))
        return new_state, new_emb, reward

    def predict(self, state: np.ndarray, emb: np.ndarray):
        """-> ``(logits [A], scaled value, legality logits [A])``."""
        A = emb.shape[0]
        out = self.policy_head(np.concatenate([np.broadcast_to(state, (A, state.shape[0])), emb], -1))
        value = float(self.value_head(np.concatenate([state, emb.mean(0)]))[0])
        return out[:, 0], value, out[:, 1]

    def policy_logits(self, vector: np.ndarray, actions: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``h`` then the policy head only, for the legal actions (what the guided UCT search asks for).

        Returns logits ``[A]``, NaN at illegal actions. Legal rows get exactly the logits of
        :meth:`initial` + :meth:`predict`: the pooling reads only legal rows and every other layer
        works row by row, so the illegal rows (most of them: about 2 of 17 actions are legal) are skipped.
        """
        A = actions.shape[0]
        rows = np.flatnonzero(mask)
        is_slow = (rows == A - 1).astype(np.float32)[:, None]
        phi = self.action_embed(np.concatenate([actions[rows], is_slow], -1))
        mean = phi.sum(0) / max(float(len(rows)), 1.0)
        peak = np.maximum(phi.max(0), -1e3) if len(rows) else np.full(phi.shape[1], -1e3, np.float32)
        state = _layer_norm(self.represent(np.concatenate([vector, mean, peak])))
        L = state.shape[0]
        emb = _layer_norm(self.action_context(np.concatenate([phi, np.broadcast_to(state, (len(rows), L))], -1)))
        out = np.full(A, np.nan, np.float32)
        out[rows] = self.policy_head(np.concatenate([np.broadcast_to(state, (len(rows), L)), emb], -1))[:, 0]
        return out

    def value_input(self, vector: np.ndarray, actions: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The value head's input ``[L + d]`` (``h``'s state and the mean of its action embeddings), the
        features a value head fine-tuned on frozen weights trains on (:mod:`mallocgame.search.muzero.value`)."""
        state, emb = self.initial(vector, actions, mask)
        return np.concatenate([state, emb.mean(0)])

    def evaluate(self, vector: np.ndarray, actions: np.ndarray, mask: np.ndarray,
                 context: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """``h`` then ``f`` once: the policy logits ``[A]`` and the raw value head output (the guided search's
        value leaves read both from one pass: the leaf's prior and its value); with ``context`` (the leaf's
        :func:`~mallocgame.search.muzero.value.context_features`) and a ``context_value`` head, that head's output."""
        state, emb = self.initial(vector, actions, mask)
        A = emb.shape[0]
        logits = self.policy_head(np.concatenate([np.broadcast_to(state, (A, state.shape[0])), emb], -1))[:, 0]
        head_input = np.concatenate([state, emb.mean(0)])
        if context is not None and self.context_value is not None:
            return logits, float(self.context_value(np.concatenate([head_input, context]))[0])
        return logits, float(self.value_head(head_input)[0])

    def evaluate_batch(self, vectors: np.ndarray, actions: np.ndarray, masks: np.ndarray,
                       contexts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`evaluate` of ``B`` examples in one pass: ``vectors [B, D]``, ``actions [B, A, F]``, ``masks [B, A]``
        (and ``contexts [B, C]``) -> ``(logits [B, A], values [B])``, each row equal to :meth:`evaluate` of that
        example to float32 rounding.

        Most action slots of an observation are empty (all-zero features, illegal: about 2 of 17 actions are
        legal), and every empty slot of one example has the same embedding, so the action layers run on the
        other slots (legal, non-zero or the slow one) plus one empty slot per example, which stands for all of
        them in the value head's mean. The concatenations of the single-example path (an action's features with
        the state, the state with an action's embedding) become sums of two products with blocks of the first
        layer's weights, so the state's part is computed once per example, not once per action.
        """
        vectors = np.asarray(vectors, np.float32)
        actions = np.asarray(actions, np.float32)
        masks = np.asarray(masks, bool)
        B, A, F = actions.shape
        kept = masks | actions.any(-1)
        kept[:, -1] = True  # the slow slot (its is-slow flag sets it apart): every example keeps one row
        rows = np.flatnonzero(kept.ravel())
        example = rows // A
        starts = np.searchsorted(example, np.arange(B))
        slow = (rows % A == A - 1).astype(np.float32)[:, None]
        legal = masks.ravel()[rows][:, None]
        phi = self.action_embed(np.concatenate([actions.reshape(B * A, F)[rows], slow], 1))  # [R, d]
        empty = self.action_embed(np.zeros((1, F + 1), np.float32))  # [1, d]: every empty slot's
        count = masks.sum(1, dtype=np.float32)[:, None]
        mean = np.add.reduceat(np.where(legal, phi, np.float32(0.0)), starts, axis=0) / np.maximum(count, 1.0)
        peak = np.maximum(np.maximum.reduceat(np.where(legal, phi, np.float32(-1e4)), starts, axis=0),
                          np.float32(-1e3))
        state = _layer_norm(self.represent(np.concatenate([vectors, mean, peak], 1)))  # [B, L]
        L, d = state.shape[1], phi.shape[1]
        ctx = self.action_context
        state_ctx = state @ ctx.w1[d:] + ctx.b1  # [B, H]

        def embed(p: np.ndarray, owner) -> np.ndarray:
            h = p @ ctx.w1[:d] + state_ctx[owner]
            np.maximum(h, 0.0, out=h)
            return _layer_norm(h @ ctx.w2 + ctx.b2)

        emb = embed(phi, example)  # [R, d]
        emb_empty = embed(np.broadcast_to(empty, (B, d)), slice(None))  # [B, d]
        pol = self.policy_head
        state_pol = state @ pol.w1[:L] + pol.b1  # [B, H]

        def policy(e: np.ndarray, owner) -> np.ndarray:
            h = e @ pol.w1[L:] + state_pol[owner]
            np.maximum(h, 0.0, out=h)
            return h @ pol.w2[:, 0] + pol.b2[0]

        logits = np.repeat(policy(emb_empty, slice(None))[:, None], A, 1)  # [B, A]
        logits.ravel()[rows] = policy(emb, example)
        n_empty = (A - kept.sum(1)).astype(np.float32)[:, None]
        emb_mean = (np.add.reduceat(emb, starts, axis=0) + n_empty * emb_empty) / np.float32(A)
        head_input = np.concatenate([state, emb_mean], 1)
        if contexts is not None and self.context_value is not None:
            return logits, self.context_value(np.concatenate([head_input, np.asarray(contexts, np.float32)], 1))[:, 0]
        return logits, self.value_head(head_input)[:, 0]

    def unscale(self, scaled: float) -> float:
        return min(max(scaled / self.value_scale, 0.0), 1.0)


def compiled_forward(net):
    """The compiled forward pass of ``net`` (a :class:`mallocgame._native.ForwardNet`: ``policy_logits``, ``prior``,
    ``evaluate``, ``evaluate_batch``), a copy of its weights made once and kept on it (made anew when one of its
    layers was replaced since); ``None`` for any other network object (e.g. a test's stand-in), whose own methods
    the search then calls. An evaluator reads it when it is built: the weights are final by then (a network whose
    weights change is copied anew, ``NumpyNet.from_torch``)."""
    if not isinstance(net, NumpyNet):
        return None
    layers = tuple(getattr(net, name) for name in NumpyNet.HEADS) + (net.context_value,)
    cached = net.__dict__.get("_compiled_forward")
    if cached is None or any(a is not b for a, b in zip(cached[0], layers)):
        cached = net._compiled_forward = (layers, ForwardNet(net))
    return cached[1]
