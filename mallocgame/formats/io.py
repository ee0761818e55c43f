"""Readers and writers for the stable formats of docs/architecture.md, "The model".

* MiniMalloc CSV ``id,lower,upper,size[,benefit]`` (capacity from ``NAME.CAPACITY.csv``);
* the JSON workload ``mallocgame.workload/1``;
* the solution CSV: the problem's columns plus ``offset`` (empty = slow memory).

Every reader raises :class:`~mallocgame.problem.model.InputError` with one line naming the file,
row/field and reason; every writer writes a temp file and renames it, so nothing is
ever half-written.

Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); path = os.path.join(d, "x.16.csv")
    >>> _ = open(path, "w").write("id,lower,upper,size\\na,0,2,8\\nb,1,3,8\\n")
    >>> p = load_problem(path); (p.n, p.capacity)
    (2, 16)
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import gzip
import io
import itertools
import json
import math
import operator
import os
import re
import stat
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Literal, Sequence

import msgspec
import numpy as np

from mallocgame._native import (
    csv_rows,
    interval_columns_loop,
    json_buffer_columns,
    json_op_columns,
    offset_columns_loop,
)
from mallocgame.formats.lift import map_intervals
from mallocgame.problem.aliasing import merge_inplace
from mallocgame.problem.model import (
    BUFFER_KINDS,
    Buffer,
    BufferTable,
    FastInterval,
    InputError,
    Op,
    Operand,
    OpTable,
    Problem,
    Solution,
    check_regular_file,
)
from mallocgame.problem.units import parse_bytes
from mallocgame.runtime.collection import gc_paused
from mallocgame.runtime.native_engine import engine

WORKLOAD_FORMAT = "mallocgame.workload/1"
CSV_COLUMNS = ("id", "lower", "upper", "size")
_CAPACITY_IN_NAME = re.compile(r"\.(\d+)\.csv(?:\.gz)?$")
# Sizes, offsets, op indices and capacities are int64 in the solvers (numpy, OR-Tools): every
# integer a reader accepts is at most this in magnitude, and so is the sum of the sizes.
MAX_INT = 2**62


# --------------------------------------------------------------------------- writing

class OutputDirectoryMissing(FileNotFoundError):
    """The folder of an output file does not exist (it is never created on the way)."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(errno.ENOENT, "directory does not exist", str(path))

    def __str__(self) -> str:
        return f"cannot write {self.filename}: directory does not exist"


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """A file object whose content replaces ``path`` only when the block ends without error.

    The one way every writer of the project writes a file (solutions, workloads, results,
    pictures, checkpoints): a temp file in the same folder, then a rename, so a reader never
    sees a half-written file. The file gets the usual permissions (0666 less the umask).
    A path that exists and is not a regular file (``/dev/null``, a FIFO) is written in place,
    never replaced; a symbolic link is followed (its target is replaced, the link stays).
    The folder must exist: a missing one raises :class:`OutputDirectoryMissing` (an
    ``OSError``: "cannot write PATH: directory does not exist"), and nothing is created.
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        with open(path, mode, **({} if "b" in mode else {"newline": ""})) as fh:
            yield fh
        return
    if not path.parent.is_dir():  # never created: a mistyped path would silently make a folder
        raise OutputDirectoryMissing(path)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"newline": ""})) as fh:
            yield fh
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        if exc.filename is None:  # a failed write or flush (a full disk): say which output it was
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str) -> None:
    if os.path.exists(tmp):
        os.unlink(tmp)


def remove_stale_temps(path: str | os.PathLike) -> list[str]:
    """Remove the temp files that killed writers of ``path`` left; returns their names.

    A writer killed with SIGKILL (or by a power cut) cannot remove its ``.NAME.PID.XXXX.tmp``;
    the next write of ``NAME`` removes every such file whose writer process no longer runs.
    A live writer's file (another run writing the same path, or a reused PID) is left alone.
    """
    path = Path(path)
    prefix = f".{path.name}."
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix):].split(".", 1)[0]
            if pid.isdigit() and not _process_runs(int(pid)) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(name)
    return removed


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid < 2**31  # another user's process: it runs
    return True


def output_folder(path: str | os.PathLike) -> Path:
    """The folder ``path`` to fill with outputs, created if missing but only inside an existing one.

    ``--plot DIR`` and ``suites --export DIR`` name a folder of their own: it is made when its
    parent exists; a missing parent raises :class:`OutputDirectoryMissing` (no chain of folders
    is created for a mistyped path).
    """
    path = Path(path)
    if not path.is_dir():
        if not path.parent.is_dir():
            raise OutputDirectoryMissing(path)
        path.mkdir(exist_ok=True)
    return path


class OutputBusy(InputError):
    """Another process holds the output (:func:`exclusive_output`): one line, exit 2."""


_HELD: dict[str, list] = {}  # lock path -> [(fd, fd), depth]: a process re-entering its own lock does not wait on itself


def lock_path(path: str | os.PathLike) -> str:
    """The sidecar lock file of an output: ``DIR/.NAME.lock`` beside the file ``path`` names, symbolic
    links (of the file or of a folder on the way) resolved; removed when the holder is done."""
    p = os.path.realpath(os.fspath(path))
    return os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.lock")


@contextlib.contextmanager
def exclusive_output(path: str | os.PathLike, *, flag: str = "--output") -> Iterator[None]:
    """Hold ``path``'s file exclusively for the block (``fcntl.flock``).

    Two runs writing one file (``compare -o same.csv`` twice at once) would each say they
    wrote it while one run's rows are lost; the second now refuses at once with
    :class:`OutputBusy` (one line). The lock names the file, not the path: it is the sidecar
    :func:`lock_path` of the file with symbolic links resolved, and, when the file exists, a lock
    on the file itself, which every hard link of it shares (the holder keeps that one while its
    writes replace the file, so another name of the file it started from stays refused). The
    locks die with their process (SIGKILL included); the lock file is removed on the way out, and
    a run that opened a lock file just removed tries again. Special files (``/dev/null``) and
    stdout are not locked.
    """
    target = os.fspath(path)
    if target == "-" or (os.path.exists(target) and not os.path.isfile(target)):
        yield
        return
    resolved = os.path.realpath(target)
    lock = lock_path(resolved)
    if lock in _HELD:
        _HELD[lock][1] += 1
        try:
            yield
        finally:
            _HELD[lock][1] -= 1
        return
    named = target if resolved == os.path.abspath(target) else f"{target} (the file {resolved})"
    busy = f"{flag}: {named} is being written by another run"
    sidecar = _lock_sidecar(lock, busy)
    try:
        whole = _lock_file(resolved, busy)
    except BaseException:
        _release(lock, sidecar, None)
        raise
    _HELD[lock] = [(sidecar, whole), 1]
    try:
        yield
    finally:
        del _HELD[lock]
        _release(lock, sidecar, whole)


def _lock_sidecar(lock: str, busy: str) -> int | None:
    """An fd holding ``lock`` (created if missing), ``None`` when its folder is not writable;
    :class:`OutputBusy` when another process holds it."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:  # an unwritable folder: check_output says so with its own line
            if exc.errno in (errno.EACCES, errno.EROFS, errno.ENOENT):
                return None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusy(f"{busy} (lock {lock} held); wait for it to finish or choose another file") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed that file as we opened it: lock the new one


def _lock_file(resolved: str, busy: str) -> int | None:
    """An fd holding the existing regular file ``resolved`` itself (its inode, whatever name it is
    opened by), ``None`` when there is none or it cannot be opened; :class:`OutputBusy` when
    another process holds it."""
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # missing (a first run), or unreadable: check_output says so with its own line
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputBusy(f"{busy} under another name (a hard link of the same file); wait for it to finish "
                         "or choose another file") from None
    return fd


def _release(lock: str, sidecar: int | None, whole: int | None) -> None:
    if sidecar is not None:  # removed while still held: a run that opened it meanwhile sees it gone
        with contextlib.suppress(OSError):
            os.unlink(lock)
    for fd in (sidecar, whole):
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_output`."""
    with atomic_output(path) as fh:
        fh.write(text)


def _fmt_num(x: float | int) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


def _csv_line(fields: Iterable[Any]) -> str:
    """One CSV record ending in ``\\n``; a field with a comma, quote or line break (``\\r`` too) is quoted."""
    out = []
    for field in map(str, fields):
        out.append('"' + field.replace('"', '""') + '"' if any(c in field for c in ',"\r\n') else field)
    return ",".join(out) + "\n"


def _csv_ids(ids: list[str]) -> list[str]:
    """The ids as CSV fields: as they are, or each quoted as :func:`_csv_line` quotes it when some id needs it."""
    if any(c in "\0".join(ids) for c in ',"\r\n'):  # some id needs quoting: each is looked at
        return [_csv_line([i])[:-1] for i in ids]
    return ids


def problem_csv_text(problem: Problem, offsets: Sequence[int | None] | None = None) -> str:
    """The problem (and optionally a solution's offsets) as MiniMalloc-style CSV text.

    Ids with commas, quotes or line breaks are quoted (RFC 4180), so the readers get them back. The rows are
    made column by column from the problem's arrays (no buffer object is made).
    """
    a, bufs = problem.arrays, problem.buffers
    with_benefit = not np.isnan(a.benefit).all()
    # MiniMalloc's alignment column, as its converter writes it: only when a buffer needs it
    with_alignment = bool((a.alignment != 1).any())
    cols = list(CSV_COLUMNS) + (["alignment"] if with_alignment else []) + (["benefit"] if with_benefit else []) + \
        (["offset"] if offsets is not None else [])
    ids = _csv_ids(problem.ids)
    numbers = [a.start, a.end, a.size] + ([a.alignment] if with_alignment else [])
    benefits = None
    if with_benefit:  # a table's column is its buffers' benefit; objects keep theirs (an int stays an int)
        given = a.benefit.tolist() if isinstance(bufs, BufferTable) else [b.benefit for b in bufs]
        benefits = ["" if b is None or b != b else _fmt_num(b) for b in given]
    if engine() == "native":
        rows = _compiled_rows(list(ids), numbers, benefits, offsets)
        if rows is not None:
            return _csv_line(cols) + rows
    columns: list[Iterable[str]] = [ids] + [map(str, c.tolist()) for c in numbers]
    if benefits is not None:
        columns.append(benefits)
    if offsets is not None:
        columns.append(["" if o is None else str(o) for o in offsets])
    return _csv_line(cols) + "".join([row + "\n" for row in map(",".join, zip(*columns))])


def _compiled_rows(ids: list[str], numbers: list[np.ndarray], benefits: list[str] | None,
                   offsets: Sequence[int | None] | None) -> str | None:
    """:func:`problem_csv_text`'s rows, written compiled (``mallocgame._native.csv_rows``): the same text, or
    ``None`` when the offsets are not exact 64-bit ints (or ``None``) in a list or tuple, or an id is no UTF-8
    (the join in Python then writes them)."""
    placed = None
    if offsets is not None:
        read = offset_columns_loop(offsets) if isinstance(offsets, (list, tuple)) else None
        if read is None:
            return None
        numbers = numbers + [read[0]]
        placed = read[1]
    table = np.ascontiguousarray(np.column_stack(numbers).astype(np.int64, copy=False).reshape(len(ids), len(numbers)))
    blank = np.zeros(table.shape, np.uint8)
    if placed is not None:
        blank[:, -1] = ~placed
    layout = [-1, *range(len(numbers) - (placed is not None))] + ([-2] if benefits is not None else []) + \
        ([len(numbers) - 1] if placed is not None else [])
    try:
        return csv_rows([ids] + ([benefits] if benefits is not None else []), table, blank, layout)
    except UnicodeEncodeError:
        return None


def write_solution_csv(path: str | os.PathLike, problem: Problem, solution: Solution) -> None:
    atomic_write_text(path, problem_csv_text(problem, solution.offsets))


def workload_dict(problem: Problem, *, explicit_capacity: bool = False) -> dict[str, Any]:
    """The problem as a ``mallocgame.workload/1`` dictionary.

    Optional fields (old files stay valid): per op ``control_deps``, the ids of ops that must
    run before it beyond what the operands say; top level ``capacity`` (with
    ``explicit_capacity``, ``null`` when there is none: suite exports say so), and
    ``original_order``, the op ids in the order the program had before ``mallocgame schedule``
    re-ordered it.
    """
    control: dict[str, list[str]] = {}
    for before, after in problem.control_deps:
        control.setdefault(after, []).append(before)
    return {
        "format": WORKLOAD_FORMAT,
        "name": problem.name,
        "ops": [
            {"id": op.id, "kind": op.kind, "flops": op.flops,
             **({"transcendentals": op.transcendentals} if op.transcendentals else {}), "fixed_bytes": op.fixed_bytes,
             "operands": [{"buffer": o.buffer, "access": o.access, "bytes": o.bytes} for o in op.operands],
             **({"control_deps": control[op.id]} if op.id in control else {})}
            for op in problem.ops
        ],
        "buffers": [
            {"id": b.id, "size": b.size, "start": b.start, "end": b.end, "alignment": b.alignment, "kind": b.kind,
             **({"benefit": b.benefit} if b.benefit is not None else {})}
            for b in problem.buffers
        ],
        "inplace": [list(pair) for pair in problem.inplace],
        **({"capacity": problem.capacity} if problem.capacity is not None or explicit_capacity else {}),
        **({"original_order": list(problem.original_order)} if problem.original_order else {}),
    }


def workload_text(problem: Problem, *, explicit_capacity: bool = False) -> str:
    """The problem as ``mallocgame.workload/1`` JSON text (:func:`workload_dict`, indented by 1, one final
    newline): what every workload file and ``-o -`` holds."""
    return json.dumps(workload_dict(problem, explicit_capacity=explicit_capacity), indent=1) + "\n"


def write_workload_json(path: str | os.PathLike, problem: Problem, *, explicit_capacity: bool = False) -> None:
    atomic_write_text(path, workload_text(problem, explicit_capacity=explicit_capacity))


# --------------------------------------------------------------------------- reading

def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _shown(raw: Any, limit: int = 40) -> str:
    """``repr(raw)``, cut short: a bad value is named, not copied whole into the error line."""
    return _cut(repr(raw), limit)


def _int_value(path: str, where: str, field: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InputError(f"{path}: {where}, field '{field}': expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        s = raw.strip()
        try:
            return int(s)
        except ValueError:  # not an integer literal, or more digits than Python converts
            try:
                f = float(s)
            except ValueError:
                f = math.nan
            if math.isfinite(f) and f.is_integer():
                return int(f)
    raise InputError(f"{path}: {where}, field '{field}': expected an integer, got {_shown(raw)}")


def _int_field(path: str, where: str, field: str, raw: Any) -> int:
    """An integer field (``3``, ``3.0``, ``"3"``, ``"3e2"``) of at most :data:`MAX_INT` in magnitude."""
    value = _int_value(path, where, field, raw)
    if abs(value) > MAX_INT:
        text = _cut(raw.strip()) if isinstance(raw, str) else _shown(raw)
        raise InputError(f"{path}: {where}, field '{field}': {text} is too {'large' if value > 0 else 'small'} "
                         f"(the limit is {'' if value > 0 else '-'}2**62)")
    return value


def _float_field(path: str, where: str, field: str, raw: Any) -> float:
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}: {where}, field '{field}': expected a number, got {_shown(raw)}") from None
    if not math.isfinite(value):
        raise InputError(f"{path}: {where}, field '{field}': expected a finite number, got {_shown(raw)}")
    return value


class _Totals:
    """Running sums over a file's rows: the sizes must fit in :data:`MAX_INT`, float sums must stay finite."""

    def __init__(self, path: str):
        self.path, self.size, self.floats = path, 0, {}

    def add_size(self, where: str, size: int) -> None:
        self.size += size
        if self.size > MAX_INT:
            raise InputError(f"{self.path}: {where}, field 'size': the sizes add up to more than 2**62 bytes")

    def add_float(self, where: str, field: str, value: float | None, what: str | None = None) -> None:
        if value is None:
            return
        total = self.floats.get(field, 0.0) + value
        self.floats[field] = total
        if not math.isfinite(total):
            raise InputError(f"{self.path}: {where}, field '{field}': the {what or field + 's'} add up to "
                             "more than a float holds")


def _check_buffer(path: str, where: str, b: Buffer, seen: set[str]) -> None:
    if not b.id.strip():
        raise InputError(f"{path}: {where}, field 'id': empty id")
    if b.id in seen:
        raise InputError(f"{path}: {where}, field 'id': duplicate id {b.id!r}")
    if b.size <= 0:
        raise InputError(f"{path}: {where}, field 'size': size must be positive, got {b.size}")
    if b.end <= b.start:
        raise InputError(f"{path}: {where}, field 'upper': upper ({b.end}) must be greater than lower ({b.start})")
    if b.start < 0:
        raise InputError(f"{path}: {where}, field 'lower': lower must not be negative, got {b.start}")
    if b.alignment <= 0:
        raise InputError(f"{path}: {where}, field 'alignment': alignment must be positive, got {b.alignment}")
    if b.benefit is not None and b.benefit < 0:
        raise InputError(f"{path}: {where}, field 'benefit': benefit must not be negative, got {b.benefit}")
    seen.add(b.id)


def capacity_from_name(path: str | os.PathLike) -> int | None:
    """``A.1048576.csv`` -> 1048576 (MiniMalloc's convention); otherwise ``None``.

    Like every integer the readers take, the capacity is at most :data:`MAX_INT` (2**62) bytes:
    the solvers hold it in int64; a larger one is refused here, at the door.
    """
    m = _CAPACITY_IN_NAME.search(os.path.basename(str(path)))
    if not m:
        return None
    digits = m.group(1)
    if len(digits) > 19 or int(digits) > MAX_INT:
        shown = digits if len(digits) <= 30 else f"{digits[:20]}... ({len(digits)} digits)"
        raise InputError(f"{path}: capacity {shown} in the file name is too large (the limit is 2**62 bytes)")
    return int(digits)


MAX_DECOMPRESSED_ENV = "MALLOCGAME_MAX_DECOMPRESSED"
# The largest real input (an XLA program's gzipped HLO text) is about 20 MB decompressed: 256 MiB leaves room for
# programs ten times larger, and a compression bomb is refused before its text costs more memory than that.
DEFAULT_MAX_DECOMPRESSED = 256 << 20


def max_decompressed() -> int:
    """Bytes a compressed input may expand to: ``$MALLOCGAME_MAX_DECOMPRESSED`` (``512MiB``, ``2GiB``,
    ``1000000``), else :data:`DEFAULT_MAX_DECOMPRESSED` (256 MiB). A bad value is an :class:`InputError`."""
    raw = os.environ.get(MAX_DECOMPRESSED_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_DECOMPRESSED
    return parse_bytes(raw, what=MAX_DECOMPRESSED_ENV)


def too_large_decompressed(path: str | os.PathLike, cap: int) -> InputError:
    """The one line for a compressed input that expands past ``cap`` bytes."""
    return InputError(f"{path}: decompresses to more than {cap:,} bytes ({_binary_size(cap)}), the cap on a "
                      f"compressed input (set {MAX_DECOMPRESSED_ENV} to read a larger one)")


def _binary_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"


def check_zip_expansion(where: str | os.PathLike, archive: zipfile.ZipFile, names: Iterable[str] | None = None) -> None:
    """:func:`too_large_decompressed` (for ``where``) when the members ``names`` (default: all) of ``archive``
    together expand past :func:`max_decompressed` bytes. The sizes are those the archive declares, which is
    enough: :mod:`zipfile` never reads a member past its declared size."""
    cap = max_decompressed()
    infos = archive.infolist() if names is None else [archive.getinfo(n) for n in names]
    if sum(info.file_size for info in infos) > cap:
        raise too_large_decompressed(where, cap)


def read_bytes(path: str) -> bytes:
    """A file's bytes, gunzipped if it is gzipped (at most :func:`max_decompressed` bytes once gunzipped);
    ``InputError`` with one line when missing, unreadable, or too large once gunzipped."""
    check_regular_file(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if data[:2] == b"\x1f\x8b":
        return _gunzip(path, data)
    if str(path).endswith(".gz"):
        raise InputError(f"{path}: not a valid gzip file (no gzip header)")
    return data


def read_text(path: str, data: bytes | None = None) -> str:
    """A UTF-8 text file's contents, gunzipped if it is gzipped (``dump.hlo.txt.gz``, at most
    :func:`max_decompressed` bytes once gunzipped), a leading byte-order mark dropped; ``InputError`` with one
    line when missing, unreadable, empty, too large once gunzipped or not a text file. ``data``: the file's
    bytes as :func:`read_bytes` gave them (not read again)."""
    if data is None:
        data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None
    text = text.removeprefix("\ufeff")  # the byte-order mark a spreadsheet saves a UTF-8 CSV with
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text


def _gunzip(path: str, data: bytes) -> bytes:
    """The gzip member(s) of ``data``; :func:`too_large_decompressed` once past :func:`max_decompressed` bytes
    (reading stops one byte past the cap)."""
    cap = max_decompressed()
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as z:
            while chunk := z.read(min(1 << 24, cap + 1 - out.tell())):
                out.write(chunk)
                if out.tell() > cap:
                    raise too_large_decompressed(path, cap)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None
    return out.getvalue()


def _header(fields: list[str]) -> list[str]:
    """A CSV header's column names: stripped, in lower case (``ID,Lower`` names the ``id`` and ``lower`` columns)."""
    return [h.strip().lower() for h in fields]



@contextlib.contextmanager
def _any_field_size() -> Iterator[None]:
    """The csv module's field limit (131,072 characters) lifted while one file is read: an id of
    any length that the writers wrote is read back."""
    was = csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(was)


def _csv_records(path: str, text: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` per record; a quoted field may hold commas, quotes and line breaks.

    After the first record, the lines between records that hold nothing but white space and commas
    (records every reader skips) are passed over without being parsed (:class:`_RecordLines`)."""
    lines = _RecordLines(text)
    reader = csv.reader(lines)
    with _any_field_size():
        try:
            for raw in reader:
                yield lines.record_line, raw
                lines.between_records = True
        except csv.Error as exc:
            raise InputError(f"{path}: row {lines.record_line}: not valid CSV ({exc})") from None


_BLANK = re.compile(r"[\s,]+")  # white space and commas (a run of blank lines ends at its last line break)


class _RecordLines:
    """The lines of ``text`` for :func:`csv.reader`, split as ``io.StringIO(text, newline="")`` splits them
    (after ``\\n``, ``\\r`` or ``\\r\\n``), except that a run of blank lines (white space and commas) met
    between two records is skipped at once: a file of a header and a billion line breaks costs a scan, not a
    billion empty records. Inside a record (a quoted field spanning lines) every line is given as it is.
    ``record_line`` is the line number of the current record's first line."""

    def __init__(self, text: str):
        self.text, self.pos, self.line, self.record_line = text, 0, 0, 1
        self.next_lf = self.next_cr = -1  # the next "\n" and "\r" at or after pos (len(text): none left)
        self.between_records = False  # True once the reader has returned a record (never before the first)

    def __iter__(self) -> _RecordLines:
        return self

    def __next__(self) -> str:
        t = self.text
        if self.between_records:
            self.between_records = False
            blank = _BLANK.match(t, self.pos)
            end = blank and 1 + max(t.rfind("\n", *blank.span()), t.rfind("\r", *blank.span()))
            if end:  # the blank lines, each with its line break (one for "\r\n")
                start = self.pos
                self.line += t.count("\n", start, end) + t.count("\r", start, end) - t.count("\r\n", start, end)
                self.pos = end
            self.record_line = self.line + 1
        start, size = self.pos, len(t)
        if start >= size:
            raise StopIteration
        if self.next_lf < start:
            found = t.find("\n", start)
            self.next_lf = size if found < 0 else found
        if self.next_cr < start:
            found = t.find("\r", start)
            self.next_cr = size if found < 0 else found
        brk = min(self.next_lf, self.next_cr)
        end = size if brk >= size else brk + (2 if t.startswith("\r\n", brk) else 1)
        self.pos = end
        self.line += 1
        return t[start:end]


# MiniMalloc's converter's other names for the columns (its `end` is inclusive: upper = end + 1)
_CSV_SYNONYMS = {"buffer": "id", "buffer_id": "id", "begin": "lower", "start": "lower", "end": "upper"}


def _csv_rows(path: str, text: str, required: Iterable[str], *,
              synonyms: dict[str, str] | None = None
              ) -> tuple[list[str], list[tuple[int, dict[str, str]]], list[str]]:
    """``(header, rows, given)``: the column names with ``synonyms`` applied, each row by them, and the names as
    written (lower case)."""
    records = _csv_records(path, text)
    header = given = _header(next(records)[1])
    if synonyms:
        named = [synonyms.get(h, h) for h in header]
        twice = sorted({h for h in named if named.count(h) > 1})
        if twice:
            given = [g for g, h in zip(header, named) if h == twice[0]]
            raise InputError(f"{path}: row 1 (header): column '{twice[0]}' given twice ({', '.join(given)})")
        header = named
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"{path}: row 1 (header): missing column '{missing[0]}' (have: {','.join(header)})")
    rows = []
    for lineno, raw in records:
        if not raw or all(not c.strip() for c in raw):
            continue
        if len(raw) != len(header):
            raise InputError(f"{path}: row {lineno}: expected {len(header)} fields, got {len(raw)}")
        rows.append((lineno, dict(zip(header, raw))))
    if not rows:
        raise InputError(f"{path}: no buffers (header only)")
    return header, rows, given


def _plain_csv_columns(text: str) -> tuple[list[str], list[list[str]]] | None:
    """``(header, columns)`` of CSV text with no quoting, carriage return or NUL: each line split at commas,
    the fields gathered per column; ``None`` when a row has another field count (blank lines too)."""
    if '"' in text or "\r" in text or "\0" in text:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    width = lines[0].count(",") + 1
    body = lines[1:]
    if not body or set(map(str.count, body, itertools.repeat(","))) != {width - 1}:
        return None
    fields = ",".join(body).split(",")
    return lines[0].split(","), [fields[k::width] for k in range(width)]


def _fast_csv_buffers(path: str, text: str) -> BufferTable | None:
    """The buffers of a well-formed plain CSV (no quoting, every field as it should be), parsed column by column
    into a :class:`~mallocgame.problem.model.BufferTable`, or ``None`` when any row needs :func:`read_csv`'s checking
    loop (which gives the one-line error)."""
    plain = _plain_csv_columns(text)
    if plain is None:
        return None
    raw_header, columns = plain
    header = [_CSV_SYNONYMS.get(h, h) for h in _header(raw_header)]
    if len(set(header)) != len(header) or not set(CSV_COLUMNS) <= set(header) or "offset" in header:
        return None
    col = dict(zip(header, columns))
    inclusive = "end" in _header(raw_header)
    if "gaps" in col and any(g.strip() for g in col["gaps"]):
        return None  # the warning is the checking loop's
    ids = col["id"]
    if not all(map(str.strip, ids)) or len(set(ids)) != len(ids):
        return None
    try:
        start, end, size = (list(map(int, col[c])) for c in ("lower", "upper", "size"))
        alignment = list(map(int, col["alignment"])) if "alignment" in col else None
        benefit = [float(x) if x.strip() else None for x in col["benefit"]] if "benefit" in col else None
    except ValueError:
        return None
    if inclusive:
        end = [e + 1 for e in end]
    columns = [start, end, size] + ([alignment] if alignment is not None else [])
    if not all(-MAX_INT <= min(c) and max(c) <= MAX_INT for c in columns) or sum(size) > MAX_INT \
            or min(size) <= 0 or min(start) < 0 or (alignment is not None and min(alignment) <= 0) \
            or any(map(operator.le, end, start)):
        return None
    if benefit is not None:
        given = [b for b in benefit if b is not None]
        if given and not (min(given) >= 0 and math.isfinite(sum(given))):
            return None  # negative, infinite or NaN benefits: named by the checking loop
    n = len(ids)
    return BufferTable(ids, np.array(size, np.int64), np.array(start, np.int64), np.array(end, np.int64),
                       np.array(alignment, np.int64) if alignment else np.ones(n, np.int64),
                       np.array([np.nan if b is None else b for b in benefit], np.float64)
                       if benefit else np.full(n, np.nan), np.zeros(n, np.uint8))


@gc_paused()
def read_csv(path: str | os.PathLike, *, with_offsets: bool = False) -> tuple[Problem, list[int | None] | None]:
    path = str(path)
    text = read_text(path)
    name = without_gz(os.path.basename(path))
    name = name[: -len(".csv")] if name.endswith(".csv") else name
    fast = None if with_offsets else _fast_csv_buffers(path, text)
    if fast is not None:
        return Problem(name=name, buffers=fast, capacity=capacity_from_name(path), source=path), None
    header, rows, given = _csv_rows(path, text, CSV_COLUMNS + (("offset",) if with_offsets else ()),
                                    synonyms=_CSV_SYNONYMS)
    inclusive = "end" in given  # MiniMalloc's `end` column: the last time step (with `upper` too: refused above)
    has_benefit = "benefit" in header
    has_alignment = "alignment" in header
    has_gaps = "gaps" in header
    gaps_given = False
    buffers, offsets, seen, totals = [], [], set(), _Totals(path)
    for lineno, row in rows:
        where = f"row {lineno}"
        benefit = None
        if has_benefit and row["benefit"].strip() != "":
            benefit = _float_field(path, where, "benefit", row["benefit"])
        alignment = 1
        if has_alignment and row["alignment"].strip() != "":
            alignment = _int_field(path, where, "alignment", row["alignment"])
        b = Buffer(
            id=row["id"],  # exactly as written: the writers quote what needs it, never pad
            start=_int_field(path, where, "lower", row["lower"]),
            end=_int_field(path, where, "end" if inclusive else "upper", row["upper"]) + (1 if inclusive else 0),
            size=_int_field(path, where, "size", row["size"]),
            benefit=benefit,
            alignment=alignment,
        )
        _check_buffer(path, where, b, seen)
        if has_gaps and row["gaps"].strip():
            _check_gaps(path, where, row["gaps"], b, inclusive)
            gaps_given = True
        totals.add_size(where, b.size)
        totals.add_float(where, "benefit", b.benefit)
        buffers.append(b)
        if with_offsets:
            raw = row["offset"].strip()
            off = None if raw == "" else _int_field(path, where, "offset", raw)
            if off is not None and off < 0:
                raise InputError(f"{path}: {where}, field 'offset': offset must not be negative, got {off}")
            offsets.append(off)
    if gaps_given:
        warnings.warn(f"{path}: column 'gaps': mallocgame keeps each buffer for its whole [lower, upper) (a gap's "
                      "memory is not reused): every answer is valid, a packing may need more memory", UserWarning,
                      stacklevel=2)
    name = without_gz(os.path.basename(path))
    name = name[: -len(".csv")] if name.endswith(".csv") else name
    problem = Problem(name=name, buffers=tuple(buffers), capacity=capacity_from_name(path), source=path)
    return problem, (offsets if with_offsets else None)


# MiniMalloc's gaps: space-separated LOWER-UPPER, each optionally @FROM:TO (the offsets the buffer keeps meanwhile)
_GAP = re.compile(r"([0-9]+)-([0-9]+)(?:@[0-9]+:[0-9]+)?")


def _check_gaps(path: str, where: str, cell: str, b: Buffer, inclusive: bool) -> None:
    """A ``gaps`` cell in MiniMalloc's form, each gap inside the buffer's life (an ``end`` column's gaps end
    inclusively, as its lives do); else an :class:`InputError` naming the row and the field."""
    for gap in cell.split():
        m = _GAP.fullmatch(gap)
        if not m:
            raise InputError(f"{path}: {where}, field 'gaps': expected space-separated LOWER-UPPER gaps, each "
                             f"optionally @FROM:TO (such as '2-4 6-7@0:64'), got {_shown(cell)}")
        lower, upper = int(m.group(1)), int(m.group(2)) + (1 if inclusive else 0)
        if not b.start <= lower < upper <= b.end:
            raise InputError(f"{path}: {where}, field 'gaps': gap {gap!r} is not a time span inside the buffer's "
                             f"life [{b.start}, {b.end})")


def _json_list(path: str, data: dict, key: str, where: str = "") -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise InputError(f"{path}: {where + ', ' if where else ''}field '{key}': expected a list, got {_shown(value)}")
    return value


def _json_id(path: str, where: str, raw: Any, field: str = "id") -> str:
    """An id field: a string (or an integer, read as its digits); anything else (an object, a list, a boolean,
    ``null``, a fraction) is an :class:`InputError` naming the field."""
    if not _is_json_id(raw):
        raise InputError(f"{path}: {where}, field '{field}': expected a string, got {_shown(raw)}")
    return str(raw)


def _is_json_id(raw: Any) -> bool:
    return isinstance(raw, str) or (isinstance(raw, int) and not isinstance(raw, bool))


def _json_name(path: str, where: str, raw: Any, field: str) -> str:
    """A name field (an op's ``kind``): a string; anything else is an :class:`InputError` naming the field."""
    if not isinstance(raw, str):
        raise InputError(f"{path}: {where}, field '{field}': expected a string, got {_shown(raw)}")
    return raw


def _json_obj(path: str, where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{path}: {where}: expected an object")
    return value


# Fast paths of parse_workload: the common, well-formed document checked column-wise. Any field
# they do not take as it is (a string number, an unknown key, a bad value) sends the document
# through the per-field loops of parse_workload, which give the one-line error.
_BUFFER_KEYS = frozenset({"id", "size", "start", "end", "alignment", "kind", "benefit"})
_OP_KEYS = frozenset({"id", "kind", "flops", "fixed_bytes", "operands", "transcendentals", "control_deps"})
_OPERAND_KEYS = frozenset({"buffer", "access", "bytes"})
_KINDS = frozenset(BUFFER_KINDS)


def _plain_ints(values: list) -> bool:
    """Every value a Python int (not a bool) of at most :data:`MAX_INT` in magnitude."""
    return all(type(v) is int for v in values) and (not values or -MAX_INT <= min(values) and max(values) <= MAX_INT)


def _fast_buffers(raw_buffers: list) -> list[Buffer] | None:
    """The buffers of a well-formed ``buffers`` list, or ``None`` when any needs the checking loop."""
    if not all(type(r) is dict and r.keys() <= _BUFFER_KEYS for r in raw_buffers):
        return None
    try:
        ids = [r["id"] for r in raw_buffers]
        size = [r["size"] for r in raw_buffers]
        start = [r["start"] for r in raw_buffers]
        end = [r["end"] for r in raw_buffers]
    except KeyError:
        return None
    align = [r.get("alignment", 1) for r in raw_buffers]
    kind = [r.get("kind", "activation") for r in raw_buffers]
    benefit = [r.get("benefit") for r in raw_buffers]
    if not (all(type(i) is str and i for i in ids) and len(set(ids)) == len(ids)
            and _plain_ints(size) and _plain_ints(start) and _plain_ints(end) and _plain_ints(align)
            and all(type(k) is str and k in _KINDS for k in kind) and sum(size) <= MAX_INT):
        return None
    if min(size) <= 0 or min(start) < 0 or min(align) <= 0 or any(e <= s for s, e in zip(start, end)):
        return None
    given = [x for x in benefit if x is not None]
    if given and not (all(type(x) is float or type(x) is int for x in given) and min(given) >= 0
                      and math.isfinite(sum(given))):
        return None
    benefit = [None if x is None else float(x) for x in benefit]
    return [Buffer(i, z, s, e, bf, al, k) for i, z, s, e, bf, al, k in zip(ids, size, start, end, benefit, align, kind)]


def _fast_ops(raw_ops: list, by_id: dict[str, Buffer]) -> tuple[list[Op], list[tuple[str, int, Any, str]]] | None:
    """The ops (and control predecessors, as parse_workload collects them) of a well-formed ``ops``
    list, or ``None`` when any needs the checking loop."""
    if not all(type(r) is dict for r in raw_ops):
        return None
    fields = _plain_op_fields(raw_ops)
    if fields is None:
        return None
    ids, kinds, flops, trans, fixed = fields
    lists = [r.get("operands", []) for r in raw_ops]
    if not all(type(x) is list for x in lists):
        return None
    flat = [o for x in lists for o in x]
    if not all(type(o) is dict and o.keys() <= _OPERAND_KEYS for o in flat):
        return None
    span = {b.id: (b.start, b.end, b.size) for b in by_id.values()}
    names = [o.get("buffer", "") for o in flat]
    if not all(type(name) is str for name in names):
        return None
    lives = [span.get(name) for name in names]
    if None in lives:
        return None
    times = [t for t, x in enumerate(lists) for _ in x]
    access = [o.get("access", "read") for o in flat]
    nbytes = [o.get("bytes", live[2]) for o, live in zip(flat, lives)]
    if not (all(live[0] <= t < live[1] for live, t in zip(lives, times))
            and all(type(a) is str for a in access) and set(access) <= {"read", "write"} and _plain_ints(nbytes)
            and min(nbytes, default=0) >= 0):
        return None
    made = list(map(Operand, names, access, nbytes))
    ops, at = [], 0
    for t in range(len(raw_ops)):
        k = len(lists[t])
        ops.append(Op(ids[t], kinds[t], float(flops[t]), fixed[t], tuple(made[at:at + k]),
                      transcendentals=float(trans[t])))
        at += k
    control = _plain_control_deps(raw_ops, ids)
    return None if control is None else (ops, control)


def _plain_op_fields(raw_ops: list) -> tuple[list, list, list, list, list] | None:
    """``(ids, kinds, flops, transcendentals, fixed_bytes)`` of the op dicts of the fast paths, or ``None`` when
    any field needs the checking loop (an unknown key, a non-string id or kind, a repeated id, a negative, non-finite
    or non-numeric number)."""
    if not all(r.keys() <= _OP_KEYS for r in raw_ops):
        return None
    ids = [r.get("id", f"op{t}") for t, r in enumerate(raw_ops)]
    kinds = [r.get("kind", "op") for r in raw_ops]
    flops = [r.get("flops", 0.0) for r in raw_ops]
    trans = [r.get("transcendentals", 0.0) for r in raw_ops]
    fixed = [r.get("fixed_bytes", 0) for r in raw_ops]
    numbers = flops + trans
    if not (all(type(i) is str for i in ids) and len(set(ids)) == len(ids) and all(type(k) is str for k in kinds)
            and _plain_ints(fixed) and all(type(x) is float or type(x) is int for x in numbers)):
        return None
    if raw_ops and (min(fixed) < 0 or min(numbers) < 0 or not math.isfinite(sum(numbers))):
        return None
    return ids, kinds, flops, trans, fixed


def _plain_control_deps(raw_ops: list, ids: list) -> list[tuple[str, int, Any, str]] | None:
    """The control predecessors of the op dicts, as parse_workload collects them (``(where, op, before, op id)``),
    or ``None`` where a ``control_deps`` is not a list."""
    control = []
    for t, raw in enumerate(raw_ops):
        if "control_deps" in raw:
            deps = raw["control_deps"]
            if type(deps) is not list:
                return None
            control += [(f"ops[{t}].control_deps[{j}]", t, before, ids[t]) for j, before in enumerate(deps)]
    return control


def parse_workload(path: str, data: Any) -> Problem:
    """Build a problem from a decoded ``mallocgame.workload/1`` document."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: top level: expected a JSON object")
    fmt = data.get("format")
    if fmt != WORKLOAD_FORMAT:
        raise InputError(f"{path}: field 'format': expected {WORKLOAD_FORMAT!r}, got {fmt!r}")
    totals = _Totals(path)
    raw_buffers = _json_list(path, data, "buffers")
    if not raw_buffers:
        raise InputError(f"{path}: field 'buffers': no buffers")
    buffers = _fast_buffers(raw_buffers)
    if buffers is None:
        buffers = _checked_buffers(path, raw_buffers, totals)
    by_id = {b.id: b for b in buffers}
    raw_ops = _json_list(path, data, "ops")
    fast_ops = _fast_ops(raw_ops, by_id)
    # control: (where, op index, predecessor id, op id)
    ops, control = fast_ops if fast_ops is not None else _checked_ops(path, raw_ops, by_id, totals)
    _check_horizon(path, buffers, ops)
    control_deps, original_order = _schedule_fields(path, data, [op.id for op in ops], control)
    inplace = _inplace_pairs(path, data, by_id)
    capacity = _capacity_field(path, data)
    raw_name = data.get("name")
    if raw_name is not None and not _is_json_id(raw_name):
        raise InputError(f"{path}: field 'name': expected a string, got {_shown(raw_name)}")
    name = str(raw_name or os.path.basename(path))
    _check_ids_write_back(path, [b.id for b in buffers], [op.id for op in ops])
    return merge_inplace(Problem(name=name, buffers=tuple(buffers), ops=tuple(ops), inplace=tuple(inplace),
                                 capacity=capacity, source=path, control_deps=control_deps,
                                 original_order=original_order))  # in-place pairs share storage (mallocgame.problem.aliasing)


def _checked_buffers(path: str, raw_buffers: list, totals: _Totals) -> list[Buffer]:
    """The ``buffers`` list field by field: the first bad one is a one-line :class:`InputError`."""
    buffers: list[Buffer] = []
    seen: set[str] = set()
    for k, raw in enumerate(raw_buffers):
        where = f"buffers[{k}]"
        raw = _json_obj(path, where, raw)
        for key in ("id", "size", "start", "end"):
            if key not in raw:
                raise InputError(f"{path}: {where}: missing field '{key}'")
        kind = raw.get("kind", "activation")
        if kind not in BUFFER_KINDS:
            raise InputError(f"{path}: {where}, field 'kind': unknown kind {kind!r} (one of {', '.join(BUFFER_KINDS)})")
        b = Buffer(
            id=_json_id(path, where, raw["id"]),
            size=_int_field(path, where, "size", raw["size"]),
            start=_int_field(path, where, "start", raw["start"]),
            end=_int_field(path, where, "end", raw["end"]),
            benefit=None if raw.get("benefit") is None else _float_field(path, where, "benefit", raw["benefit"]),
            alignment=_int_field(path, where, "alignment", raw.get("alignment", 1)),
            kind=kind,
        )
        _check_buffer(path, where.replace("row", ""), b, seen)
        totals.add_size(where, b.size)
        totals.add_float(where, "benefit", b.benefit)
        buffers.append(b)
    return buffers


def _checked_ops(path: str, raw_ops: list, by_id: dict[str, Buffer],
                 totals: _Totals) -> tuple[list[Op], list[tuple[str, int, Any, str]]]:
    """The ``ops`` list field by field, and the control predecessors each names (checked later,
    by :func:`_schedule_fields`): the first bad field is a one-line :class:`InputError`."""
    ops: list[Op] = []
    op_ids: set[str] = set()
    control: list[tuple[str, int, Any, str]] = []  # (where, op index, predecessor id, op id)
    for t, raw in enumerate(raw_ops):
        where = f"ops[{t}]"
        raw = _json_obj(path, where, raw)
        op_id = _json_id(path, where, raw["id"]) if "id" in raw else f"op{t}"
        if op_id in op_ids:
            raise InputError(f"{path}: {where}, field 'id': duplicate op id {op_id!r}")
        op_ids.add(op_id)
        ops.append(_checked_op(path, where, t, op_id, raw, by_id, totals))
        for j, before in enumerate(_json_list(path, raw, "control_deps", where)):
            control.append((f"{where}.control_deps[{j}]", t, before, op_id))
    return ops, control


def _checked_op(path: str, where: str, t: int, op_id: str, raw: dict, by_id: dict[str, Buffer],
                totals: _Totals) -> Op:
    """Op ``t`` (``raw``, at ``where``): its numbers and its operands, checked."""
    flops = _float_field(path, where, "flops", raw.get("flops", 0.0))
    fixed = _int_field(path, where, "fixed_bytes", raw.get("fixed_bytes", 0))
    trans = _float_field(path, where, "transcendentals", raw.get("transcendentals", 0.0))
    if flops < 0 or fixed < 0 or trans < 0:
        raise InputError(f"{path}: {where}: flops, transcendentals and fixed_bytes must not be negative")
    totals.add_float(where, "flops", flops + trans, "flops")
    operands = [_checked_operand(path, f"{where}.operands[{j}]", t, rawo, by_id)
                for j, rawo in enumerate(_json_list(path, raw, "operands", where))]
    kind = _json_name(path, where, raw.get("kind", "op"), "kind")
    return Op(op_id, kind, flops, fixed, tuple(operands), transcendentals=trans)


def _checked_operand(path: str, where: str, t: int, raw: Any, by_id: dict[str, Buffer]) -> Operand:
    """An operand of op ``t``: a known buffer live at ``t``, read or written, bytes not negative."""
    raw = _json_obj(path, where, raw)
    name = _json_id(path, where, raw.get("buffer", ""), "buffer")
    if name not in by_id:
        raise InputError(f"{path}: {where}, field 'buffer': unknown buffer {name!r}")
    b = by_id[name]
    if not (b.start <= t < b.end):
        raise InputError(
            f"{path}: {where}: op {t} touches buffer {name!r} outside its live range [{b.start}, {b.end})"
        )
    access = raw.get("access", "read")
    if access not in ("read", "write"):
        raise InputError(f"{path}: {where}, field 'access': expected 'read' or 'write', got {access!r}")
    nbytes = _int_field(path, where, "bytes", raw.get("bytes", b.size))
    if nbytes < 0:
        raise InputError(f"{path}: {where}, field 'bytes': must not be negative")
    return Operand(name, access, nbytes)


def _check_horizon(path: str, buffers: list[Buffer], ops: list[Op]) -> None:
    """With ops, no buffer may live past the last one."""
    if ops and max(b.end for b in buffers) > len(ops):
        horizon = len(ops)
        for k, b in enumerate(buffers):
            if b.end > horizon:
                raise InputError(f"{path}: buffers[{k}], field 'end': {b.end} is past the last op ({horizon})")


def _inplace_pairs(path: str, data: dict, by_id: dict[str, Buffer]) -> list[tuple[str, str]]:
    """The optional top-level ``inplace`` field: pairs of known buffer ids."""
    inplace = []
    for k, pair in enumerate(_json_list(path, data, "inplace")):
        if not (isinstance(pair, list) and len(pair) == 2 and all(_is_json_id(x) and str(x) in by_id for x in pair)):
            raise InputError(f"{path}: inplace[{k}]: expected a pair of known buffer ids, got {pair!r}")
        inplace.append((str(pair[0]), str(pair[1])))
    return inplace


def _capacity_field(path: str, data: dict) -> int | None:
    """The optional top-level ``capacity``: a positive integer, or ``None``."""
    capacity = data.get("capacity")
    if capacity is not None:
        capacity = _int_field(path, "top level", "capacity", capacity)
        if capacity <= 0:
            raise InputError(f"{path}: field 'capacity': must be positive, got {capacity}")
    return capacity


def _schedule_fields(path: str, data: dict, op_ids: Sequence[str],
                     control: list[tuple[str, int, Any, str]]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The optional ``control_deps`` (per op) and ``original_order`` (top level) of a workload, checked.

    A control predecessor must be a known op scheduled before the op naming it (the file's order
    is a program); ``original_order`` must list every op id exactly once. ``op_ids`` are the ops' ids in order.
    """
    raw = data.get("original_order")
    if not control and raw is None:
        return (), ()
    position = dict(zip(op_ids, range(len(op_ids))))
    pairs: dict[tuple[str, str], None] = {}  # ordered, no duplicates
    for where, t, before, op_id in control:
        if isinstance(before, bool) or not isinstance(before, (str, int)) or str(before) not in position:
            raise InputError(f"{path}: {where}: expected the id of an op, got {_shown(before)}")
        if position[str(before)] >= t:
            raise InputError(f"{path}: {where}: op {str(before)!r} must run before {op_id!r} "
                             f"but is scheduled at {position[str(before)]}, not before {t}")
        pairs[(str(before), op_id)] = None
    if raw is None:
        return tuple(pairs), ()
    if not isinstance(raw, list):
        raise InputError(f"{path}: field 'original_order': expected a list of op ids, got {_shown(raw)}")
    order = []
    for k, oid in enumerate(raw):
        if isinstance(oid, bool) or not isinstance(oid, (str, int)) or str(oid) not in position:
            raise InputError(f"{path}: original_order[{k}]: expected the id of an op, got {_shown(oid)}")
        order.append(str(oid))
    if len(order) != len(op_ids) or len(set(order)) != len(op_ids):
        missing = sorted(set(position) - set(order))
        what = f"op {missing[0]!r} is missing" if missing else "an op id appears twice"
        raise InputError(f"{path}: field 'original_order': must list each of the {len(op_ids)} ops once ({what})")
    return tuple(pairs), tuple(order)


class _CompactObjects:
    """``json.loads``'s ``object_hook`` that turns each well-formed buffer object into a :class:`Buffer` and each
    well-formed operand object into an :class:`Operand` as they are decoded, so a large workload never holds a
    dictionary per buffer and per operand; any other object stays a dictionary. Ids and buffer names are shared
    (one string per name). ``buffers`` and ``operands`` count what was turned, so that
    :func:`_compact_workload` can tell that nothing else was."""

    def __init__(self) -> None:
        self.buffers = self.operands = 0
        self.names: dict[str, str] = {}

    def __call__(self, raw: dict) -> Any:
        keys = raw.keys()
        if "buffer" in raw and keys <= _OPERAND_KEYS and len(keys) == 3:
            name, access, nbytes = raw["buffer"], raw["access"], raw["bytes"]
            if type(name) is str and (access == "read" or access == "write") and type(nbytes) is int \
                    and 0 <= nbytes <= MAX_INT:
                self.operands += 1
                return Operand(self.names.setdefault(name, name), access, nbytes)
        elif "size" in raw and keys <= _BUFFER_KEYS and _BUFFER_NEEDS <= keys:
            bid, size, start, end = raw["id"], raw["size"], raw["start"], raw["end"]
            alignment, kind, benefit = raw.get("alignment", 1), raw.get("kind", "activation"), raw.get("benefit")
            if type(bid) is str and bid and type(size) is int and type(start) is int and type(end) is int \
                    and type(alignment) is int and 0 < size <= MAX_INT and 0 <= start < end <= MAX_INT \
                    and 0 < alignment <= MAX_INT and type(kind) is str and kind in _KINDS \
                    and (benefit is None or ((type(benefit) is float or type(benefit) is int) and 0 <= benefit)):
                self.buffers += 1
                return Buffer(self.names.setdefault(bid, bid), size, start, end,
                              None if benefit is None else float(benefit), alignment, kind)
        return raw


_BUFFER_NEEDS = frozenset({"id", "size", "start", "end"})


def _compact_workload(path: str, text: str) -> Problem | None:
    """The problem of a well-formed workload, decoded through :class:`_CompactObjects`, or ``None`` when anything
    in it needs :func:`parse_workload` (which then reads the text again and names the bad field)."""
    hook = _CompactObjects()
    try:
        data = json.loads(text, object_hook=hook)
    except (ValueError, RecursionError):
        return None
    if type(data) is not dict or type(data.get("buffers")) is not list or type(data.get("ops", [])) is not list:
        return None
    buffers, raw_ops = data["buffers"], data.get("ops", [])
    if not buffers or len(buffers) != hook.buffers or not all(type(b) is Buffer for b in buffers):
        return None
    ids = [b.id for b in buffers]
    if len(set(ids)) != len(ids) or sum(b.size for b in buffers) > MAX_INT:
        return None
    given = [b.benefit for b in buffers if b.benefit is not None]
    if given and not math.isfinite(sum(given)):
        return None
    operands = 0
    for raw in raw_ops:
        if type(raw) is not dict or type(raw.get("operands", [])) is not list:
            return None
        operands += len(raw.get("operands", []))
    if operands != hook.operands:
        return None  # an operand left a dictionary, or an Operand where none belongs
    by_id = {b.id: b for b in buffers}
    fast_ops = _compact_ops(raw_ops, by_id)
    raw_name = data.get("name")
    if fast_ops is None or data.get("format") != WORKLOAD_FORMAT or not (
            raw_name is None or type(raw_name) is str or type(raw_name) is int):
        return None
    ops, control = fast_ops
    try:
        _check_horizon(path, buffers, ops)
        control_deps, original_order = _schedule_fields(path, data, [op.id for op in ops], control)
        inplace = _inplace_pairs(path, data, by_id)
        capacity = _capacity_field(path, data)
        _check_ids_write_back(path, [b.id for b in buffers], [op.id for op in ops])
    except InputError:
        return None
    return merge_inplace(Problem(name=str(raw_name or os.path.basename(path)), buffers=tuple(buffers), ops=tuple(ops),
                                 inplace=tuple(inplace), capacity=capacity, source=path, control_deps=control_deps,
                                 original_order=original_order))


def _compact_ops(raw_ops: list, by_id: dict[str, Buffer]) -> tuple[list[Op], list[tuple[str, int, Any, str]]] | None:
    """:func:`_fast_ops` of an ``ops`` list whose operands :class:`_CompactObjects` made: the ops and their
    control predecessors, or ``None`` when any needs the checking loop."""
    fields = _plain_op_fields(raw_ops)
    if fields is None:
        return None
    ids, kinds, flops, trans, fixed = fields
    lists = [r.get("operands", []) for r in raw_ops]
    if not all(type(o) is Operand for x in lists for o in x):
        return None
    for t, x in enumerate(lists):
        for o in x:
            b = by_id.get(o.buffer)
            if b is None or not b.start <= t < b.end:
                return None
    ops = [Op(ids[t], kinds[t], float(flops[t]), fixed[t], tuple(lists[t]), transcendentals=float(trans[t]))
           for t in range(len(raw_ops))]
    control = _plain_control_deps(raw_ops, ids)
    return None if control is None else (ops, control)


# The columnar reader: a well-formed workload decoded by msgspec into small typed records (no dictionary per
# buffer or operand), the buffers and then the ops turned into numpy columns (BufferTable, OpTable) section by
# section, so the records of one section at most are alive at a time. A field of another type, an unknown key
# or a null sends the document to the readers above, which name the bad field.
class _JsonBuffer(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: str
    size: int
    start: int
    end: int
    alignment: int = 1
    kind: str = "activation"
    benefit: float | msgspec.UnsetType = msgspec.UNSET  # null: the checking loop's (it reads null as none)


class _JsonOperand(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    buffer: str
    access: Literal["read", "write"] = "read"
    bytes: int | msgspec.UnsetType = msgspec.UNSET


class _JsonOp(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: str | msgspec.UnsetType = msgspec.UNSET
    kind: str = "op"
    flops: float = 0.0
    fixed_bytes: int = 0
    operands: list[_JsonOperand] = []
    transcendentals: float = 0.0
    control_deps: list | msgspec.UnsetType = msgspec.UNSET


class _JsonWorkload(msgspec.Struct, gc=False):
    format: Any = msgspec.UNSET
    name: Any = msgspec.UNSET
    buffers: msgspec.Raw = msgspec.Raw(b"null")
    ops: msgspec.Raw = msgspec.Raw(b"[]")
    inplace: Any = msgspec.UNSET
    capacity: Any = msgspec.UNSET
    original_order: Any = msgspec.UNSET


_JSON_TOP = msgspec.json.Decoder(_JsonWorkload)
_JSON_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_JSON_BUFFERS = msgspec.json.Decoder(list[_JsonBuffer])
_JSON_OPS = msgspec.json.Decoder(list[_JsonOp])
_RECORDS_AT_ONCE = 1 << 16  # records alive at a time: a large file's sections are decoded in pieces


def _pieces(raw: msgspec.Raw, decoder: msgspec.json.Decoder) -> Iterator[list]:
    """The JSON list ``raw`` decoded by ``decoder`` (a list decoder), :data:`_RECORDS_AT_ONCE` items at a time;
    ``msgspec.ValidationError``/``DecodeError`` when it is not a list of what ``decoder`` takes (``RecursionError``
    when nested too deeply)."""
    items = _JSON_ITEMS.decode(raw)
    for lo in range(0, len(items), _RECORDS_AT_ONCE):
        yield decoder.decode(b"[" + b",".join(items[lo:lo + _RECORDS_AT_ONCE]) + b"]")


def _int_column(values: Iterable[int], n: int) -> np.ndarray | None:
    """int64 ``[n]`` of ``values``, or ``None`` when one is past :data:`MAX_INT` in magnitude."""
    try:
        column = np.fromiter(values, np.int64, n)
    except OverflowError:
        return None
    return column if not n or (-MAX_INT <= column.min() and column.max() <= MAX_INT) else None


def _sum_fits(column: np.ndarray) -> bool:
    """The sum of ``column`` (int64, each at most :data:`MAX_INT`) is at most :data:`MAX_INT`, exactly."""
    if float(np.abs(column).sum(dtype=np.float64)) < 2.0**61:
        return True
    return sum(column.tolist()) <= MAX_INT


_KIND_CODES = {k: c for c, k in enumerate(BUFFER_KINDS)}
_GET = {name: operator.attrgetter(name) for name in (
    "id", "size", "start", "end", "alignment", "kind", "benefit", "buffer", "access", "bytes", "flops",
    "transcendentals", "fixed_bytes", "operands", "control_deps")}


def _buffer_columns(raw: msgspec.Raw) -> tuple | None:
    """The ``buffers`` list decoded by msgspec into ``(ids, size, start, end, alignment, benefit, kind)`` (the
    reference of :func:`mallocgame._native.json_buffer_columns`), or ``None`` when any buffer needs the checking loop."""
    ids: list[str] = []
    parts: dict[str, list[np.ndarray]] = {f: [] for f in ("size", "start", "end", "alignment", "benefit", "kind")}
    try:
        for records in _pieces(raw, _JSON_BUFFERS):
            n = len(records)
            ids += map(_GET["id"], records)
            for f in ("size", "start", "end", "alignment"):
                column = _int_column(map(_GET[f], records), n)
                if column is None:
                    return None
                parts[f].append(column)
            kinds = list(map(_KIND_CODES.get, map(_GET["kind"], records)))
            if None in kinds:
                return None
            parts["kind"].append(np.array(kinds, np.uint8))
            benefit = list(map(_GET["benefit"], records))
            parts["benefit"].append(np.full(n, np.nan) if benefit.count(msgspec.UNSET) == n else np.array(
                [math.nan if x is msgspec.UNSET else x for x in benefit], np.float64))
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if not ids:
        return None
    return (ids, *(np.concatenate(parts.pop(f)) for f in ("size", "start", "end", "alignment", "benefit", "kind")))


def _within_max_int(*columns: np.ndarray) -> bool:
    """Every value of the int64 ``columns`` is at most :data:`MAX_INT` in magnitude."""
    return all(not len(c) or (-MAX_INT <= c.min() and c.max() <= MAX_INT) for c in columns)


def _columnar_buffers(raw: msgspec.Raw) -> tuple[BufferTable, dict[str, int]] | None:
    """The ``buffers`` list as a :class:`~mallocgame.problem.model.BufferTable` and the index of its ids, or ``None``
    when any buffer needs the checking loop. Decoded by the compiled scanner when ``MALLOCGAME_ENGINE`` is
    ``native`` and the list is of its plain shape, else by :func:`_buffer_columns`."""
    columns = json_buffer_columns(raw, BUFFER_KINDS) if engine() == "native" else None
    if columns is None:
        columns = _buffer_columns(raw)
    if columns is None:
        return None
    ids, size, start, end, alignment, benefit, kind = columns
    n = len(ids)
    if not _within_max_int(size, start, end, alignment):
        return None
    index = dict(zip(ids, range(n)))
    if not all(ids) or len(index) != n or size.min() <= 0 or start.min() < 0 or alignment.min() <= 0 \
            or (end <= start).any() or not _sum_fits(size):
        return None
    given = benefit[~np.isnan(benefit)]
    if len(given) and not (given.min() >= 0 and math.isfinite(float(given.sum()))):
        return None
    return BufferTable(ids, size, start, end, alignment, benefit, kind), index


def _op_columns(raw: msgspec.Raw, buffers: BufferTable, index: dict[str, int]) -> tuple | None:
    """The ops decoded by msgspec into ``(ids, kinds, flops, transcendentals, fixed_bytes, counts, buffer, write,
    bytes)`` and their control predecessors (as :func:`parse_workload` collects them): the reference of
    :func:`mallocgame._native.json_op_columns`; ``None`` when any op needs the checking loop."""
    ids: list[str] = []
    kinds: list[str] = []
    strings: dict[str, str] = {}  # one string per op kind
    control: list[tuple[str, int, Any, str]] = []
    parts: dict[str, list[np.ndarray]] = {f: [] for f in (
        "flops", "transcendentals", "fixed_bytes", "counts", "buffer", "write", "bytes")}
    try:
        for records in _pieces(raw, _JSON_OPS):
            n_ops, at = len(records), len(ids)
            given = list(map(_GET["id"], records))
            if msgspec.UNSET in given:  # an op without an id is "op<index>"
                given = [f"op{t}" if i is msgspec.UNSET else i for t, i in enumerate(given, at)]
            ids += given
            names = list(map(_GET["kind"], records))
            kinds += map(strings.setdefault, names, names)
            parts["flops"].append(np.fromiter(map(_GET["flops"], records), np.float64, n_ops))
            parts["transcendentals"].append(np.fromiter(map(_GET["transcendentals"], records), np.float64, n_ops))
            fixed = _int_column(map(_GET["fixed_bytes"], records), n_ops)
            if fixed is None:
                return None
            parts["fixed_bytes"].append(fixed)
            operands = list(map(_GET["operands"], records))
            parts["counts"].append(np.fromiter(map(len, operands), np.int64, n_ops))
            for t, deps in enumerate(map(_GET["control_deps"], records), at):
                if deps is not msgspec.UNSET:
                    control += [(f"ops[{t}].control_deps[{j}]", t, before, ids[t]) for j, before in enumerate(deps)]
            flat = list(itertools.chain.from_iterable(operands))
            n = len(flat)
            try:
                buf = np.fromiter(map(index.__getitem__, map(_GET["buffer"], flat)), np.int64, n)
            except KeyError:
                return None
            parts["buffer"].append(buf)
            # the access is "read" or "write" (the decoder's Literal): a length of 5 is a write
            parts["write"].append(np.fromiter(map(len, map(_GET["access"], flat)), np.int8, n) == 5)
            nbytes = list(map(_GET["bytes"], flat))
            if nbytes.count(msgspec.UNSET):  # none given: the buffer's size
                sizes = buffers.size[buf].tolist()
                nbytes = [z if x is msgspec.UNSET else x for x, z in zip(nbytes, sizes)]
            column = _int_column(nbytes, n)
            if column is None:
                return None
            parts["bytes"].append(column)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    flops, trans, fixed, counts, buf, write, nbytes = (
        np.concatenate(parts.pop(f)) if parts[f] else np.zeros(0, np.float64 if f in ("flops", "transcendentals")
                                                                 else bool if f == "write" else np.int64)
        for f in ("flops", "transcendentals", "fixed_bytes", "counts", "buffer", "write", "bytes"))
    return (ids, kinds, flops, trans, fixed, counts, buf, write, nbytes), control


def _columnar_ops(raw: msgspec.Raw, buffers: BufferTable, index: dict[str, int]
                  ) -> tuple[OpTable, list[tuple[str, int, Any, str]]] | None:
    """The ops (and their control predecessors, as :func:`parse_workload` collects them) as an
    :class:`~mallocgame.problem.model.OpTable` naming ``buffers``, or ``None`` when any needs the checking loop.
    Decoded by the compiled scanner when ``MALLOCGAME_ENGINE`` is ``native`` and the list is of its plain shape
    (no ``control_deps``), else by :func:`_op_columns`."""
    columns = json_op_columns(raw, index, buffers.size) if engine() == "native" else None
    made = (columns, []) if columns is not None else _op_columns(raw, buffers, index)
    if made is None:
        return None
    (ids, kinds, flops, trans, fixed, counts, buf, write, nbytes), control = made
    if not _within_max_int(fixed, nbytes):
        return None
    n_ops = len(ids)
    if len(set(ids)) != n_ops:
        return None
    if n_ops and (fixed.min() < 0 or min(flops.min(), trans.min()) < 0
                  or not math.isfinite(float(flops.sum() + trans.sum()))):
        return None
    if len(nbytes) and nbytes.min() < 0:
        return None
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    at = np.repeat(np.arange(n_ops, dtype=np.int64), counts)
    if ((buffers.start[buf] > at) | (at >= buffers.end[buf])).any():
        return None  # an op touching a buffer outside its life
    return OpTable(ids, kinds, flops, trans, fixed, ptr, buf, write, nbytes, buffers.ids), control


def _columnar_workload(path: str, data: bytes) -> Problem | None:
    """The problem of a well-formed workload (``data``: the file's bytes) with its buffers and ops as columns,
    or ``None`` when anything in it needs :func:`parse_workload` (which then reads the text and names the bad
    field)."""
    try:
        top = _JSON_TOP.decode(data.removeprefix(b"\xef\xbb\xbf"))
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    if top.format != WORKLOAD_FORMAT or not (top.name is msgspec.UNSET or top.name is None
                                              or type(top.name) is str or type(top.name) is int):
        return None
    made_buffers = _columnar_buffers(top.buffers)
    if made_buffers is None:
        return None
    buffers, index = made_buffers
    made = _columnar_ops(top.ops, buffers, index)
    if made is None:
        return None
    ops, control = made
    fields = {k: v for k in ("inplace", "capacity", "original_order") if (v := getattr(top, k)) is not msgspec.UNSET}
    try:
        if len(ops) and int(buffers.end.max()) > len(ops):
            return None  # a buffer past the last op: the checking loop names it
        control_deps, original_order = _schedule_fields(path, fields, ops.ids, control)
        inplace = _inplace_pairs(path, fields, index)
        capacity = _capacity_field(path, fields)
        _check_ids_write_back(path, buffers.ids, ops.ids)
    except InputError:
        return None
    name = top.name if top.name is not msgspec.UNSET else None
    return merge_inplace(Problem(name=str(name or os.path.basename(path)), buffers=buffers, ops=ops,
                                 inplace=tuple(inplace), capacity=capacity, source=path, control_deps=control_deps,
                                 original_order=original_order))


@gc_paused()
def read_workload_json(path: str | os.PathLike) -> Problem:
    path = str(path)
    data = read_bytes(path)
    problem = _columnar_workload(path, data)
    if problem is not None:
        return problem
    text = read_text(path, data)
    del data
    problem = _compact_workload(path, text)
    if problem is not None:
        return problem
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InputError(f"{path}: invalid JSON ({str(exc).split(':')[0]})") from None
    return parse_workload(path, data)


def _check_ids_write_back(path: str, buffer_ids: Sequence[str], op_ids: Sequence[str]) -> None:
    """Refuses, with its place, an id (of ``buffer_ids``, ``op_ids``) that a writer could not write back as it
    was read: a blank id (the CSV reader refuses it), or a lone surrogate (JSON's ``\\ud800`` escape), which
    no UTF-8 file can hold."""
    if not all(map(str.strip, buffer_ids)):
        blank = next(k for k, b in enumerate(buffer_ids) if not b.strip())
        raise InputError(f"{path}: buffers[{blank}], field 'id': empty id")
    for what, ids in (("buffers", buffer_ids), ("ops", op_ids)):
        try:
            "".join(ids).encode("utf-8")
        except UnicodeEncodeError:
            k = next(k for k, i in enumerate(ids) if not _encodable(i))
            bad = next(c for c in ids[k] if not _encodable(c))
            raise InputError(f"{path}: {what}[{k}], field 'id': not valid Unicode text (lone surrogate "
                             f"U+{ord(bad):04X}), which no output file can hold") from None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def without_gz(name: str) -> str:
    """A file name without a trailing ``.gz`` (``A.1048576.csv.gz`` is read as ``A.1048576.csv``, gunzipped)."""
    return name[:-3] if name.endswith(".gz") else name


def load_problem(path: str | os.PathLike) -> Problem:
    """Read a problem from a ``.csv`` (MiniMalloc) or ``.json`` (workload) file, gzipped (``.gz``) or not.
    (:func:`mallocgame.inputs.load.read_file` also takes scheduled HLO text.)"""
    path = str(path)
    kind = without_gz(path)
    if kind.endswith(".json"):
        return read_workload_json(path)
    if kind.endswith(".csv"):
        return read_csv(path)[0]
    if not os.path.exists(path):
        raise InputError(f"{path}: file not found")
    raise InputError(f"{path}: unknown file type (expected .csv, .json or .hlo.txt, gzipped or not)")


def read_solution_csv(path: str | os.PathLike, problem: Problem) -> list[int | None]:
    """Offsets of a solution CSV, in ``problem``'s buffer order.

    The file must describe exactly the problem's buffers (same ids, lives and sizes).
    """
    path = str(path)
    sol_problem, offsets = read_csv(path, with_offsets=True)
    assert offsets is not None
    mine = {b.id: (b.start, b.end, b.size) for b in problem.buffers}
    theirs = {b.id: (b.start, b.end, b.size) for b in sol_problem.buffers}
    other = "solution is for a different problem"
    for b in sol_problem.buffers:
        if b.id not in mine:
            raise InputError(f"{path}: buffer {b.id!r} is not in problem {problem.name!r}: {other}")
        if mine[b.id] != theirs[b.id]:
            raise InputError(f"{path}: buffer {b.id!r}: lifetime or size differs from problem {problem.name!r}: {other}")
    for b in problem.buffers:
        if b.id not in theirs:
            raise InputError(f"{path}: buffer {b.id!r} of problem {problem.name!r} is missing: {other}")
    by_id = {b.id: off for b, off in zip(sol_problem.buffers, offsets)}
    return [by_id[b.id] for b in problem.buffers]


# --------------------------------------------------------------------------- prefetch-mode answers

INTERVAL_COLUMNS = ("id", "offset", "start", "end", "copy_start")


def intervals_csv_text(problem: Problem, intervals: Sequence) -> str:
    """A prefetch answer as CSV ``id,offset,start,end,copy_start`` (docs/prefetch.md section 2), one row per
    interval in the order of (buffer, start).

    Examples:
        >>> from mallocgame.problem.model import Buffer
        >>> p = Problem("t", (Buffer("a", 8, 0, 3), Buffer("b,c", 4, 0, 2)), capacity=16, mode="prefetch")
        >>> print(intervals_csv_text(p, [FastInterval(1, 8, 1, 2, 0), FastInterval(0, 0, 0, 3)]), end="")
        id,offset,start,end,copy_start
        a,0,0,3,
        "b,c",8,1,2,0
    """
    if engine() == "native":
        rows = _compiled_interval_rows(problem, intervals)
        if rows is not None:
            return _csv_line(INTERVAL_COLUMNS) + rows
    lines = [_csv_line(INTERVAL_COLUMNS)]
    for iv in sorted(intervals, key=lambda v: (v.buffer, v.start)):
        lines.append(_csv_line([problem.buffers[iv.buffer].id, iv.offset, iv.start, iv.end,
                                "" if iv.copy_start is None else iv.copy_start]))
    return "".join(lines)


def _sorted_interval_columns(problem: Problem, intervals: Sequence) -> np.ndarray | None:
    """A prefetch answer's intervals as int64 columns ``(buffer, offset, start, end, has_copy, copy_start or 0)`` in
    the order of (buffer, start), read compiled; ``None`` when they are not in a list or tuple, a field is not an
    exact 64-bit int or a buffer index is not one of ``problem``'s (the callers then read them one by one).

    Examples:
        >>> from mallocgame.problem.model import Buffer
        >>> p = Problem("t", (Buffer("a", 8, 0, 3), Buffer("b", 4, 0, 2)), capacity=16, mode="prefetch")
        >>> _sorted_interval_columns(p, [FastInterval(1, 8, 1, 2, 0), FastInterval(0, 0, 0, 3)]).tolist()
        [[0, 0, 0, 3, 0, 0], [1, 8, 1, 2, 1, 0]]
    """
    if type(intervals) not in (list, tuple):
        return None
    cols = interval_columns_loop(intervals)
    if cols is None or (len(cols) and not (0 <= cols[:, 0].min() and cols[:, 0].max() < problem.n)):
        return None
    return cols[np.lexsort((cols[:, 2], cols[:, 0]))]  # stable, as sorted() by (buffer, start)


def _compiled_interval_rows(problem: Problem, intervals: Sequence) -> str | None:
    """:func:`intervals_csv_text`'s rows, written compiled (``mallocgame._native.csv_rows``): the same text, or
    ``None`` when the intervals are not in a list or tuple, a field is not an exact 64-bit int, a buffer index is
    not one of the problem's, or an id is no UTF-8 (the Python rows then write them)."""
    cols = _sorted_interval_columns(problem, intervals)
    if cols is None:
        return None
    ids = _csv_ids(problem.ids)
    row_ids = [ids[i] for i in cols[:, 0].tolist()]
    table = np.ascontiguousarray(cols[:, [1, 2, 3, 5]])
    blank = np.zeros(table.shape, np.uint8)
    blank[:, 3] = cols[:, 4] == 0  # no copy: an empty copy_start
    try:
        return csv_rows([row_ids], table, blank, [-1, 0, 1, 2, 3])
    except UnicodeEncodeError:
        return None


def write_intervals_csv(path: str | os.PathLike, problem: Problem, intervals: Sequence) -> None:
    atomic_write_text(path, intervals_csv_text(problem, intervals))


def read_intervals_csv(path: str | os.PathLike, problem: Problem) -> list:
    """The fast intervals of a prefetch answer CSV; a header alone is the all-slow answer.

    A map-mode solution CSV (``id,lower,upper,size,offset``) is accepted too and read as its
    map intervals (:func:`mallocgame.formats.lift.map_intervals`).
    """
    path = str(path)
    text = read_text(path)
    rows = list(_csv_records(path, text))
    header = _header(rows[0][1])
    if "lower" in header and "offset" in header:
        return map_intervals(problem, read_solution_csv(path, problem))
    missing = [c for c in INTERVAL_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: row 1 (header): missing column '{missing[0]}' (have: {','.join(header)}); "
                         f"a prefetch answer has columns {','.join(INTERVAL_COLUMNS)}")
    out = []
    for lineno, raw in rows[1:]:
        if not raw or all(not c.strip() for c in raw):
            continue
        if len(raw) != len(header):
            raise InputError(f"{path}: row {lineno}: expected {len(header)} fields, got {len(raw)}")
        row = dict(zip(header, raw))
        where = f"row {lineno}"
        bid = row["id"]
        if bid not in problem.index:
            raise InputError(f"{path}: {where}: buffer {bid!r} is not in problem {problem.name!r}")
        copy = row["copy_start"].strip()
        out.append(FastInterval(problem.index[bid], _int_field(path, where, "offset", row["offset"]),
                                _int_field(path, where, "start", row["start"]), _int_field(path, where, "end", row["end"]),
                                None if copy == "" else _int_field(path, where, "copy_start", copy)))
    return out
