"""Two variants of one workload that differ in a single parameter, measured interleaved in one
process (A B, B A, ...), so drift cancels: the time ratio with its 95% interval, and the ratio
of bytes autograd saves for backward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite.compare.paired_gate import paired_ratios
from perfsuite.core import documents
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.documents import Count, Name, Params, Samples, Scalar
from perfsuite.core.workload import Workload
from perfsuite.measuring.saved import saved_tensor_bytes
from perfsuite.measuring.system import pinned
from perfsuite.measuring.timing import Clock, clock_for
from perfsuite.stats import summary as stats


@documents.shape("pair result", frozen=True)
class PairResult(documents.SuiteEntry):
    # Derived from the pairs and the bytes, written beside them for readers without perfsuite.
    DERIVED = {"time_ratio": "time_ratio", "time_ratio_ci": "time_ratio_ci", "saved_ratio": "saved_ratio"}

    workload: Name
    params: Params  # the shared parameters
    vary: Name
    a: Scalar
    b: Scalar
    ratios: Samples  # per pair: time_a / time_b
    saved_bytes_a: Count
    saved_bytes_b: Count

    @property
    def time_ratio(self) -> float:
        return stats.median(self.ratios)

    @property
    def time_ratio_ci(self) -> tuple[float, float] | None:
        return stats.median_ci(self.ratios)

    @property
    def saved_ratio(self) -> float | None:
        return self.saved_bytes_a / self.saved_bytes_b if self.saved_bytes_b else None


def pair(workload: Workload, params: dict, vary: str, a, b, device: str, clock: Clock, budget_s: float) -> PairResult:
    pa, pb = workload.resolve({**params, vary: a}), workload.resolve({**params, vary: b})
    step_a, step_b = workload.build(pa, device).fn, workload.build(pb, device).fn
    saved = [saved_tensor_bytes(s) for s in (step_a, step_b)]
    run = paired_ratios(step_b, step_a, clock, budget_s)  # ratio = time_a / time_b
    shared = {k: v for k, v in pa.items() if k != vary}
    return PairResult(workload.name, shared, vary, str(a), str(b), run.ratios, saved[0], saved[1])


@dataclass(frozen=True)
class Pair(Measure):
    """A case measured as a pair: `vary` at `a` against `b`, interleaved for the case's budget
    (perfsuite.run.execute.check_cases checks both variants before anything runs)."""

    vary: str
    a: Any
    b: Any
    kind = "pair"

    def variants(self, case: Case) -> list[dict[str, Any]]:
        return [{**case.params, self.vary: self.a}, {**case.params, self.vary: self.b}]

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> PairResult:
        clock = ctx.clock or clock_for(cfg.device, "host")
        with pinned(cfg.cpus, cfg.threads_on(cfg.device)):  # the threads a record of this run gets
            return pair(case.workload, dict(case.params), self.vary, self.a, self.b, cfg.device, clock, cfg.max_time)
