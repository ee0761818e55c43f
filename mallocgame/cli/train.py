"""``mallocgame train``: train the mallocMuZero agent by self-play and save a checkpoint.

Attached lazily to the CLI (``LAZY_COMMANDS``), so torch is imported only when training.
SIGINT/SIGTERM stop the run (exit 130 / 143) and say which step the checkpoint holds;
``--resume CKPT`` continues from it exactly (same settings, same random stream).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from mallocgame.cli.common import SECONDS, SEED, check_output, fail, is_stdout
from mallocgame.cli.progress import status
from mallocgame.engine.pools import check_ray_address
from mallocgame.problem.model import InputError
from mallocgame.runtime.interrupts import Interrupted, ignore_signals, raise_on_signals
from mallocgame.search.muzero.distributed import RaySelfPlay
from mallocgame.search.muzero.env import game_factory
from mallocgame.search.muzero.inference import NumpyNet
from mallocgame.search.muzero.problems import CURRICULA, REAL_SIZES, Recipe, named_curriculum, tuning_recipes
from mallocgame.search.muzero.value import generate, train_context_head
from mallocgame.search.uct import PREFETCH_K

#: The prefetch game exactly as the ``muzero`` solver plays it (``solvers/muzero.py``), so the checkpoint is one the
#: solver reads in prefetch mode.
PREFETCH_GAME_FIELDS = {"variant": "prefetch", "k": PREFETCH_K, "order": "xla", "windows": 2}


@click.command()
@click.option("--steps", type=int, default=2000, show_default=True, help="Total gradient updates (with --resume: the new total).")
@click.option("--games-per-iter", type=int, default=4, show_default=True, help="Self-play games per iteration.")
@click.option("--updates-per-iter", type=int, default=16, show_default=True, help="Gradient updates per iteration.")
@click.option("--simulations", type=int, default=8, show_default=True, help="Search simulations per self-play move.")
@click.option("--search", "search_method", type=click.Choice(["gumbel", "puct"]), default="gumbel", show_default=True)
@click.option("--model", type=click.Choice(["learned", "simulator"]), default="learned", show_default=True,
              help="Self-play plans with the learned dynamics (MuZero) or the true game (AlphaZero style).")
@click.option("--rollout-depth", type=int, default=0, show_default=True,
              help="--model simulator: greedy moves of the true game before the value head judges a leaf.")
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option("--unroll", type=int, default=5, show_default=True, help="Dynamics steps unrolled per sample (K).")
@click.option("--td-steps", type=int, default=10, show_default=True, help="n of the n-step value target.")
@click.option("--lr", "learning_rate", type=float, default=1e-3, show_default=True)
@click.option("--consistency-weight", type=float, default=1.0, show_default=True,
              help="Weight of the latent consistency loss (EfficientZero); 0 turns it off.")
@click.option("--reanalyse-fraction", type=float, default=0.25, show_default=True,
              help="Share of each batch's positions searched again with the current network (MuZero Reanalyse).")
@click.option("--init", "init_path", default=None, metavar="PT",
              help="Start from this checkpoint's weights (same network and game) instead of a seeded initialisation.")
@click.option("--curriculum", type=click.Choice(CURRICULA), default="small", show_default=True,
              help="Training problems: 'small' (layered and random-interval programs of --min-size..--max-size) or "
                   "'real' (XLA-compiled JAX, torch-exported, layered and, in map mode, random-interval programs of "
                   "1,000-15,000 buffers; needs jax and torch).")
@click.option("--mode", type=click.Choice(["map", "prefetch"]), default="map", show_default=True,
              help="map: the fixed-order game (--k, --order); prefetch: the prefetch game as the muzero solver "
                   "plays it (k = 4 per copy window, two windows, greedy-xla's order).")
@click.option("--min-size", type=int, default=None, help="Smallest training problem (buffers) [default: 16; "
              "--curriculum real: 1000].")
@click.option("--max-size", type=int, default=None, help="Largest training problem (buffers) [default: 64; "
              "--curriculum real: 15000].")
@click.option("--replay-capacity", type=int, default=None, help="Positions the replay buffer keeps [default: 20000; "
              "--curriculum real: 200000].")
@click.option("--k", "k", type=int, default=16, show_default=True, help="Game (map mode): candidate offsets per move.")
@click.option("--order", type=click.Choice(["start", "xla", "size"]), default="xla", show_default=True,
              help="Game (map mode): buffer order of the fixed-order variant.")
@click.option("-o", "--output", "--out", "out_path", default="muzero.pt", show_default=True, metavar="CKPT",
              help="Training checkpoint (written atomically; resumable; not '-').")
@click.option("--resume", "resume_path", default=None, metavar="CKPT",
              help="Continue this checkpoint with its own settings; only --steps, --output, --export, "
                   "--time-limit and --checkpoint-every apply.")
@click.option("--export", "export_path", default=None, metavar="PT",
              help="Also write a small model-only copy (what the solver needs) here.")
@click.option("--value-head-seconds", type=SECONDS, default=None, metavar="SECONDS",
              help="With --export: then label the curriculum's problems with the value leaves' target for this long "
                   "(greedy rollouts from the children of walk states, search.muzero.value) and add a value-leaf "
                   "head trained on them to the export, marked with that target; without it value leaves do not "
                   "read the export's value head (it estimates another target).")
@click.option("--checkpoint-every", type=int, default=10, show_default=True, help="Save every N iterations.")
@click.option("--tune-every", type=int, default=None, metavar="N",
              help="Every N iterations play the curriculum's tuning recipes (tuning_recipes: fixed seeds no training "
                   "draws) with the policy alone, log its return / greedy's and the value head's error there, and "
                   "keep the best so far as a model-only <output>.best.pt; 0: never [default: 0; --curriculum real: "
                   "2]. Applies with --resume.")
@click.option("--tune-count", type=click.IntRange(min=1), default=4, show_default=True,
              help="Tuning recipes (families in turn, sizes spread over the curriculum's).")
@click.option("--time-limit", "--time-budget", "time_budget", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop at the first iteration boundary after this many seconds (the run is then not "
                   "reproducible in length; resume continues it exactly). --time-budget is an alias.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--ray-actors", "ray_actors", type=click.IntRange(min=1), default=None, metavar="N",
              help="Play each iteration's self-play games on N Ray actors (pip install 'mallocgame[ray]'); "
                   "reproducible under --seed whatever N, but another game stream than local self-play.")
@click.option("--address", default=None, metavar="ADDR",
              help="With --ray-actors: the Ray cluster to join; default: a local runtime.")
@click.option("--quiet", is_flag=True, help="No status line on stderr (by default one on a terminal).")
def train(steps, games_per_iter, updates_per_iter, simulations, search_method, model, rollout_depth, batch_size, unroll, td_steps,
          learning_rate, consistency_weight, reanalyse_fraction, init_path, curriculum, mode, min_size, max_size,
          replay_capacity, k, order, out_path,
          resume_path, export_path, checkpoint_every, tune_every, tune_count,
          time_budget, seed, ray_actors, address, quiet=False, value_head_seconds=None) -> None:
    """Train the muzero solver's network by self-play on generated problems; deterministic under --seed."""
    _check_files_and_ray(out_path, export_path, time_budget=time_budget, resume_path=resume_path,
                         ray_actors=ray_actors, address=address)
    if value_head_seconds is not None and not export_path:
        fail("--value-head-seconds: needs --export (the head is added to the exported network)")
    if value_head_seconds is not None and not value_head_seconds > 0:
        fail(f"--value-head-seconds: must be a positive number of seconds, got {value_head_seconds}")
    try:
        from mallocgame.search.muzero import checkpoint as ckpt
        from mallocgame.search.muzero.train import TrainConfig, describe, new_state, resume_state
    except ImportError as exc:
        fail(f"train needs torch ({exc}): pip install 'mallocgame[train]'")

    try:
        problems = named_curriculum(curriculum, mode, min_size, max_size)
    except ValueError as exc:
        fail(str(exc))
    min_size, max_size = problems.min_size, problems.max_size
    if replay_capacity is None:
        replay_capacity = 200_000 if curriculum == "real" else 20_000
    _check_settings({"--steps": steps, "--games-per-iter": games_per_iter, "--updates-per-iter": updates_per_iter,
                     "--batch-size": batch_size, "--unroll": unroll, "--td-steps": td_steps, "--k": k,
                     "--min-size": min_size, "--replay-capacity": replay_capacity}, simulations=simulations,
                    consistency_weight=consistency_weight, model=model, rollout_depth=rollout_depth, tune_every=tune_every,
                    reanalyse_fraction=reanalyse_fraction, init_path=init_path, resume_path=resume_path,
                    min_size=min_size, max_size=max_size)
    t0 = time.monotonic()
    try:
        if resume_path:
            payload = ckpt.load(resume_path)
            state = resume_state(payload, game_factory(payload["game"]))
        else:
            config = TrainConfig(games_per_iter=games_per_iter, updates_per_iter=updates_per_iter,
                                 batch_size=batch_size, unroll=unroll, td_steps=td_steps,
                                 learning_rate=learning_rate, simulations=simulations, search_method=search_method,
                                 model=model, rollout_depth=rollout_depth, curriculum=problems, replay_capacity=replay_capacity,
                                 consistency_weight=consistency_weight, reanalyse_fraction=reanalyse_fraction)
            game_fields = (dict(PREFETCH_GAME_FIELDS) if mode == "prefetch"
                           else {"variant": "order", "k": k, "order": order})
            init = ckpt.load(init_path) if init_path else None
            state = new_state(config, seed, game_factory(game_fields), game_fields, Recipe("layered", min_size, 0),
                              init=init)
    except ckpt.CheckpointError as exc:
        fail(f"--resume: {exc}" if resume_path else f"--init: {exc}" if init_path else str(exc))
    make_game = game_factory(state.game_config)
    click.echo(describe(state))
    click.echo(f"start at step {state.step}, train to {steps}; checkpoint -> {out_path}")
    deadline = None if time_budget is None else t0 + time_budget
    if tune_every is None:
        tune_every = 2 if state.config.curriculum.min_size >= REAL_SIZES[0] else 0
    tuning = tuning_recipes(state.config.curriculum, tune_count) if tune_every else []
    if tuning:
        click.echo("tuning recipes: " + ", ".join(f"{r.kind}-{r.n}-c{r.capacity_fraction:g}-s{r.seed}" for r in tuning))
    with status(f"train: step {state.step} of {steps}", quiet=quiet) as line:
        _train_to(state, steps, make_game, out_path=out_path, checkpoint_every=checkpoint_every, deadline=deadline,
                  ray_actors=ray_actors, address=address, line=line, tuning=tuning, tune_every=tune_every)
    if export_path:
        ckpt.atomic_save(ckpt.model_only(state.payload()), export_path)
        if value_head_seconds:
            _value_leaf_head(state, state.config.curriculum, export_path, value_head_seconds, seed)
    click.echo(f"done: step {state.step}, {state.replay.total_games} games, {time.monotonic() - t0:.0f}s; "
               f"saved {out_path}" + (f" and {export_path}" if export_path else ""))


def _value_leaf_head(state, curriculum, export_path: str, seconds: float, seed: int) -> None:
    """Label ``curriculum``'s problems with the value leaves' target under the trained network for ``seconds``
    (:func:`mallocgame.search.muzero.value.generate`, four fifths of them) and add a ``context_value`` head trained
    on them (:func:`~mallocgame.search.muzero.value.train_context_head`, the rest) to ``export_path``; on
    SIGINT/SIGTERM the export stays the plain network."""
    net = NumpyNet.from_torch(state.net)
    try:
        with raise_on_signals(), tempfile.TemporaryDirectory() as tmp:
            data = str(Path(tmp) / "labels.npz")
            done = generate(data, net, dict(state.game_config), curriculum, seed=seed, seconds=0.8 * seconds)
            if done < 2 or len(np.unique(np.load(data)["problem"])) < 2:
                fail(f"--value-head-seconds: {seconds:g} s labelled {done} problem(s); the head needs two or more "
                     "(one to choose it on): give more seconds")
            summary = train_context_head(data, export_path, export_path, inputs="context", seconds=0.2 * seconds,
                                         seed=seed)
    except Interrupted as stop:
        ignore_signals()
        click.echo(f"interrupted by {stop.signal_name} while training the value leaves' head; {export_path} holds "
                   "the network without it")
        sys.exit(stop.exit_code)
    click.echo(f"value leaves' head: {done} problems, {summary['rows']} labels; validation MSE "
               f"{summary['val_mse_shrunk']:.4g} (y = 0: {summary['val_mse_zero']:.4g}); added to {export_path}")


def _check_files_and_ray(out_path: str, export_path: str | None, *, time_budget: float | None,
                         resume_path: str | None, ray_actors: int | None, address: str | None) -> None:
    """Exit 2 for an output that cannot be written, a bad time limit, a missing --resume checkpoint or
    unusable Ray flags: all checked before paying for torch."""

    for name, path in (("--output", out_path), ("--export", export_path)):
        if is_stdout(path):
            fail(f"{name}: a checkpoint is not written to stdout; give a file")
        check_output(path, name)
    if time_budget is not None and not time_budget > 0:
        fail(f"--time-limit: must be a positive number of seconds, got {time_budget}")
    if resume_path and not os.path.isfile(resume_path):
        fail(f"--resume: {resume_path}: checkpoint not found")
    if address is not None and ray_actors is None:
        fail("--address: only with --ray-actors")
    if ray_actors is not None:
        if importlib.util.find_spec("ray") is None:
            fail("--ray-actors: ray is not installed (pip install 'mallocgame[ray]')")

        try:
            check_ray_address(address)
        except InputError as exc:
            fail(str(exc).replace("--executor ray", "--ray-actors"))


def _check_settings(positive: dict[str, int], *, simulations: int, consistency_weight: float,
                    reanalyse_fraction: float, model: str, rollout_depth: int, tune_every: int | None, init_path: str | None,
                    resume_path: str | None, min_size: int, max_size: int) -> None:
    """Exit 2 for a training setting out of its range (``positive``: flag -> value, each must be > 0)."""
    for name, value in positive.items():
        if value <= 0:
            fail(f"{name}: must be positive, got {value}")
    if simulations < 0:
        fail(f"--simulations: must be >= 0, got {simulations}")
    if not consistency_weight >= 0:
        fail(f"--consistency-weight: must be >= 0, got {consistency_weight}")
    if not 0 <= reanalyse_fraction <= 1:
        fail(f"--reanalyse-fraction: must be in [0, 1], got {reanalyse_fraction}")
    if tune_every is not None and tune_every < 0:
        fail(f"--tune-every: must be >= 0, got {tune_every}")
    if rollout_depth < 0:
        fail(f"--rollout-depth: must be >= 0, got {rollout_depth}")
    if rollout_depth and model != "simulator":
        fail("--rollout-depth: needs --model simulator (the learned model has no game to roll out)")
    if init_path and resume_path:
        fail("--init: not with --resume (a resumed run has its own weights)")
    if max_size < min_size:
        fail(f"--max-size: must be >= --min-size ({min_size}), got {max_size}")


def _shower(line, steps: int):
    """The training log's printer: one ``key=value`` line per entry on stdout, and the status line
    (``line``, `mallocgame.cli.progress.status`) set to the step reached."""
    def show(entry: dict) -> None:
        line.echo(" ".join(f"{k}={v}" for k, v in entry.items()))
        if "step" in entry:
            line.set(f"train: step {entry['step']} of {steps}")
    return show


def _train_to(state, steps: int, make_game, *, out_path: str, checkpoint_every: int, deadline: float | None,
              ray_actors: int | None, address: str | None, line, tuning=(), tune_every: int = 0) -> None:
    """Train ``state`` to ``steps`` (or the deadline), self-play local or on Ray actors; on SIGINT/SIGTERM
    say which step the checkpoint holds and exit 130 / 143."""
    from mallocgame.search.muzero import checkpoint as ckpt
    from mallocgame.search.muzero.train import train as run_training

    play = None
    try:
        with raise_on_signals():
            if ray_actors is not None:
                try:
                    play = RaySelfPlay(ray_actors, state.game_config, address=address)
                except (ConnectionError, ValueError, RuntimeError) as exc:
                    fail(f"--ray-actors: cannot start or reach a Ray cluster ({' '.join(str(exc).split())[:200]})")
                line.echo(f"self-play on {ray_actors} Ray actor{'s' if ray_actors > 1 else ''}")
            run_training(state, steps, make_game, checkpoint_path=out_path, checkpoint_every=checkpoint_every,
                         deadline=deadline, on_log=_shower(line, steps), play=play, tuning=list(tuning),
                         tune_every=tune_every)
    except Interrupted as stop:  # the checkpoint on disk is whole (atomic saves): say where to continue
        ignore_signals()
        line.close()
        try:
            saved = f"{out_path} holds step {ckpt.load(out_path)['step']}"
        except ckpt.CheckpointError:
            saved = f"no checkpoint was written to {out_path} yet"
        click.echo(f"interrupted by {stop.signal_name} at step {state.step}; {saved}"
                   + (f" (continue with: mallocgame train --resume {out_path} --steps {steps})"
                      if "holds" in saved else ""))
        sys.exit(stop.exit_code)
    finally:
        if play is not None:
            play.close()
