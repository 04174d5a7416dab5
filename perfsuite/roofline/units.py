"""Nsight Compute's units. Its prefixes are decimal: 1 Kbyte = 1000 bytes."""

from __future__ import annotations

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
         "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_FREQ = {"cycle/nsecond": 1e9, "cycle/usecond": 1e6, "cycle/msecond": 1e3, "cycle/second": 1.0,
         "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


class UnitError(ValueError):
    pass


def parse_number(text: str) -> float:
    """'1,234,567' and '1234.5' alike; ValueError for anything else ('n/a', '')."""
    t = text.strip().replace(",", "")
    if not t:
        raise ValueError("empty value")
    return float(t)


def to_base(value: float, unit: str) -> float:
    """Bytes, seconds, cycles per second, or a plain count, from ncu's unit."""
    u = unit.strip()
    if u in _TIME:
        return value * _TIME[u]
    if u.lower() in _FREQ:
        return value * _FREQ[u.lower()]
    if u.endswith("byte"):
        prefix = u[: -len("byte")]
        if prefix not in _PREFIX:
            raise UnitError(f"unknown byte unit {unit!r}")
        return value * _PREFIX[prefix]
    if u.endswith("byte/second"):
        prefix = u[: -len("byte/second")]
        return value * _PREFIX.get(prefix, 1.0)
    # Counts (inst, cycle, warp, ...), percentages and dimensionless values pass unchanged.
    return value
