"""From a path or name to a problem ready for the solvers: ``example:`` names, mode, hardware, capacity.

Every door (the Python API, every CLI command, ``compare``, the experiments) prepares a
problem through :func:`prepare`, so the capacity rule is one rule (docs/architecture.md):

1. ``capacity`` given: that many bytes;
2. else ``capacity_fraction`` given: that fraction of the max live bytes, rounded down to
   the hardware's alignment (at least one alignment unit);
3. else ``hardware`` given: the hardware's capacity;
4. else the input's own (``NAME.CAPACITY.csv`` or the JSON ``capacity``);
5. else, for workloads with ops, the default hardware's; else none (pack: minimise the peak).

``minimize_peak`` drops any capacity: a pack problem that minimises the peak has none.

Example:
    >>> p = load_problem("example:pack40")
    >>> p.mode, p.capacity, p.n
    ('pack', 64, 40)
"""

from __future__ import annotations

import dataclasses
import math
from importlib.resources import files
from pathlib import Path

import numpy as np

from mallocgame.formats.io import load_problem as read_table_or_workload
from mallocgame.formats.io import without_gz
from mallocgame.hardware.spec import PRESETS, HardwareSpec, load_hardware
from mallocgame.importers.hlo import load_hlo
from mallocgame.problem.aliasing import merge_inplace
from mallocgame.problem.intervals import max_live
from mallocgame.problem.model import MODES, BufferTable, InputError, Problem
from mallocgame.problem.suggest import did_you_mean
from mallocgame.problem.units import parse_bytes

EXAMPLE_PREFIX = "example:"
MAX_BYTES = 2**62  # the largest capacity (sizes and offsets are int64 in the solvers; mallocgame.formats.io.MAX_INT)


def example_names() -> list[str]:
    """The bundled examples, without extension (``layered150``, ``pack40``)."""
    return [n.split(".")[0] for n in _example_files()]


def _example_files() -> list[str]:
    data = files("mallocgame.inputs") / "data"
    return sorted(p.name for p in data.iterdir() if p.name.endswith((".csv", ".json")))


def example_path(name: str) -> Path:
    """The file of the bundled example ``name`` (``example:NAME`` on the command line)."""
    data = files("mallocgame.inputs") / "data"
    for candidate in _example_files():
        if candidate == name or candidate.split(".")[0] == name:
            return Path(str(data / candidate))
    raise InputError(f"{EXAMPLE_PREFIX}{name}: no such bundled example (have: {', '.join(example_names())})"
                     f"{did_you_mean(name, example_names())}")


def resolve_path(spec: str | Path) -> Path:
    """A file path for ``spec``: itself, or the bundled file of ``example:NAME``."""
    text = str(spec)
    if text.startswith(EXAMPLE_PREFIX):
        return example_path(text[len(EXAMPLE_PREFIX):])
    return Path(text)


HLO_SUFFIXES = (".hlo.txt", ".hlo")
PROBLEM_SUFFIXES = (".csv", ".json", *HLO_SUFFIXES)  # each gzipped too (``.gz``)


def read_file(path: str | Path) -> Problem:
    """A problem file: a ``.csv`` (MiniMalloc), a ``.json`` workload or scheduled HLO text (``.hlo.txt``, ``.hlo``:
    imported as ``mallocgame import hlo`` would, in-place pairs merged), gzipped (``.gz``) or not."""
    if without_gz(str(path)).endswith(HLO_SUFFIXES):
        return merge_inplace(load_hlo(path).problem)
    return read_table_or_workload(path)


def read_problem(spec: str | Path) -> Problem:
    """Read a problem file (CSV or JSON workload) or a bundled ``example:NAME``, as written."""
    return read_file(resolve_path(spec))


def default_mode(problem: Problem) -> str:
    """JSON workloads and CSVs with a ``benefit`` column are map problems; plain CSVs pack."""
    if problem.has_ops or not np.isnan(problem.arrays.benefit).all():
        return "map"
    return "pack" if without_gz(problem.source).endswith(".csv") else "map"


def fraction_capacity(live: int, fraction: float, alignment: int = 1) -> int:
    """``fraction`` of ``live`` bytes rounded down to ``alignment`` (at least one unit).

    >>> fraction_capacity(10_000, 0.4, 512), fraction_capacity(100, 0.5)
    (3584, 50)
    """
    if not (math.isfinite(fraction) and fraction > 0):
        raise InputError(f"--capacity-fraction: must be a positive number, got {fraction}")
    if live * fraction > MAX_BYTES:
        raise InputError(f"--capacity-fraction: {fraction:g} x the max live bytes ({live}) is more than 2**62 bytes")
    cap = max(1, int(live * fraction))
    return max(cap // alignment * alignment, alignment) if alignment > 1 else cap


def prepare(problem: Problem, *, mode: str | None = None, capacity: int | str | None = None,
            capacity_fraction: float | None = None, hardware=None, minimize_peak: bool = False,
            oversized_ok: bool = False):
    """Apply mode, hardware and capacity to a read problem; returns ``(problem, spec)``.

    In pack mode a buffer larger than the capacity is refused (every buffer must be placed),
    unless ``oversized_ok`` (``info`` describes such a problem: :func:`oversized`).

    ``hardware`` is a preset name, a file, a :class:`~mallocgame.hardware.spec.HardwareSpec` or ``None``.
    The returned problem carries its spec (``problem.hardware``); buffer alignments become
    their least common multiple with the hardware's. Raises :class:`InputError` (one line).
    """
    if mode is not None and mode not in MODES:
        raise InputError(f"--mode: must be one of {', '.join(MODES)}, got {mode!r}")
    mode = mode or default_mode(problem)
    if isinstance(hardware, HardwareSpec):
        spec = hardware
    elif hardware:
        spec = load_hardware(hardware)
    else:
        spec = PRESETS["tpuv4i"] if problem.has_ops else PRESETS["unit"]
    if capacity is not None:
        cap = parse_bytes(capacity)
    elif capacity_fraction is not None:
        cap = fraction_capacity(max_live(problem), capacity_fraction, spec.alignment)
    elif hardware:
        cap = spec.capacity
    elif problem.capacity is not None:
        cap = problem.capacity
        if cap > MAX_BYTES:  # a Problem built in code (the readers refuse it already)
            raise InputError(f"{problem.source or problem.name}: capacity {cap} is too large (the limit is 2**62 bytes)")
    elif problem.has_ops:
        cap = spec.capacity
    else:
        cap = None
    if minimize_peak:
        cap = None
    where = problem.source or problem.name
    if mode == "prefetch" and not problem.has_ops:
        raise InputError(f"{where}: prefetch mode needs a workload with ops (a JSON workload), not a plain CSV")
    if mode in ("map", "prefetch") and cap is None:
        raise InputError(f"{where}: no fast-memory capacity: pass --capacity or --hardware "
                         "(or name the file NAME.CAPACITY.csv)")
    if mode == "pack" and cap is not None and not oversized_ok:
        over = np.flatnonzero(problem.arrays.size > cap)
        if len(over):
            too_big = problem.buffers[int(over[0])]
            raise InputError(f"{where}: buffer {too_big.id!r}: size {too_big.size} "
                             f"exceeds capacity {cap} (pack mode must place every buffer)")
    if problem.inplace:  # in-place pairs share storage for every consumer (read workloads are merged already)
        problem = merge_inplace(problem)
    buffers = problem.buffers
    if isinstance(buffers, BufferTable) and max(int(buffers.alignment.max(initial=1)), spec.alignment) < 2**31:
        # the columns, no buffer object made (an lcm of two alignments below 2**31 fits in int64)
        if spec.alignment > 1 and (buffers.alignment % spec.alignment).any():
            buffers = buffers.replace(alignment=np.lcm(buffers.alignment, spec.alignment))
    elif spec.alignment > 1 and any(b.alignment % spec.alignment for b in buffers):
        buffers = tuple(b if b.alignment % spec.alignment == 0 else
                        dataclasses.replace(b, alignment=math.lcm(b.alignment, spec.alignment))
                        for b in buffers)
    return problem.replace(buffers=buffers, capacity=cap, mode=mode, hardware=spec), spec


def oversized(problem: Problem) -> list[int]:
    """The buffers larger than the capacity (by index): in pack mode they cannot be placed."""
    cap = problem.capacity
    if cap is None:
        return []
    return np.flatnonzero(problem.arrays.size > cap).tolist()


def capacity_warning(problem: Problem) -> str | None:
    """One line when the capacity makes the problem degenerate, else ``None``.

    Below the alignment only offset 0 is usable; in map mode a capacity that holds every buffer at
    addresses of its own (their total bytes) makes the problem trivial. A capacity between the max
    live bytes and that total gets no warning: whether every buffer fits at once is then a packing
    problem, and a hard one at the max live bytes (MiniMalloc's benchmark set; in pack mode that is
    the tightest feasible case).
    """
    cap = problem.capacity
    if cap is None or problem.n == 0:
        return None
    align = int(problem.arrays.alignment.max())
    if cap < align:
        return (f"warning: {problem.name}: capacity {cap} is below the alignment {align}: "
                "only offset 0 can be used")
    total = int(problem.arrays.size.sum())
    if problem.mode == "map" and cap >= total:
        return (f"warning: {problem.name}: capacity {cap} holds every buffer at addresses of its own ({total} bytes "
                "in all): every buffer is fast, the problem is trivial")
    return None


def load_problem(path_or_example: str | Path, *, capacity: int | str | None = None, hardware=None,
                 mode: str | None = None, capacity_fraction: float | None = None) -> Problem:
    """Read and prepare a problem: a CSV, a JSON workload or ``example:NAME``.

    The result carries its hardware spec (``problem.hardware``), so
    [`mallocgame.solve`][mallocgame.api.solve] and [`mallocgame.validate`][mallocgame.api.validate] need nothing else.
    """
    problem, _ = prepare(read_problem(path_or_example), mode=mode, capacity=capacity,
                         capacity_fraction=capacity_fraction, hardware=hardware)
    return problem
