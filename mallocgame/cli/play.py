"""``mallocgame play PROBLEM``: the mallocGame step by step in the terminal, to debug policies.

Each step shows the decision (fixed-order variant: the current buffer; fixed-address
variant: the lowest free skyline segment), the legal actions with their features, the
greedy's choice, and after the move the reward and running total. ``--policy greedy``
plays the greedy through; ``--policy interactive`` reads one action index per step from
stdin (an empty line takes the greedy's choice, ``g`` plays the greedy to the end).
Bad input (file, option, or an action that is not legal) is one line on stderr, exit 2.
"""

from __future__ import annotations

import sys

import click

from mallocgame.cli.common import (
    EXIT_NO_SOLUTION,
    capacity_warning,
    check_output,
    fail,
    is_stdout,
    load_prepared,
    problem_options,
    write_text,
)
from mallocgame.formats.io import intervals_csv_text, problem_csv_text
from mallocgame.hardware.evaluator import Evaluator
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hardware.validator import validate, validate_intervals
from mallocgame.problem.model import InputError, offsets_tuple
from mallocgame.search.game import Game, GameConfig


@click.command("play")
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
@click.option("--variant", type=click.Choice(["order", "address", "prefetch"]), default="order", show_default=True,
              help="order: fixed buffer order, choose the offset; address: fixed address, choose the buffer.")
@click.option("--k", "k", type=int, default=16, show_default=True, help="Candidate actions besides slow/close.")
@click.option("--order", type=click.Choice(["start", "xla", "size"]), default="start", show_default=True,
              help="Buffer order of the order variant.")
@click.option("--policy", type=click.Choice(["greedy", "interactive"]), default="interactive", show_default=True)
@click.option("--quiet", is_flag=True, help="Print only the final line.")
@click.option("-o", "--output", default=None, metavar="SOLUTION.csv",
              help="Write the final placement here ('-': stdout; the game then goes to stderr).")
def play(problem_path, mode, capacity, capacity_fraction, hardware, variant, k, order, policy, quiet, output) -> None:
    """Play the mallocGame on PROBLEM, one decision per step."""
    if k < 1:
        fail(f"--k: must be >= 1, got {k}")
    check_output(output, "-o")
    try:
        if variant == "prefetch" and mode not in (None, "prefetch"):
            raise InputError(f"--variant prefetch plays prefetch mode, not --mode {mode}")
        problem, spec = load_prepared(problem_path, mode="prefetch" if variant == "prefetch" else mode, capacity=capacity,
                                      capacity_fraction=capacity_fraction, hardware=hardware)
        if problem.mode == "prefetch":
            variant = "prefetch"  # the only variant with a decision per use segment
        game = Game(problem, spec, GameConfig(variant=variant, k=k, order=order))
    except (InputError, ValueError) as exc:
        fail(str(exc))
    capacity_warning(problem)
    err = is_stdout(output)  # stdout carries the solution CSV only
    say = (lambda _msg: None) if quiet else (lambda msg: click.echo(msg, err=err))
    say(f"{problem.name}: {problem.n} buffers, {problem.mode} mode, capacity {problem.capacity}, "
        f"variant {variant}, k={k}" + (f", order {order}" if variant == "order" else ""))
    autoplay = policy == "greedy"
    while not game.done:
        say(game.describe_state())
        for line in game.describe_actions():
            say(f"  {line}")
        if autoplay:
            action = game.greedy_action()
            say(f"action> {action} (greedy)")
        else:
            action = _read_action(game, err)
            if action is None:  # "g": the greedy from here on
                autoplay = True
                action = game.greedy_action()
        reward = game.step(action)
        say(f"  reward {reward:+.6g}  total {game.total_reward():.6g}")
    _finish(problem, spec, game, output)


def _read_action(game, err: bool = False) -> int | None:
    click.echo("action> ", nl=False, err=err)
    line = sys.stdin.readline()
    if not line:
        fail(f"stdin: input ended at step {game.steps + 1} before the game did")
    text = line.strip()
    if text == "":
        return game.greedy_action()
    if text == "g":
        return None
    try:
        action = int(text)
    except ValueError:
        fail(f"stdin: step {game.steps + 1}: expected an action index, 'g' or an empty line, got {text!r}")
    legal = game.legal_actions().tolist()
    if action not in legal:
        fail(f"stdin: step {game.steps + 1}: action {action} is not legal (legal: {', '.join(map(str, legal))})")
    return action


def _finish(problem, spec, game, output: str | None) -> None:
    """The final line (placed, return, value, valid), exit 1 for an invalid end, then the answer to ``output``."""
    if problem.mode == "prefetch":
        line, violation, text = _summary_prefetch(problem, spec, game)
    else:
        line, violation, text = _summary_offsets(problem, spec, game)
    line += ", valid" if violation is None else f", not a solution: {violation}"
    click.echo(line, err=is_stdout(output))
    if violation is not None:
        sys.exit(EXIT_NO_SOLUTION)
    if output:
        write_text(output, text())


def _summary_offsets(problem, spec, game):
    offsets = offsets_tuple(game.offsets())
    placed = sum(o is not None for o in offsets)
    line = f"done: {placed}/{problem.n} buffers in fast memory, return {game.total_reward():.6g}"
    if problem.mode == "map":
        ev = Evaluator.of(problem, spec)
        line += f", value {ev.value(offsets):.6g} (time {ev.time(offsets):.6g} vs {ev.time_all_slow:.6g} all slow)"
    return line, validate(problem, offsets), lambda: problem_csv_text(problem, offsets)


def _summary_prefetch(problem, spec, game):
    intervals = game.intervals()
    pev = PrefetchEvaluator.of(problem, spec)
    b, slow = pev.breakdown(intervals), pev.time_all_slow
    line = (f"done: {len(intervals)} fast intervals of {len({iv.buffer for iv in intervals})}/{problem.n} buffers, "
            f"return {game.total_reward():.6g}, value {slow - b.time:.6g} (time {b.time:.6g} vs {slow:.6g} all slow, "
            f"stall {b.stall:.3g})")
    return line, validate_intervals(problem, intervals), lambda: intervals_csv_text(problem, intervals)
