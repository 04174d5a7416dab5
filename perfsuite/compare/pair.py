"""Two variants of one workload that differ in a single parameter, measured interleaved in one
process (A B, B A, ...), so drift cancels: the time ratio with its 95% interval, and the ratio
of bytes autograd saves for backward."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from perfsuite.compare.gate import paired_ratios
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.workload import Workload
from perfsuite.measure.saved import saved_tensor_bytes
from perfsuite.measure.timing import Clock, clock_for
from perfsuite.stats import summary as stats
from perfsuite.measure.system import pinned


@dataclass(frozen=True)
class PairResult:
    workload: str
    params: dict  # the shared parameters
    vary: str
    a: str
    b: str
    ratios: list[float]  # per pair: time_a / time_b
    saved_bytes_a: int
    saved_bytes_b: int

    @property
    def time_ratio(self) -> float:
        return stats.median(self.ratios)

    @property
    def time_ratio_ci(self) -> tuple[float, float] | None:
        return stats.median_ci(self.ratios)

    @property
    def saved_ratio(self) -> float | None:
        return self.saved_bytes_a / self.saved_bytes_b if self.saved_bytes_b else None

    DERIVED = ("time_ratio", "time_ratio_ci", "saved_ratio")

    @classmethod
    def from_dict(cls, d: dict) -> "PairResult":
        """Back from to_dict(): the raw fields; derived numbers are recomputed, not read (a suite's
        document adds the case and the suite's name beside them)."""
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.update(time_ratio=self.time_ratio, time_ratio_ci=self.time_ratio_ci, saved_ratio=self.saved_ratio)
        return d


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
    (perfsuite.run.execute.run_cases checks both variants before anything runs)."""
    vary: str
    a: Any
    b: Any
    kind = "pair"

    def variants(self, case: Case) -> list[dict]:
        return [{**case.params, self.vary: self.a}, {**case.params, self.vary: self.b}]

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> PairResult:
        clock = ctx.clock or clock_for(cfg.device, "host")
        with pinned(cfg.cpus, cfg.threads_on(cfg.device)):  # the threads a record of this run gets
            return pair(case.workload, dict(case.params), self.vary, self.a, self.b, cfg.device, clock, cfg.max_time)
