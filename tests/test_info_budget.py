"""`mallocgame info` answers within INFO_SECONDS: its expensive bound gets what loading and the facts left."""

from __future__ import annotations

import pytest

from mallocgame.cli import info as info_module
from mallocgame.cli.main import main as cli
from mallocgame.formats.io import write_workload_json
from mallocgame.inputs.generate import layered_network
from mallocgame.runtime.budget import Budget


def test_the_expensive_bound_gets_what_is_left_of_the_budget():
    """At most the mode's INFO_BOUND_SECONDS, else what is left less the keep-back, none below the minimum."""
    seconds = info_module._expensive_bound_seconds
    assert seconds("map", None) == info_module.INFO_BOUND_SECONDS["map"]
    left = seconds("map", Budget.start(6.0))
    assert 6.0 - info_module.INFO_KEEP_SECONDS - 0.5 < left <= 6.0 - info_module.INFO_KEEP_SECONDS
    assert seconds("prefetch", Budget.start(1000.0)) == info_module.INFO_BOUND_SECONDS["prefetch"]
    assert seconds("map", Budget.start(info_module.INFO_KEEP_SECONDS + 0.5)) == 0.0
    assert seconds("map", Budget.start(0.0)) == 0.0


@pytest.mark.parametrize("info_seconds, kind", [(0.0, "relaxation per-op"), (60.0, "no-fragmentation")])
def test_info_reports_the_instant_bound_when_its_time_is_spent(info_seconds, kind, tmp_path, monkeypatch, capsys):
    """With no time left the bound is the per-op one, computed in milliseconds; with time, the no-fragmentation
    relaxation's (both answer the same command, exit 0)."""
    path = tmp_path / "layered.json"
    write_workload_json(path, layered_network(300, seed=1))
    monkeypatch.setenv("MALLOCGAME_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(info_module, "INFO_SECONDS", info_seconds)
    with pytest.raises(SystemExit) as stop:
        cli.main(["info", str(path), "--quiet"], prog_name="mallocgame")
    out = capsys.readouterr().out
    assert stop.value.code in (0, None)
    assert f"bound ({kind}" in out


def test_info_s_budget_counts_from_the_command_s_start(tmp_path, monkeypatch, capsys):
    """The interpreter's start and the imports are inside INFO_SECONDS: a command that started a minute ago (as a
    process whose imports took that long) has no time left for the expensive bound and reports the instant one."""
    import time

    path = tmp_path / "layered.json"
    write_workload_json(path, layered_network(300, seed=1))
    monkeypatch.setenv("MALLOCGAME_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(info_module, "command_started", lambda: time.monotonic() - 60.0)
    monkeypatch.setattr(info_module, "INFO_SECONDS", 30.0)
    with pytest.raises(SystemExit) as stop:
        cli.main(["info", str(path), "--quiet"], prog_name="mallocgame")
    out = capsys.readouterr().out
    assert stop.value.code in (0, None)
    assert "bound (relaxation per-op" in out
