"""Issue 19 item 7: the flaky ``test_train_killed_then_resumed_continues_from_the_checkpoint``.

Its cause, made deterministic: SIGTERM arriving while ``torch.save`` writes a checkpoint raised
:class:`Interrupted` mid-record; torch's zip writer's ``__exit__`` then raised ``RuntimeError:
[enforce fail at inline_container.cc] ... unexpected pos`` over it (exit 1, not 143). Here the
signal is sent from inside the pickling of the payload, i.e. always mid-write: the write must
end, the file must load, and the interrupt must come right after.
"""

from __future__ import annotations

import os
import signal

import pytest

from mallocgame.runtime.interrupts import Interrupted, defer_signals, raise_on_signals


class Trap:
    """Pickled inside torch.save: sends SIGTERM to this process mid-write, then pickles as 0."""

    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return (int, (0,))


def test_sigterm_inside_a_checkpoint_write_waits_for_the_write(tmp_path):
    torch = pytest.importorskip("torch")
    from mallocgame.search.muzero.checkpoint import atomic_save

    path = tmp_path / "ck.pt"
    payload = {"step": 7, "w": torch.arange(100_000, dtype=torch.float32), "trap": Trap(),
               "more": torch.ones(50_000)}
    with pytest.raises(Interrupted) as info:
        with raise_on_signals():
            atomic_save(payload, str(path))
    assert info.value.exit_code == 143
    saved = torch.load(path, weights_only=False)
    assert saved["step"] == 7 and saved["trap"] == 0 and torch.equal(saved["w"], payload["w"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.pt"]  # no temp file left


def test_defer_signals_delivers_each_signal_once_after_the_block():
    seen = []
    with raise_on_signals():
        try:
            with defer_signals():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
                seen.append("block ended")
        except Interrupted as exc:
            seen.append(exc.exit_code)
    assert seen == ["block ended", 130]
