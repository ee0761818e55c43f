"""Numbers as a person reads them: times in ns/µs/ms/s, bytes in B/KiB/MiB/GiB, fractions in percent.

Every line the commands print for a person (``solve``'s summary line, ``compare``'s table and
summary, ``validate``, ``info``, ``check-solver``) formats its numbers here; the exact numbers stay
in ``--json`` and the CSVs. The rules:

* four significant figures, with the unit chosen so the number lies in [1, 1000) (bytes: [1, 1024));
* a value that is exact at the precision shown has no trailing zeros (``4GiB`` is 4 GiB exactly,
  ``4.000GiB`` is 4 GiB to four figures), so an exact value and a near one never print the same;
* numbers printed together go through :func:`distinct`: it raises the precision until different
  numbers print differently (a value 0.01% below its bound is not shown equal to it); numbers within
  :data:`SAME` (relative) of each other are the same number, float rounding apart;
* a nonzero percentage is never shown as ``0.00%`` (:func:`format_percent`).

Example:
    >>> format_seconds(0.000132485), format_seconds(0.003), format_seconds(12.5), format_seconds(1.026e-8)
    ('132.5µs', '3ms', '12.5s', '10.26ns')
    >>> format_bytes(64), format_bytes(10101248), format_bytes(4 * 2**30), format_bytes(4 * 10**9)
    ('64B', '9.633MiB', '4GiB', '3.725GiB')
    >>> distinct(format_seconds, [1.026e-8, 1.0e-8, 1.0e-8])
    ['10.26ns', '10ns', '10ns']
    >>> distinct(format_seconds, [0.000132485, 0.0001324851])
    ['132.485µs', '132.4851µs']
    >>> format_percent(0.048), format_percent(0.0), format_percent(1.2e-5)
    ('4.80%', '0.00%', '0.0012%')
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Callable, Sequence

from mallocgame.problem.model import InputError

DIGITS = 4  # significant figures of every number shown to a person
MAX_DIGITS = 17  # enough to tell any two different floats apart
# Relative difference below which two computed times are the same number (sums of the same float terms
# in another order differ in their last bits): they print alike, and a saving this close to its bound is at it.
SAME = 1e-9

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_UNITS = ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def _figures(scaled: float, digits: int) -> str:
    """``scaled`` with ``digits`` significant figures in fixed notation (no exponent)."""
    if scaled == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(scaled))))
    text = f"{scaled:.{decimals}f}"
    if decimals and math.floor(math.log10(abs(float(text)))) > math.floor(math.log10(abs(scaled))):
        text = f"{scaled:.{decimals - 1}f}"  # 9.9996 rounded up to 10.000: one decimal fewer
    return text


def _trimmed(text: str) -> str:
    """``4.000`` -> ``4``: the zeros of a value that is exact at the precision shown."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_seconds(seconds: float | None, digits: int = DIGITS) -> str:
    """A time in s, ms, µs or ns with ``digits`` significant figures (``-`` for ``None``).

    >>> format_seconds(0.0009999), format_seconds(0.00099999), format_seconds(0), format_seconds(-0.0025)
    ('999.9µs', '1.000ms', '0s', '-2.5ms')
    >>> format_seconds(86400.0), format_seconds(float("inf")), format_seconds(None)
    ('86400s', 'inf s', '-')
    """
    if seconds is None:
        return "-"
    if seconds == 0:
        return "0s"
    if not math.isfinite(seconds):
        return f"{seconds} s"
    size = abs(seconds)
    units = [(scale, name) for scale, name in _TIME_UNITS if size >= scale] or [_TIME_UNITS[-1]]
    k = _TIME_UNITS.index(units[0])
    while True:
        scale, name = _TIME_UNITS[k]
        text = _figures(seconds / scale, digits)
        if k > 0 and abs(float(text)) >= 1000:  # 999.96µs rounds to 1000µs: one unit up
            k -= 1
            continue
        exact = float(text) * scale == seconds or float(text) == seconds / scale
        return (_trimmed(text) if exact else text) + name


def format_bytes(size: int | float | None, digits: int = DIGITS) -> str:
    """A byte count in B, KiB, MiB, GiB (... EiB) with ``digits`` significant figures (``-`` for ``None``).

    Below 1 KiB the count is exact (``1000B``).

    >>> format_bytes(1023), format_bytes(1024), format_bytes(1048575), format_bytes(1536), format_bytes(None)
    ('1023B', '1KiB', '1.000MiB', '1.5KiB', '-')
    """
    if size is None:
        return "-"
    if isinstance(size, float) and not math.isfinite(size):
        return f"{size} B"
    n = abs(size)
    k = next((i for i, (scale, _) in enumerate(_BYTE_UNITS) if n >= scale), None)
    if k is None:
        return f"{_trimmed(_figures(size, max(digits, 4)))}B"
    while True:
        scale, name = _BYTE_UNITS[k]
        text = _figures(size / scale, digits)
        if k > 0 and abs(float(text)) >= 1024:  # 1023.99KiB rounds to 1024KiB: one unit up
            k -= 1
            continue
        exact = Decimal(text) * scale == Decimal(size)
        return (_trimmed(text) if exact else text) + name


def format_number(value: float | None, digits: int = DIGITS) -> str:
    """A plain number (no unit) with ``digits`` significant figures.

    >>> format_number(123456.0), format_number(0.5), format_number(1 / 3), format_number(None)
    ('123456', '0.5', '0.3333', '-')
    """
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    text = _figures(value, digits)
    return _trimmed(text) if float(text) == value else text


def format_percent(fraction: float | None, decimals: int = 2) -> str:
    """A fraction as a percentage with ``decimals`` decimals, more for a nonzero one that would show
    as 0 (or as 100%): ``0.00%`` is zero and ``100.00%`` is one.

    >>> format_percent(0.1059), format_percent(-3e-7), format_percent(0.999999), format_percent(None)
    ('10.59%', '-0.000030%', '99.99990%', '-')
    """
    if fraction is None:
        return "-"
    if not math.isfinite(fraction):
        return f"{fraction}%"
    percent = fraction * 100
    wide = decimals
    while wide < MAX_DIGITS and _looks_round(f"{percent:.{wide}f}", percent):
        wide += 1
    if wide > decimals:  # widened: one more figure than the first that tells it from 0 or 100
        wide += 1
    return f"{percent:.{wide}f}%"


def _looks_round(text: str, percent: float) -> bool:
    """Does ``text`` show 0 or 100 for a percentage that is neither?"""
    shown = abs(float(text))
    return (shown == 0 and percent != 0) or (shown == 100 and abs(percent) != 100)


def distinct(formatter: Callable[..., str], values: Sequence, digits: int = DIGITS) -> list[str]:
    """``[formatter(v, d) for v in values]`` at the smallest ``d >= digits`` at which different values
    print differently (equal values print the same; ``None`` prints ``-``). Values within :data:`SAME`
    (relative) of each other are not told apart.

    >>> distinct(format_bytes, [10101248, 10105344, 10101248])
    ['9.633MiB', '9.637MiB', '9.633MiB']
    >>> distinct(format_seconds, [3.710501488174481e-06, 3.710501488174479e-06])
    ['3.711µs', '3.711µs']
    >>> distinct(format_bytes, [2**30, 2**30 + 1]), distinct(format_bytes, [2**30 + 1, 2**30 + 2])
    (['1GiB', '1.000GiB'], ['1.000000001GiB', '1.000000002GiB'])
    """
    d = digits
    while True:
        texts = [formatter(v, d) for v in values]
        shown: dict[str, list] = {}
        for text, value in zip(texts, values):
            shown.setdefault(text, []).append(value)
        if d >= MAX_DIGITS or all(_same(group) for group in shown.values()):
            return texts
        d += 1


def _same(values: list) -> bool:
    """Are ``values`` one number (equal, or floats within :data:`SAME` of each other)?"""
    first = values[0]
    if all(v == first for v in values):
        return True
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in values):
        return False
    if any(isinstance(v, int) for v in values) and all(isinstance(v, int) for v in values):
        return False  # byte counts are exact
    return all(math.isclose(v, first, rel_tol=SAME, abs_tol=0.0) for v in values)


__all__ = ["DIGITS", "SAME", "distinct", "format_bytes", "format_number", "format_percent", "format_seconds"]


# Parsing a byte count a person wrote (--capacity, MALLOCGAME_MAX_DECOMPRESSED).
_MAX_BYTES = 2**62  # the largest byte count (sizes and offsets are int64 in the solvers)
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_bytes(text: str | int, *, what: str = "--capacity") -> int:
    """Bytes from ``4MiB``, ``1.5GiB``, ``512KB``, ``64`` (SI ``KB``/``MB``; binary ``KiB``/``MiB``).

    >>> parse_bytes("4MiB"), parse_bytes("1.5GiB"), parse_bytes("512KB"), parse_bytes("4096")
    (4194304, 1610612736, 512000, 4096)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([0-9]+))?\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(3).upper() if m else ""
        if not m or unit not in _UNITS:
            raise InputError(f"{what}: expected bytes such as 4096, 512KB, 4MiB or 1.5GiB, got {text!r}")
        try:
            if m.group(1).isdigit() and not m.group(2):  # a plain integer: exact, however large
                number = int(m.group(1)) * _UNITS[unit]
            else:
                number = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1) * _UNITS[unit]
        except (OverflowError, ValueError):  # past a float, or more digits than Python converts
            number = math.inf
        if isinstance(number, float) and math.isfinite(number) and number != int(number):
            raise InputError(f"{what}: {text!r} is not a whole number of bytes")
        value = number if isinstance(number, int) else int(number) if math.isfinite(number) else _MAX_BYTES + 1
    if value <= 0:
        raise InputError(f"{what}: must be positive, got {text!r}")
    if value > _MAX_BYTES:
        shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:40] + "..."
        raise InputError(f"{what}: {shown} is too large (the limit is 2**62 bytes)")
    return value


def decimal_units_note(text: str | int, *, what: str = "capacity") -> str | None:
    """The note that says how a byte count with a decimal unit (``KB``, ``MB``, ``GB``, ``TB``: powers of
    1000) was read, since ``4G`` and ``4GiB`` are powers of 1024; ``None`` for any other text.

    >>> decimal_units_note("4 GB")
    "note: capacity '4 GB' = 4,000,000,000 bytes (decimal; 4 GiB is '4GiB')"
    >>> decimal_units_note("4GiB"), decimal_units_note(4096)
    (None, None)
    """
    if not isinstance(text, str):
        return None
    m = re.fullmatch(r"\s*(\S+?)\s*([KMGT])B\s*", text, flags=re.IGNORECASE)
    if not m:
        return None
    try:
        value = parse_bytes(text, what=what)
    except InputError:
        return None
    binary = f"{m.group(2).upper()}iB"
    return f"note: {what} {text!r} = {value:,} bytes (decimal; {m.group(1)} {binary} is '{m.group(1)}{binary}')"
