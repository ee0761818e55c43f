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

from mallocgame.cli.main import EXIT_BAD_INPUT, EXIT_NO_SOLUTION, fail, problem_options
from mallocgame.inputs.load import prepare, read_problem
from mallocgame.model import InputError


@click.command("play")
@click.argument("problem_path", metavar="PROBLEM")
@problem_options
@click.option("--variant", type=click.Choice(["order", "address"]), default="order", show_default=True,
              help="order: fixed buffer order, choose the offset; address: fixed address, choose the buffer.")
@click.option("--k", "k", type=int, default=16, show_default=True, help="Candidate actions besides slow/close.")
@click.option("--order", type=click.Choice(["start", "xla", "size"]), default="start", show_default=True,
              help="Buffer order of the order variant.")
@click.option("--policy", type=click.Choice(["greedy", "interactive"]), default="interactive", show_default=True)
@click.option("--quiet", is_flag=True, help="Print only the final line.")
@click.option("-o", "--output", default=None, metavar="SOLUTION.csv", help="Write the final placement here.")
def play(problem_path, mode, capacity, hardware, variant, k, order, policy, quiet, output) -> None:
    """Play the mallocGame on PROBLEM, one decision per step."""
    from search.game import Game, GameConfig

    if k < 1:
        fail(f"--k: must be >= 1, got {k}")
    try:
        problem, spec = prepare(read_problem(problem_path), mode=mode, capacity=capacity, hardware=hardware)
        game = Game(problem, spec, GameConfig(variant=variant, k=k, order=order))
    except (InputError, ValueError) as exc:
        fail(str(exc))
    say = (lambda _msg: None) if quiet else click.echo
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
            action = _read_action(game)
            if action is None:  # "g": the greedy from here on
                autoplay = True
                action = game.greedy_action()
        reward = game.step(action)
        say(f"  reward {reward:+.6g}  total {game.total_reward():.6g}")
    _finish(problem, spec, game, output)


def _read_action(game) -> int | None:
    click.echo("action> ", nl=False)
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
    from hardware.evaluator import Evaluator
    from hardware.validator import validate
    from mallocgame.model import Solution, Status, offsets_tuple

    offsets = offsets_tuple(game.offsets())
    violation = validate(problem, offsets)
    placed = sum(o is not None for o in offsets)
    line = f"done: {placed}/{problem.n} buffers in fast memory, return {game.total_reward():.6g}"
    if problem.mode == "map":
        ev = Evaluator(problem, spec)
        line += f", value {ev.value(offsets):.6g} (time {ev.time(offsets):.6g} vs {ev.time_all_slow:.6g} all slow)"
    line += ", valid" if violation is None else f", not a solution: {violation}"
    click.echo(line)
    if violation is not None:
        sys.exit(EXIT_NO_SOLUTION)
    if output:
        from mallocgame.io import write_solution_csv

        try:
            write_solution_csv(output, problem, Solution(offsets=offsets, status=Status.FEASIBLE, mode=problem.mode))
        except OSError as exc:
            fail(f"{output}: cannot write ({exc.strerror})", EXIT_BAD_INPUT)
