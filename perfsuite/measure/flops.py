"""FLOPs of one step, counted by torch's FlopCounterMode (for workloads without an analytic count)."""

from __future__ import annotations

from typing import Callable

from perfsuite.measure.counted import once_per_case


@once_per_case  # every build of a case has the same FLOPs: the first build counts
def count_flops(fn: Callable[[], object]) -> float:
    """FLOPs of one call of `fn`, counted by torch's FlopCounterMode (runs `fn` once, untimed).

    The counter sees matmuls, convolutions and attention (forward and backward); elementwise
    work counts as zero, so the figure is the tensor-core/BLAS work the roofline compares.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())
