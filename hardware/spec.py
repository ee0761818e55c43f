"""Hardware specs: fast-memory size and alignment, bandwidths, peak FLOP/s (docs/architecture.md, "Scoring").

Presets are named; a user file (TOML or JSON) with the same fields gives any other chip.

Example:
    >>> spec = load_hardware("tpuv4i")
    >>> spec.capacity == 128 * 2**20
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass

from mallocgame.model import InputError


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


def _parse_file(path: str) -> HardwareSpec:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        raise InputError(f"{path}: hardware file not found") from None
    try:
        data = tomllib.loads(raw.decode()) if path.endswith(".toml") else json.loads(raw)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'} ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a table of hardware fields")
    base = PRESETS[data.get("base", "tpuv4i")] if data.get("base", "tpuv4i") in PRESETS else None
    if base is None:
        raise InputError(f"{path}: field 'base': unknown preset {data.get('base')!r}")
    values = dataclasses.asdict(base) | {"name": os.path.basename(path)}
    for key, value in data.items():
        if key == "base":
            continue
        if key not in _FIELDS:
            raise InputError(f"{path}: field '{key}': unknown hardware field (known: {', '.join(_FIELDS)})")
        if key == "name":
            values[key] = str(value)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InputError(f"{path}: field '{key}': expected a positive number, got {value!r}")
        if key in ("capacity", "alignment"):
            if int(value) != value:
                raise InputError(f"{path}: field '{key}': expected an integer, got {value!r}")
            value = int(value)
        values[key] = value
    return HardwareSpec(**values)


def load_hardware(preset_or_file: str) -> HardwareSpec:
    """A preset by name (``tpuv4i``, ``test``, ``unit``) or a ``.toml``/``.json`` file."""
    if preset_or_file in PRESETS:
        return PRESETS[preset_or_file]
    if preset_or_file.endswith((".toml", ".json")):
        return _parse_file(preset_or_file)
    raise InputError(f"--hardware: unknown preset or file {preset_or_file!r} (presets: {', '.join(PRESETS)})")
