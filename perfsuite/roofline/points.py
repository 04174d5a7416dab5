"""Roofline points: one per launch, and sums of them per kernel family, per NVTX range and for
the whole step. Aggregates are sums of FLOPs, bytes and time (never averages of ratios)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.roofline.metrics import MissingMetric, figures
from perfsuite.roofline.names import short_name
from perfsuite.roofline.ncu import Launch, NcuCsvError


@dataclass(frozen=True)
class Point:
    id: str  # launch ID, or "group", "range", "total"
    kernel: str
    nvtx_range: str
    flops: float
    dram_bytes: float
    l2_bytes: float | None
    l1_bytes: float | None
    time_s: float
    dtype: str = ""  # CPU roofline: which matmul peak is this point's roof
    pipe_flops: dict = field(default_factory=dict)  # GPU: FLOPs per pipe (metrics.PIPES)
    note: str = ""  # why `flops` is a lower bound; "" when it is exact
    launches: int = 1
    tensor_flops: float | None = 0.0  # None: unknown

    @property
    def exact(self) -> bool:
        return not self.note

    @property
    def intensity(self) -> float | None:
        """FLOP per DRAM byte; None (not infinite) when no byte moved."""
        return self.flops / self.dram_bytes if self.dram_bytes > 0 else None

    def level_intensity(self, nbytes: float | None) -> float | None:
        return self.flops / nbytes if nbytes else None

    @property
    def flop_per_s(self) -> float | None:
        return self.flops / self.time_s if self.time_s > 0 else None

    def pipes(self) -> dict:
        return self.pipe_flops or ({self.dtype or "fp32": self.flops} if self.flops else {})

    @property
    def pipe(self) -> str:
        """The pipe that did most of the FLOPs ("" for none)."""
        ps = {k: v for k, v in self.pipes().items() if v > 0}
        return max(ps, key=ps.__getitem__) if ps else ""

    @property
    def short(self) -> str:
        return self.kernel if self.id == "group" else short_name(self.kernel)

    def bound(self, ridge: float) -> str:
        ai = self.intensity
        return "" if ai is None else ("compute" if ai >= ridge else "memory")


def _who(launch: Launch) -> str:
    return f"launch {launch.id} ({short_name(launch.kernel)})"


def point(launch: Launch, path: Path) -> Point:
    try:
        f = figures(launch.metrics)
    except MissingMetric as exc:
        raise NcuCsvError(
            f"{path}: {_who(launch)} lacks the metric {exc.args[0]} (its rows start at line {launch.line})"
        ) from None
    if f.time_s <= 0:
        raise NcuCsvError(f"{path}: {_who(launch)} at line {launch.line} took {f.time_s!r} s; a launch takes time")
    tensor = None if f.tensor == "unknown" else sum(v for k, v in f.pipe_flops.items() if k.startswith("tensor_"))
    return Point(
        launch.id,
        launch.kernel,
        launch.nvtx,
        sum(f.pipe_flops.values()),
        f.dram,
        f.l2,
        f.l1,
        f.time_s,
        pipe_flops=f.pipe_flops,
        note=f.note,
        tensor_flops=tensor,
    )


def _sum_opt(values) -> float | None:
    vals = list(values)
    return None if not vals or any(v is None for v in vals) else sum(vals)


def aggregate(points: list[Point], label: str, rng: str = "", kernel: str = "") -> Point:
    pipes: dict = {}
    for p in points:
        for k, v in p.pipes().items():
            pipes[k] = pipes.get(k, 0.0) + v
    notes = [p.note for p in points if p.note]
    note = (
        (
            f"lower bound: {len(notes)} of {len(points)} launches have unknown tensor FLOPs"
            if len(points) > 1
            else notes[0]
        )
        if notes
        else ""
    )
    dtypes = {p.dtype for p in points}
    return Point(
        label,
        kernel,
        rng,
        sum(p.flops for p in points),
        sum(p.dram_bytes for p in points),
        _sum_opt(p.l2_bytes for p in points),
        _sum_opt(p.l1_bytes for p in points),
        sum(p.time_s for p in points),
        dtypes.pop() if len(dtypes) == 1 else "",
        pipe_flops=pipes,
        note=note,
        launches=sum(p.launches for p in points),
        tensor_flops=_sum_opt(p.tensor_flops for p in points),
    )


def by_range(points: list[Point], launches: list[Launch]) -> list[Point]:
    """One point per NVTX range; a launch counts in every range it is inside."""
    ranges: dict[str, list[Point]] = {}
    for p, launch in zip(points, launches):
        for name in launch.ranges:
            ranges.setdefault(name, []).append(p)
    return [aggregate(ps, "range", name) for name, ps in ranges.items()]


def by_kernel(points: list[Point]) -> list[Point]:
    """One point per kernel family (short name), the most time first."""
    groups: dict[str, list[Point]] = {}
    for p in points:
        groups.setdefault(p.short, []).append(p)
    out = [aggregate(ps, "group", kernel=name) for name, ps in groups.items()]
    return sorted(out, key=lambda p: -p.time_s)
