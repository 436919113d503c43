"""Byte sizes as people write them in configs ("4GiB", "1.5 G", "327374182400") and back.

Decimal units (KB, MB, GB, TB) are powers of 1000, binary ones (KiB … TiB) powers of 1024, and the
bare letters K/M/G/T are binary because that is what GPU memory sizes are counted in.  Pure.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

# Keys are lower-case: units are matched case-insensitively.
_MULTIPLIERS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": TIB,
    "k": KIB,
    "m": MIB,
    "g": GIB,
    "t": TIB,
}
_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[A-Za-z]*)\s*")
_UNITS_HELP = "B, KB, MB, GB, TB (x1000), KiB, MiB, GiB, TiB or K, M, G, T (x1024)"


def parse_bytes(text: str) -> int:
    """Bytes in `text`: a whole number, optionally with a unit; decimals need a unit to be whole."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size: expected a number and an optional unit")
    unit = match["unit"]
    multiplier = _MULTIPLIERS.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"{text!r} has an unknown unit {unit!r}: use {_UNITS_HELP}")
    # Decimal, not float: "1.5GiB" must be exactly 1610612736, and big sizes must not round.
    try:
        value = Decimal(match["number"]) * multiplier
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise ValueError(f"{text!r} is not a size") from exc
    if value != value.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def format_bytes(n: int) -> str:
    """A short human reading of `n` bytes, in binary units: 4294967296 -> "4.0 GiB"."""
    for name, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {name}"
    return f"{n} B"
