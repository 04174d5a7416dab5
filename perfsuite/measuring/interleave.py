"""Two steps timed in alternating blocks (A B, then B A, ...): the core of every paired
comparison here (gate, precision comparison, `perfsuite pair`). Alternating the order inside
each pair cancels a linear drift; pairing adjacent blocks cancels slow drift."""

from __future__ import annotations

from collections.abc import Callable

from perfsuite.measuring.timing import Clock

Step = Callable[[], object]


def interleaved_blocks(
    step_a: Step,
    step_b: Step,
    clock: Clock,
    n: int,
    *,
    pairs: int | None = None,
    budget_s: float | None = None,
    min_pairs: int = 6,
    b_first: bool = False,
) -> tuple[list[float], list[float]]:
    """Per-step seconds of A and of B, one value per block of `n` calls, pair by pair; runs
    `pairs` pairs, or for `budget_s` seconds (at least `min_pairs`), or both: up to `pairs`
    pairs within `budget_s`. `b_first`: the first pair is B A (then A B, ...).

    A B, B A runs one side twice in a row (B B), and a block that follows its own side runs
    warm (its caches, its process on the core). A long call gives each side that turn equally
    (A B B A A B ...); a caller that calls for two pairs at a time with other steps between (the
    gate, rotating over builds and side processes) alternates `b_first`, or B alone gets the
    warm turns: two side processes of the same code read 0.96 "faster" for B on a 0.4 ms step
    (2026-11-27, scripts/gate_sides.py)."""
    if pairs is None and budget_s is None:
        raise ValueError("give pairs, budget_s or both")
    ta: list[float] = []
    tb: list[float] = []
    start = clock.now()
    i = 0
    while (pairs is None or i < pairs) and (budget_s is None or i < min_pairs or clock.now() - start < budget_s):
        if (i + b_first) % 2 == 0:
            a = clock.time_block(step_a, n)
            b = clock.time_block(step_b, n)
        else:
            b = clock.time_block(step_b, n)
            a = clock.time_block(step_a, n)
        ta.append(a / n)
        tb.append(b / n)
        i += 1
    return ta, tb
