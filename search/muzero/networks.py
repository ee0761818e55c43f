"""The MuZero networks (PyTorch): representation h, dynamics g, prediction f.

Schrittwieser et al. 2020, "Mastering Atari, Go, chess and shogi by planning with a
learned model", adapted to a game whose action set is a variable list of canonical offsets
(docs/architecture.md, "The game"). The latent state has two parts, so every head is shared across
actions and the same weights serve any problem size:

* ``state``   float32 ``[B, L]``    -- a summary of the position;
* ``actions`` float32 ``[B, A, d]`` -- one embedding per action slot (A = k + 1, last = slow).

h(obs):        phi_i = MLP(action features_i, is_slow_i); pooled = mean/max of phi over legal actions;
               state = LN(MLP(obs vector, pooled)); actions_i = LN(MLP(phi_i, state)).
g(latent, a):  state' = LN(state + MLP(state, actions_a)); actions'_i = LN(actions_i + MLP(actions_i, state', actions_a));
               reward = MLP(state, actions_a).
f(latent):     logit_i, legal_i = MLP(state, actions_i) (one shared MLP, two outputs per action);
               value = MLP(state, mean_i actions_i).

LN is a LayerNorm without parameters: it keeps the latent bounded through long unrolls
(MuZero min-max scales its hidden state for the same reason). ``legal_i`` is a learned
legality logit: deeper than the root the learned model has no true mask, so the search
masks actions the model predicts illegal (see :mod:`mallocgame.search.muzero.models`).

Values and rewards are scalars. The game's normalised return lies in [0, 1] but is
small (about 0.1 on layered networks, 1e-3 per step), so the heads predict
``value_scale`` times it with a linear output trained by MSE; :meth:`MuZeroNet.unscale`
divides and clamps to [0, 1] for the search.

With ``graph_rounds`` > 0 the network also holds a :class:`GraphEncoder` (features ``encoder/3``,
:mod:`mallocgame.search.muzero.graph_encoder`): learned message passing over the interference graph whose
per-buffer output goes into the input vector (the trainer fills it in, so gradients reach the encoder).

All weights are initialised from an explicit ``torch.Generator`` (no global RNG).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class NetworkConfig:
    """Shapes and sizes of a :class:`MuZeroNet`."""

    obs_dim: int
    action_features: int
    num_actions: int
    latent: int = 64  # L
    action_latent: int = 32  # d
    hidden: int = 64
    value_scale: float = 10.0  # heads predict value_scale x normalised value/reward
    aux: bool = False  # an auxiliary head (expert iteration: does the current buffer end in fast memory)
    graph_rounds: int = 0  # rounds of the graph encoder (0: none)
    graph_inputs: int = 0  # its per-buffer input features
    graph_dim: int = 0  # its per-buffer output

    def as_dict(self) -> dict:
        return asdict(self)


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


def _norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:])


class MuZeroNet(nn.Module):
    """h, g and f of MuZero over a (state, per-action embeddings) latent; see the module docstring."""

    def __init__(self, config: NetworkConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        L, d, H = config.latent, config.action_latent, config.hidden
        self.action_embed = _mlp(config.action_features + 1, H, d)
        self.represent = _mlp(config.obs_dim + 2 * d, H, L)
        self.action_context = _mlp(d + L, H, d)
        self.dynamics_state = _mlp(L + d, H, L)
        self.dynamics_actions = _mlp(2 * d + L, H, d)
        self.reward_head = _mlp(L + d, H, 1)
        self.policy_head = _mlp(L + d, H, 2)
        self.value_head = _mlp(L + d, H, 1)
        if config.aux:  # registered last: the other heads draw the same initial weights with or without it
            self.aux_head = _mlp(L + d, H, 1)
        if config.graph_rounds > 0:  # registered after the heads: they draw the same initial weights without it
            self.graph_encoder = GraphEncoder(config.graph_inputs, config.graph_dim, config.graph_rounds)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None) -> None:
        """PyTorch's default Linear initialisation, drawn from ``generator``."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:  # the graph encoder's neighbour terms have none
                    bound = 1.0 / math.sqrt(module.in_features)
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)

    # h --------------------------------------------------------------------------------
    def initial(self, vector: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor):
        """``vector [B, D]``, ``actions [B, A, F]``, ``mask [B, A]`` -> ``(state [B, L], embeddings [B, A, d])``."""
        B, A, _ = actions.shape
        is_slow = torch.zeros(B, A, 1, dtype=actions.dtype)
        is_slow[:, -1] = 1.0
        phi = self.action_embed(torch.cat([actions, is_slow], -1))  # [B, A, d]
        m = mask.to(phi.dtype).unsqueeze(-1)
        mean = (phi * m).sum(1) / m.sum(1).clamp_min(1.0)
        peak = torch.where(m > 0, phi, torch.full_like(phi, -1e4)).amax(1).clamp_min(-1e3)
        state = _norm(self.represent(torch.cat([vector, mean, peak], -1)))
        emb = _norm(self.action_context(torch.cat([phi, state.unsqueeze(1).expand(B, A, -1)], -1)))
        return state, emb

    # g --------------------------------------------------------------------------------
    def recurrent(self, state: torch.Tensor, emb: torch.Tensor, action: torch.Tensor):
        """``action [B]`` (int64) -> ``(state' [B, L], embeddings' [B, A, d], scaled reward [B])``."""
        B, A, d = emb.shape
        chosen = emb[torch.arange(B), action]  # [B, d]
        sa = torch.cat([state, chosen], -1)
        reward = self.reward_head(sa).squeeze(-1)
        new_state = _norm(state + self.dynamics_state(sa))
        ctx = torch.cat([new_state, chosen], -1).unsqueeze(1).expand(B, A, -1)
        new_emb = _norm(emb + self.dynamics_actions(torch.cat([emb, ctx], -1)))
        return new_state, new_emb, reward

    # f --------------------------------------------------------------------------------
    def predict(self, state: torch.Tensor, emb: torch.Tensor):
        """-> ``(policy logits [B, A], scaled value [B], legality logits [B, A])`` (logits unmasked)."""
        B, A, _ = emb.shape
        out = self.policy_head(torch.cat([state.unsqueeze(1).expand(B, A, -1), emb], -1))  # [B, A, 2]
        value = self.value_head(torch.cat([state, emb.mean(1)], -1)).squeeze(-1)
        return out[..., 0], value, out[..., 1]

    def auxiliary(self, state: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        """The auxiliary head's logit ``[B]`` (needs ``config.aux``): in expert iteration, does the
        current buffer end in fast memory in the teacher's best episode."""
        return self.aux_head(torch.cat([state, emb.mean(1)], -1)).squeeze(-1)

    def unscale(self, scaled: torch.Tensor) -> torch.Tensor:
        """Scaled head output -> normalised value/reward in [0, 1]."""
        return (scaled / self.config.value_scale).clamp(0.0, 1.0)


def sparse_adjacency(indptr, indices, n: int) -> torch.Tensor:
    """The sparse ``[n, n]`` 0/1 tensor of a CSR adjacency (``indptr [n+1]``, ``indices``; numpy or torch)."""
    indptr, indices = torch.as_tensor(indptr, dtype=torch.int64), torch.as_tensor(indices, dtype=torch.int64)
    rows = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
    return torch.sparse_coo_tensor(torch.stack([rows, indices]), torch.ones(len(indices)), (n, n),
                                   check_invariants=True).coalesce()


class GraphEncoder(nn.Module):
    """``rounds`` of ``h' = relu(W_self h + b + W_nbr mean_{N(i)} h + W_size sum_{N(i)} (size_j / scale) h_j)``
    over a batch of interference graphs (block-diagonal), as
    :class:`mallocgame.search.muzero.graph_encoder.NumpyGraphEncoder` computes it for the search."""

    def __init__(self, inputs: int, dim: int, rounds: int):
        super().__init__()
        self.rounds = nn.ModuleList(
            nn.ModuleDict({"self": nn.Linear(fan_in, dim), "nbr": nn.Linear(fan_in, dim, bias=False),
                           "size": nn.Linear(fan_in, dim, bias=False)})
            for fan_in in [inputs] + [dim] * (rounds - 1))

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``x [N, F]``, ``adjacency`` a sparse ``[N, N]`` of 0/1 (symmetric; :func:`sparse_adjacency`),
        ``weight [N]`` = size / scale -> ``[N, D]``."""
        degree = torch.sparse.mm(adjacency, torch.ones(x.shape[0], 1, dtype=x.dtype))
        inverse_degree = 1.0 / degree.clamp_min(1.0)
        h = x
        for layer in self.rounds:
            f = h.shape[1]
            sums = torch.sparse.mm(adjacency, torch.cat([h, weight.unsqueeze(1) * h], 1))
            h = F.relu(layer["self"](h) + layer["nbr"](sums[:, :f] * inverse_degree) + layer["size"](sums[:, f:]))
        return h

    @torch.no_grad()
    def reproduce_fixed_means(self) -> None:
        """Set two rounds (``inputs = F``, ``dim = 3F``) to compute ``[x, mean x, mean of the means]``, the fixed
        encoding of ``encoder/1`` (:func:`mallocgame.search.muzero.encoder.encoding`) for non-negative ``x``, on
        which the ReLUs are the identity: an ``encoder/3`` network so started computes what its ``encoder/2``
        parent does."""
        first, second = self.rounds
        f = first["self"].in_features
        if len(self.rounds) != 2 or first["self"].out_features != 3 * f:
            raise ValueError("the fixed encoding needs two rounds of 3 x inputs")
        eye = torch.eye(f)
        for layer in self.rounds:
            for name in ("self", "nbr", "size"):
                layer[name].weight.zero_()
            layer["self"].bias.zero_()
        first["self"].weight[:f, :f] = eye
        first["nbr"].weight[f:2 * f, :f] = eye
        second["self"].weight[:2 * f, :2 * f] = torch.eye(2 * f)
        second["nbr"].weight[2 * f:, f:2 * f] = eye


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())
