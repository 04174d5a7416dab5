"""Compare two sets of records case by case: ratio, its interval, a test, and a verdict.

Rule: a case is *slower* when the ratio of medians new/base exceeds 1 + threshold, the
bootstrap interval of that ratio lies wholly above 1, and the Mann-Whitney U test on the raw
samples gives p < alpha. *faster* is the mirror image. A change beyond the threshold that the
samples cannot support is *noisy*; anything else is *same*.

Records measured in worker processes (`--processes`) on both sides are compared on their
process medians, the independent units, rather than on pooled samples whose spread hides the
between-process variance.

How the two sides were measured (record.conditions) is judged too. Different torch thread
counts refuse the comparison, like a different torch (`--allow-env-mismatch` overrides): the
step itself costs something else. Everything else only warns, one line per case: a different
number of processes (the same step, but the intervals mean different things), different CPUs
or pinning, hypervisor steal or other processes busy during either timed region, and a record
that does not say how it was measured (schema 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfsuite.measure import env as envmod
from perfsuite.stats import summary as stats
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record

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
    warnings: tuple[str, ...] = ()  # why the two sides may not be comparable
    basis: str = "samples"  # what was compared: raw samples, or process medians (N vs M)

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


def _side(name: str, cond: dict) -> list[str]:
    from perfsuite.measure import system

    out = []
    if (cond.get("steal_fraction") or 0) > system.STEAL_WARN:
        out.append(f"{name} lost {cond['steal_fraction']:.1%} of its CPU time to hypervisor steal")
    if (cond.get("others_cpus") or 0) > system.OTHERS_WARN_CPUS:
        out.append(f"other processes kept {cond['others_cpus']:.1f} CPU(s) busy while {name} was timed")
    return out


def measurement_differences(base: Record, new: Record) -> tuple[list[str], list[str]]:
    """(refusals, warnings) about how two records of one case were measured."""
    cb, cn = base.conditions, new.conditions
    missing = [name for name, c in (("base", cb), ("new", cn)) if not c]
    if missing:
        return [], [f"{' and '.join(missing)} does not record how it was measured (schema 1): "
                    "processes, CPUs, threads and steal cannot be checked"]
    refusals, warnings = [], []
    if cb.get("torch_threads") != cn.get("torch_threads"):
        refusals.append(f"torch threads: {cb.get('torch_threads')} vs {cn.get('torch_threads')}")
    if cb.get("processes", 1) != cn.get("processes", 1):
        warnings.append(f"measured in {cb.get('processes', 1)} vs {cn.get('processes', 1)} process(es): "
                        "only a multi-process interval includes the between-process spread")
    if cb.get("heap", "default") != cn.get("heap", "default"):
        warnings.append(f"heap {cb.get('heap', 'default')} vs {cn.get('heap', 'default')}: page faults are "
                        "inside one side's step time only, and a held heap keeps freed memory and a 256 MiB "
                        "reserve resident, so host memory figures differ too")
    if (cb.get("cpus"), cb.get("pinned")) != (cn.get("cpus"), cn.get("pinned")):
        def where(c):
            return f"CPUs {c.get('cpus')}{' (pinned)' if c.get('pinned') else ''}"
        warnings.append(f"{where(cb)} vs {where(cn)}")
    return refusals, warnings + _side("base", cb) + _side("new", cn)


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
        refusals, warnings = measurement_differences(rb, rn)
        if not allow_env_mismatch:
            diff = (envmod.mismatches(rb.env, rn.env) if rb.env and rn.env else []) + refusals
            if diff:
                raise RecordError(
                    f"{rn.label()}: environments differ ({'; '.join(diff)}); "
                    "pass --allow-env-mismatch to compare anyway"
                )
        warnings = refusals + warnings  # allowed, but still said
        basis = "samples"
        if rb.processes and rn.processes:
            basis = f"process medians ({len(rb.processes)} vs {len(rn.processes)})"
            base_s, new_s = [p["median"] for p in rb.processes], [p["median"] for p in rn.processes]
        else:
            base_s, new_s = list(rb.samples_s), list(rn.samples_s)
        c = compare_samples(rn.label(), base_s, new_s, threshold, alpha)
        cases.append(replace(c, warnings=tuple(warnings), basis=basis))
    return Comparison(
        cases=cases,
        only_base=[b[k].label() for k in b if k not in n],
        only_new=[n[k].label() for k in n if k not in b],
    )
