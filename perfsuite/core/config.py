"""The frozen run configuration, validated with messages that name the field, and device choice."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from perfsuite.core.errors import ConfigError, DeviceUnavailable
from perfsuite.measure.timing import TIMING_MODES

# Upper bound for `processes` and `threads`: a typo (1000) should fail, not fork a thousand times.
MAX_WORKERS = 256


@dataclass(frozen=True)
class RunConfig:
    """How one case is measured. Nothing downstream reads globals or environment variables."""

    device: str = "auto"
    max_time: float = 10.0  # seconds per case, warm-up included
    min_time: float = 0.0  # measure at least this long even when the CI has converged
    # The CI may stop the timing only once this share of max_time (warm-up included) has passed:
    # a few milliseconds of one process's samples cannot see the variation between runs.
    min_fraction: float = 0.5
    # Builds of the step rotated inside the process (perfsuite.measure.runner): the interval comes
    # from how much they disagree. A workload may allow fewer (Workload.max_builds).
    builds: int = 3
    target_rel_ci: float = 0.01  # stop when the median's 95% CI is within +-1% of the median
    confidence: float = 0.95
    min_samples: int = 10
    max_samples: int = 100_000
    warmup_window: int = 5  # settled when two consecutive windows' medians agree ...
    warmup_tolerance: float = 0.02  # ... within this fraction
    warmup_min_fraction: float = 0.05  # of max_time; warm-up never ends before this
    warmup_max_fraction: float = 0.3  # of max_time; past it warm-up stops with a warning
    clock_overhead_limit: float = 0.001  # clock's own cost as a fraction of one block
    timing: str = "event"  # CUDA only: "event" (device time) or "host" (sync + wall clock)
    nvtx: bool = True
    nvml_interval: float = 0.05
    seed: int = 0
    processes: int = 1  # fresh worker processes the budget is spread over (perfsuite.measure.workers)
    cpus: tuple[int, ...] | None = None  # pin the measuring process to these CPUs (os.sched_setaffinity)
    threads: int | None = None  # torch.set_num_threads for the measurement; None: leave torch's setting
    # "steady": glibc's malloc keeps freed memory and serves blocks up to 32 MiB from the heap, so
    # page faults leave a CPU step's time (perfsuite.measure.heap); process-wide once set.
    heap: str = "default"

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds or a positive fraction, got {v!r}")

        for name in ("max_time", "target_rel_ci", "warmup_tolerance", "clock_overhead_limit", "nvml_interval"):
            positive(name)
        if not isinstance(self.min_time, (int, float)) or self.min_time < 0:
            raise ConfigError(f"min_time must be >= 0 seconds, got {self.min_time!r}")
        if self.min_time > self.max_time:
            raise ConfigError(f"min_time ({self.min_time}) must not exceed max_time ({self.max_time})")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be between 0 and 1, got {self.confidence!r}")
        if not isinstance(self.min_fraction, (int, float)) or not 0 <= self.min_fraction <= 1:
            raise ConfigError(f"min_fraction must be between 0 and 1, got {self.min_fraction!r}")
        if not 0 < self.warmup_max_fraction < 1:
            raise ConfigError(f"warmup_max_fraction must be between 0 and 1, got {self.warmup_max_fraction!r}")
        if not 0 <= self.warmup_min_fraction <= self.warmup_max_fraction:
            raise ConfigError(
                f"warmup_min_fraction must be between 0 and warmup_max_fraction, got {self.warmup_min_fraction!r}"
            )
        for name in ("min_samples", "max_samples", "warmup_window", "builds"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
        if self.max_samples < self.min_samples:
            raise ConfigError("max_samples must be >= min_samples")
        if self.timing not in TIMING_MODES:
            raise ConfigError(f"timing must be one of {', '.join(TIMING_MODES)}, got {self.timing!r}")
        for name in ("processes", "threads"):
            v = getattr(self, name)
            if not (v is None and name == "threads") and (
                    not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_WORKERS):
                raise ConfigError(f"{name} must be an integer from 1 to {MAX_WORKERS}, got {v!r}")
        from perfsuite.measure.heap import HEAP_MODES

        if self.heap not in HEAP_MODES:
            raise ConfigError(f"heap must be one of {', '.join(HEAP_MODES)}, got {self.heap!r}")
        if self.cpus is not None:
            if isinstance(self.cpus, list):
                object.__setattr__(self, "cpus", tuple(self.cpus))
            if (not isinstance(self.cpus, tuple) or not self.cpus or len(set(self.cpus)) != len(self.cpus)
                    or any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in self.cpus)):
                raise ConfigError(f"cpus must be a non-empty list of distinct CPU numbers >= 0, got {self.cpus!r}")
        if not isinstance(self.device, str) or not self.device:
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def resolve_device(spec: str) -> str:
    """'auto' -> cuda when present, else cpu. Asking for CUDA without one is an error, never a CPU run."""
    import torch

    spec = spec.strip().lower()
    if spec == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return "cpu"
    if spec == "cuda" or spec.startswith("cuda:"):
        # The spelling is checked first: `cuda:abc` is wrong on every machine, GPU or not.
        index = "0" if spec == "cuda" else spec.split(":", 1)[1]
        if not index.isdigit():
            raise ConfigError(f"--device {spec}: expected cuda:N with N a non-negative integer")
        index = int(index)
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"--device {spec}: no CUDA device is available on this machine "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); use --device cpu"
            )
        if not 0 <= index < torch.cuda.device_count():
            raise DeviceUnavailable(f"--device {spec}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return f"cuda:{index}"
    raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}")
