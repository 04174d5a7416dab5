"""GPU utilisation, memory, power and SM clock sampled by NVML on a background thread.

Sampling runs only while the timed region runs. Without NVML (no `nvidia-ml-py`, no driver,
no such device) the summary says "unavailable" with the reason; nothing fails.

Which GPU: the sampler is given torch's CUDA index, and NVML numbers every GPU of the machine
whatever CUDA_VISIBLE_DEVICES hides or reorders (torch's cuda:0 under CUDA_VISIBLE_DEVICES=2 is
NVML's device 2). So the device is found by its UUID, the one name both agree on; only where
torch gives no UUID, or NVML knows none like it, is NVML's device of the same index read, and
the summary's `gpu` block says so.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field

FIELDS = ("gpu_util_pct", "mem_util_pct", "mem_used_bytes", "power_w", "sm_clock_mhz")
# NVML's utilisation rates are averages over the driver's last sample period, 1/6 s to 1 s by GPU
# (issue 54): read during a region shorter than that they average in the idle set-up before it (a
# fully busy 0.4 s region read 18% with a 1 s window; a graph-replayed ResNet read 98% busy in one
# process and 34% "host-bound" in three workers of 0.3-0.6 s each, H200 2026-11-28).
UTIL_WINDOW_S = 1.0


def _load_nvml():
    try:
        import pynvml  # provided by the nvidia-ml-py package
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install 'perfsuite[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError subclasses vary by driver: any failure means "no NVML"
        return None, f"NVML could not start: {exc}"
    return pynvml, ""


def _read(nvml, handle) -> dict:
    util = nvml.nvmlDeviceGetUtilizationRates(handle)
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    try:
        power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # milliwatts
    except Exception:  # noqa: BLE001 - not every board reports power
        power = None
    clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
    return {
        "gpu_util_pct": float(util.gpu),
        "mem_util_pct": float(util.memory),
        "mem_used_bytes": float(mem.used),
        "power_w": power,
        "sm_clock_mhz": float(clock),
    }


def _energy_j(nvml, handle) -> float | None:
    """The GPU's total-energy counter in joules (millijoules since the driver loaded; Volta and
    newer), or None where the board has none."""
    try:
        return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and its kin vary by driver
        return None


def _util_samples(nvml, handle, since_us: int) -> list[float] | None:
    """The driver's own utilisation samples stamped at or after `since_us` (microseconds of the
    wall clock, as NVML stamps them): what the GPU did inside the region alone. None where the
    driver keeps none (nvmlDeviceGetSamples is not supported everywhere)."""
    try:
        _kind, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
        vals = [float(x.sampleValue.uiVal) for x in samples if int(x.timeStamp) >= since_us]
    except Exception:  # noqa: BLE001 - NVMLError subclasses vary by driver: no samples, the rates stand
        return None
    return vals or None


# NVML's compute modes (nvmlComputeMode_t) by number, as nvidia-smi names them.
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def gpu_state(index: int) -> dict:
    """What of torch's CUDA device `index` changes a step's cost or who may share it, as NVML reads
    it (issue 54: a history's environment label left these out): the enforced power limit in W,
    MIG mode, compute mode. Empty where NVML cannot say; each field None where its query fails."""
    nvml, _why = _load_nvml()
    if nvml is None:
        return {}
    try:
        handle, _ = nvml_handle(nvml, index)
    except Exception:  # noqa: BLE001 - NVMLError subclasses vary by driver
        return {}

    def ask(read):
        try:
            return read()
        except Exception:  # noqa: BLE001 - not every board or driver answers every query
            return None

    limit = ask(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    mig = ask(lambda: nvml.nvmlDeviceGetMigMode(handle))
    mode = ask(lambda: nvml.nvmlDeviceGetComputeMode(handle))
    return {
        "gpu_power_limit_w": round(limit / 1000.0, 1) if isinstance(limit, (int, float)) else None,
        "gpu_mig": bool(mig[0]) if isinstance(mig, (list, tuple)) and mig else None,
        "gpu_compute_mode": COMPUTE_MODES.get(int(mode)) if isinstance(mode, int) else None,
    }


def compute_mode(index: int) -> str | None:
    """The compute mode of torch's CUDA device `index` as nvidia-smi names it, or None where NVML
    cannot say (gpu_state's reading)."""
    return gpu_state(index).get("gpu_compute_mode")


def normalise_uuid(value) -> str | None:
    """A GPU UUID as its 32 lower-case hex digits, however it is spelled; None if it is not one.

    NVML gives 'GPU-eab43309-aa90-8814-01b8-57c04c1f359b' (bytes from older pynvml); torch gives
    a torch._C._CUuuid, whose str() is the dashed hex without the prefix and whose `bytes` are
    the 16 raw bytes."""
    raw = getattr(value, "bytes", None)
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        return bytes(raw).hex()
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii", errors="replace")
    if not isinstance(value, str):
        value = str(value) if value is not None else ""
    digits = re.sub(r"^(gpu|mig)-", "", value.strip().lower()).replace("-", "")
    return digits if re.fullmatch(r"[0-9a-f]{32}", digits) else None


def _nvml_spelling(hex32: str) -> str:
    h = hex32
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def torch_uuid(index: int) -> tuple[str | None, str]:
    """torch's UUID of CUDA device `index` as 32 hex digits, or None and why there is none."""
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception as exc:  # noqa: BLE001 - no CUDA build, no driver, no such device
        return None, f"torch gave no properties for CUDA device {index} ({exc})"
    if uuid is None:
        return None, "this torch's device properties carry no UUID"
    hex32 = normalise_uuid(uuid)
    return (hex32, "") if hex32 else (None, f"torch's UUID {str(uuid)!r} is not 32 hex digits")


def nvml_handle(nvml, index: int) -> tuple[object, dict]:
    """NVML's handle of torch's CUDA device `index`, and a record of how it was found: by UUID
    (NVML's own lookup, else a scan of NVML's devices comparing normalised UUIDs, for a pynvml
    whose lookup wants another spelling), else by NVML index with a note. Raises what NVML
    raises when not even the index names a device."""
    hex32, why = torch_uuid(index)
    if hex32:
        uuid = _nvml_spelling(hex32)
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid), {"uuid": uuid, "matched_by": "uuid"}
        except Exception:  # noqa: BLE001 - not found by its UUID: look for it by index below
            pass
        try:
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                if normalise_uuid(nvml.nvmlDeviceGetUUID(handle)) == hex32:
                    return handle, {"uuid": uuid, "matched_by": "uuid"}
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses vary by driver
            why = f"NVML could not list its devices ({exc})"
        else:
            why = f"no NVML device has torch's UUID {uuid}"
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    note = f"NVML device {index} read by index: {why}; NVML ignores CUDA_VISIBLE_DEVICES" + (
        f" (set to {visible!r}), so this may be another GPU than torch's" if visible is not None else ""
    )
    return handle, {"nvml_index": index, "matched_by": "index", "note": note}


@dataclass
class NvmlSampler:
    """Context manager sampling torch's CUDA device `index` every `interval_s` seconds."""

    index: int | None = 0
    interval_s: float = 0.05
    enabled: bool = True
    samples: list[dict] = field(default_factory=list)
    reason: str = ""
    gpu: dict = field(default_factory=dict)  # which NVML device was read, and how it was found
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # The driver's utilisation samples stamped inside the region (_util_samples), and its length.
    in_region: list[float] | None = None
    region_s: float = 0.0
    # The region's joules from the energy counter (perfsuite.measuring.energy.counted), or why not.
    energy: dict = field(default_factory=lambda: {"status": "unavailable", "reason": "not a CUDA device"})

    def __enter__(self) -> NvmlSampler:
        if not self.enabled or self.index is None:
            self.reason = "not a CUDA device" if self.index is None else "disabled"
            return self
        nvml, why = _load_nvml()
        if nvml is None:
            self.reason = why
            return self
        try:
            handle, self.gpu = nvml_handle(nvml, self.index)
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses vary by driver
            self.reason = f"NVML has no device {self.index}: {exc}"
            return self
        self._nvml, self._handle = nvml, handle
        self._energy0 = _energy_j(nvml, handle)
        self._since_us, self._t0 = int(time.time() * 1e6), time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="perfsuite-nvml", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(_read(self._nvml, self._handle))
            except Exception as exc:  # noqa: BLE001 - a driver hiccup ends sampling, never the benchmark
                self.reason = f"NVML read failed: {exc}"
                return
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.region_s = time.monotonic() - self._t0
            self.in_region = _util_samples(self._nvml, self._handle, self._since_us)
            end = _energy_j(self._nvml, self._handle)
            if self._energy0 is None or end is None:
                self.energy = {
                    "status": "unavailable",
                    "reason": "this GPU has no NVML energy counter (Volta and newer do)",
                }
            else:
                from perfsuite.measuring.energy import counted

                self.energy = counted(self._energy0, end, self.region_s, "nvml")

    def summary(self) -> dict:
        if not self.samples:
            return {"status": "unavailable", "reason": self.reason or "no samples taken"}
        out: dict = {"status": "ok", "n": len(self.samples), "interval_s": self.interval_s, "gpu": dict(self.gpu)}
        for name in FIELDS:
            vals = [s[name] for s in self.samples if s[name] is not None]
            if vals:
                out[name] = {"mean": sum(vals) / len(vals), "max": max(vals)}
        if self.in_region:  # the driver's samples of the region itself: no window reaches outside it
            out["gpu_util_pct"] = {"mean": sum(self.in_region) / len(self.in_region), "max": max(self.in_region)}
            out["gpu_util_from"] = f"{len(self.in_region)} driver samples stamped inside the region"
        elif self.region_s < UTIL_WINDOW_S:
            out.pop("gpu_util_pct", None)
            out.pop("mem_util_pct", None)
            out["gpu_util_unknown"] = (
                f"the timed region lasted {self.region_s:.2f} s, shorter than NVML's utilisation window (up to "
                f"{UTIL_WINDOW_S:g} s), and the driver kept no samples of it: a rate read then averages in the "
                "idle set-up before it"
            )
        return out


def pooled(summaries: list[dict]) -> dict:
    """The NVML summaries of several processes of one case as one: means weighted by each one's
    sample count, the largest max. Every process's timed region counts: on 2026-11-28 an H200
    reached its power cap only after the first of three processes, whose summary alone was kept."""
    ok = [s for s in summaries if s.get("status") == "ok" and s.get("n")]
    if not ok:
        return summaries[0] if summaries else {"status": "unavailable", "reason": "no samples taken"}
    first = ok[0]
    out: dict = {"status": "ok", "n": sum(s["n"] for s in ok), "interval_s": first["interval_s"], "gpu": first["gpu"]}
    if len(ok) > 1:
        out["processes"] = len(ok)
    for name in FIELDS:
        having = [s for s in ok if isinstance(s.get(name), dict)]
        if having:
            n = sum(s["n"] for s in having)
            out[name] = {
                "mean": sum(s[name]["mean"] * s["n"] for s in having) / n,
                "max": max(s[name]["max"] for s in having),
            }
    if "gpu_util_pct" not in out:  # no process could say: the reason of the first
        unknown = next((s["gpu_util_unknown"] for s in ok if s.get("gpu_util_unknown")), None)
        if unknown:
            out["gpu_util_unknown"] = unknown
    return out
