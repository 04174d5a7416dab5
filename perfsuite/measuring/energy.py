"""Energy per step (issue 54): joules over the timed region from a cumulative counter, divided by
the steps timed in it. On a GPU, NVML's total-energy counter (Volta and newer; perfsuite.measuring.nvml
reads it beside its samples); on the CPU, Linux's RAPL package counters where they are readable.

A counter, not a power sensor: NVML's power reading samples a fraction of the time on recent GPUs,
while the energy counter integrates all of it; and a counter read at the region's two ends keeps
no sampling thread busy beside the step. Both counters update every few tens of milliseconds, so a
region shorter than MIN_REGION_S says "unknown" instead of a rounding step of the counter.
"""

from __future__ import annotations

import time
from pathlib import Path

# The RAPL package domains (intel-rapl:N, not their sub-domains intel-rapl:N:M) live here.
RAPL_ROOT = Path("/sys/class/powercap")
# Shorter timed regions read "unknown": both counters update every 20-100 ms.
MIN_REGION_S = 0.5


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason}


def per_step(reading: dict, steps: int, items_per_step: float) -> dict:
    """A region's energy reading ({"status": "ok", "energy_j", "region_s", "source"}) as the
    record keeps it: with the steps it covered, joules per step and items per joule."""
    if reading.get("status") != "ok" or not steps:
        return reading if reading.get("status") != "ok" else unavailable("no steps were timed")
    j = reading["energy_j"] / steps
    return {**reading, "steps": steps, "per_step_j": j, "items_per_j": items_per_step / j if j > 0 else None}


def pooled(readings: list[dict]) -> dict:
    """The energy of several processes' regions of one case as one: joules and steps summed."""
    ok = [r for r in readings if r.get("status") == "ok" and r.get("steps")]
    if not ok:
        return readings[0] if readings else unavailable("not measured")
    energy, steps = sum(r["energy_j"] for r in ok), sum(r["steps"] for r in ok)
    j = energy / steps
    items = ok[0]["items_per_j"] * ok[0]["per_step_j"] if ok[0].get("items_per_j") else None
    return {
        "status": "ok",
        "source": ok[0]["source"],
        "energy_j": energy,
        "region_s": sum(r["region_s"] for r in ok),
        "steps": steps,
        "per_step_j": j,
        "items_per_j": items / j if items and j > 0 else None,
        "processes": len(ok),
    }


def counted(start: float | None, end: float | None, region_s: float, source: str, wrap: float | None = None) -> dict:
    """Joules between two readings of a cumulative counter (in joules), or why there are none."""
    if start is None or end is None:
        return unavailable(f"{source}: the counter could not be read")
    if region_s < MIN_REGION_S:
        return unavailable(
            f"the timed region lasted {region_s:.2f} s, shorter than {MIN_REGION_S:g} s: the energy counter "
            "updates every 20-100 ms"
        )
    delta = end - start
    if delta < 0 and wrap:  # the counter wrapped around its range during the region
        delta += wrap
    if delta < 0:
        return unavailable(f"{source}: the counter went backwards")
    return {"status": "ok", "source": source, "energy_j": delta, "region_s": region_s}


class RaplCounter:
    """Context manager: the CPU packages' energy over its block, from RAPL (Linux powercap)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or RAPL_ROOT
        self.reading: dict = unavailable("not measured")

    def _domains(self) -> list[Path]:
        try:
            return sorted(d for d in self.root.iterdir() if d.name.startswith("intel-rapl:") and d.name.count(":") == 1)
        except OSError:
            return []

    def _read(self, domains: list[Path]) -> list[tuple[float, float]] | None:
        """Each package's (joules now, its counter's wrap-around range in joules)."""
        try:
            return [
                (int((d / "energy_uj").read_text()) * 1e-6, int((d / "max_energy_range_uj").read_text()) * 1e-6)
                for d in domains
            ]
        except (OSError, ValueError):
            return None

    def __enter__(self) -> RaplCounter:
        self._domains_read = self._domains()
        self._start = self._read(self._domains_read) if self._domains_read else None
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        region_s = time.monotonic() - self._t0
        if not self._domains_read:
            self.reading = unavailable(f"no RAPL counter here ({self.root}: none readable; a VM rarely exposes one)")
            return
        end = self._read(self._domains_read)
        if self._start is None or end is None:
            self.reading = unavailable(f"RAPL counters in {self.root} are not readable (root only on most kernels)")
            return
        # Each package's counter wraps on its own: its delta first, then the sum.
        parts = [counted(a, b, region_s, "rapl", wrap=w) for (a, _), (b, w) in zip(self._start, end)]
        bad = next((p for p in parts if p["status"] != "ok"), None)
        self.reading = bad or {**parts[0], "energy_j": sum(p["energy_j"] for p in parts)}
