"""Command-line values parsed once, with messages that name the flag: argparse `type=` callables
the command modules and perfsuite.cli.options declare their arguments with."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfsuite.core.config import MAX_TIME_S, number_in
from perfsuite.core.errors import ConfigError
from perfsuite.measuring.system import parse_cpus

# A count on the command line beyond this is a typo (and `int` of 10^20 overflows C callees).
MAX_COUNT = 1_000_000


def positive_float(name: str, most: float = MAX_TIME_S):
    """A number above 0 and at most `most` (default: seconds, at most a day): `--max-time 1e20`
    would overflow the deadlines computed from it."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number, got {text[:40]!r}") from None
        try:
            return number_in(name, v, 0, most, above=True)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def whole(name: str, least: int, most: int = MAX_COUNT):
    def parse(text: str) -> int:
        t = text.strip()
        # Digits only, and few of them: int() of a 10^6-digit string is itself slow.
        if not (t.isascii() and t.isdigit()) or len(t) > 12 or not least <= int(t) <= most:
            raise argparse.ArgumentTypeError(
                f"{name} expects a whole number >= {least} (at most {most}), got {text[:40]!r}"
            )
        return int(t)

    return parse


def count(name: str):
    return whole(name, 1)


def fraction(name: str, most: float = 1.0):
    """A probability or a share: strictly between 0 and `most` (`--fdr 2` would accept every slowdown)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number between 0 and {most:g}, got {text!r}") from None
        if not 0 < v < most:  # also refuses nan, which compares false with everything
            raise argparse.ArgumentTypeError(f"{name} must be between 0 and {most:g} (exclusive), got {text!r}")
        return v

    return parse


def nonnegative_float(name: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} expects a number, got {text!r}") from None
        if not 0 <= v < float("inf"):  # nan too
            raise argparse.ArgumentTypeError(f"{name} must be a finite number >= 0, got {text!r}")
        return v

    return parse


def given_path(name: str):
    """A path that names something: `--workloads ""` would be the current folder, every file in it."""

    def parse(text: str) -> Path:
        if not text.strip() or "\x00" in text:
            raise argparse.ArgumentTypeError(f"{name} expects a file or folder, got {text[:40]!r}")
        return Path(text)

    return parse


def cpu_list(text: str) -> tuple[int, ...]:
    try:
        return parse_cpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--cpus: {exc}") from None


def shard(text: str) -> tuple[int, int]:
    """K/N: the K-th of N shards of a suite (`run --shard`)."""
    k, slash, n = text.partition("/")
    if not (slash and k.strip().isdigit() and n.strip().isdigit()) or not 1 <= int(k) <= int(n) <= 1000:
        raise argparse.ArgumentTypeError(f"--shard expects K/N with 1 <= K <= N <= 1000, got {text!r}")
    return int(k), int(n)
