"""The frozen run configuration, validated with messages that name the field, and device choice."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from perfsuite.core.errors import ConfigError, DeviceUnavailable

# How the step is timed on CUDA (perfsuite.measuring.timing.clock_for): CUDA events around the
# timed region, or a synchronise and the host's clock.
TIMING_MODES = ("event", "host")
# The allocator set-up around the timed region (perfsuite.measuring.heap).
HEAP_MODES = ("default", "steady")

# Upper bound for `processes` and `threads`: a typo (1000) should fail, not fork a thousand times.
MAX_WORKERS = 256
# Builds of one step in one process, or side processes a side at once: each is a model in memory
# and a build's set-up before the budget (issue 51: `--builds 1000000 --max-time 0.2` hung).
MAX_BUILDS = 64
# Seconds one case (or a command's window) may be given: more than a day is a typo, and 10^20
# would overflow the deadlines and timestamps computed from it.
MAX_TIME_S = 86_400.0


def number_in(name: str, value: Any, least: float, most: float, *, whole: bool = False, above: bool = False) -> Any:
    """`value` if it is a number from `least` (excluded when `above`) to `most`, a whole one when
    `whole`; else a ConfigError naming `name` and the range. The one range check of a number given
    on the command line or in a declaration (NaN, infinities, bools and strings are refused)."""
    kinds: tuple[type, ...] = (int,) if whole else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    if ok:
        try:
            ok = math.isfinite(value) and (least < value if above else least <= value) and value <= most
        except OverflowError:  # an int beyond any float: finite, and out of every range here
            ok = False
    if not ok:
        kind = "a whole number" if whole else "a number"
        low = f"above {least:g}" if above else f"from {least:g}"
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ConfigError(f"{name} must be {kind} {low} to {most:g}, got {shown}")
    return value


# processes=None ("auto"): one worker process per this many seconds of budget, from
# AUTO_MIN_PROCESSES up to AUTO_MAX_PROCESSES; a budget shorter than two such slots is measured in
# the calling process. Most of the variation between runs is between processes (docs/measurement.md), so a case is
# measured in several by default; each slot must hold a fork, the build(s), warm-up and timing.
AUTO_WORKER_S = 2.0
# Builds of the step rotated inside one process measuring alone (builds=None; see RunConfig.builds).
IN_PROCESS_BUILDS = 3
AUTO_MAX_PROCESSES = 5
AUTO_MIN_PROCESSES = 3


# torch threads for a CPU measurement unless `threads` says otherwise: one, as torch.utils.benchmark's
# Timer does. Two threads on this 2-core VM took 25-140x as long per step whenever another process
# was busy (each parallel region waits for a descheduled thread; docs/measurement.md); one thread
# shares a core and slows by the share it gets.
CPU_THREADS = 1


def auto_processes(max_time: float) -> int:
    """How many worker processes `processes=None` means for a budget of `max_time` seconds: never
    two, whose interval pays t = 12.7 on one degree of freedom (issue 36: a 4 s run's two processes
    agreeing within 5% gave 962 us .. 245 ms); three pay 4.3."""
    n = int(max_time // AUTO_WORKER_S)
    return 1 if n < 2 else min(max(n, AUTO_MIN_PROCESSES), AUTO_MAX_PROCESSES)


@dataclass(frozen=True)
class RunConfig:
    """How one case is measured. Nothing downstream reads globals or environment variables."""

    device: str = "auto"
    max_time: float = 10.0  # seconds per case, warm-up included
    min_time: float = 0.0  # measure at least this long even when the CI has converged
    # The CI may stop the timing only once this share of max_time (warm-up included) has passed:
    # a few milliseconds of one process's samples cannot see the variation between runs.
    min_fraction: float = 0.5
    # Builds of the step rotated inside the process (perfsuite.measuring.runner): the interval comes
    # from how much they disagree. A workload may allow fewer (Workload.max_builds).
    # None: IN_PROCESS_BUILDS measuring in this process, one in each worker process (a worker is
    # itself a fresh build, and two more builds would take set-up time out of its short slot).
    builds: int | None = None
    target_rel_ci: float = 0.01  # stop when the median's 95% CI is within +-1% of the median
    # What a run cannot see in its own processes: the machine's state drifts between runs minutes
    # apart (matmul n=256 on one thread: 5 processes in a run agreed within +-0.4% while run centres
    # spread +-1%, reports/quality). Added in quadrature to the reported interval's half-width
    # (Record.stats), not to the convergence test; 0 reports the run's own interval alone.
    run_drift: float = 0.01
    # Time a fixed reference kernel between the blocks (perfsuite.measuring.reference), into the
    # record's conditions: `compare` then judges the step's time per reference time, which the
    # machine's drift between runs moves far less than seconds. The CPU only (reference.taken_on).
    reference: bool = True
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
    # One call of the step under a dispatch mode after the timed blocks: the operators it ran
    # (perfsuite.measuring.signature), what `compare` tells more work from the same work by.
    signature: bool = True
    # Instructions per step, counted under Callgrind in a child process after measuring
    # (perfsuite.measuring.instructions): tens of seconds a case, so asked for (--instructions).
    instructions: bool = False
    nvml_interval: float = 0.05
    seed: int = 0
    # Fresh worker processes the budget is spread over (perfsuite.measuring.workers); None: as many as
    # the budget allows (auto_processes), which `workers` reads.
    processes: int | None = None
    cpus: tuple[int, ...] | None = None  # pin the measuring process to these CPUs (os.sched_setaffinity)
    # torch.set_num_threads for the measurement; None: CPU_THREADS on the CPU (threads_on), torch's
    # own setting on CUDA, where the host threads feed the device and rarely set the time.
    threads: int | None = None
    # "steady": glibc's malloc keeps freed memory and serves blocks up to 32 MiB from the heap, so
    # page faults leave a CPU step's time (perfsuite.measuring.heap); process-wide once set.
    heap: str = "default"

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds or a positive fraction, got {v!r}")

        for name in ("max_time", "target_rel_ci", "warmup_tolerance", "clock_overhead_limit", "nvml_interval"):
            positive(name)
        number_in("max_time", self.max_time, 0, MAX_TIME_S, above=True)
        if (
            not isinstance(self.run_drift, (int, float))
            or isinstance(self.run_drift, bool)
            or not 0 <= self.run_drift < 1
        ):
            raise ConfigError(f"run_drift must be a fraction from 0 to below 1, got {self.run_drift!r}")
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
            if name == "builds" and v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
        if self.builds is not None and self.builds > MAX_BUILDS:
            raise ConfigError(f"builds must be at most {MAX_BUILDS} (each is a copy of the model), got {self.builds}")
        if self.max_samples < self.min_samples:
            raise ConfigError("max_samples must be >= min_samples")
        if self.timing not in TIMING_MODES:
            raise ConfigError(f"timing must be one of {', '.join(TIMING_MODES)}, got {self.timing!r}")
        for name in ("processes", "threads"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_WORKERS):
                raise ConfigError(f"{name} must be an integer from 1 to {MAX_WORKERS}, got {v!r}")
        if self.heap not in HEAP_MODES:
            raise ConfigError(f"heap must be one of {', '.join(HEAP_MODES)}, got {self.heap!r}")
        if self.cpus is not None:
            if isinstance(self.cpus, list):
                object.__setattr__(self, "cpus", tuple(self.cpus))
            if (
                not isinstance(self.cpus, tuple)
                or not self.cpus
                or len(set(self.cpus)) != len(self.cpus)
                or any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in self.cpus)
            ):
                raise ConfigError(f"cpus must be a non-empty list of distinct CPU numbers >= 0, got {self.cpus!r}")
        if not isinstance(self.device, str) or not self.device:
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")

    @property
    def workers(self) -> int:
        """The worker processes this configuration measures a case in (1: the calling process)."""
        return self.processes if self.processes is not None else auto_processes(self.max_time)

    def threads_on(self, device: str) -> int | None:
        """The torch threads a case on `device` (resolved) is measured with; None: torch's own."""
        if self.threads is not None:
            return self.threads
        return CPU_THREADS if device == "cpu" else None

    def to_dict(self) -> dict[str, Any]:
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
        if not (index.isascii() and index.isdecimal()):
            raise ConfigError(f"--device {spec}: expected cuda:N with N a non-negative integer")
        number = int(index)
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"--device {spec}: no CUDA device is available on this machine "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); use --device cpu"
            )
        if not 0 <= number < torch.cuda.device_count():
            raise DeviceUnavailable(f"--device {spec}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return f"cuda:{number}"
    raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}")


def config_digest(config: dict[str, Any]) -> str:
    """A resolved run configuration's digest: a results folder resumed under another is refused."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
