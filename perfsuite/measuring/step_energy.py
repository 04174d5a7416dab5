"""A step's joules per step over a region of its own (issue 54): what a side of the gate answers when
asked for its energy (perfsuite.compare.energy_pairs). The counters are perfsuite.measuring.energy's
(RAPL) and perfsuite.measuring.nvml's (NVML's total energy)."""

from __future__ import annotations

import time

from perfsuite.measuring import energy
from perfsuite.measuring.energy import RaplCounter, per_step, unavailable
from perfsuite.measuring.nvml import NvmlSampler
from perfsuite.measuring.timing import synchronize


def step_energy(step, device: str, seconds: float) -> dict:
    """Joules per step of `step` called for about `seconds` (at least MIN_REGION_S) between two
    readings of the device's counter: NVML's total energy on CUDA, RAPL's packages on the CPU. One
    call first, outside the region, so a lazy first call's work is not in it. What a side of the
    gate answers when asked for its energy (perfsuite.compare.energy_pairs)."""
    cuda = str(device).startswith("cuda")
    if cuda:
        import torch

        counter: NvmlSampler | RaplCounter = NvmlSampler(index=torch.device(device).index or 0, interval_s=1.0)
    else:
        counter = RaplCounter()
    step()
    synchronize(device)
    n = 0
    with counter:
        # The region's clock starts inside the counter: its own start (NVML's handle, its thread)
        # counted against the region left it shorter than MIN_REGION_S, and "unavailable".
        t0 = time.monotonic()
        while n == 0 or time.monotonic() - t0 < max(seconds, energy.MIN_REGION_S):
            step()
            n += 1
        synchronize(device)
    reading = counter.energy if isinstance(counter, NvmlSampler) else counter.reading
    if isinstance(counter, NvmlSampler) and counter.reason and reading.get("status") != "ok":
        reading = unavailable(counter.reason)  # NVML itself could not start: say why, not "not a CUDA device"
    return per_step(reading, n, 1.0)
