"""Environment fingerprint: small `collect_*` functions, each adding what it can see."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from perfsuite.core.git import git_output
from perfsuite.measuring import system
from perfsuite.measuring.system import THREAD_VARS

# Keys that must agree for two records to be compared: they change what a step costs.
# The git commit is deliberately absent - comparing commits is the point.
COMPARABLE_KEYS = (
    "torch",
    "cuda",
    "cudnn",
    "gpu_name",
    "driver",
    "cpu_model",
    "logical_cores",
    "torch_threads",
    "python",
    "gpu_power_limit_w",
    "gpu_mig",
)
# Comparable keys fingerprints before 2026-11-29 did not have: a record without one is not
# refused for it (None against a value is "not known", not a difference).
LATER_KEYS = frozenset({"gpu_power_limit_w", "gpu_mig"})


def collect_python() -> dict:
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }


def collect_os() -> dict:
    return {"os": platform.system(), "os_release": platform.release(), "machine": platform.machine()}


def collect_host() -> dict:
    return {"host": socket.gethostname()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# CPU features with which bf16 arithmetic runs in hardware (x86: AVX512-BF16, AMX; Arm: the
# BF16 extension). Without one, torch converts bf16 and falls back to slow kernels: on an
# AVX2-only EPYC a bf16 matmul ran at about 1 GFLOP/s against 58 in fp32, and a ResNet18 bf16
# training step took over a minute.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def parse_cpu_flags(cpuinfo: str) -> set[str] | None:
    """The feature flags of the first CPU in a /proc/cpuinfo text ("flags" on x86, "Features" on
    Arm); None when the text names none."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def cpu_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether this CPU has bf16 arithmetic in hardware; None where its flags cannot be read."""
    try:
        flags = parse_cpu_flags(cpuinfo.read_text())
    except OSError:
        return None
    return None if flags is None else bool(flags & BF16_FLAGS)


def collect_cpu() -> dict:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": affinity,
        "cpu_native_bf16": cpu_native_bf16(),
    }


def collect_torch(device: str | None = None) -> dict:
    """torch's versions and, with CUDA, the GPU `device` names ("cuda:1" -> GPU 1; "cuda", a CPU
    device or None -> the current GPU): its name keys the stored peaks and comparisons, so
    it must be the GPU the run measures, not GPU 0 whatever `--device` said."""
    try:
        import torch
    except ImportError:
        return {"torch": None}
    out = {
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cuda": torch.version.cuda,
        "cudnn": None,
        "gpu_name": None,
        "gpu_index": None,
        "gpu_count": 0,
        "driver": None,
    }
    if torch.cuda.is_available():
        out["cudnn"] = torch.backends.cudnn.version()
        out["gpu_count"] = torch.cuda.device_count()
        index = _gpu_index(torch, device)
        out["gpu_index"] = index
        out["gpu_name"] = torch.cuda.get_device_name(index)
        out["driver"] = _nvidia_driver()
        from perfsuite.measuring.nvml import gpu_state

        out.update(gpu_state(index))
    return out


def _gpu_index(torch, device: str | None) -> int:
    if device is not None and str(device).startswith("cuda"):
        index = torch.device(device).index
        if index is not None:
            return index
    return torch.cuda.current_device()


def _nvidia_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:  # noqa: BLE001 - no NVML binding or driver: the driver stays unknown
        return None


def collect_git(cwd: str | os.PathLike | None = None) -> dict:
    def git(*args: str) -> str | None:
        return git_output(cwd, *args, timeout=10)

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "git_dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(status)}


def collect_cpu_power() -> dict:
    """Frequency governors and turbo, where /sys shows them (inside most VMs it does not: None)."""
    governors = sorted(set(system.read_governors().values()))
    return {"cpu_governors": governors or None, "cpu_turbo": system.read_turbo()}


def collect_load() -> dict:
    return {"load_avg": system.read_load_average()}


def collect_threads() -> dict:
    """Thread settings that change a step's cost: OMP/MKL variables and the CPUs this process may use."""
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"thread_env": {v: os.environ[v] for v in THREAD_VARS if v in os.environ}, "cpu_affinity": affinity}


# How long collect_activity watches the machine: long enough for /proc's 10 ms ticks to add up.
ACTIVITY_WINDOW_S = 0.3


def collect_activity(window_s: float = ACTIVITY_WINDOW_S) -> dict:
    """Hypervisor steal, other processes' CPU use and the busiest of them, over a short window."""
    with system.CpuUsage() as usage:
        busy = system.busy_processes(window_s)
    r = usage.readings
    return {
        "steal_fraction": r.get("steal_fraction"),
        "others_cpus": r.get("others_cpus"),
        "busy_processes": busy,
        "activity_window_s": window_s,
    }


COLLECTORS = (
    collect_python,
    collect_os,
    collect_host,
    collect_cpu,
    collect_torch,
    collect_git,
    collect_cpu_power,
    collect_load,
    collect_threads,
    collect_activity,
)


def fingerprint(cwd: str | os.PathLike | None = None, device: str | None = None) -> dict:
    """Everything the collectors see, in one flat dict; `device` is the run's (see collect_torch)."""
    out: dict = {}
    for collect in COLLECTORS:
        if collect is collect_git:
            out.update(collect(cwd))
        elif collect is collect_torch:
            out.update(collect(device))
        else:
            out.update(collect())
    return out


def comparable(env: dict) -> dict:
    """The part of a fingerprint that must match for a comparison to be meaningful."""
    # A later key that is not known is left out, so a fingerprint without it (a CPU, a record of
    # before) is the same dict as it always was: machine digests and a history's labels hold.
    out = {k: env.get(k) for k in COMPARABLE_KEYS if not (k in LATER_KEYS and env.get(k) is None)}
    # Patch releases of Python do not change step costs; major.minor does.
    if out["python"]:
        out["python"] = ".".join(str(out["python"]).split(".")[:2])
    return out


def mismatches(a: dict, b: dict) -> list[str]:
    """Human-readable differences between two fingerprints' comparable parts."""
    ca, cb = comparable(a), comparable(b)
    return [
        f"{k}: {ca.get(k)!r} vs {cb.get(k)!r}"
        for k in COMPARABLE_KEYS
        if ca.get(k) != cb.get(k) and not (k in LATER_KEYS and (ca.get(k) is None or cb.get(k) is None))
    ]


if __name__ == "__main__":  # pragma: no cover
    print(fingerprint(), file=sys.stdout)
