"""Read a model-only checkpoint without importing torch (the solver's fast path).

``torch.save`` writes a zip: ``<root>/data.pkl`` (a pickle whose tensors refer to storages by
key) and ``<root>/data/<key>`` (raw little-endian storage bytes). For the few types a
model-only checkpoint holds (dicts, lists, numbers, strings, ``OrderedDict`` state dicts of
dense CPU tensors) this reader rebuilds the same structure with numpy arrays in place of
tensors. Anything else (another global, big-endian data) raises :class:`UnsupportedCheckpoint`
and the caller falls back to ``torch.load``. Importing torch costs seconds on a busy
machine, which a solver with a 2-second limit cannot afford.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
from typing import Any

import numpy as np

from mallocgame.formats.io import check_zip_expansion
from mallocgame.search.muzero.inference import NumpyNet

_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
           "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
           "ByteStorage": np.uint8, "BoolStorage": np.bool_}


class UnsupportedCheckpoint(ValueError):
    """The file uses something this reader does not handle; use ``torch.load``."""


class _StorageType:
    def __init__(self, name: str):
        self.dtype = np.dtype(_DTYPES[name])


def _rebuild_tensor(storage: np.ndarray, offset: int, size, stride, *_: Any) -> np.ndarray:
    if len(size) == 0:
        return storage[offset:offset + 1].reshape(()).copy()
    item = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size), strides=tuple(s * item for s in stride))
    return np.array(view)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: zipfile.ZipFile, root: str):
        super().__init__(io.BytesIO(data))
        self.archive, self.root = archive, root

    def find_class(self, module: str, name: str):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _DTYPES:
            return _StorageType(name)
        raise UnsupportedCheckpoint(f"unsupported pickle global {module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise UnsupportedCheckpoint(f"unsupported persistent id {pid!r:.60}")
        _, storage_type, key, _location, numel = pid
        raw = self.archive.read(f"{self.root}/data/{key}")
        return np.frombuffer(raw, dtype=storage_type.dtype, count=numel)


def read(path: str) -> dict[str, Any]:
    """The checkpoint dict at ``path`` with numpy arrays for tensors (raises :class:`UnsupportedCheckpoint`)."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_zip_expansion(path, archive)  # an InputError (a ValueError): torch.load is not tried either
            names = archive.namelist()
            pkl = next((n for n in names if n.endswith("/data.pkl")), None)
            if pkl is None:
                raise UnsupportedCheckpoint("no data.pkl in the archive")
            root = pkl.rsplit("/", 1)[0]
            order = f"{root}/byteorder"
            if order in names and archive.read(order).strip() != b"little":
                raise UnsupportedCheckpoint("big-endian checkpoint")
            return _Unpickler(archive.read(pkl), archive, root).load()
    except (zipfile.BadZipFile, pickle.UnpicklingError, KeyError, EOFError, OSError) as exc:
        raise UnsupportedCheckpoint(f"{type(exc).__name__}: {exc}") from None


def load_inference(path: str):
    """``(NumpyNet, checkpoint dict)`` for the search; torch is imported only if this reader cannot parse ``path``.

    Raises :class:`mallocgame.search.muzero.checkpoint.CheckpointError`-like ``ValueError`` with one line for a
    missing or foreign file.
    """
    fmt = "mallocgame.muzero/1"
    if not os.path.isfile(path):
        raise ValueError(f"{path}: checkpoint not found")
    try:
        payload = read(path)
    except UnsupportedCheckpoint:
        from mallocgame.search.muzero import checkpoint as ckpt

        payload = ckpt.load(path)
        payload = dict(payload, model={k: v.numpy() for k, v in payload["model"].items()})
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        raise ValueError(f"{path}: not a {fmt} checkpoint")
    net = NumpyNet(payload["model"], float(payload["network"]["value_scale"]))
    net.features = str(payload.get("features") or "")
    net.value_target = str(payload.get("value_target") or "")
    return net, payload


_LOADED: dict[str, tuple[Any, dict]] = {}  # checkpoint path -> (numpy network, game config fields)


def load_agent_network(path: str):
    """The network (numpy inference copy) and game config of a checkpoint, cached per path.

    Read without torch when possible (:func:`load_inference`): importing torch would cost seconds
    of the time limit. The muzero solver and ``mallocgame solve``'s checkpoint check share the
    cache: the CLI loads the network before the solver's child is forked, which finds it here.
    """
    if path not in _LOADED:
        net, payload = load_inference(path)
        _LOADED[path] = (net, dict(payload["game"]))
    return _LOADED[path]
