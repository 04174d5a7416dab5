"""Per-launch roofline figures and their totals, from metrics in base units."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfsuite.roofline.ncu import (
    CYCLES, CYCLES_PER_S, DRAM, DRAM_R, DRAM_W, L1, L2, OPS, PRECISIONS, TENSOR_FLOPS_PER_INST, TENSOR_METRIC,
    TIME, Launch, NcuCsvError,
)

# Peak FP32 (non-tensor) TFLOP/s and DRAM GB/s from the vendors' datasheets, for --device.
KNOWN_DEVICES = {
    "A100-SXM4-40GB": (19.5, 1555.0), "A100-SXM4-80GB": (19.5, 2039.0), "A100-PCIE-40GB": (19.5, 1555.0),
    "H100-SXM5-80GB": (66.9, 3350.0), "H100-PCIE-80GB": (51.2, 2000.0), "V100-SXM2-16GB": (15.7, 900.0),
    "T4": (8.1, 320.0), "L4": (30.3, 300.0), "A10G": (31.2, 600.0), "RTX-4090": (82.6, 1008.0),
    "RTX-3090": (35.6, 936.0),
}


@dataclass(frozen=True)
class Point:
    id: str
    kernel: str
    nvtx_range: str
    flops: float
    dram_bytes: float
    l2_bytes: float | None
    l1_bytes: float | None
    time_s: float
    dtype: str = ""  # CPU roofline: which matmul peak is this point's roof

    @property
    def intensity(self) -> float | None:
        """FLOP per DRAM byte; None (not infinite) when no byte moved."""
        return self.flops / self.dram_bytes if self.dram_bytes > 0 else None

    @property
    def flop_per_s(self) -> float | None:
        return self.flops / self.time_s if self.time_s > 0 else None

    def bound(self, ridge: float) -> str:
        ai = self.intensity
        return "" if ai is None else ("compute" if ai >= ridge else "memory")


def _who(launch: Launch) -> str:
    return f"launch {launch.id} ({launch.kernel[:60]})"


def _metric(launch: Launch, name: str, path: Path) -> float:
    if name not in launch.metrics:
        raise NcuCsvError(f"{path}: {_who(launch)} lacks the metric {name}")
    return launch.metrics[name]


def _flops(launch: Launch, path: Path) -> float:
    total, families = 0.0, 0
    for p in PRECISIONS:
        for pre in ("sm", "smsp"):
            names = [f"{pre}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for op in OPS]
            present = [n in launch.metrics for n in names]
            if any(present):
                missing = [n for n, ok in zip(names, present) if not ok]
                if missing:
                    raise NcuCsvError(f"{path}: {_who(launch)} lacks the metric {missing[0]}")
                add, mul, fma = (launch.metrics[n] for n in names)
                total += add + mul + 2 * fma
                families += 1
                break
    if not families:
        raise NcuCsvError(f"{path}: {_who(launch)} lacks the metric "
                          "sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum (any precision)")
    return total + launch.metrics.get(TENSOR_METRIC, 0.0) * TENSOR_FLOPS_PER_INST


def point(launch: Launch, path: Path) -> Point:
    m = launch.metrics
    if DRAM in m:
        dram = m[DRAM]
    elif DRAM_R in m or DRAM_W in m:
        dram = _metric(launch, DRAM_R, path) + _metric(launch, DRAM_W, path)
    else:
        raise NcuCsvError(f"{path}: {_who(launch)} lacks the metric {DRAM} (or {DRAM_R} + {DRAM_W})")
    if TIME in m:
        t = m[TIME]
    elif CYCLES in m:
        t = m[CYCLES] / _metric(launch, CYCLES_PER_S, path)
    else:
        raise NcuCsvError(f"{path}: {_who(launch)} lacks the metric {TIME} (or {CYCLES} and {CYCLES_PER_S})")
    return Point(launch.id, launch.kernel, " > ".join(launch.nvtx), _flops(launch, path), dram,
                 m.get(L2), m.get(L1), t)


def _sum_opt(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def aggregate(points: list[Point], launches: list[Launch], label: str, rng: str = "") -> Point:
    """Sums of FLOPs, bytes and time (never averages of ratios)."""
    return Point(label, "", rng, sum(p.flops for p in points), sum(p.dram_bytes for p in points),
                 _sum_opt(p.l2_bytes for p in points), _sum_opt(p.l1_bytes for p in points),
                 sum(p.time_s for p in points))


def by_range(points: list[Point], launches: list[Launch]) -> list[Point]:
    """One row per NVTX range; a launch counts in every range of its push/pop stack."""
    ranges: dict[str, list[Point]] = {}
    for p, launch in zip(points, launches):
        for name in dict.fromkeys(launch.nvtx):
            ranges.setdefault(name, []).append(p)
    return [aggregate(ps, [], "range", name) for name, ps in ranges.items()]
