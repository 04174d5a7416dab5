"""Where a CUDA step's time went, in one word, from the NVML summary of its timed region.

NVML's GPU utilisation is the share of time at least one kernel was running. Well under half
means the GPU sat idle most of the step waiting for work: the host (Python, the framework,
kernel launches, data) is the limit, and a faster GPU or kernel would not help. It says
nothing about how full the SMs were, so "device-bound" means only "the GPU was kept busy".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# Below this mean utilisation the GPU was idle most of the step.
HOST_BOUND_BELOW_PCT = 50.0


@dataclass(frozen=True)
class Bound:
    verdict: str  # "host-bound", "device-bound", "unknown", or "n/a (<device type>)"
    gpu_util_pct: float | None
    reason: str

    def cell(self) -> str:
        """Short table cell: the verdict, with the utilisation it rests on."""
        return self.verdict if self.gpu_util_pct is None else f"{self.verdict} ({self.gpu_util_pct:.0f}% busy)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def where_time_went(device: str, nvml: dict[str, Any] | None) -> Bound:
    """The verdict for a step measured on `device` whose timed region NVML summarised as `nvml`
    (perfsuite.measuring.nvml.NvmlSampler.summary())."""
    kind = device.split(":", 1)[0]
    if kind != "cuda":
        return Bound(f"n/a ({kind})", None, f"not a CUDA device ({device})")
    nvml = nvml or {}
    if nvml.get("status") != "ok":
        return Bound("unknown", None, f"NVML unavailable: {nvml.get('reason') or 'not sampled'}")
    if nvml.get("gpu_util_unknown") and not nvml.get("gpu_util_pct"):  # a region shorter than NVML's window
        return Bound("unknown", None, str(nvml["gpu_util_unknown"]))
    util = (nvml.get("gpu_util_pct") or {}).get("mean")
    if not isinstance(util, (int, float)) or isinstance(util, bool) or not math.isfinite(util):
        return Bound("unknown", None, f"NVML summary field 'gpu_util_pct.mean' is missing or not a number: {util!r}")
    if util < HOST_BOUND_BELOW_PCT:
        return Bound(
            "host-bound",
            float(util),
            f"the GPU was busy {util:.0f}% of the timed region (NVML mean): idle most of the step, "
            "waiting for the host to launch work",
        )
    return Bound(
        "device-bound",
        float(util),
        f"the GPU was busy {util:.0f}% of the timed region (NVML mean; busy = a kernel running, "
        "not how full the SMs were)",
    )
