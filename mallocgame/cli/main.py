"""The ``mallocgame`` command line (click): the group. Its commands and their flags are a contract.

Exit codes: 0 a valid solution was produced (and written with ``-o``); 1 no solution was
found (nothing written); 2 bad input or usage. Bad input is one line on stderr.
Click's usage errors are one ``error:`` line too, and so is any exception a command does not
expect (exit 1; ``MALLOCGAME_TRACEBACK=1`` shows the traceback): no command prints a traceback.
Every command lives in a module of its own (``solve``, ``info``, ``import``, ...), attached lazily
(:data:`LAZY_COMMANDS`): ``mallocgame --help`` imports none of them and ``mallocgame solvers`` never
pays for torch or OR-Tools. The rules every command shares (``--capacity`` units, ``-o -``,
``--json`` stamps, solver options that are never silently ignored) live in :mod:`mallocgame.cli.common`.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import sys
import textwrap
import warnings
from dataclasses import dataclass

import click

from mallocgame.cli.exits import EXIT_NO_SOLUTION, command_starts, fail
from mallocgame.problem.model import InputError
from mallocgame.problem.suggest import did_you_mean
from mallocgame.runtime.interrupts import interrupted, raise_on_signals
from mallocgame.runtime.memory import keep_freed_memory


@dataclass(frozen=True)
class LazyCommand:
    """A command of the group, imported only when it runs: ``module:attribute`` and its one-line help
    (what ``mallocgame --help`` prints beside it; tests/test_cli_lazy.py checks that it equals the
    command's own ``get_short_help_str()``)."""

    target: str
    short_help: str


LAZY_COMMANDS = {
    "check-solver": LazyCommand("mallocgame.cli.check_solver:check_solver",
                                "Run the conformance checks on solver NAME (exit 0 all pass, 1 some fail, 2 unknown or broken)."),
    "compare": LazyCommand("mallocgame.cli.compare:compare_command",
                           "Run every solver on every input; print a table; optionally write CSV/JSON and pictures."),
    "executorch": LazyCommand("mallocgame.cli.executorch:executorch_command",
                              "Export SPEC to an ExecuTorch .pte whose memory plan mallocgame packs."),
    "import": LazyCommand("mallocgame.cli.importers:import_group",
                          "Turn real ML programs into workload JSON files (mallocgame.workload/1)."),
    "info": LazyCommand("mallocgame.cli.info:info",
                        "Size, horizon, components, largest clique, max live bytes and (map mode) the bound of PROBLEM."),
    "play": LazyCommand("mallocgame.cli.play:play", "Play the mallocGame on PROBLEM, one decision per step."),
    "plot": LazyCommand("mallocgame.cli.plot:plot_command",
                        "Draw one answer: time x address rectangles by buffer kind, slow buffers in a band below."),
    "schedule": LazyCommand("mallocgame.cli.schedule:schedule_command",
                            "Re-order WORKLOAD's ops within their dependencies to lower the peak live bytes or the "
                            "estimated time."),
    "solve": LazyCommand("mallocgame.cli.solve:solve", "Solve PROBLEM with one solver; print one summary line."),
    "solvers": LazyCommand("mallocgame.cli.solvers:solvers",
                           "List every registered solver with its modes and a one-line description (imports none of "
                           "them); with NAME, that solver's options (pass them as --solver-option KEY=VALUE)."),
    "suites": LazyCommand("mallocgame.cli.suites:suites_command",
                          "List the built-in suites (name, count, description), or the entries of suite NAME."),
    "train": LazyCommand("mallocgame.cli.train:train",
                         "Train the muzero solver's network by self-play on generated problems; deterministic under --seed."),
    "validate": LazyCommand("mallocgame.cli.validate:validate",
                            "Check SOLUTION against PROBLEM: prints `ok ...` or the first violation (exit 0 / 1)."),
}


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word, ending ``...``, as click shortens a command's help."""
    if len(text) <= limit:
        return text
    return "..." if limit < 3 else textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False)


class _StoppedBySignal(BaseException):
    """A ``KeyboardInterrupt`` (SIGINT, or SIGTERM through ``raise_on_signals``) carried past click's
    ``main``, which would print a blank stderr line before its ``Abort``."""

    def __init__(self, cause: KeyboardInterrupt):
        super().__init__(cause)
        self.cause = cause


class LazyGroup(click.Group):
    """A click group whose commands (:data:`LAZY_COMMANDS`) are imported only when one of them runs."""

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in LAZY_COMMANDS if self._available(n)})

    @staticmethod
    def _available(name: str) -> bool:
        try:
            return importlib.util.find_spec(LAZY_COMMANDS[name].target.split(":")[0]) is not None
        except ImportError:
            return False

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS and self._available(name):
            module, attr = LAZY_COMMANDS[name].target.split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        """Click's own, with the closest command name in the message for an unknown one."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if args and self.get_command(ctx, args[0]) is None:
                exc.message = exc.message.rstrip(".") + did_you_mean(args[0], self.list_commands(ctx))
            raise

    def format_commands(self, ctx, formatter):
        """The ``Commands:`` section of ``--help``, as click writes it, from the one-line help strings
        of :data:`LAZY_COMMANDS` (no command module is imported)."""
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS:
                rows.append((name, LAZY_COMMANDS[name].short_help))
                continue
            cmd = super().get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(sys.maxsize)))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, shortened(text, limit)) for name, text in rows])

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's own ``main``, with every usage error as one ``error:`` line (exit 2). A command that reads the
        process's arguments (``args`` None) is the process's command: its time counts from the process's start."""
        command_starts(own_process=args is None)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)

        warnings.showwarning = _one_line_warning
        try:
            with raise_on_signals():  # SIGTERM, like Ctrl-C, unwinds (children killed, temp files removed)
                code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            close = getattr(exc, "possibilities", None)  # click's close option names
            text = " ".join((exc.message if close else exc.format_message()).split()).rstrip(".")
            text, _, suggestion = text.partition("; did you mean ")  # the suggestion is said last
            suggestion = f"; did you mean {close[0]!r}?" if close else f"; did you mean {suggestion}" if suggestion else ""
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx else ""
            click.echo(f"error: {text}{hint}{suggestion}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, KeyboardInterrupt):  # a command that had nothing finished to report
                stop = interrupted(cause)
                click.echo(f"interrupted by {stop.signal_name}", err=True)
                sys.exit(stop.exit_code)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except (KeyboardInterrupt, _StoppedBySignal) as exc:  # between click's own handlers, or in a command
            stop = interrupted(exc.cause if isinstance(exc, _StoppedBySignal) else exc)
            click.echo(f"interrupted by {stop.signal_name}", err=True)
            sys.exit(stop.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        """Run the command; an exception it does not expect is one ``error:`` line, not a traceback."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _StoppedBySignal(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except InputError as exc:  # bad input that escaped the command's own handling
            fail(str(exc))
        except OSError as exc:
            if exc.errno == errno.EPIPE or os.environ.get("MALLOCGAME_TRACEBACK"):
                raise  # click handles a closed stdout
            fail(f"{getattr(exc, 'filename', None) or 'system'}: {exc.strerror or exc}")
        except Exception as exc:
            if os.environ.get("MALLOCGAME_TRACEBACK"):
                raise
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            fail(f"unexpected {exc.__class__.__name__}{': ' + text if text else ''} "
                 "(MALLOCGAME_TRACEBACK=1 shows where)", EXIT_NO_SOLUTION)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning on the command line (an importer's note read by `solve`, a reader's): one ``warning:``
    line with the message, as the commands' own warnings, not Python's file and source line."""
    text = " ".join(str(message).split())
    click.echo(f"warning: {text}", err=True)


@click.group(cls=LazyGroup)
@click.version_option(package_name="mallocgame")
def main() -> None:
    """mallocgame: place ML buffers in fast memory so programs run fast."""
    keep_freed_memory()  # before a command reads its input: big columns reuse freed pages


if __name__ == "__main__":
    main(prog_name="mallocgame")
