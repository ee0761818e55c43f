"""Hardware specs: fast-memory size and alignment, bandwidths, peak FLOP/s (docs/architecture.md, "Scoring").

Presets are named; a user file (TOML or JSON) with the same fields gives any other chip.

Examples:
    >>> spec = load_hardware("tpuv4i")
    >>> spec.capacity == 128 * 2**20
    True
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import tomllib
from dataclasses import dataclass

from mallocgame.problem.model import InputError, check_regular_file


@dataclass(frozen=True)
class HardwareSpec:
    name: str
    capacity: int  # fast-memory bytes
    alignment: int  # bytes; every fast-memory offset is a multiple of it
    fast_bw: float  # bytes/s of the fast memory
    slow_bw: float  # bytes/s of HBM
    peak_flops: float  # FLOP/s
    copy_bw: float  # bytes/s of the async copy engine (HBM <-> fast)

    def replace(self, **changes) -> "HardwareSpec":
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, HardwareSpec] = {
    # TPUv4i-like inference chip (Jouppi et al., "Ten Lessons From Three Generations Shaped Google's
    # TPUv4i", ISCA 2021, Table 1): 128 MiB CMEM, 614 GB/s HBM2, 138 TFLOP/s bf16. copy_bw, the async
    # copy engine between HBM and CMEM (prefetch mode, docs/prefetch.md): DMA out of HBM cannot beat
    # HBM's 614 GB/s, and the ops' own HBM traffic (which the cost model does not charge to copies)
    # shares it, so we take half, 300 GB/s. Set copy_bw in a hardware file to model another split.
    "tpuv4i": HardwareSpec("tpuv4i", 128 * 2**20, 512, 3.0e12, 614e9, 138e12, 300e9),
    # A small chip for tests and examples: 1 MiB fast memory.
    "test": HardwareSpec("test", 2**20, 64, 1.0e12, 100e9, 10e12, 50e9),
    # No alignment, unit bandwidths: the neutral choice for MiniMalloc CSV inputs.
    "unit": HardwareSpec("unit", 2**30, 1, 10.0, 1.0, 1.0, 1.0),
}

_FIELDS = {f.name: f.type for f in dataclasses.fields(HardwareSpec)}


MAX_BYTES = 2**62  # capacities and alignments are int64 in the solvers (as mallocgame.formats.io.MAX_INT)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _read_file(path: str) -> bytes:
    """The bytes of a regular file; a FIFO or a directory is refused before it is opened (it could block)."""
    check_regular_file(path, "hardware file")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _parse_file(path: str) -> HardwareSpec:
    """A spec from a TOML/JSON file: known fields only, finite positive numbers, ``base`` a preset name."""
    raw = _read_file(path)
    kind = "TOML" if path.endswith(".toml") else "JSON"
    try:
        data = tomllib.loads(raw.decode()) if path.endswith(".toml") else json.loads(raw)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid {kind} ({exc})") from None
    except RecursionError:
        raise InputError(f"{path}: not valid {kind} (nested too deeply)") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InputError(f"{path}: not valid {kind} ({' '.join(str(exc).split(':')[0].split())})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a table of hardware fields")
    base = data.get("base", "tpuv4i")
    if not isinstance(base, str) or base not in PRESETS:
        raise InputError(f"{path}: field 'base': expected a preset name ({', '.join(PRESETS)}), got {_shown(base)}")
    values = dataclasses.asdict(PRESETS[base]) | {"name": os.path.basename(path)}
    for key, value in data.items():
        if key == "base":
            continue
        if key not in _FIELDS:
            raise InputError(f"{path}: field '{key}': unknown hardware field (known: {', '.join(_FIELDS)})")
        if key == "name":
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{path}: field 'name': expected a string, got {_shown(value)}")
            values[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value <= 0 \
                or value == math.inf:
            raise InputError(f"{path}: field '{key}': expected a finite positive number, got {_shown(value)}")
        if key in ("capacity", "alignment"):
            if value > MAX_BYTES:
                raise InputError(f"{path}: field '{key}': {_shown(value)} is too large (the limit is 2**62)")
            if int(value) != value:
                raise InputError(f"{path}: field '{key}': expected an integer, got {_shown(value)}")
            value = int(value)
        elif not 1e-6 <= value <= 1e300:  # times (bytes / bandwidth, FLOPs / peak) must stay finite
            raise InputError(f"{path}: field '{key}': {_shown(value)} is out of range (from 1e-6 to 1e300)")
        values[key] = value
    return HardwareSpec(**values)


def load_hardware(preset_or_file: str) -> HardwareSpec:
    """A preset by name (``tpuv4i``, ``test``, ``unit``) or a ``.toml``/``.json`` file."""
    if preset_or_file in PRESETS:
        return PRESETS[preset_or_file]
    if preset_or_file.endswith((".toml", ".json")):
        return _parse_file(preset_or_file)
    # mallocgame.problem.suggest's rule, here by hand: hardware imports only the model
    close = difflib.get_close_matches(preset_or_file, list(PRESETS), n=1)
    raise InputError(f"--hardware: unknown preset or file {preset_or_file!r} (presets: {', '.join(PRESETS)})"
                     + (f"; did you mean {close[0]!r}?" if close else ""))
