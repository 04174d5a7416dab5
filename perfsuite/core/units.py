"""Human-readable numbers with SI prefixes (decimal) and binary byte sizes."""

from __future__ import annotations

import math


def _digits(x: float, digits: int) -> str:
    """`x` to `digits` significant digits, never in exponent notation: 1010 MiB reads "1010", not
    "1.01e+03" (a value past the largest unit keeps its whole digits), and a value below the
    smallest unit its leading zeros (0.00001 ns, not 1e-05)."""
    text = f"{x:.{digits}g}"
    if "e+" in text:  # 9999.9 rounds to "1e+04" at four digits
        return f"{x:.0f}"
    if "e-" in text:
        return f"{x:.{digits - 1 - math.floor(math.log10(abs(x)))}f}".rstrip("0").rstrip(".")
    return text


def fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{_digits(s / scale, 4)} {unit}"
    return f"{_digits(s / 1e-9, 4)} ns"


def fmt_rate(x: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{_digits(x / scale, 4)} {prefix}{unit}"
    return f"{_digits(x, 4)} {unit}"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{_digits(n / scale, 3)} {unit}"
    return f"{n:.0f} B"
