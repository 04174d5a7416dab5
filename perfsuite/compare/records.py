"""Compare two sets of records case by case: ratio, its interval, a test, and a verdict.

Separate runs of unchanged code differ by more than the samples inside one run say (issue 26:
two resnet runs of the same code were called `slower` in 2 of 6 pairs). So a case is judged on
each record's independent units, the medians of its worker processes or else of the builds of
the step it rotated (record.units()), not on its pooled samples:

- the ratio is that of the units' geometric means new/base, with a two-sample t interval and test on
  their logs (stats.log_ratio_test): the interval widens when either side's builds disagree;
- the *noise band* is what two separate runs of unchanged code differ by: twice the SD of the
  difference of the two runs' centres, each side's from the spread of its units, or the case's
  noise floor learned by `perfsuite gate --learn-floor` when that is larger. Process medians are
  independent units: a run's centre then varies by their log SD / sqrt(N). Build medians share one
  process, whose placement moves them together: a one-process run's centre varies by at least
  their whole log SD (more, which only a learned floor can say); and both runs' drift with the
  machine's state (RunConfig.run_drift, stored in each record's config), which neither can see,
  or, where the base holds three or more runs of the case (`perfsuite compare BASE BASE BASE NEW`,
  or re-measures in one file), the drift learned from them (`learned_drift`) when that is larger;
- *slower* when the ratio exceeds 1 + threshold and 1 + noise band, the interval lies wholly
  above 1 and p < alpha; *faster* is the mirror image; a change beyond the threshold that the
  units or the noise band cannot support is *undecided* (perfsuite.stats.verdict: exit 5, never
  1); a change within the threshold is *same* when its interval lies within the threshold or the
  noise band (the wider), else undecided;
- and never slower or faster while the machine-speed reference moved between the two runs by
  more than the difference itself: the machine changed more than the code could be seen to
  (issue 36: two runs of one commit two minutes apart, the reference 39% apart, were called
  1.57x slower). The case is undecided and says so.

Records with one build in one process (versions 1 and 2) have no units: they are compared on
their raw samples as before (bootstrap interval of the ratio of medians, Mann-Whitney U), with
the noise band of whichever side has units, and a warning that the verdict cannot see the
variation between runs.

How the two sides were measured (record.conditions) is judged too. Different torch thread
counts refuse the comparison, like a different torch (`--allow-env-mismatch` overrides): the
step itself costs something else. Everything else only warns, one line per case: a different
number of processes (the same step, but the intervals mean different things), different CPUs
or pinning, hypervisor steal or other processes busy during either timed region, and a record
that does not say how it was measured (schema 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from perfsuite.compare import work as work_kind
from perfsuite.core import documents
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record, reference_ratios
from perfsuite.measuring import fingerprint as envmod
from perfsuite.measuring import system
from perfsuite.stats import summary as stats
from perfsuite.stats import verdict as words

VERDICTS = words.WORDS


@documents.shape("case comparison", frozen=True)
class CaseComparison(documents.Result):
    label: str
    base_median_s: float
    new_median_s: float
    ratio: float  # new / base: > 1 means slower
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    warnings: tuple[str, ...] = ()  # why the two sides may not be comparable
    basis: str = "samples"  # what was compared: raw samples, or process/build medians (N vs M)
    noise: float = 0.0  # the noise band: what separate runs of unchanged code differ by, as a fraction
    drift: float = 0.0  # what each run's centre moves by between runs (95% half-width) in that band
    base_runs: int = 1  # base runs of the case the drift was learned from (1: none, run_drift used)
    # new / base of the machine-speed reference (perfsuite.measuring.reference) when both records
    # carry one: how much slower the machine ran for new. The ratio is then per reference time.
    machine: float | None = None
    # What kind of change (perfsuite.compare.work): from the two records' work signatures, exact.
    work: str = work_kind.UNKNOWN
    work_changes: tuple[str, ...] = ()  # "+3 aten.cumsum.default (64x8192) float32", largest first
    environment_changed: bool = False  # the fingerprints or the numerics flags differ (allowed)

    def what_changed(self) -> str:
        """The kind of change in words (perfsuite.compare.work.said)."""
        return work_kind.said(self.work, self.work_changes, self.verdict, self.environment_changed)


def verdict(ratio: float, ci: tuple[float, float], p: float, threshold: float, alpha: float, noise: float = 0.0) -> str:
    """`threshold` is the smallest change that matters; `noise` the band separate runs of
    unchanged code stay within: a change inside it is undecided however significant."""
    significant = p < alpha and (ci[0] > 1.0 or ci[1] < 1.0)
    if ratio > 1.0 + threshold:
        return words.SLOWER if significant and ci[0] > 1.0 and ratio > 1.0 + noise else words.UNDECIDED
    if ratio < 1.0 / (1.0 + threshold):
        return words.FASTER if significant and ci[1] < 1.0 and ratio < 1.0 / (1.0 + noise) else words.UNDECIDED
    # Same only when the interval says so too, within the threshold or the noise band, whichever
    # is wider (a ratio of 1.043 with an interval up to 1.19 is not "same": issue 36).
    band = 1.0 + max(threshold, noise)
    return words.SAME if 1.0 / band <= ci[0] and ci[1] <= band else words.UNDECIDED


def machine_moved(c: CaseComparison, base: Record, new: Record) -> str | None:
    """Why a slower/faster verdict cannot stand: the machine-speed reference (the same kernel,
    timed in both runs) moved by more than the difference. None when it did not, or either
    record lacks the reference."""
    rb, rn = base.conditions.get("reference"), new.conditions.get("reference")
    if (
        c.verdict not in (words.SLOWER, words.FASTER)
        or not rb
        or not rn
        or base.reference_kernel != new.reference_kernel
    ):
        return None
    if base.relative_units() is None or new.relative_units() is None:  # a process's reference too short to read
        return None
    mb, mn = base.reference_median_s, new.reference_median_s
    assert mb is not None and mn is not None  # both carry a reference (above)
    m = mn / mb
    if not (m > 0 and math.isfinite(m)) or abs(math.log(m)) < abs(math.log(c.ratio)):
        return None
    return (
        f"undecided rather than {c.verdict}: the machine itself ran {abs(m - 1):.0%} "
        f"{'slower' if m > 1 else 'faster'} for new (the machine-speed reference kernel, timed in both runs), "
        f"more than the {abs(c.ratio - 1):.0%} difference; separate runs on a machine that moved this much "
        "cannot show it: measure both in one interleaved `perfsuite gate`, or again on a quieter machine"
    )


def _log_sd(units: list[float] | None) -> float | None:
    if not units or len(units) < 2:
        return None
    return float(np.std(np.log(np.asarray(units, dtype=float)), ddof=1))


def _centre_var(units: list[float] | None, independent: bool) -> float | None:
    """Variance of a run's log centre from its units' spread (see the module's docstring)."""
    sd = _log_sd(units)
    if sd is None or units is None:  # (sd is None without units)
        return None
    return sd**2 / len(units) if independent else sd**2


def noise_band(
    base_units: list[float] | None,
    new_units: list[float] | None,
    floor: float = 0.0,
    independent: tuple[bool, bool] = (False, False),
    drift: float = 0.0,
) -> float:
    """What two separate runs of unchanged code differ by, as a fraction: exp(2 sd) - 1, with sd
    the SD of the difference of the two runs' log centres (a side without units borrows the
    other's), never below a learned noise `floor`. `independent`, per side: whether its units are
    processes (their mean's variance falls with their number) or builds of one process. `drift`
    (RunConfig.run_drift, a 95% half-width) is what each run's centre moves with the machine's
    state, which neither record can see: added for both sides."""
    vs = [v for v in (_centre_var(base_units, independent[0]), _centre_var(new_units, independent[1])) if v is not None]
    d2 = 2 * (math.log1p(drift) / 2.0) ** 2  # two runs' drift, each as an SD (95% half-width / 2)
    if not vs:
        return max(floor, math.exp(2.0 * math.sqrt(d2)) - 1.0) if drift else floor
    var = sum(vs) * (2 / len(vs)) + d2
    return max(floor, math.exp(2.0 * math.sqrt(var)) - 1.0)


MIN_RUNS_TO_LEARN = stats.MIN_RUNS_FOR_DRIFT


def learned_drift(runs: list[Record], relative: bool = False, per_sample: bool = True) -> float | None:
    """What separate runs of the same code moved by, learned from several base runs of one case: a
    95% half-width (as RunConfig.run_drift), t(0.975, K-1) SDs of their K log medians (the t
    quantile widens it for a few runs' uncertain SD). None below MIN_RUNS_TO_LEARN runs. The runs'
    medians carry their own sampling noise too: what a run's centre moves by, all of it."""
    centres = [_centre(r, relative, per_sample) for r in runs]
    medians = [m for m in centres if m and m > 0 and math.isfinite(m)]
    if len(medians) < MIN_RUNS_TO_LEARN:
        return None
    return stats.drift_halfwidth(medians)


def _centre(r: Record, relative: bool, per_sample: bool = True) -> float | None:
    """A run's centre: its median in seconds, or the median of its units per the machine-speed
    reference (a record in one build of one process: its per-sample ratio, or its median over the
    reference's)."""
    if not relative:
        return r.median_s
    units = r.relative_units(per_sample)
    if units and r.units():
        return stats.median(units)
    ref = r.conditions.get("reference")
    ref_median = r.reference_median_s  # None exactly when there is no reference
    if not ref or ref_median is None:
        return None
    ratio = reference_ratios(ref)[0]
    return ratio if per_sample and ratio else r.median_s / ref_median


def compare_units(
    label: str,
    base: list[float],
    new: list[float],
    threshold: float = 0.05,
    alpha: float = 0.01,
    floor: float = 0.0,
    independent: tuple[bool, bool] = (False, False),
    drift: float = 0.0,
) -> CaseComparison:
    """Two records' units (process or build medians, two or more a side) compared."""
    ratio, ci, p = stats.log_ratio_test(base, new)
    noise = noise_band(base, new, floor, independent, drift)
    return CaseComparison(
        label,
        stats.median(base),
        stats.median(new),
        ratio,
        ci[0],
        ci[1],
        p,
        verdict(ratio, ci, p, threshold, alpha, noise),
        noise=noise,
    )


def compare_samples(
    label: str,
    base: list[float],
    new: list[float],
    threshold: float = 0.05,
    alpha: float = 0.01,
    seed: int = 0,
    noise: float = 0.0,
) -> CaseComparison:
    """Raw samples compared (records without units): bootstrap interval, Mann-Whitney U."""
    mb, mn = stats.median(base), stats.median(new)
    ratio = mn / mb
    ci = stats.bootstrap_ratio_ci(base, new, seed=seed)
    p = stats.mann_whitney_p(base, new)
    return CaseComparison(
        label, mb, mn, ratio, ci[0], ci[1], p, verdict(ratio, ci, p, threshold, alpha, noise), noise=noise
    )


@dataclass(frozen=True)
class Comparison:
    cases: list[CaseComparison]
    only_base: list[str]
    only_new: list[str]

    @property
    def regressed(self) -> bool:
        return any(c.verdict == words.SLOWER for c in self.cases)

    @property
    def exit_code(self) -> int:
        """1 on a slower case; else 5 when a case is undecided; else 0 (perfsuite.stats.verdict)."""
        return words.exit_code([c.verdict for c in self.cases])


def _side(name: str, cond: dict) -> list[str]:
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
        return [], [
            f"{' and '.join(missing)} does not record how it was measured (schema 1): "
            "processes, CPUs, threads and steal cannot be checked"
        ]
    refusals, warnings = [], []
    if cb.get("torch_threads") != cn.get("torch_threads"):
        refusals.append(f"torch threads: {cb.get('torch_threads')} vs {cn.get('torch_threads')}")
    # The numerics flags change which kernels run (issue 54: fp32 matmuls with TF32 allowed against
    # a base without it read as a code speed-up of up to 7x on an H100); records of before
    # 2026-11-28 did not keep them, and are not judged on them.
    fb, fn = cb.get("torch_flags") or {}, cn.get("torch_flags") or {}
    if fb and fn:
        differ = [f"{k} {fb.get(k)!r} vs {fn.get(k)!r}" for k in sorted(set(fb) | set(fn)) if fb.get(k) != fn.get(k)]
        if differ:
            refusals.append("torch flags: " + ", ".join(differ))
    if cb.get("processes", 1) != cn.get("processes", 1):
        warnings.append(
            f"measured in {cb.get('processes', 1)} vs {cn.get('processes', 1)} process(es): "
            "only a multi-process interval includes the between-process spread"
        )
    if cb.get("heap", "default") != cn.get("heap", "default"):
        warnings.append(
            f"heap {cb.get('heap', 'default')} vs {cn.get('heap', 'default')}: page faults are "
            "inside one side's step time only, and a held heap keeps freed memory and a 256 MiB "
            "reserve resident, so host memory figures differ too"
        )
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
    floors: dict[str, float] | None = None,
) -> Comparison:
    """Match records by case (workload, params, device) and compare each pair. `floors` are
    learned noise floors by case label (`perfsuite gate --learn-floor`), fractions. A case the
    base holds several runs of is compared on its last, and judged against the drift between
    them (learned_drift) when it is larger than the records' own run_drift."""
    if threshold <= 0:
        raise RecordError(f"threshold must be positive, got {threshold}")
    base_runs: dict[tuple, list[Record]] = {}
    for r in base:
        base_runs.setdefault(r.case_key(), []).append(r)
    # With repeated cases, the last record of a case is the one compared (a re-measure); the
    # base's earlier runs say how much separate runs differ.
    b = {k: runs[-1] for k, runs in base_runs.items()}
    n = {r.case_key(): r for r in new}
    cases = []
    for key in [k for k in n if k in b]:
        rb, rn = b[key], n[key]
        if rb.id == rn.id and rb.samples_s == rn.samples_s:  # `compare store:HEAD store:HEAD`
            raise RecordError(
                f"{rn.label()}: base and new are the same record ({rn.id}): comparing it with itself "
                "says nothing; give two runs (two results files, or store: sources that select different runs)"
            )
        refusals, warnings = measurement_differences(rb, rn)
        diff = (envmod.mismatches(rb.env, rn.env) if rb.env and rn.env else []) + refusals
        if not allow_env_mismatch:
            if diff:
                raise RecordError(
                    f"{rn.label()}: environments differ ({'; '.join(diff)}); "
                    "pass --allow-env-mismatch to compare anyway"
                )
        warnings = refusals + warnings  # allowed, but still said
        floor = (floors or {}).get(rn.label(), 0.0)
        drift = max(rb.config.get("run_drift") or 0.0, rn.config.get("run_drift") or 0.0)
        # Earlier base runs teach the drift only when measured like the one compared: another
        # thread count or environment is another step, whose difference is not noise.
        alike = [
            r
            for r in base_runs[key][:-1]
            if not measurement_differences(r, rb)[0] and not (r.env and rb.env and envmod.mismatches(r.env, rb.env))
        ]
        if len(alike) < len(base_runs[key]) - 1:
            warnings.append(
                f"{len(base_runs[key]) - 1 - len(alike)} earlier base run(s) measured unlike the last "
                "(threads or environment) were left out of the drift between runs"
            )
        # Per reference time when both sides carry the machine-speed reference (the same kernel):
        # the machine's drift between the runs divides out (perfsuite.measuring.reference).
        # Sample by sample when every record involved carries it; else all in the older unit (a
        # process median over its reference median), never the two units mixed in one verdict.
        per_sample = all(r.sample_ratios for r in (*alike, rb, rn))
        rel_b, rel_n = rb.relative_units(per_sample), rn.relative_units(per_sample)
        relative = bool(rel_b and rel_n and rb.reference_kernel == rn.reference_kernel)
        if not relative and (rel_b or rel_n):
            warnings.append(
                "only one side timed the machine-speed reference (or their kernels differ): compared "
                "in seconds, which the machine's drift between runs moves"
            )
        if not relative:  # in seconds, the machine's own drift between runs is noise too
            drift = max(drift, rb.machine_drift, rn.machine_drift)
        learned = learned_drift(
            [*alike, rb],
            relative=relative and all(r.reference_kernel == rb.reference_kernel for r in alike),
            per_sample=per_sample,
        )
        runs_used = 1
        if learned is not None and learned > drift:
            drift, runs_used = learned, len(alike) + 1
        ub, un = rb.units(), rn.units()
        if ub and un:
            kinds = [f"{'process' if r.processes else 'build'} medians" for r in (rb, rn)]
            basis = (
                f"{kinds[0]} ({len(ub)} vs {len(un)})"
                if kinds[0] == kinds[1]
                else f"{kinds[0]} ({len(ub)}) vs {kinds[1]} ({len(un)})"
            )
            if relative and rel_b and rel_n:  # (relative: both are there)
                c = compare_units(
                    rn.label(),
                    rel_b,
                    rel_n,
                    threshold,
                    alpha,
                    floor,
                    independent=(bool(rb.processes), bool(rn.processes)),
                    drift=drift,
                )
                ref_b, ref_n = rb.reference_median_s, rn.reference_median_s
                assert ref_b is not None and ref_n is not None  # relative units come from both references
                machine = ref_n / ref_b
                c = replace(c, base_median_s=stats.median(ub), new_median_s=stats.median(un), machine=machine)
                basis += (
                    f" per reference-kernel time (the reference ran {abs(machine - 1):.1%} "
                    f"{'slower' if machine >= 1 else 'faster'} for new)"
                )
            else:
                c = compare_units(
                    rn.label(),
                    ub,
                    un,
                    threshold,
                    alpha,
                    floor,
                    independent=(bool(rb.processes), bool(rn.processes)),
                    drift=drift,
                )
        else:
            basis = "samples"
            missing = [name for name, u in (("base", ub), ("new", un)) if not u]
            warnings.append(
                f"{' and '.join(missing)} {'were' if len(missing) == 2 else 'was'} measured in one build "
                "in one process: the verdict rests "
                "on samples that cannot see the variation between runs"
            )
            c = compare_samples(
                rn.label(),
                list(rb.samples_s),
                list(rn.samples_s),
                threshold,
                alpha,
                noise=noise_band(ub, un, floor, (bool(rb.processes), bool(rn.processes)), drift),
            )
        if runs_used > 1:
            basis += f"; separate runs differ by ±{drift:.1%} (learned from {runs_used} base runs)"
        moved = machine_moved(c, rb, rn)
        if moved:
            c = replace(c, verdict=words.UNDECIDED)
            warnings.append(moved)
        kind, changes = work_kind.change(rb.signature, rn.signature, rb.instructions, rn.instructions)
        cases.append(
            replace(
                c,
                warnings=tuple(warnings),
                basis=basis,
                drift=drift,
                base_runs=runs_used,
                work=kind,
                work_changes=tuple(changes),
                environment_changed=bool(diff),
            )
        )
    return Comparison(
        cases=cases,
        only_base=[b[k].label() for k in b if k not in n],
        only_new=[n[k].label() for k in n if k not in b],
    )
