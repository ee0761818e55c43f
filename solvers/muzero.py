"""MuZero-guided tree search (mallocMuZero) with the shipped trained network; map, pack and prefetch modes.

Two arms: the default guided UCT below, and ``model=learned``, the
paper's MuZero (Schrittwieser et al. 2020): a Gumbel search inside the learned dynamics
(`mallocgame.search.muzero.models.LearnedModel`) from one real observation per move; the game is
stepped only by the committed moves. Its network (``LEARNED_CHECKPOINT``) is ``selfplay.pt``, the
Gumbel self-play network (``mallocgame train --consistency-weight --reanalyse-fraction`` fine-tunes one
with EfficientZero's consistency loss and MuZero Reanalyse; why none is shipped: docs/results.md, "muzero's
defaults"). ``model=simulator`` plans with the true game instead (AlphaZero style). Both are map mode only.

Default search (``method="uct"``): exactly the search of the
``mcts`` solver (`mallocgame.search.uct.UCTSearch`: the same greedy rollouts to the end of the
episode, tree reuse, per-move commitment, budgets and fallback answers), except that the network's
policy is the prior of the selection (``search/uct.py``, "Guided selection"). The network is asked
once per tree node the search leaves, never at a forced move (one legal action). With
``prior="uniform"`` the same search runs with a uniform prior and no network: the control the
network must beat.

The selection rule (``selection="untried-uct"``) cannot starve a move: UCT's
untried-first rule is kept (Kocsis & Szepesvari, "Bandit based Monte-Carlo Planning", ECML 2006),
so at every node the greedy's move is tried first and every legal move once before any is tried
again; the prior only orders the untried moves after the greedy's and, once all are tried, scales
UCT's exploration bonus of move ``a`` by ``(k * p(a)) ** prior_power`` (``k`` legal moves; a
multiplicative progressive bias, Chaslot et al., "Progressive strategies for Monte-Carlo tree
search", 2008), with UCT's own constant 1. A uniform prior scales by exactly 1, so the uniform
control *is* ``mcts``, answer for answer (a test checks it). Chosen on the tuning problems only (seeds
201-212; ``DEFAULT_SELECTION``), never the held-out ones; the pUCT rule (``selection="puct"``, constant 10)
is an option.

The default network is xla21 (``DEFAULT_CHECKPOINT``: cur159 trained on with XLA-compiled programs in the
curriculum; chosen on two tuning sets), and map mode commits to the move with the best return seen
(``commit="max"``, as ``mcts``). Prefetch mode plays the uniform prior with ``leaf="auto"`` (``DEFAULT_LEAF``:
rollouts where the time per move affords two, else 64 greedy steps and the reference episode's return to go; no
network is read). At equal wall time (10 s and 60 s) on held-out programs of 1,000 buffers or more, the default
beats the mode's baseline (greedy-xla, msa; in map mode measured with ``start="game"``, and greedy-xla's answer is
among the fallback answers the search starts from). Against ``mcts`` it is level in map mode; in prefetch mode, where
its truncated leaves afford many more simulations than ``mcts``'s rollouts on the programs whose rollouts are dear, it
is ahead of ``mcts`` on a few programs and behind on at most one, not significantly. In map mode the
search starts from the best fallback answer (``start="answer"``) and plays the network only where that answer is
greedy-xla's, in greedy-xla's order, which the network was trained on; elsewhere it plays the uniform prior, which is
``mcts``'s search, so most held-out answers of the two are the same. With the network playing everywhere
(``start="game"``) it was ahead of ``mcts`` at 60 s on more programs than behind without reaching significance, and not
ahead at 10 s; prefetch mode's default plays no network (figures: docs/results.md, "Equal wall time", "The network at
real size", "Map mode's start at 60 s" and "Prefetch mode at equal wall time, again"). The measurements that chose
every default below: docs/results.md, "muzero's defaults".

Options (`MuZeroOptions`, listed by `mallocgame solvers muzero`; the CLI passes ``--simulations`` and ``--solver-option``):

* ``simulations``  new simulations per move (default 16), all counted in ``stats["simulations"]``;
* ``prior``        ``"network"`` (default), ``"uniform"``, ``"network-relaxation-mean"`` /
  ``"network-relaxation-product"`` (the network's prior averaged / multiplied with the relaxation's,
  `mallocgame.search.muzero.guide.BlendedPrior`; map mode, elsewhere the network alone) or
  ``"relaxation"`` (a hand-written control: most of the weight on what the
  no-fragmentation relaxation's fast set says of the buffer,
  `mallocgame.search.muzero.guide.RelaxationPrior`; map mode only). The network is used only on the game
  it was trained on (the checkpoint's ``game`` fields; the shipped one: map mode's fixed-order
  game in greedy-xla's order, k = 16). Pack mode (the fixed-address game, as ``mcts``) has no trained
  network, so it plays with the uniform prior. Prefetch mode (the prefetch game, k = 4 per copy window) has one,
  ``PREFETCH_CHECKPOINT`` (``checkpoints/prefetch.pt``), read when given as ``checkpoint``; it is not the default
  (``PREFETCH_NETWORK_BY_DEFAULT``; docs/results.md, "muzero's defaults"), so by default prefetch mode plays the
  uniform prior too. ``stats["prior"]`` says which prior played and why;
* ``checkpoint``   path of a ``.pt`` from ``mallocgame train`` or expert iteration, whatever input features its
  network reads (``encoder/3``: learned message passing over the interference graph, docs/training.md) (default: the
  environment variable ``MALLOCGAME_MUZERO_CHECKPOINT``, else the shipped
  ``search/muzero/checkpoints/default.pt``; in prefetch mode ``prefetch.pt`` is read only when given here;
  with ``model=learned|simulator`` and ``method=gumbel|puct``, which read the plain observation,
  ``selfplay.pt``, the Gumbel self-play network); a network trained in the answer's order (expert iteration's
  ``order="answer"``, its ``game`` fields say order ``"answer"``) plays map mode's game of ``start="answer"``, always
  in the order of the best fallback answer, and with ``start="game"`` the search runs without it;
* ``selection``    ``"untried-uct"`` (default, above), ``"untried-puct"`` (untried-first, then pUCT) or ``"puct"``
  (pUCT over all legal moves, an untried one at its parent's mean; can starve a move);
* ``prior_power``  with ``untried-uct``: the power of ``k * p(a)`` (default 2, chosen on the tuning problems);
* ``prior_decay``  with ``untried-uct``: ``m > 0`` fades that power to ``prior_power * m / (m + N)`` at a node of
  ``N`` visits, so UCT takes over where the search has many returns (``search/uct.py``, "Guided selection");
  default ``DEFAULT_PRIOR_DECAY`` (0: no fading);
* ``commit``       ``"visits"`` (the most visited root move) or ``"max"`` (the root move whose subtree holds the
  best return seen); default ``DEFAULT_COMMIT`` of `mallocgame.search.uct`, ``mcts``'s ("max" in map and
  prefetch modes);
* ``exploration``  the UCT / pUCT constant on sibling-normalised values (default ``DEFAULT_EXPLORATION``: with
  ``untried-uct`` 1, ``mcts``'s; with the pUCT rules 10 in map mode, chosen on the tuning problems, 1 in pack
  and prefetch modes);
* ``rollout_depth`` steps past the root per rollout (default: to the end of the episode, as ``mcts``);
* ``model``        ``"learned"`` (the paper's MuZero, above) or ``"simulator"`` (the network's prior and
  value, the true game as the model; leaves valued after ``rollout_depth`` greedy moves, default 48).
  Not given: the guided UCT (the default). Either value selects the searches of
  `mallocgame.search.muzero.search` (``method``, default ``"gumbel"``); map mode only, other modes get an
  InputError. With ``method=gumbel|puct`` and no ``model``: ``MALLOCGAME_MUZERO_MODEL``, else simulator;
* ``method``       ``"uct"`` (default, above) or ``"gumbel"`` / ``"puct"`` (with ``model``; without it the
  simulator), the searches inside a model;
* ``search_model`` the old name of ``model`` (same values; giving both with different values is an error);
* ``c_scale``      Gumbel's weight of Q against the prior (default 0.1 simulator, 0.02 learned);
* ``leaf``         ``"rollout"`` (map and pack modes' default: a greedy rollout to the end, as ``mcts``), ``"auto"``
  (prefetch mode's default, ``DEFAULT_LEAF``; below), ``"value"`` or ``"mixed"``
  (``search/uct.py``, "Value leaves"): a new leaf is valued by the network's value head instead,
  as the return still to come in the reference (greedy) episode corrected by the head's estimate of the value
  relative to the greedy continuation (`mallocgame.search.muzero.value`); one network pass per leaf gives
  the leaf's prior too. ``"mixed"`` plays ``leaf_steps`` greedy rollout steps first. A leaf then costs one
  network pass instead of O(n) game steps. The default network for value leaves is ``VALUE_CHECKPOINT``
  (``value.pt``: ``default.pt`` with its value head fine-tuned, ``experiments/train_value_head.py``; the same
  prior). Guided UCT only (``method=uct``, no ``model``); not the default in map mode (docs/results.md,
  "muzero's defaults").
  ``"auto"`` plays rollouts where the time per move affords ``auto_simulations`` (default 2) of them to the end
  and ``"mixed"`` leaves where it does not (``search/uct.py`` ``auto_leaf``; ``stats["leaf_played"]`` says which).
  With the network at the leaves (map mode) it first measures what a value leaf costs (its share of one batched
  pass, ``leaf_batch`` copies of the start state) and what a rollout costs (one rollout from the start), and plays
  rollouts wherever a mixed leaf would cost as much as the rollout it replaces (``stats["leaf_cost_us"]``,
  ``stats["rollout_cost_us"]``): the rule that picks the value head where rollouts are dear. Where it plays
  rollouts to the end, ``start="answer"`` enters the greedy's moves with their known returns as with ``"rollout"``
  (``search/uct.py``, "Known greedy return"; ``stats["known_greedy_moves"]``, 0 where it plays mixed leaves). Not
  map mode's default: behind rollouts on the real-size tuning recipes at the answer start (docs/results.md,
  "leaf=auto with map mode's known greedy returns");
* ``focus``        a move whose network prior gives the greedy's move at least ``focus`` is committed to it
  unsearched, and the time goes to the moves the network doubts (``search/uct.py``, "Focus"; default
  ``DEFAULT_FOCUS``, 0: every move with a choice is searched); with the uniform prior every move of ``k`` legal
  moves has ``1/k``;
* ``start``        map mode: ``"game"`` (the checkpoint's game, greedy-xla's order) or ``"answer"`` (the same game in
  the order of the best fallback answer, as ``mcts``'s option ``start``); where that order is played the search runs
  without the network (trained on greedy-xla's order; in the answer's order it searched worse than the uniform prior
  on the tuning recipes) and ``stats["prior"]`` says so; ``prior="relaxation"`` plays in any order (it reads which
  buffer is decided, not the order); default ``DEFAULT_START`` of `mallocgame.search.uct`,
  ``"answer"`` in map mode (ahead of ``"game"`` at 10 s on the real-size tuning recipes, not behind at 60 s:
  docs/results.md, "Where map mode's search starts" and "Map mode's start at 60 s");
* ``leaf_batch``   with value leaves read from the network: descents whose leaves one batched network pass values
  (default ``DEFAULT_LEAF_BATCH``; ``search/uct.py``, "Batched value leaves"); 1 values each leaf alone;
* ``leaf_steps``   with ``leaf="mixed"``: greedy rollout steps before the value (default 16, not tuned; with
  ``"auto"`` 64, and 0 in map mode with the network at the leaves, ``AUTO_LEAF_STEPS_NETWORK``);
* ``leaf_value``   ``"network"`` (default) or ``"reference"``: the control without a network at the leaves,
  ``y = 0`` (the future as in the greedy reference episode). A game the network was not trained on (pack and
  prefetch modes), or a checkpoint whose value heads are not trained on the leaves' target (no
  ``mallocgame.search.muzero.value.VALUE_TARGET`` mark: ``default.pt`` and ``mallocgame train``'s), gets the
  reference (``stats["leaf_value"]`` says so). Prefetch mode's leaves read no network: they read the prefetch
  value head (`mallocgame.search.muzero.value.PrefetchValue`, ``stats["leaf_value"] = "prefetch head"``) of
  ``value_checkpoint`` or, by default, ``PREFETCH_VALUE_CHECKPOINT`` where it is shipped, if marked with the value
  leaves' target; else the reference;
* ``value_checkpoint`` prefetch mode: the prefetch value head's checkpoint
  (`mallocgame.search.muzero.value.train_prefetch_head`; a missing or foreign file is an input error).

The answer is the best complete episode seen: the committed path, a rollout that reached the
end, the greedy episodes of the other game shapes, or the ``hint`` (prefetch mode: also
all-slow and greedy-xla lifted), exactly as ``mcts``; with ``model`` / ``method=gumbel|puct`` the
best of the searched episode, a complete rollout (simulator), the game's greedy episode and the hint.
All randomness comes from ``seed``; the answer is the same for the same seed unless the time limit binds.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.engine.session import held_baselines, no_worse_than_held
from mallocgame.problem.model import InputError, Problem, Solution, Status, offsets_array, offsets_tuple
from mallocgame.runtime.budget import SAFETY, Budget
from mallocgame.search.game import Game, GameConfig
from mallocgame.search.game_data import GameData
from mallocgame.search.game_order import ANSWER_ORDER
from mallocgame.search.muzero import checkpoints as shipped_checkpoints
from mallocgame.search.muzero.encoder import RELAX_SECONDS, WITH_RELAX, relaxation_set, relaxation_usable
from mallocgame.search.muzero.guide import BlendedPrior, NetworkPrior, RelaxationPrior, uniform_prior
from mallocgame.search.muzero.search import SearchConfig
from mallocgame.search.muzero.selfplay import Agent
from mallocgame.search.muzero.torchless import load_agent_network  # shared with the CLI's checkpoint check
from mallocgame.search.muzero.value import (
    NetworkValue,
    PrefetchValue,
    load_prefetch_head,
    reads_value_target,
    reference_value,
)
from mallocgame.search.uct import (
    COMMITS,
    DEFAULT_COMMIT,
    DEFAULT_GAME,
    DEFAULT_START,
    GUIDED_RULES,
    LEAVES,
    PREFETCH_K,
    STARTS,
    MCTSConfig,
    solve_with_uct,
)

DEFAULT_SIMULATIONS = 16
DEFAULT_ROLLOUT_DEPTH = 48  # the searches inside a model only
LEGACY_SEARCH_SHARE = 0.9  # of the limit the searches inside a model play in (less SAFETY)
DEFAULT_C_SCALE = {"simulator": 0.1, "learned": 0.02}  # tuned on layered/intervals seeds 201-206 (held out)
BLENDED_PRIORS = {"network-relaxation-mean": "mean", "network-relaxation-product": "product"}  # guide.BlendedPrior
PRIORS = ("network", "uniform", "relaxation", *BLENDED_PRIORS)
#: pUCT constant, chosen on the tuning problems (seeds 201-212, 16 simulations; never the held-out set;
#: docs/results.md, "muzero's defaults"). Map mode only: pack and prefetch keep 1.
#: Values are min-max normalised among siblings, so 10 lets the prior, not one rollout, decide where to look.
PUCT_EXPLORATION = {"map": 10.0, "pack": 1.0, "prefetch": 1.0}
#: The selection rule (search/uct.py, "Guided selection") and its prior power, chosen on the tuning problems
#: (seeds 201-212, 16 simulations; docs/results.md, "muzero's defaults"): untried-uct at UCT's constant 1 is the
#: rule whose uniform control is ``mcts`` itself, and of its powers 2 searched best.
DEFAULT_SELECTION = "untried-uct"
DEFAULT_PRIOR_POWER = 2.0
#: The fading of that power with a node's visits (``prior_decay``; 0 = none, the rule chosen at 16 simulations).
DEFAULT_PRIOR_DECAY = 0.0
#: The exploration constant per selection rule and mode.
DEFAULT_EXPLORATION = {"puct": PUCT_EXPLORATION, "untried-puct": PUCT_EXPLORATION,
                       "untried-uct": {"map": 1.0, "pack": 1.0, "prefetch": 1.0}}
METHODS = ("uct", "gumbel", "puct")
RELAX_SHARE = 0.2  # of the time limit, at most, for the relaxation MIP the network (and prior=relaxation) reads;
#                   solved after the fallback answers (solve_with_uct's ``prepare``), so it does not cut them short
CHECKPOINT_ENV = "MALLOCGAME_MUZERO_CHECKPOINT"
MODEL_ENV = "MALLOCGAME_MUZERO_MODEL"
DEFAULT_CHECKPOINT = Path(shipped_checkpoints.__file__).resolve().parent / "default.pt"
#: The searches inside a model read the plain observation: their default is the Gumbel self-play network
#: (`experiments/results/muzero_training.md`).
LEGACY_CHECKPOINT = DEFAULT_CHECKPOINT.with_name("selfplay.pt")
#: ``model=learned``'s network: ``selfplay.pt``, which searched better in the learned model on the tuning problems
#: than the network fine-tuned from it by learned-model self-play (docs/results.md, "muzero's defaults").
LEARNED_CHECKPOINT = LEGACY_CHECKPOINT
MODELS = ("learned", "simulator")
#: Value leaves (search/uct.py, "Value leaves"): the network whose value head was fine-tuned on the
#: value target relative to the greedy continuation (experiments/train_value_head.py); its other weights are
#: cur159.pt's (the default network before xla21), so its prior is cur159's, not default.pt's.
VALUE_CHECKPOINT = DEFAULT_CHECKPOINT.with_name("value.pt")
#: Prefetch mode: the policy network of the prefetch game (k = PREFETCH_K per copy window, two
#: windows, greedy-xla's order), trained by expert iteration (``experiments/train_prefetch_net.py``). Its value head
#: is not trained, so value leaves never read it.
PREFETCH_CHECKPOINT = DEFAULT_CHECKPOINT.with_name("prefetch.pt")
#: Map mode: the network with a learned graph encoder (features ``encoder/3``, docs/training.md), read when given as
#: ``checkpoint``; not the default (docs/results.md, "muzero's defaults").
GRAPH_CHECKPOINT = DEFAULT_CHECKPOINT.with_name("encoder3.pt")
#: Prefetch mode's value leaves: the prefetch value head (`mallocgame.search.muzero.value.PrefetchValue`, a small MLP
#: over the leaf's context relative to the reference episode, trained on ``y``; experiments/value_head_error_prefetch.py)
#: read where a leaf is valued, when this file is shipped; without it the leaves get the reference, ``y = 0``.
PREFETCH_VALUE_CHECKPOINT = DEFAULT_CHECKPOINT.with_name("prefetch_value.pt")
#: Whether ``prior="network"`` plays ``PREFETCH_CHECKPOINT`` in prefetch mode when no checkpoint is given; decided
#: by the held-out prefetch measurement (docs/results.md, "muzero's defaults").
PREFETCH_NETWORK_BY_DEFAULT = False
LEAF_VALUES = ("network", "reference")
DEFAULT_LEAF_STEPS = 16
#: ``leaf="auto"``'s steps before the reference value where it plays "mixed", chosen on the prefetch tuning sets
#: at 10 s (docs/results.md, "muzero's defaults").
DEFAULT_AUTO_LEAF_STEPS = 64
#: ``leaf="auto"``'s steps where the value network values the leaves (map mode): none, so that the one batched pass
#: that values a leaf gives its prior too (a leaf after rollout steps needs a second pass for the prior of its node).
AUTO_LEAF_STEPS_NETWORK = 0
#: ``leaf="auto"`` plays rollouts where the time per move affords this many to the end (estimated from the first
#: greedy episode: the time per move over half an episode's steps). Chosen on the prefetch tuning sets at 10 s
#: (docs/results.md, "muzero's defaults"); the estimate is conservative, rollouts deeper in the tree are shorter
#: and forced moves take no simulations.
DEFAULT_AUTO_SIMULATIONS = 2
#: The leaf evaluation per mode (option ``leaf``): prefetch mode plays "auto" (its leaves valued by the reference
#: episode, y = 0: no value network is trained for the prefetch game), map and pack modes rollouts to the end
#: (which searched better than value leaves in map mode: docs/results.md, "muzero's defaults").
DEFAULT_LEAF = {"map": "rollout", "pack": "rollout", "prefetch": "auto"}
#: Value leaves per batched network pass (option ``leaf_batch``; ``search/uct.py``, "Batched value leaves"): at 16 a
#: pass costs a few times one example's (experiments/bench_muzero_inference.py) and a move's simulations still
#: spread over the tree.
DEFAULT_LEAF_BATCH = 16
#: The prior's focus (option ``focus``; ``search/uct.py``, "Focus"): 0, every move with a choice is searched.
DEFAULT_FOCUS = 0.0


def _choice(name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InputError(f"muzero: option {name} must be one of {', '.join(choices)}, got {value!r}")
    return value


@dataclass(frozen=True)
class MuZeroOptions(Options):
    """The options of the ``muzero`` solver (the module's docstring says what each does)."""

    simulations: int | None = option(None, f"simulations per move (default {DEFAULT_SIMULATIONS})", low=1)
    checkpoint: str | None = option(None, "the network's checkpoint file (default: the shipped network)")
    prior: str = option("network", "the prior of the guided UCT", choices=PRIORS)
    exploration: float | None = option(None, "the UCT / pUCT constant (default: per selection rule and mode)",
                                       low=0.0)
    method: str = option("uct", "the search: guided UCT, or Gumbel / pUCT inside a model", choices=METHODS)
    model: str | None = option(None, "the model the Gumbel / pUCT searches plan in (map mode)", choices=MODELS)
    search_model: str | None = option(None, "the old name of model", choices=MODELS)
    c_scale: float | None = option(None, "the Gumbel / pUCT searches' value scale (default: per model)", low=0.0)
    rollout_depth: int | None = option(None, "rollout steps from a leaf (default: to the end)", low=0)
    selection: str | None = option(None, f"the guided selection rule (default {DEFAULT_SELECTION})",
                                   choices=GUIDED_RULES)
    prior_power: float | None = option(None, f"the prior's power (default {DEFAULT_PRIOR_POWER:g})", low=0.0)
    prior_decay: float | None = option(None, f"the fading of the power with visits (default {DEFAULT_PRIOR_DECAY:g})",
                                       low=0.0)
    leaf: str | None = option(None, "the leaf evaluation (default: per mode)", choices=LEAVES)
    leaf_steps: int | None = option(None, "greedy steps before a mixed leaf's value (default: per leaf)", low=0)
    leaf_value: str = option("network", "what values a leaf: the network or the reference episode",
                             choices=LEAF_VALUES)
    commit: str | None = option(None, "which move is committed: most visited or best return (default: per mode)",
                                choices=COMMITS)
    auto_simulations: int | None = option(None, "leaf=auto's rollouts to the end a move must afford "
                                                f"(default {DEFAULT_AUTO_SIMULATIONS})", low=1)
    leaf_batch: int | None = option(None, "value leaves valued by one network pass "
                                          f"(default {DEFAULT_LEAF_BATCH})", low=1)
    value_checkpoint: str | None = option(None, "prefetch mode: the value head's checkpoint "
                                                "(default: the shipped one, if any)")
    focus: float | None = option(None, "moves whose prior gives the greedy's move at least this are not searched "
                                       f"(default {DEFAULT_FOCUS:g}: all are)", low=0.0, high=1.0)
    start: str | None = option(None, "map mode's fixed-order game: its buffers in the game's order or in the best "
                                     "fallback answer's (default: per mode)", choices=STARTS)


class MuZeroSolver(Solver):
    name = "muzero"
    modes = frozenset({"map", "pack", "prefetch"})
    # imported before the clock starts (mallocgame.engine.runner.preload); not torch: the search reads its networks
    # without it (search/muzero/torchless.py), and a command's limit counts what is preloaded
    preload = ("scipy.optimize",)

    Options = MuZeroOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, opts = request.problem, request.options
        t0 = time.monotonic()
        prior, method, model, checkpoint, c_scale = opts.prior, opts.method, opts.model, opts.checkpoint, opts.c_scale
        rollout_depth, exploration, leaf = opts.rollout_depth, opts.exploration, opts.leaf
        selection = DEFAULT_SELECTION if opts.selection is None else opts.selection
        if opts.search_model is not None:  # the old spelling of model
            if model is not None and model != opts.search_model:
                raise InputError(f"muzero: options model={model!r} and search_model={opts.search_model!r} disagree "
                                 "(search_model is the old name of model; give one)")
            model = opts.search_model
        sims = DEFAULT_SIMULATIONS if opts.simulations is None else opts.simulations
        if exploration is None:
            exploration = DEFAULT_EXPLORATION[selection][problem.mode]
        prior_power = DEFAULT_PRIOR_POWER if opts.prior_power is None else opts.prior_power
        prior_decay = DEFAULT_PRIOR_DECAY if opts.prior_decay is None else opts.prior_decay
        commit = DEFAULT_COMMIT[problem.mode] if opts.commit is None else opts.commit
        leaf_given = leaf is not None
        leaf = DEFAULT_LEAF[problem.mode] if leaf is None else leaf
        leaf_value = opts.leaf_value
        leaf_steps = opts.leaf_steps
        if leaf_steps is None:
            leaf_steps = DEFAULT_LEAF_STEPS if leaf != "auto" else (
                AUTO_LEAF_STEPS_NETWORK if problem.mode == "map" and opts.leaf_value == "network"
                else DEFAULT_AUTO_LEAF_STEPS)
        auto_simulations = DEFAULT_AUTO_SIMULATIONS if opts.auto_simulations is None else opts.auto_simulations
        leaf_batch = DEFAULT_LEAF_BATCH if opts.leaf_batch is None else opts.leaf_batch
        if method != "uct" or model is not None:
            if leaf_given and leaf != "rollout":
                raise InputError("muzero: option leaf=value|mixed|auto is the guided UCT's (method=uct, no model)")
            if problem.mode != "map":
                what = f"model={model}" if model is not None else f"method={method}"
                raise InputError(f"muzero: option {what} plays map mode only, not {problem.mode} mode")
            return _solve_legacy(self.name, request, t0=t0,
                                 sims=sims, checkpoint=checkpoint, search_model=model,
                                 method="gumbel" if method == "uct" else method, c_scale=c_scale,
                                 rollout_depth=rollout_depth)
        return _solve_uct(self.name, request,
                          sims=sims, checkpoint=checkpoint, prior=prior, exploration=float(exploration),
                          rollout_depth=rollout_depth, selection=selection, prior_power=float(prior_power),
                          prior_decay=float(prior_decay), leaf=(leaf, leaf_steps, leaf_value), commit=commit,
                          auto_simulations=auto_simulations, leaf_batch=leaf_batch,
                          value_checkpoint=opts.value_checkpoint,
                          focus=DEFAULT_FOCUS if opts.focus is None else opts.focus,
                          start=opts.start or DEFAULT_START[problem.mode])


# --- the default: UCT with the network's prior (search/uct.py, "Guided selection") --------------
def _game_config(problem: Problem, checkpoint_game: dict | None):
    if problem.mode == "prefetch":
        return GameConfig(variant="prefetch", k=PREFETCH_K, order="xla", windows=2)
    variant, order = DEFAULT_GAME[problem.mode]
    cfg = GameConfig(variant=variant, k=16, order=order)
    if problem.mode == "map" and checkpoint_game is not None:
        cfg = GameConfig(**checkpoint_game)  # the game the network was trained on
    return cfg


def _default_checkpoint(mode: str, valued: bool) -> Path:
    """The network read when no checkpoint is given: the prefetch network in prefetch mode when it is the default
    (``PREFETCH_NETWORK_BY_DEFAULT``; value leaves there read no network), else ``value.pt`` for value leaves and
    ``default.pt`` (map mode's game)."""
    if mode == "prefetch" and PREFETCH_NETWORK_BY_DEFAULT:
        return PREFETCH_CHECKPOINT
    return VALUE_CHECKPOINT if valued else DEFAULT_CHECKPOINT


def _solve_uct(name: str, request: SolveRequest, *, sims: int, checkpoint: str | None, prior: str, exploration: float,
               rollout_depth: int | None, selection: str, prior_power: float, prior_decay: float = 0.0,
               leaf: tuple[str, int, str] = ("rollout", 0, "network"), commit: str,
               auto_simulations: int = 2, leaf_batch: int = 1, value_checkpoint: str | None = None,
               focus: float = 0.0, start: str = "game") -> Solution:
    problem, hardware = request.problem, request.hardware
    stats: dict[str, Any] = {"method": "uct", "selection": selection, "exploration": exploration,
                             "prior_power": prior_power, "prior_decay": prior_decay, "commit": commit}
    net = trained_game = None
    valued = leaf[0] != "rollout" and leaf[2] == "network" and problem.mode != "prefetch"  # no value net there
    blend = BLENDED_PRIORS.get(prior)
    if blend is not None and problem.mode != "map":
        stats["blend"] = f"none (the relaxation prior plays map mode only, not {problem.mode}): the network alone"
        prior, blend = "network", None
    if prior == "network" or blend or valued:
        path = checkpoint or os.environ.get(CHECKPOINT_ENV) or str(_default_checkpoint(problem.mode, valued))
        net, trained_game = load_agent_network(path)
        stats["checkpoint"] = path
    game_cfg = _game_config(problem, trained_game)
    answer_net = game_cfg.order == ANSWER_ORDER and start != "answer"  # a network of the answer's order, not played
    if answer_net:
        game_cfg = dataclasses.replace(game_cfg, order=DEFAULT_GAME[problem.mode][1])
    value_net = net if net is not None and GameConfig(**trained_game) == game_cfg else None  # its game, or none
    if blend:  # the network joined with the relaxation: without a network for this game, the relaxation alone
        prior = "network" if value_net is not None else "relaxation"
    if net is not None and value_net is None and prior == "network":
        why = (" by default: checkpoint=" + str(PREFETCH_CHECKPOINT) + " plays it"
               if problem.mode == "prefetch" and not PREFETCH_NETWORK_BY_DEFAULT and PREFETCH_CHECKPOINT.is_file()
               else "")
        stats["prior"] = ("uniform (the network plays the game in the answer's order: start=answer)" if answer_net
                          else f"uniform (no network trained for {problem.mode} mode's {game_cfg.variant} game{why})")
    else:
        stats["prior"] = "network" if value_net is not None and prior == "network" else "uniform"
    net = value_net if prior == "network" else None
    prior_fn = NetworkPrior(net) if net is not None else uniform_prior
    if prior == "relaxation":
        if problem.mode == "map":
            prior_fn, stats["prior"] = RelaxationPrior(), "relaxation"
        else:
            stats["prior"] = f"uniform (the relaxation prior plays map mode only, not {problem.mode})"
    elif blend and net is not None:
        prior_fn, stats["prior"] = BlendedPrior(prior_fn, RelaxationPrior(), blend), f"network-relaxation-{blend}"
    # the prefetch network's value head is untrained (policy-only expert iteration): prefetch leaves read the prefetch
    # value head, if any, or the reference
    leaf_fn = (_prefetch_leaf_evaluator(leaf, value_checkpoint, stats) if problem.mode == "prefetch"
               else _leaf_evaluator(leaf, value_net, stats))
    reads_relax = isinstance(prior_fn, RelaxationPrior | BlendedPrior) or getattr(net, "features", "") in WITH_RELAX
    valued_relax = isinstance(leaf_fn, NetworkValue) and getattr(value_net, "features", "") in WITH_RELAX
    data = GameData(problem, hardware) if problem.mode == "map" and (reads_relax or valued_relax) else None

    def prepare(prior_now, answer_stats: dict):
        """The relaxation, solved once before the search shares its time out over the moves, in a share of the
        limit, and after the fallback answers (solve_with_uct), so that its time does not cut them short."""
        if data is None:
            return prior_now
        relaxation_set(data, time_limit=min(RELAX_SECONDS, request.budget.part(RELAX_SHARE).seconds))
        if reads_relax and not relaxation_usable(data):
            if isinstance(prior_now, BlendedPrior) and getattr(net, "features", "") not in WITH_RELAX:
                answer_stats["prior"] = "network (the relaxation found no fast set in its time)"
                return prior_now.network
            answer_stats["prior"] = "uniform (the relaxation found no fast set in its time)"
            return uniform_prior
        return prior_now

    cfg = MCTSConfig(simulations=sims, exploration=exploration, rollout="greedy", rollout_depth=rollout_depth,
                     commit=commit, guided=selection, prior_power=prior_power, prior_decay=prior_decay,
                     leaf=leaf[0], leaf_steps=leaf[1], auto_simulations=auto_simulations, leaf_batch=leaf_batch,
                     focus=focus)
    solution = solve_with_uct(name, request, cfg, game_cfg, prior=prior_fn, data=data, stats=stats, leaf_value=leaf_fn,
                              prepare=prepare, start=start, prior_reads_any_order=_reads_any_order(prior_fn))
    # The network is asked exactly when the search asks its prior (never at a forced move) or values a leaf.
    calls = ((prior_fn.calls if isinstance(prior_fn, NetworkPrior | BlendedPrior) else 0)
             + (leaf_fn.calls if isinstance(leaf_fn, NetworkValue) else 0))
    passes = ({"leaf_passes": leaf_fn.passes} if isinstance(leaf_fn, NetworkValue) else
              {"value_head_calls": leaf_fn.calls} if isinstance(leaf_fn, PrefetchValue) else {})
    return dataclasses.replace(solution, stats={**solution.stats, "network_evaluations": calls, **passes})


def _reads_any_order(prior_fn) -> bool:
    """Whether ``prior_fn`` may guide the fixed-order game in any order of its buffers (``start="answer"``): the
    uniform prior, and the relaxation's, which reads only which buffer is decided; not the network's, which reads the
    game in the order it was trained on."""
    return prior_fn is uniform_prior or isinstance(prior_fn, RelaxationPrior)


def _leaf_evaluator(leaf: tuple[str, int, str], value_net, stats: dict):
    """The leaf evaluator of ``leaf = (leaf, leaf_steps, leaf_value)``: None for rollouts, the network's value head
    (:class:`~mallocgame.search.muzero.value.NetworkValue`) or the reference control; ``stats`` says which."""
    kind, steps, which = leaf
    if kind == "rollout":
        return None
    stats.update({"leaf": kind, "leaf_steps": steps if kind in ("mixed", "auto") else 0})
    if which == "network" and value_net is not None and reads_value_target(value_net):
        stats["leaf_value"] = "network"
        return NetworkValue(value_net)
    stats["leaf_value"] = ("reference" if which == "reference" else "reference (no network for this game)"
                           if value_net is None else
                           "reference (the checkpoint's value head is not trained on the value leaves' target)")
    return reference_value


def _prefetch_leaf_evaluator(leaf: tuple[str, int, str], path: str | None, stats: dict):
    """Prefetch mode's leaf evaluator of ``leaf = (leaf, leaf_steps, leaf_value)``: None for rollouts, the prefetch
    value head of ``path`` (default ``PREFETCH_VALUE_CHECKPOINT`` where shipped) when it is marked with the value
    leaves' target, else the reference control; ``stats`` says which and why."""
    kind, steps, which = leaf
    if kind == "rollout":
        return None
    stats.update({"leaf": kind, "leaf_steps": steps if kind in ("mixed", "auto") else 0})
    if which == "reference":
        stats["leaf_value"] = "reference"
        return reference_value
    if path is None and PREFETCH_VALUE_CHECKPOINT.is_file():
        path = str(PREFETCH_VALUE_CHECKPOINT)
    if path is None:
        stats["leaf_value"] = "reference (no value head for prefetch mode's game)"
        return reference_value
    try:
        head, why = load_prefetch_head(path)
    except ValueError as exc:
        raise InputError(f"muzero: option value_checkpoint: {exc}") from None
    stats["value_checkpoint"] = path
    if head is None:
        stats["leaf_value"] = f"reference ({why})"
        return reference_value
    stats["leaf_value"] = "prefetch head"
    return PrefetchValue(head)


# --- the searches inside a model (Gumbel / pUCT of search.muzero.search), map mode ---------------
def _solve_legacy(name: str, request: SolveRequest, *, t0: float, sims: int, checkpoint: str | None,
                  search_model: str | None, method: str, c_scale: float | None, rollout_depth: int | None) -> Solution:
    problem, hardware, seed, hint = request.problem, request.hardware, request.seed, request.hint
    searching = request.budget.part(LEGACY_SEARCH_SHARE, keep=SAFETY)
    held = held_baselines(request.facts, request.budget.seconds)  # first: the answer is never below them

    model = search_model or os.environ.get(MODEL_ENV) or "simulator"
    model = _choice("model", model, MODELS)
    path = (checkpoint or os.environ.get(CHECKPOINT_ENV)
            or str(LEARNED_CHECKPOINT if model == "learned" else LEGACY_CHECKPOINT))
    c_scale = DEFAULT_C_SCALE[model] if c_scale is None else c_scale
    net, game_fields = load_agent_network(path)
    if getattr(net, "features", ""):
        raise InputError(f"muzero: method {method!r} / model read the plain observation, but checkpoint {path} "
                         f"reads features {net.features!r}; give one from `mallocgame train` (checkpoint=...)")
    if game_fields.get("order") == ANSWER_ORDER:
        raise InputError(f"muzero: method {method!r} / model play greedy-xla's order, but checkpoint {path}'s network "
                         "plays the answer's (method=uct)")
    search = SearchConfig(simulations=sims, method=method, gumbel_scale=0.0, c_scale=c_scale)
    depth = (DEFAULT_ROLLOUT_DEPTH if model == "simulator" else 0) if rollout_depth is None else rollout_depth
    if depth and model != "simulator":
        raise InputError("muzero: option rollout_depth needs model=simulator with method gumbel/puct")
    agent = Agent(net, search, model, depth)
    rng = np.random.default_rng(seed)

    data = GameData(problem, hardware)
    config = GameConfig(**game_fields)
    greedy = Game(problem, hardware, config, data=data)
    _finish_greedily(greedy, searching.deadline)  # the incumbent first: cheap, and an answer whatever happens next
    game = Game(problem, hardware, config, data=data)
    play = _Play(game, agent, rng, sims, searching)
    play.run()

    candidates = [(game.total_reward(), game.offsets(), "search" if play.greedy_moves == 0 else
                   "search+greedy" if game.done else "search (cut short)")]
    if agent.best_rollout is not None:
        candidates.append((agent.best_rollout[0], agent.best_rollout[1], "rollout"))
    if greedy.done:
        candidates.append((greedy.total_reward(), greedy.offsets(), "greedy"))
    if hint is not None and len(hint.offsets) == problem.n:
        off = offsets_array(hint.offsets)
        candidates.append((data.evaluator.value(off) / data.reward_norm, off, "hint"))
    value, offsets, source = max(candidates, key=lambda c: c[0])  # first wins ties: the search's own
    stats = {"checkpoint": path, "method": method, "model": model, "search_model": model, "c_scale": c_scale,
             "rollout_depth": depth, "simulations_per_move": sims,
             "simulations": play.simulations, "searched_moves": play.searched_moves,
             "greedy_moves": play.greedy_moves, "forced_moves": play.forced_moves, "network_evaluations": agent.evaluator.calls,
             "search_value_normalised": game.total_reward(), "answer_from": source,
             "game": dict(game_fields)}
    answer = Solution(offsets=offsets_tuple(offsets), status=Status.FEASIBLE, mode=problem.mode,
                      objective=value * data.reward_norm, wall_time=time.monotonic() - t0,
                      history=((time.monotonic() - t0, value * data.reward_norm),), stats=stats, solver=name)
    return no_worse_than_held(problem, hardware, answer, held, answer_from=source)


class _Play:
    """Commit moves by search while ``budget`` allows, then greedily (the searches inside a model)."""

    def __init__(self, game, agent, rng: np.random.Generator, sims: int, budget: Budget):
        self.game, self.agent, self.rng, self.sims, self.budget = game, agent, rng, sims, budget
        self.simulations = self.searched_moves = self.greedy_moves = self.forced_moves = 0
        self.sim_seconds = 0.0  # measured cost of one simulation (running mean)

    def _moves_left(self) -> int:
        left = getattr(self.game, "decisions_left", None)
        return max(1, int(left) if left is not None else self.game.data.n - self.game.steps)

    def _affordable(self) -> int:
        """Simulations this move can pay for if the rest of the budget is spread evenly."""
        if self.simulations == 0:
            return self.sims
        per_move = self.budget.left() / self._moves_left()
        return min(self.sims, int(per_move / max(self.sim_seconds, 1e-6)))

    def run(self) -> None:
        game = self.game
        while not game.done:
            now = time.monotonic()
            if self.budget.expired():
                return
            legal = game.legal_actions()
            if legal.size == 1:  # a forced move: nothing to search (the search would return it unsearched)
                game.step(int(legal[0]))
                self.forced_moves += 1
                continue
            sims = self._affordable()
            if sims < 2:  # cannot afford a search: a greedy move banks the time for later ones
                game.step(game.greedy_action())
                self.greedy_moves += 1
                continue
            result = self.agent.search(game, self.rng, simulations=sims)
            if result.simulations:
                spent = (time.monotonic() - now) / result.simulations
                n = self.simulations
                self.sim_seconds = (self.sim_seconds * n + spent * result.simulations) / (n + result.simulations)
                self.simulations += result.simulations
            self.searched_moves += 1
            game.step(result.action)


def _finish_greedily(game, deadline: float) -> int:
    """Greedy moves until done or ``deadline``; undecided buffers stay slow. Returns the moves made."""
    moves = 0
    while not game.done and time.monotonic() < deadline:
        game.step(game.greedy_action())
        moves += 1
    return moves
