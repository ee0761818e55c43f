"""Plain UCT Monte Carlo tree search with greedy rollouts on the mallocGame (the traditional baseline).

Runs :class:`mallocgame.search.uct.UCTSearch` on one variant of the game (:mod:`mallocgame.search.game`; by
default the fixed-order game in greedy-xla's order in map mode, the fixed-address game in
pack mode), committing one move at a time with ``simulations`` new simulations per move
(option ``simulations``, default 16) within ``time_limit``. The answer is the best
complete episode seen: the committed path, a rollout that reached the end, the greedy
episodes of the other game shapes (fixed order by start and by greedy-xla's order, which
replays ``greedy-xla`` exactly; fixed address), or the ``hint``. Pack mode: the game
places every buffer it can within the capacity (no capacity: it minimises the peak); an
episode that leaves a buffer out is not a packing, so the status is then UNKNOWN and the
runner reports it invalid.

Prefetch mode (docs/prefetch.md): the prefetch variant of the game (:mod:`mallocgame.search.game_prefetch`,
one decision per use segment, buffers in greedy-xla's order, ``k`` offsets for each of
``windows`` copy windows), searched the same way; the answer is the final fast intervals. It is
never worse than the greedy episodes of the prefetch game in both buffer orders, greedy-xla's
map answer lifted to prefetch mode (:func:`mallocgame.formats.lift.lift_map_answer`), all-slow, or
the ``hint`` (a prefetch answer; a map answer is lifted), compared with
:class:`mallocgame.hardware.prefetch_cost.PrefetchEvaluator`.

Options (`MCTSOptions`; `mallocgame solvers mcts` lists them): ``variant`` ("order" | "address"; prefetch mode
always plays "prefetch"), ``k`` (default 16; prefetch mode 4), ``windows`` (prefetch mode, default 2),
``order``, ``rollout`` ("greedy" | "random"), ``epsilon``, ``rollout_depth`` (rollout steps past the root; default:
to the end of the episode, in every mode), ``leaf``, ``exploration``, ``commit`` ("visits" | "max"; default
``DEFAULT_COMMIT`` of :mod:`mallocgame.search.uct`: "max" in map and prefetch modes, where committing to the most
visited move led the search away from the best episode it had seen, "visits" in pack mode).

``start`` (map mode's fixed-order game; default ``DEFAULT_START`` of :mod:`mallocgame.search.uct`, "answer" in map
mode): "game" plays the buffers in the game's order (``order``) from its greedy episode; "answer" starts from the best
fallback answer: the game keeps its order where that answer is its own greedy episode (greedy-xla's), else plays the
buffers in the answer's order, its fast buffers by offset (:func:`mallocgame.search.game_order.answer_order`), in which
the game's greedy episode replays that answer or betters it; the greedy's moves then enter the tree with their known
returns (:class:`mallocgame.search.uct.MCTSConfig` ``known_greedy``), so each move's simulations try alternatives to
the answer. ``stats["start"]`` names the answer. "answer" was ahead of "game" at 10 s on the real-size tuning recipes
(docs/results.md, "Where map mode's search starts").

``leaf``: "rollout" (every mode's default, ``DEFAULT_LEAF``: a new leaf is valued by a rollout, to the end or
``rollout_depth`` steps past the root) or "auto" (:mod:`mallocgame.search.uct`, "Value leaves", without a network:
rollouts to the end where the time per move affords ``AUTO_SIMULATIONS`` of them, else ``AUTO_LEAF_STEPS`` greedy
steps and the return still to come in the greedy episode from the search's start; the muzero solver's prefetch
leaf, so that its uniform control is mcts with ``leaf="auto"``). In prefetch mode, at 10 s on the tuning problems,
neither "auto" nor a rollout depth of 16-1024 steps was ahead of rollouts to the end (docs/results.md, "mcts's
defaults").
"""

from __future__ import annotations

from dataclasses import dataclass

from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options, SolveRequest, option
from mallocgame.problem.model import InputError, Solution
from mallocgame.search.game import GameConfig
from mallocgame.search.uct import (
    COMMITS,
    DEFAULT_COMMIT,
    DEFAULT_GAME,
    DEFAULT_START,
    PREFETCH_K,
    STARTS,
    MCTSConfig,
    reference_value,
    solve_with_uct,
)

ORDERS = ("start", "xla", "size")  # the buffer orders of the fixed-order games (search.game_data.buffer_order)
#: The leaf evaluations of mcts (option ``leaf``): a rollout (to the end, or ``rollout_depth`` steps past the root),
#: or "auto" (module docstring).
MCTS_LEAVES = ("rollout", "auto")
#: The leaf evaluation per mode (option ``leaf``): rollouts in every mode; in prefetch mode neither "auto" nor rollouts
#: cut at 16-1024 steps were ahead of rollouts to the end on the tuning problems (docs/results.md, "mcts's defaults").
DEFAULT_LEAF = {"map": "rollout", "pack": "rollout", "prefetch": "rollout"}
#: ``leaf="auto"``: greedy steps before the reference episode values a leaf, and the rollouts to the end a move must
#: afford for rollouts to be played (the muzero solver's prefetch-mode values, so that its uniform control is mcts).
AUTO_LEAF_STEPS = 64
AUTO_SIMULATIONS = 2


@dataclass(frozen=True)
class MCTSOptions(Options):
    """The options of the ``mcts`` solver (the module's docstring says what each does)."""

    simulations: int | None = option(None, f"simulations per move (default {MCTSConfig.simulations})", low=1)
    variant: str | None = option(None, "the game: fixed order or fixed address (default: per mode)",
                                 choices=("order", "address", "prefetch"))
    k: int | None = option(None, f"offsets per decision (default 16; prefetch mode {PREFETCH_K})", low=1)
    order: str | None = option(None, "the buffer order of the fixed-order games (default: per mode)", choices=ORDERS)
    rollout: str = option("greedy", "the rollout policy", choices=("greedy", "random"))
    epsilon: float = option(0.0, "the share of random moves in a greedy rollout", low=0.0, high=1.0)
    rollout_depth: int | None = option(None, "rollout steps from a leaf (default: to the end)", low=0)
    exploration: float = option(1.0, "the UCT constant on sibling-normalised values", low=0.0)
    commit: str | None = option(None, "which move is committed: most visited or best return (default: per mode)",
                                choices=COMMITS)
    windows: int = option(2, "copy windows per use segment (prefetch mode)", low=1, high=3)
    leaf: str | None = option(None, "the leaf evaluation: a rollout, or 'auto' (rollouts where a move affords "
                                    f"{AUTO_SIMULATIONS} to the end, else {AUTO_LEAF_STEPS} greedy steps and the "
                                    "greedy episode's return to go) (default: per mode)", choices=MCTS_LEAVES)
    start: str | None = option(None, "map mode's fixed-order game: its buffers in the game's order or in the best "
                                     "fallback answer's (default: per mode)", choices=STARTS)


class MCTSSolver(Solver):
    name = "mcts"
    modes = frozenset({"map", "pack", "prefetch"})
    Options = MCTSOptions

    def solve(self, request: SolveRequest) -> Solution:
        problem, opts = request.problem, request.options
        simulations, variant, k, order, windows = opts.simulations, opts.variant, opts.k, opts.order, opts.windows
        rollout, epsilon, rollout_depth, exploration, commit = (opts.rollout, opts.epsilon, opts.rollout_depth,
                                                                opts.exploration, opts.commit)
        leaf = opts.leaf or DEFAULT_LEAF[problem.mode]
        try:  # an option value the game or the search cannot take is bad input (one line, exit 2)
            cfg = MCTSConfig(simulations=simulations or MCTSConfig.simulations, exploration=exploration,
                             rollout=rollout, epsilon=epsilon, rollout_depth=rollout_depth,
                             commit=commit or DEFAULT_COMMIT[problem.mode], leaf=leaf, leaf_steps=AUTO_LEAF_STEPS,
                             auto_simulations=AUTO_SIMULATIONS)
            if problem.mode == "prefetch":
                if variant not in (None, "prefetch"):
                    raise ValueError(f"prefetch mode plays the prefetch variant of the game, not {variant!r}")
                game_cfg = GameConfig(variant="prefetch", k=PREFETCH_K if k is None else k, order=order or "xla",
                                      windows=windows)
            else:
                if variant == "prefetch":
                    raise ValueError(f"the prefetch variant of the game plays prefetch mode, not {problem.mode} mode")
                default_variant, default_order = DEFAULT_GAME[problem.mode]
                game_cfg = GameConfig(variant=variant or default_variant, k=16 if k is None else k,
                                      order=order or (default_order if variant in (None, default_variant) else "start"))
        except (ValueError, TypeError) as exc:
            raise InputError(f"mcts: {exc}") from None
        stats = {"leaf_steps": AUTO_LEAF_STEPS, "leaf_value": "reference"} if leaf == "auto" else None
        return solve_with_uct(self.name, request, cfg, game_cfg, stats=stats,
                              leaf_value=reference_value if leaf == "auto" else None,
                              start=opts.start or DEFAULT_START[problem.mode])
