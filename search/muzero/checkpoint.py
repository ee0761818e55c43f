"""Checkpoints: atomic save, safe load (``torch.load(weights_only=True)``), resume.

A checkpoint is one ``torch.save`` dict of tensors and plain Python values:

``format``          ``"mallocgame.muzero/1"``
``network``         :class:`~mallocgame.search.muzero.networks.NetworkConfig` fields
``game``            the ``GameConfig`` fields the network was trained with (shapes depend on them)
``features``        optional: the network's input vector (``"encoder/1"``, ``"encoder/2"``, ``"encoder/3"``:
                    :mod:`mallocgame.search.muzero.encoder`; absent: the game's observation vector)
``model``           the network's ``state_dict``
``train``           the ``TrainConfig`` fields (absent in exported model-only files)
``optimizer``, ``step``, ``rng`` (numpy ``bit_generator.state``), ``replay`` (compact
trajectories: recipes, actions and targets; observations are rebuilt by replaying),
``games``, ``log`` -- present in training checkpoints, so ``--resume`` continues exactly.

Writes go to a temporary file in the same directory, then ``os.replace``: a reader never
sees half a checkpoint.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import torch

from mallocgame.formats.io import atomic_output, check_zip_expansion
from mallocgame.problem.model import InputError
from mallocgame.runtime.interrupts import defer_signals
from mallocgame.search.muzero.networks import MuZeroNet, NetworkConfig

FORMAT = "mallocgame.muzero/1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable or of another format (one-line message)."""


def atomic_save(payload: dict[str, Any], path: str) -> None:
    """``torch.save`` through :func:`mallocgame.formats.io.atomic_output`: readers never see half a checkpoint.

    SIGINT/SIGTERM wait for the write to end (:class:`mallocgame.runtime.interrupts.defer_signals`): one
    raised inside ``torch.save`` would surface as torch's RuntimeError, not as the interrupt.
    """
    with defer_signals(), atomic_output(path, "wb") as fh:
        torch.save(payload, fh)


def load(path: str) -> dict[str, Any]:
    """The checkpoint dict at ``path`` (raises :class:`CheckpointError`)."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        with zipfile.ZipFile(path) as archive:
            check_zip_expansion(path, archive)
    except InputError as exc:
        raise CheckpointError(str(exc)) from None
    except (zipfile.BadZipFile, OSError):
        pass  # not an archive: torch.load says what it is
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad file
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a {FORMAT} checkpoint")
    return payload


def network_from(payload: dict[str, Any]) -> MuZeroNet:
    """The network stored in a loaded checkpoint, in eval mode."""
    net = MuZeroNet(NetworkConfig(**payload["network"]))
    net.load_state_dict(payload["model"])
    return net.eval()


def model_only(payload: dict[str, Any]) -> dict[str, Any]:
    """A small copy of a training checkpoint with just what inference needs (for shipping)."""
    keep = ("format", "network", "game", "features", "model", "summary")
    out = {k: payload[k] for k in keep if k in payload}
    out["step"] = payload.get("step", 0)
    out["games"] = payload.get("games", 0)
    return out
