"""The CLI keeps freed memory for reuse (mallocgame.runtime.memory) before a command reads its input."""

from __future__ import annotations

import ctypes
import sys

import pytest

from mallocgame.cli import main as main_module
from mallocgame.runtime import memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_glibc_takes_the_settings():
    assert memory.keep_freed_memory() is True
    assert ctypes.CDLL(None).mallopt(memory.M_MMAP_THRESHOLD, memory.KEEP_BYTES) == 1  # a value glibc accepts


def test_a_command_sets_it_before_reading(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr(main_module, "keep_freed_memory", lambda: calls.append("kept") or True)
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    with pytest.raises(SystemExit) as stop:
        main_module.main.main(["info", str(path), "--quiet"], prog_name="mallocgame")
    assert stop.value.code in (0, None) and calls == ["kept"] and "buffers: 2" in capsys.readouterr().out
