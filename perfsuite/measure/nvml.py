"""GPU utilisation, memory, power and SM clock sampled by NVML on a background thread.

Sampling runs only while the timed region runs. Without NVML (no `nvidia-ml-py`, no driver,
no such device) the summary says "unavailable" with the reason; nothing fails.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

FIELDS = ("gpu_util_pct", "mem_util_pct", "mem_used_bytes", "power_w", "sm_clock_mhz")


def _load_nvml():
    try:
        import pynvml  # provided by the nvidia-ml-py package
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'perfsuite[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses vary by driver: any failure means "no NVML"
        return None, f"NVML could not start: {exc}"
    return pynvml, ""


def _read(nvml, handle) -> dict:
    util = nvml.nvmlDeviceGetUtilizationRates(handle)
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    try:
        power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # milliwatts
    except Exception:  # not every board reports power
        power = None
    clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
    return {
        "gpu_util_pct": float(util.gpu),
        "mem_util_pct": float(util.memory),
        "mem_used_bytes": float(mem.used),
        "power_w": power,
        "sm_clock_mhz": float(clock),
    }


@dataclass
class NvmlSampler:
    """Context manager sampling GPU `index` every `interval_s` seconds."""

    index: int | None = 0
    interval_s: float = 0.05
    enabled: bool = True
    samples: list[dict] = field(default_factory=list)
    reason: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "NvmlSampler":
        if not self.enabled or self.index is None:
            self.reason = "not a CUDA device" if self.index is None else "disabled"
            return self
        nvml, why = _load_nvml()
        if nvml is None:
            self.reason = why
            return self
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:
            self.reason = f"NVML has no device {self.index}: {exc}"
            return self
        self._nvml, self._handle = nvml, handle
        self._thread = threading.Thread(target=self._loop, name="perfsuite-nvml", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(_read(self._nvml, self._handle))
            except Exception as exc:  # a driver hiccup ends sampling, never the benchmark
                self.reason = f"NVML read failed: {exc}"
                return
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> dict:
        if not self.samples:
            return {"status": "unavailable", "reason": self.reason or "no samples taken"}
        out: dict = {"status": "ok", "n": len(self.samples), "interval_s": self.interval_s}
        for name in FIELDS:
            vals = [s[name] for s in self.samples if s[name] is not None]
            if vals:
                out[name] = {"mean": sum(vals) / len(vals), "max": max(vals)}
        return out
