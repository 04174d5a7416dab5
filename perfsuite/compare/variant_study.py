"""What a variant study keeps: per case, eager's figures and one row per variant (its gate verdict
against eager, latency, throughput, memory, size, build and cold-call time, agreement and
metrics, whether it holds accuracy), as the `variants` document and the store keep it."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Literal

from pydantic import Field

from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.core import documents
from perfsuite.core.documents import Count, Finite, Name, NonNegative, Params, Text

Fraction = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
STATUSES = ("measured", "refused", "failed")


@documents.shape("variant row")
class VariantRow(documents.Result):
    """One variant of one case. `verdict`: its gate against eager (ratio variant/eager: below 1 is
    faster); `kept`: each fraction of eager it keeps (top-1 agreement, each metric); `below`: those
    under the floor, so `holds` is False."""

    DERIVED = {"speedup": "speedup", "speedup_interval": "speedup_interval", "word": "word"}

    variant: Name
    status: Literal["measured", "refused", "failed"]
    reason: Text | None = None
    verdict: GateVerdict | None = None
    build_s: NonNegative | None = None
    cold_s: NonNegative | None = None
    size_bytes: Count | None = None
    latency_s: dict[Name, NonNegative] = field(default_factory=dict)
    # eager's, timed in alternation with this variant's (the same stretch of the machine's load)
    eager_latency_s: dict[Name, NonNegative] = field(default_factory=dict)
    items_per_s: NonNegative | None = None
    memory: dict[Name, Finite] = field(default_factory=dict)
    outputs: dict[Name, Finite | None] = field(default_factory=dict)
    metrics: dict[Name, Finite] = field(default_factory=dict)
    kept: dict[Name, Fraction] = field(default_factory=dict)
    below: list[Text] = field(default_factory=list)
    holds: bool | None = None

    @property
    def speedup(self) -> float | None:
        """eager's time over the variant's (above 1: faster), from the verdict's estimate."""
        return 1.0 / self.verdict.median_ratio if self.verdict is not None and self.verdict.median_ratio > 0 else None

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        if self.verdict is None:
            return None
        lo, hi = self.verdict.interval
        return (1.0 / hi if hi > 0 else 0.0, 1.0 / lo if lo > 0 else float("inf"))

    @property
    def word(self) -> str | None:
        return self.verdict.word if self.verdict is not None else None


@documents.shape("variant study")
class VariantStudy(documents.Result):
    """Every variant of one case against eager, with the floor they were held to."""

    DERIVED = {"best": "best", "closing": "closing"}

    workload: Name
    params: Params
    device: Name
    floor: Fraction
    items_unit: Name
    eager: VariantRow | None  # None: no variant's sides were measured (every one refused or failed first)
    rows: list[VariantRow] = field(default_factory=list)
    # Asked for, but the study was stopped (Ctrl-C, SIGTERM) before their verdicts: the closing line
    # chooses among the measured only, and says so.
    unmeasured: list[Name] = field(default_factory=list)

    @property
    def best(self) -> str | None:
        """The fastest variant that holds accuracy and is faster than eager by the threshold."""
        fast = [r for r in self.rows if r.status == "measured" and r.holds and r.word == "faster"]
        return max(fast, key=lambda r: r.speedup or 0.0).variant if fast else None

    @property
    def closing(self) -> str:
        """The line a user acts on: which variant to ship for this case, and why that one."""
        case = ", ".join(f"{k}={v}" for k, v in self.params.items())
        best = next((r for r in self.rows if r.variant == self.best), None)
        stopped = (
            f"; stopped before the verdicts of {', '.join(self.unmeasured)}, which were not measured"
            if self.unmeasured
            else ""
        )
        if not any(r.status == "measured" for r in self.rows):
            # Nothing was compared: "keep eager" would read as a measured answer (issue 50's rerun).
            said = "; ".join(
                f"{status}: {', '.join(r.variant for r in self.rows if r.status == status)}"
                for status in ("refused", "failed")
                if any(r.status == status for r in self.rows)
            )
            return (
                f"{self.workload} [{case}]: no variant was measured ({said or 'none asked'}), so there is "
                f"nothing to choose; the reasons are above{stopped}"
            )
        if best is None:
            held = [r.variant for r in self.rows if r.status == "measured" and r.holds]
            return (
                f"{self.workload} [{case}]: no variant {'measured ' if stopped else ''}that holds accuracy is "
                f"faster than eager (held: {', '.join(held) or 'none'}); keep eager{stopped}"
            )
        lo, hi = best.speedup_interval or (0.0, 0.0)
        kept = ", ".join(f"{k} {v:.3f}" for k, v in best.kept.items())
        return (
            f"{self.workload} [{case}]: fastest {'measured ' if stopped else ''}variant that holds accuracy: "
            f"{best.variant}, {best.speedup:.2f}x ({lo:.2f}-{hi:.2f}) against eager; kept of eager: "
            f"{kept or 'not measured'}{stopped}"
        )
