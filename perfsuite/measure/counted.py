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
the next build or worker process (perfsuite.measure.workers sends them on). Frames nest: an inner
frame without counts of its own hands out its outer frame's.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")
_frames: list[tuple[dict[str, list], dict[str, list]]] = []  # (counts left to hand out, counts made)


def once_per_case(count: Callable[[Callable[[], object]], T]) -> Callable[[Callable[[], object]], T]:
    key = f"{count.__module__}.{count.__qualname__}"

    @functools.wraps(count)
    def reused(fn: Callable[[], object]) -> T:
        for known, _ in reversed(_frames):
            if known.get(key):
                value = known[key].pop(0)
                break
        else:
            value = count(fn)  # an exception (an op the counter cannot follow) is not kept: the next build counts
        for _, made in _frames:
            made.setdefault(key, []).append(value)
        return value

    return reused


@contextlib.contextmanager
def shared(known: dict[str, list] | None = None) -> Iterator[dict[str, list]]:
    """Builds of one case inside: counts from `known` (by counting function) are handed out first.
    Yields the counts handed out or made inside, by counting function."""
    frame = ({key: list(values) for key, values in (known or {}).items()}, {})
    _frames.append(frame)
    try:
        yield frame[1]
    finally:
        _frames.remove(frame)
