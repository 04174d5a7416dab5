"""How two revisions are gated against each other: one frozen bundle, built once by the command
or the library call and handed to every prober (the gate, bisect's probes, history's pairs)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from perfsuite.core.config import MAX_BUILDS, MAX_TIME_S
from perfsuite.core.errors import ConfigError

HEAPS = ("steady", "default")


@dataclass(frozen=True)
class GateSettings:
    """`max_time`: seconds per gate (a case, a probe, a pair of commits); `builds`: processes a
    side in each round; `threshold`: the smallest slowdown that counts; `fdr`: false alarms per
    unchanged case; `threads`: torch threads in the sides (None: torch's own); `heap`: steady
    keeps glibc's freed memory in the sides (perfsuite.measuring.heap); `variant`: the variant of
    the step every side times (perfsuite.variants: `gate --variant int8-dynamic` follows the int8
    path across commits; None: the workload's own step)."""

    max_time: float = 15.0
    builds: int = 1
    threshold: float = 0.01
    fdr: float = 0.01
    threads: int | None = None
    heap: str = "steady"
    variant: str | None = None
    # Joules per step paired after the first round's pairs (perfsuite.compare.energy_pairs, about
    # 12 s a case): None, on where a counter is the rule (CUDA: NVML's), off on the CPU (RAPL is
    # rarely readable, and counts every process on the package); history and bisect make None off
    # (each of their probes would pay it).
    energy: bool | None = None

    def __post_init__(self) -> None:
        if not 0 < self.max_time <= MAX_TIME_S:
            raise ConfigError(f"max_time must be above 0 and at most {MAX_TIME_S:g} s, got {self.max_time!r}")
        if isinstance(self.builds, bool) or not isinstance(self.builds, int) or not 1 <= self.builds <= MAX_BUILDS:
            raise ConfigError(f"builds must be a whole number from 1 to {MAX_BUILDS}, got {self.builds!r}")
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise ConfigError(f"threshold must be a finite number >= 0, got {self.threshold!r}")
        if not 0 < self.fdr < 0.5:  # a one-sided test at 0.5 or more says nothing
            raise ConfigError(f"fdr must be between 0 and 0.5 (exclusive), got {self.fdr!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):  # fmt: skip
            raise ConfigError(f"threads must be a whole number >= 1 or None, got {self.threads!r}")
        if self.heap not in HEAPS:
            raise ConfigError(f"heap must be one of {', '.join(HEAPS)}, got {self.heap!r}")
        if self.energy is not None and not isinstance(self.energy, bool):
            raise ConfigError(f"energy must be True, False or None (on CUDA), got {self.energy!r}")
        if self.variant is not None:
            from perfsuite.variants.catalog import named

            named(self.variant)  # an unknown name: refused before anything is measured

    def on(self, device: str) -> GateSettings:
        """These settings on `device`: threads None becomes one on the CPU (RunConfig.threads_on: six
        side processes with two threads each on two cores made pairs 0.5-2.3x apart), torch's own on
        CUDA; a variant the device cannot run (fp16 on a CPU, a library not installed) is refused."""
        from dataclasses import replace

        from perfsuite.core.config import RunConfig

        if self.variant is not None:  # one this device cannot run: refused before any checkout or side
            from perfsuite.variants.catalog import runnable

            runnable(self.variant, device)
        return replace(self, threads=RunConfig(threads=self.threads).threads_on(device))

    def energy_on(self, device: str) -> bool:
        return self.energy if self.energy is not None else str(device).startswith("cuda")

    def logged(self) -> dict:
        """As a log's settings keep them (a resumed log must have been measured alike); no variant
        is left out, as logs written before variants existed keep it. Energy is not a setting of the
        time verdict: a point is judged alike with or without it."""
        out = asdict(self)
        del out["energy"]
        if out["variant"] is None:
            del out["variant"]
        return out


@dataclass(frozen=True)
class WhyOptions:
    """How `why` profiles two sides: `steps` per profiler window, `rounds` windows per side,
    the `top` operators listed."""

    steps: int = 5
    rounds: int = 4
    top: int = 20

    def __post_init__(self) -> None:
        for name in ("steps", "rounds", "top"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"why {name} must be a whole number >= 1, got {v!r}")
