"""Nsight Compute's units, checked against what each metric measures.

Prefixes are decimal (1 Kbyte = 1000 bytes). A value must carry a unit of its metric's kind:
a time in an unknown unit, or bytes counted in `inst`, is refused instead of being read as
seconds or bytes. Kinds: time, bytes, freq (cycles per second), per_cycle (a
`.peak_sustained` rate) and count (instructions, cycles, ops: no unit or a count word).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_FREQ = {
    "cycle/nsecond": 1e9,
    "cycle/usecond": 1e6,
    "cycle/msecond": 1e3,
    "cycle/second": 1.0,
    "cycle/ns": 1e9,
    "cycle/us": 1e6,
    "cycle/ms": 1e3,
    "cycle/s": 1.0,
    "hz": 1.0,
    "khz": 1e3,
    "mhz": 1e6,
    "ghz": 1e9,
}
# What ncu writes for plain counts; "" is its unit for the sm__ops_path_tensor_* FLOP counts.
_COUNT_WORDS = ("", "inst", "cycle", "warp", "thread", "op", "ops", "flop", "sector", "request")
KINDS = ("time", "bytes", "freq", "per_cycle", "count")


class UnitError(ValueError):
    pass


def parse_number(text: str) -> float:
    """'1,234,567' and '1234.5' alike; ValueError for anything else ('n/a', ''). NaN and
    infinities parse: the caller refuses them with the metric's name."""
    t = text.strip()
    # Thousands separators only where they belong: `1,00,0` is a typo or another locale's
    # number, not 1000.
    if "," in t and not _GROUPED.fullmatch(t):
        raise ValueError(f"{text!r} has misplaced thousands separators")
    t = t.replace(",", "")
    if not t:
        raise ValueError("empty value")
    return float(t)


_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?")


def _prefixed(unit: str, words: tuple[str, ...]) -> float | None:
    """Scale of `unit` when it is one of `words` after an optional decimal prefix."""
    if unit in words:
        return 1.0
    if unit[:1] in _PREFIX and unit[1:] in words and unit[1:]:
        return _PREFIX[unit[:1]]
    return None


def _infer(u: str) -> str:
    if u in _TIME:
        return "time"
    if u.lower() in _FREQ or u.endswith("/second"):
        return "freq"
    if u.endswith("/cycle"):
        return "per_cycle"
    if u.endswith("byte"):
        return "bytes"
    return "count"


def to_base(value: float, unit: str, kind: str | None = None) -> float:
    """Seconds, bytes, cycles per second, per-cycle rates or plain counts from ncu's unit.
    `kind`: what the metric measures; None infers it from the unit (for callers that know
    nothing of the metric)."""
    u = unit.strip()
    k = kind or _infer(u)
    if k not in KINDS:
        raise ValueError(f"unknown unit kind {k!r}")
    scale: float | None
    if k == "time":
        scale = _TIME.get(u)
    elif k == "freq":
        scale = _FREQ.get(u.lower())
    elif k == "bytes":
        scale = _prefixed(u, ("byte",))
    elif k == "per_cycle":
        num, _, den = u.rpartition("/")
        scale = _prefixed(num, ("byte",) + _COUNT_WORDS) if den == "cycle" else (1.0 if u == "" else None)
    else:
        scale = _prefixed(u, _COUNT_WORDS)
        if scale is None and kind is None:  # percentages and other dimensionless values
            scale = 1.0
    if scale is None:
        raise UnitError(f"unknown {k} unit {unit!r}")
    return value * scale


def read(text: str, unit: str, kind: str | None = None) -> float:
    """A CSV cell in base units, rounded once: '3.584' us is float('3.584e-6'), not
    3.584 * 1e-6 (which is 3.5839999999999997e-06). ValueError / UnitError as above."""
    value = parse_number(text)
    scale = to_base(1.0, unit, kind)
    if not math.isfinite(value):  # the reader refuses it, naming the metric
        return value
    exp = round(math.log10(scale))
    if 10.0**exp != scale:
        return value * scale
    return float(Decimal(text.strip().replace(",", "")).scaleb(exp))  # exact decimal shift, one rounding
