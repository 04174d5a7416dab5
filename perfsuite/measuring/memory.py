"""Peak memory of the timed region only.

Host: the kernel keeps a high-water mark of resident memory (VmHWM). Writing "5" to
/proc/self/clear_refs resets it to the current RSS (Linux >= 4.0), so the value read at the
end is the true peak *of the region*: exact, and nothing is missed between samples, unlike a
sampling thread, and the imports and model set-up before the region are excluded. Where
that file is not writable (not Linux, a locked-down container) we fall back to
`ru_maxrss`, which covers the whole process, and say so in a warning.

CUDA: the caching allocator's own counters, reset with `reset_peak_memory_stats`.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_kib(key: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_bytes() -> int | None:
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def _reset_high_water_mark() -> bool:
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class HostPeakRSS:
    """Context manager: peak resident set size during the `with` body."""

    method: str = ""
    before_bytes: int | None = None
    peak_bytes: int | None = None
    warnings: list[str] = field(default_factory=list)

    def __enter__(self) -> HostPeakRSS:
        self.before_bytes = current_rss_bytes()
        if _reset_high_water_mark():
            self.method = "clear_refs+VmHWM"
        else:
            self.method = "ru_maxrss"
            self.warnings.append(
                "host peak memory covers the whole process (imports and set-up included): "
                "/proc/self/clear_refs is not writable here"
            )
        return self

    def __exit__(self, *exc) -> None:
        if self.method == "clear_refs+VmHWM":
            kib = _status_kib("VmHWM")
            self.peak_bytes = None if kib is None else kib * 1024
        else:
            maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # Linux reports KiB, macOS bytes.
            self.peak_bytes = maxrss if sys.platform == "darwin" else maxrss * 1024

    def to_dict(self) -> dict:
        delta = None
        if self.peak_bytes is not None and self.before_bytes is not None:
            delta = max(0, self.peak_bytes - self.before_bytes)
        return {
            "host_method": self.method,
            "host_rss_before_bytes": self.before_bytes,
            "host_peak_rss_bytes": self.peak_bytes,
            "host_peak_delta_bytes": delta,
        }


@dataclass
class CudaPeakMemory:
    """Context manager: the CUDA caching allocator's peaks during the `with` body."""

    device: torch.device | str | int | None = None
    allocated_before: int | None = None
    max_allocated: int | None = None
    max_reserved: int | None = None

    def __enter__(self) -> CudaPeakMemory:
        import torch

        # Synchronise first so that frees of earlier, still-queued work are accounted before reset.
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.allocated_before = torch.cuda.memory_allocated(self.device)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        torch.cuda.synchronize(self.device)
        self.max_allocated = torch.cuda.max_memory_allocated(self.device)
        self.max_reserved = torch.cuda.max_memory_reserved(self.device)

    def to_dict(self) -> dict:
        return {
            "cuda_allocated_before_bytes": self.allocated_before,
            "cuda_max_allocated_bytes": self.max_allocated,
            "cuda_max_reserved_bytes": self.max_reserved,
        }
