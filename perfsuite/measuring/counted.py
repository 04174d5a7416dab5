"""Counts that every build of one case repeats, made once: its first build counts, the rest reuse.

A build measures its step's work by running it under an instrument: the FLOPs (FlopCounterMode,
measure.flops) and the bytes autograd saves (measure.saved). For ResNet18 `ci` batch 8 on the
2-core VM that is ~0.7 s of running the step slowly, in every build of the case: in every
worker process, inside its slot of the budget (a 2 s slot timed ~0.5 s of steps, 2026-11-27),
and again in each of a process's in-process builds. The counts depend on the case (its params,
shapes and dtype), which every build of it shares, not on where the build's memory landed.

`shared(known)` wraps the builds of one case: inside it a counting function decorated with
`once_per_case` hands out the counts in `known` in the order they were made (each function its
own), and counts only when none is left; it yields every count handed out or made, in order, for
the next build or worker process (perfsuite.measuring.workers sends them on). Frames nest: an inner
frame without counts of its own hands out its outer frame's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class _Frame:
    """One `shared` block: the counts left to hand out and the counts made, by counting function.
    Frames are told apart by identity (two frames can hold equal counts)."""

    __slots__ = ("known", "made")

    def __init__(self, known: dict[str, list]) -> None:
        self.known = {key: list(values) for key, values in known.items()}
        self.made: dict[str, list] = {}


_frames: list[_Frame] = []


def once_per_case(stand_in: T) -> Callable[[Callable[[Callable[[], object]], T]], Callable[[Callable[[], object]], T]]:
    """The decorated counting function counts in a case's first build only (see the module); inside
    `stood_in()` it does not count at all and hands out `stand_in`."""

    def decorate(count: Callable[[Callable[[], object]], T]) -> Callable[[Callable[[], object]], T]:
        key = f"{count.__module__}.{count.__qualname__}"

        @functools.wraps(count)
        def reused(fn: Callable[[], object]) -> T:
            if _standing_in:
                return stand_in
            value = None
            for frame in reversed(_frames):
                if frame.known.get(key):
                    value = frame.known[key].pop(0)
                    break
            if value is None:  # nothing to hand out, or the first build's count of this call failed
                try:
                    value = count(fn)
                except BaseException:
                    _note(key, None)  # kept as a failure, so that the counts after it keep their places
                    raise
            _note(key, value)
            return value

        return reused

    return decorate


_standing_in: list[bool] = []


@contextlib.contextmanager
def stood_in() -> Iterator[None]:
    """Builds inside make none of these counts: each counting function hands out its stand-in. For a
    build whose counts nobody reads: the instruction count's child builds a step to count its
    instructions, and under Callgrind the FLOP counter's and the saved-tensor hooks' runs of a
    ResNet18 ci step were 73 s of its 86 s build (2026-11-30)."""
    _standing_in.append(True)
    try:
        yield
    finally:
        _standing_in.pop()


def _note(key: str, value) -> None:
    for frame in _frames:
        frame.made.setdefault(key, []).append(value)


@contextlib.contextmanager
def shared(known: dict[str, list] | None = None) -> Iterator[dict[str, list]]:
    """Builds of one case inside: counts from `known` (by counting function) are handed out first.
    Yields the counts handed out or made inside, by counting function (None where one failed)."""
    frame = _Frame(known or {})
    _frames.append(frame)
    try:
        yield frame.made
    finally:
        _frames.remove(frame)


def alike(make: Callable[[], T]) -> Callable[[], T]:
    """`make` (one build of a case) for building again: its first call counts, the later ones
    reuse those counts (and whatever counts an enclosing `shared` hands out)."""
    first: dict[str, list] = {}

    def build() -> T:
        nonlocal first
        with shared(first) as made:
            out = make()
        first = first or made
        return out

    return build
