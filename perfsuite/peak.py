"""This device's peak: matmul FLOP/s (fp32, bf16) and memory bandwidth, measured and stored.

Every record then reports achieved FLOP/s as a fraction of this measured peak, not of a
datasheet number the machine may never reach (shared cloud cores rarely hold turbo clocks).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from perfsuite import registry
from perfsuite.config import RunConfig
from perfsuite.errors import RecordError
from perfsuite.record import Work
from perfsuite.runner import run_case
from perfsuite.storage import atomic_write_text
from perfsuite.workloads.base import BuiltStep, Workload

# Big enough to leave caches and reach steady kernel throughput; small enough for 2 CPU cores.
MATMUL_N = {"cpu": 2048, "cuda": 8192}
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}
PEAK_DTYPES = ("fp32", "bf16")


def device_key(env: dict, device: str) -> str:
    """Peaks are per device model and thread count: the same cores with fewer threads peak lower."""
    if device.startswith("cuda"):
        return f"cuda|{env.get('gpu_name')}"
    return f"cpu|{env.get('cpu_model')}|threads={env.get('torch_threads')}"


def _copy_workload(nbytes: int) -> Workload:
    def build(params, device) -> BuiltStep:
        import torch

        src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)

        def step() -> None:
            dst.copy_(src)

        # A copy reads every byte once and writes it once.
        return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="copies",
                                             bytes_per_step=2.0 * src.numel() * 4))

    return Workload(name="copy", description="large tensor copy", params=(), builder=build)


def measure_peak(cfg: RunConfig, env: dict, device: str) -> dict:
    kind = "cuda" if device.startswith("cuda") else "cpu"
    cfg = replace(cfg, device=device)
    matmul = registry.get("matmul")
    flops, records = {}, []
    for dtype in PEAK_DTYPES:
        rec = run_case(matmul, {"n": MATMUL_N[kind], "dtype": dtype}, cfg, env=env)
        flops[dtype] = rec.flops_per_s
        records.append(rec)
    copy = run_case(_copy_workload(COPY_BYTES[kind]), {}, cfg, env=env)
    records.append(copy)
    return {
        "device_key": device_key(env, device),
        "flops_per_s": flops,
        "bytes_per_s": copy.work.bytes_per_step / copy.median_s,
        "measured": datetime.now(timezone.utc).isoformat(),
        "matmul_n": MATMUL_N[kind],
        "copy_bytes": COPY_BYTES[kind],
        "torch": env.get("torch"),
        "records": [r.id for r in records],
    }


def load_peaks(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: peak file is unreadable ({exc}); delete it and run `perfsuite peak`") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: peak file must hold a JSON object")
    return data


def save_peak(path: Path, peak: dict) -> None:
    peaks = load_peaks(path)
    peaks[peak["device_key"]] = peak
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(peaks, indent=1))


def peak_for(path: Path, env: dict, device: str) -> dict | None:
    return load_peaks(path).get(device_key(env, device))
