"""A regression gate that can see a few percent on a noisy shared machine.

Separate processes differ by up to +-20% here (../shared/ANCHORS.md), so the gate never
compares two runs: it interleaves the two versions of a step in one process, in A B B A
order, block after block, and judges the per-pair time ratios B/A, in which slow drift
cancels. A case is flagged when a one-sided Wilcoxon signed-rank test on the log ratios says
they sit above log(1 + threshold) (p below the Benjamini-Hochberg cut-off across all cases of
the gate), and it fails only if an independent confirmation run flags it again (p < 0.05), so
an unchanged case fails in well under 1% of gates. (A sign test was tried first: with half
the efficiency it caught only 9 of 20 injected 3% slowdowns of the ResNet18 ci step.) The threshold per case is the
larger of the requested effect and the case's noise floor, learned from A-against-A runs of
the unchanged code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from perfsuite import stats
from perfsuite.interleave import interleaved_blocks
from perfsuite.measure.timing import Clock

Step = Callable[[], object]


@dataclass(frozen=True)
class PairedRun:
    ratios: list[float]  # per pair: time_b / time_a
    block_size: int

    @property
    def median(self) -> float:
        return stats.median(self.ratios)

    def p_slower(self, threshold: float) -> float:
        # Log ratios: a slowdown and the matching speed-up are symmetric around 0.
        return stats.signed_rank_greater([math.log(r) for r in self.ratios], math.log1p(threshold))


def paired_ratios(step_a: Step, step_b: Step, clock: Clock, budget_s: float, block_s: float = 0.05) -> PairedRun:
    """Interleave A and B (A B, then B A, ...) for `budget_s`; blocks of about `block_s` each.

    Both steps are warmed first (one block each). Blocks are short so that drift within a
    pair stays small; each pair gives one ratio."""
    t = clock.time_block(step_a, 1)
    clock.time_block(step_b, 1)
    n = max(1, int(block_s / max(t, 1e-9)))
    for s in (step_a, step_b):  # warm both at the block size
        clock.time_block(s, n)
    ta, tb = interleaved_blocks(step_a, step_b, clock, n, budget_s=budget_s)
    ratios = [b / a for a, b in zip(ta, tb)]
    return PairedRun(ratios, n)


def noise_floor(build: Callable[[], Step], clock: Clock, runs: int = 5, budget_s: float = 3.0) -> float:
    """How far the median pair ratio of the unchanged code against itself strays from 1: the
    largest |m - 1| over `runs` runs, each of two separate builds (separate builds differ in
    memory placement, which alone can shift a step by a percent). A gate threshold below
    this would flag noise."""
    return max(abs(paired_ratios(build(), build(), clock, budget_s).median - 1.0) for _ in range(runs))


@dataclass
class GateCase:
    label: str
    step_a: Step
    step_b: Step
    floor: float = 0.0


@dataclass
class GateVerdict:
    label: str
    threshold: float
    first: PairedRun
    p_first: float
    flagged: bool = False
    confirm: PairedRun | None = None
    p_confirm: float | None = None
    slower: bool = False  # flagged by the first run and confirmed by the second
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "label": self.label, "threshold": self.threshold, "median_ratio": self.first.median,
            "p": self.p_first, "flagged": self.flagged,
            "confirm_median_ratio": None if self.confirm is None else self.confirm.median,
            "p_confirm": self.p_confirm, "slower": self.slower, "pairs": len(self.first.ratios),
            "notes": self.notes,
        }


def run_gate(cases: list[GateCase], clock: Clock, threshold: float = 0.0, budget_s: float = 15.0,
             q: float = 0.05, alpha_confirm: float = 0.05) -> list[GateVerdict]:
    """Gate every case: first runs with half the budget, BH across cases, confirmation runs
    (the other half) for the flagged ones only. `threshold` is the smallest slowdown that
    counts (0: any significant slowdown)."""
    if threshold < 0 or budget_s <= 0:
        raise ValueError("threshold must be >= 0 and budget_s > 0")
    verdicts = []
    for c in cases:
        thr = max(threshold, c.floor)
        run = paired_ratios(c.step_a, c.step_b, clock, budget_s / 2)
        verdicts.append(GateVerdict(c.label, thr, run, run.p_slower(thr)))
    rejected = stats.benjamini_hochberg([v.p_first for v in verdicts], q)
    for v, c, rej in zip(verdicts, cases, rejected):
        if not rej:
            continue
        v.flagged = True
        v.confirm = paired_ratios(c.step_a, c.step_b, clock, budget_s / 2)
        v.p_confirm = v.confirm.p_slower(v.threshold)
        v.slower = v.p_confirm < alpha_confirm
        if not v.slower:
            v.notes.append(f"not confirmed: second run's median ratio {v.confirm.median:.3f} (p={v.p_confirm:.2g})")
    return verdicts


def slowed(step: Step, extra: Step, count: int) -> Step:
    """`step` followed by `count` calls of `extra`: an injected slowdown for validating gates."""
    def run():
        step()
        for _ in range(count):
            extra()
    return run


def padding_matmul() -> Step:
    """One 256x256 matmul on preallocated inputs: the unit of an injected slowdown (ANCHORS' W2+x%)."""
    import torch

    a, b = torch.randn(256, 256), torch.randn(256, 256)

    def mm():
        torch.mm(a, b)

    return mm


def injected_slowdown(step: Step, fraction: float, clock: Clock):
    """A copy of `step` slower by about `fraction`, padded with 256x256 matmuls.
    Returns (slowed step, matmuls added, estimated fraction)."""
    mm = padding_matmul()
    t_step = stats.median([clock.time_block(step, 1) for _ in range(15)])
    t_mm = stats.median([clock.time_block(mm, 20) / 20 for _ in range(15)])
    count = max(1, round(fraction * t_step / t_mm))
    return slowed(step, mm, count), count, count * t_mm / t_step


def power_and_false_alarms(build: Callable[[], Step], clock: Clock, fraction: float, trials: int,
                           budget_s: float, threshold: float = 0.0) -> dict:
    """Gate `trials` unchanged and `trials` slowed comparisons, each between two fresh builds;
    the rates the gate achieves."""
    _, count, est = injected_slowdown(build(), fraction, clock)
    mm = padding_matmul()
    caught = false = 0
    for _ in range(trials):
        (v_same,) = run_gate([GateCase("same", build(), build())], clock, threshold, budget_s)
        (v_slow,) = run_gate([GateCase("slow", build(), slowed(build(), mm, count))], clock, threshold, budget_s)
        false += v_same.slower
        caught += v_slow.slower
    return {"fraction_requested": fraction, "matmuls_added": count, "fraction_estimated": est,
            "trials": trials, "budget_s": budget_s, "power": caught / trials, "false_alarm_rate": false / trials,
            "caught": caught, "false_alarms": false}


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a rate k/n (Wilson score), for reporting power and false-alarm rates."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))
