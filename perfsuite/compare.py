"""Compare two sets of records case by case: ratio, its interval, a test, and a verdict.

Rule: a case is *slower* when the ratio of medians new/base exceeds 1 + threshold, the
bootstrap interval of that ratio lies wholly above 1, and the Mann-Whitney U test on the raw
samples gives p < alpha. *faster* is the mirror image. A change beyond the threshold that the
samples cannot support is *noisy*; anything else is *same*.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfsuite import env as envmod
from perfsuite import stats
from perfsuite.errors import RecordError
from perfsuite.record import Record

VERDICTS = ("faster", "slower", "same", "noisy")


@dataclass(frozen=True)
class CaseComparison:
    label: str
    base_median_s: float
    new_median_s: float
    ratio: float  # new / base: > 1 means slower
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def verdict(ratio: float, ci: tuple[float, float], p: float, threshold: float, alpha: float) -> str:
    significant = p < alpha and (ci[0] > 1.0 or ci[1] < 1.0)
    if ratio > 1.0 + threshold:
        return "slower" if significant and ci[0] > 1.0 else "noisy"
    if ratio < 1.0 / (1.0 + threshold):
        return "faster" if significant and ci[1] < 1.0 else "noisy"
    return "same"


def compare_samples(
    label: str,
    base: list[float],
    new: list[float],
    threshold: float = 0.05,
    alpha: float = 0.01,
    seed: int = 0,
) -> CaseComparison:
    mb, mn = stats.median(base), stats.median(new)
    ratio = mn / mb
    ci = stats.bootstrap_ratio_ci(base, new, seed=seed)
    p = stats.mann_whitney_p(base, new)
    return CaseComparison(label, mb, mn, ratio, ci[0], ci[1], p, verdict(ratio, ci, p, threshold, alpha))


@dataclass(frozen=True)
class Comparison:
    cases: list[CaseComparison]
    only_base: list[str]
    only_new: list[str]

    @property
    def regressed(self) -> bool:
        return any(c.verdict == "slower" for c in self.cases)


def compare_records(
    base: list[Record],
    new: list[Record],
    threshold: float = 0.05,
    alpha: float = 0.01,
    allow_env_mismatch: bool = False,
) -> Comparison:
    """Match records by case (workload, params, device) and compare each pair."""
    if threshold <= 0:
        raise RecordError(f"threshold must be positive, got {threshold}")
    # With repeated cases in one file, the last record of a case wins (a re-measure).
    b = {r.case_key(): r for r in base}
    n = {r.case_key(): r for r in new}
    cases = []
    for key in [k for k in n if k in b]:
        rb, rn = b[key], n[key]
        if not allow_env_mismatch and rb.env and rn.env:
            diff = envmod.mismatches(rb.env, rn.env)
            if diff:
                raise RecordError(
                    f"{rn.label()}: environments differ ({'; '.join(diff)}); "
                    "pass --allow-env-mismatch to compare anyway"
                )
        cases.append(compare_samples(rn.label(), list(rb.samples_s), list(rn.samples_s), threshold, alpha))
    return Comparison(
        cases=cases,
        only_base=[b[k].label() for k in b if k not in n],
        only_new=[n[k].label() for k in n if k not in b],
    )
