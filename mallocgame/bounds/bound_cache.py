"""The on-disk cache of each problem's bound: computed once, read by every later command at once.

A problem's bound (:class:`mallocgame.bounds.bounds.Bound`) is a pure function of its content, its mode, the
hardware spec and the bound code, so it is kept on disk under a key that hashes exactly those
(:func:`problem_key`): the buffers, the ops, the capacity, the mode, the spec's fields and the source
of the modules that compute bounds (an edit to them starts a new key). The same workload read from
another file, under another name, finds the same entry.

One JSON file per problem, ``bounds/KEY.json`` in the cache folder: ``$MALLOCGAME_CACHE_DIR`` when
set, else ``$XDG_CACHE_HOME/mallocgame``, else ``~/.cache/mallocgame`` (:func:`cache_dir`). It holds
the tightest bound known (its value, its kind, every bound computed by kind) and how many seconds the
expensive bound was given (0: not computed yet). Writes are atomic (a temp file, then a rename) and
merge with what is there under a lock on the folder (``bounds/.lock``, ``fcntl.flock``), so two commands
storing bounds of one problem at once keep the tighter: an entry only ever gets tighter. An entry that
cannot be read or does not hold a valid bound is ignored (and replaced by the next write). The folder
holds at most :data:`MAX_ENTRIES` entries: a write that adds one past it removes the least recently used
(a read marks an entry used). ``MALLOCGAME_NO_CACHE=1`` (the
commands' ``--no-cache``) neither reads nor writes the cache; an unwritable folder is the same as
no cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.bounds.bounds import Bound
from mallocgame.formats.io import atomic_write_text
from mallocgame.problem.model import BUFFER_KINDS, BufferTable, OpTable, Problem, derived_facts

CACHE_ENV = "MALLOCGAME_CACHE_DIR"
NO_CACHE_ENV = "MALLOCGAME_NO_CACHE"
FORMAT = "mallocgame.bound/1"
# The modules whose code decides a bound's value: their source is part of every key.
# The most entries kept (a few hundred bytes each): past it, the least recently used go.
MAX_ENTRIES = 10_000
# How many of the least recently used a full folder loses at once (a tenth), so that pruning is rare.
PRUNE_SHARE = 0.1
BOUND_MODULES = ("mallocgame.bounds.bounds", "mallocgame.bounds.prefetch_bound", "mallocgame.hardware.evaluator",
                 "mallocgame.bounds.bound_cache")


@dataclass(frozen=True)
class Entry:
    """A cached bound: the tightest known (``bound``, its ``others`` every bound by kind), the seconds
    the expensive bound was given (``full_seconds``; 0 when only the instant bounds were stored) and
    whether it finished within them (``complete``: more time would not change it)."""

    bound: Bound
    full_seconds: float
    complete: bool = False


def enabled() -> bool:
    """Is the cache in use (``MALLOCGAME_NO_CACHE`` unset, empty or ``0``)?"""
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def disable() -> None:
    """Turn the cache off for this process and its children (``--no-cache``)."""
    os.environ[NO_CACHE_ENV] = "1"


def cache_dir() -> Path:
    """The cache folder: ``$MALLOCGAME_CACHE_DIR``, else ``$XDG_CACHE_HOME/mallocgame``, else
    ``~/.cache/mallocgame``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mallocgame"


def _code_version() -> str:
    """SHA-256 of the source of :data:`BOUND_MODULES` (those not imported yet are imported)."""
    h = hashlib.sha256()
    for name in BOUND_MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        h.update(name.encode())
        with open(module.__file__, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


_CODE_VERSION: list[str] = []  # computed once per process


def code_version() -> str:
    """The bound code's version: a hash of its source (:data:`BOUND_MODULES`)."""
    if not _CODE_VERSION:
        _CODE_VERSION.append(_code_version())
    return _CODE_VERSION[0]


def problem_key(problem: Problem, hardware: Any) -> str:
    """The cache key of ``problem`` on ``hardware``: SHA-256 (hex) of its canonical content (buffers,
    ops, aliasing pairs, dependencies), capacity, mode, the hardware spec and :func:`code_version`.
    The problem's name and file are not part of it. Built once per problem and hardware."""
    facts = derived_facts(problem)
    key = facts.get(("bound_key", hardware))
    if key is not None:
        return key
    h = hashlib.sha256()
    h.update(f"{FORMAT}\0{code_version()}\0{problem.mode}\0{problem.capacity}\0{hardware!r}\0".encode())
    a = problem.arrays
    for column in (a.size, a.start, a.end, a.alignment, a.benefit):
        h.update(np.ascontiguousarray(column).tobytes())
    ops, oa, bufs, ids = problem.ops, problem.op_arrays, problem.buffers, problem.ids
    # Columns, not one string per item: a third of the time at 100k buffers (150k operands). The problem's
    # columns (BufferTable, OpTable) when it has them: no object made. Kinds as their codes, operands by their
    # buffer's index and a write flag (the buffer ids are hashed too): a string per operand took most
    # of the key's time at 2M buffers.
    kinds = bufs.kind if isinstance(bufs, BufferTable) else [BUFFER_KINDS.index(b.kind) for b in bufs]
    op_ids, op_kinds = (ops.ids, ops.kinds) if isinstance(ops, OpTable) else ([op.id for op in ops],
                                                                             [op.kind for op in ops])
    for strings in (ids, op_ids, op_kinds):
        h.update(b"\0" + "\x1f".join(strings).encode("utf-8", "surrogatepass"))
    for numbers, dtype in ((kinds, np.int64), (oa.buf_of, np.int64), (oa.write, np.int64),
                           (oa.flops, np.float64), (oa.transcendentals, np.float64), (oa.fixed_bytes, np.int64),
                           (np.bincount(oa.op_of, minlength=len(ops)), np.int64), (oa.nbytes, np.int64)):
        h.update(np.ascontiguousarray(numbers, dtype).tobytes())
    h.update(repr((problem.inplace, problem.control_deps)).encode("utf-8", "surrogatepass"))
    key = facts["bound_key", hardware] = h.hexdigest()
    return key


def entry_path(problem: Problem, hardware: Any) -> Path:
    """The file of ``problem``'s entry (it may not exist)."""
    return cache_dir() / "bounds" / f"{problem_key(problem, hardware)}.json"


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _parse(doc: Any, mode: str) -> Entry | None:
    """The entry in ``doc`` (a parsed JSON file), or ``None`` when it is not a valid one for ``mode``."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("mode") != mode:
        return None
    value, seconds, full = _number(doc.get("value")), _number(doc.get("seconds", 0.0)), _number(doc.get("full_seconds"))
    kind, others, complete = doc.get("kind"), doc.get("others"), doc.get("complete", False)
    if value is None or seconds is None or full is None or full < 0 or not isinstance(complete, bool):
        return None
    if not isinstance(kind, str) or not kind:
        return None
    if not isinstance(others, dict) or not all(isinstance(k, str) and _number(v) is not None for k, v in others.items()):
        return None
    return Entry(Bound(value, kind, seconds, tuple((k, float(v)) for k, v in others.items())), full, complete)


def load(problem: Problem, hardware: Any) -> Entry | None:
    """The cached entry of ``problem``, or ``None`` (none, unreadable, not valid, or the cache is off)."""
    if not enabled():
        return None
    path = entry_path(problem, hardware)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    entry = _parse(doc, problem.mode)
    if entry is not None:
        with contextlib.suppress(OSError):  # used now: the last to be pruned (a read-only cache stays as it is)
            os.utime(path)
    return entry


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """Hold the cache folder's lock (``folder/.lock``) for the block: one read-merge-write or pruning at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def prune(folder: Path, *, keep: int | None = None) -> int:
    """Remove the least recently used entries of ``folder`` beyond ``keep`` (:data:`MAX_ENTRIES`), down to
    ``keep`` less :data:`PRUNE_SHARE` of it; returns how many were removed. Call it under the folder's lock."""
    keep = MAX_ENTRIES if keep is None else keep
    entries = []
    with os.scandir(folder) as it:
        for item in it:
            if item.name.endswith(".json"):
                with contextlib.suppress(OSError):  # removed meanwhile by a command without the lock: gone anyway
                    entries.append((item.stat().st_mtime_ns, item.path))
    if len(entries) <= keep:
        return 0
    entries.sort()
    removed = 0
    for _, path in entries[:len(entries) - int(keep * (1 - PRUNE_SHARE))]:
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    return removed


def tighter(mode: str, a: Bound, b: Bound) -> Bound:
    """The tighter of two valid bounds of a ``mode`` problem (pack: the higher lower bound on the peak;
    map, prefetch: the lower upper bound on the saving), with every bound of both in ``others``."""
    lower = mode == "pack"
    pick = max if lower else min
    others: dict[str, float] = {}
    for kind, value in (*a.others, *b.others, (a.kind, a.value), (b.kind, b.value)):
        others[kind] = pick(others.get(kind, value), value)
    best = b if (b.value > a.value if lower else b.value < a.value) else a
    return Bound(best.value, best.kind, best.seconds, tuple(others.items()))


def store(problem: Problem, hardware: Any, bound: Bound, *, full_seconds: float = 0.0,
          complete: bool = False) -> Entry | None:
    """Merge ``bound`` into ``problem``'s entry (the tighter bound is kept; ``full_seconds``: the seconds the
    expensive bound was given, 0 when ``bound`` holds only the instant bounds; ``complete``: it finished
    within them) and write it atomically. Returns the entry now known, or ``None`` when the cache is off
    or cannot be written."""
    if not enabled():
        return None
    path = entry_path(problem, hardware)
    try:
        with _folder_lock(path.parent):
            return _merge_and_write(problem, hardware, path, bound, full_seconds, complete)
    except OSError:  # an unwritable cache is no cache: the bound is still reported
        return None


def _merge_and_write(problem: Problem, hardware: Any, path: Path, bound: Bound, full_seconds: float,
                     complete: bool) -> Entry:
    old = load(problem, hardware)
    if old is not None:
        bound = tighter(problem.mode, old.bound, bound)
        full_seconds = max(full_seconds, old.full_seconds)
        complete = complete or old.complete
    entry = Entry(bound, full_seconds, complete)
    doc = {"format": FORMAT, "problem": problem.name, "mode": problem.mode, "value": bound.value,
           "kind": bound.kind, "seconds": bound.seconds, "others": dict(bound.others) or {bound.kind: bound.value},
           "full_seconds": full_seconds, "complete": complete}
    new = not path.exists()
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    if new:
        prune(path.parent)
    return entry
