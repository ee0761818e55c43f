"""The group imports a command's module only to run it (issue 17): ``mallocgame --help`` prints every
command's one-line help from :data:`mallocgame.cli.main.LAZY_COMMANDS`, which must say what the commands
themselves say."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest

from mallocgame.cli.main import LAZY_COMMANDS, main, shortened


def real_command(name: str) -> click.Command:
    module, attr = LAZY_COMMANDS[name].target.split(":")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_each_one_line_help_is_the_commands_own(name):
    command = real_command(name)
    assert command.name == name
    assert LAZY_COMMANDS[name].short_help == command.get_short_help_str(sys.maxsize)


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_the_group_help_is_what_click_writes_from_the_commands(width):
    eager = click.Group("mallocgame", help=main.help, params=main.params,
                        commands={name: real_command(name) for name in LAZY_COMMANDS})
    shown = [group.get_help(click.Context(group, info_name="mallocgame", terminal_width=width, max_content_width=width))
             for group in (main, eager)]
    assert shown[0] == shown[1]
    assert "solve  " in shown[0] and "validate  " in shown[0]


def test_shortened_cuts_at_a_word_like_click():
    assert shortened("short", 10) == "short"
    assert shortened("one two three four", 12) == "one two..."
    assert shortened("anything", 2) == "..."


def test_help_imports_no_command_module():
    code = ("import sys\nfrom mallocgame.cli.main import main\n"
            "try:\n    main(['--help'], prog_name='mallocgame')\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('mallocgame.cli.'))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].split() == ["mallocgame.cli.exits", "mallocgame.cli.main"]
    assert "Commands:" in r.stdout and "solve" in r.stdout
