"""Two precisions of one training workload, compared in one process.

Speed: the two steps run interleaved in A B B A order, pair after pair, so machine drift
(which on shared VMs reaches 10-20% between processes) cancels inside each pair; the speed-up
is the median of the per-pair time ratios with its distribution-free 95% interval.
Memory: bytes saved for backward by one step of each (exact on any device), and on CUDA the
allocator's peak. Where the time went: on CUDA each side's step then runs alone under NVML
(host-bound when the GPU sits idle most of it). Accuracy: both train from the same initial
weights on the same batch until each has *applied* N optimiser steps (fp16's GradScaler skips
its first ones: that side trains on, within perfsuite.training.applied.max_skips, and the skips
are counted); the low precision's loss trajectory must stay within what its rounding alone
explains, measured on runs of A from perturbed weights (perfsuite.training.agreement, the rule
`perfsuite check`'s AMP check uses). Fitting one fixed batch is a deterministic, well-conditioned target that both precisions must
reach; on fresh random batches (random labels) the loss of a small-batch ResNet wanders
chaotically and two healthy runs can differ by 50% (seen here), so a tolerance means nothing.
Even on one batch a fixed tolerance was not a statement about the precision (issue 55: a healthy
bf16 ResNet18 ended 5.5% from fp32 on a CPU with AMX, every time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core import documents
from perfsuite.core.bound import Bound, where_time_went
from perfsuite.core.case import Case, Context, Measure
from perfsuite.core.config import RunConfig
from perfsuite.core.documents import Count, Measured, Name, NonNegative, Params, SampleList, Text
from perfsuite.measuring.interleave import interleaved_blocks
from perfsuite.measuring.nvml import NvmlSampler
from perfsuite.measuring.runner import calibrate
from perfsuite.measuring.saved import saved_tensor_bytes
from perfsuite.measuring.system import pinned
from perfsuite.measuring.timing import Clock, clock_for
from perfsuite.stats import summary as stats
from perfsuite.training.agreement import DEFAULT_FLOOR, ENVELOPE_FACTOR, loss_agreement
from perfsuite.training.applied import final_loss
from perfsuite.training.setup import TrainingSetup, training_setup
from perfsuite.training.step import make_train_step

# NVML's utilisation is an average over its last sample period (1/6 s to 1 s by board), and the
# interleaved blocks alternate sides far faster than that: each side is sampled on its own,
# running alone, after running alone long enough that no reading still averages in the other.
UTIL_SETTLE_S = 1.0
UTIL_WINDOW_S = 1.0
_NOT_SAMPLED = {"status": "unavailable", "reason": "not sampled"}


@documents.shape("amp comparison", frozen=True)
class AmpComparison(documents.SuiteEntry):
    DERIVED = {
        "speedup": "speedup",
        "speedup_ci": "speedup_ci",
        "verdict": "worded",
        "accuracy_ok": "accuracy_ok",
        "memory_ratio": "memory_ratio",
        "loss_rel_diff": "loss_rel_diff",
        "bound_a": "bound_a",
        "bound_b": "bound_b",
    }

    workload: Name
    params: Params
    device: Name
    precision_a: Name
    precision_b: Name
    pair_ratios: SampleList  # time_a / time_b per pair: > 1 means b is faster
    time_a_s: SampleList
    time_b_s: SampleList
    saved_bytes_a: Count
    saved_bytes_b: Count
    cuda_peak_a: Count | None
    cuda_peak_b: Count | None
    final_loss_a: Measured
    final_loss_b: Measured
    loss_tolerance: NonNegative
    steps: Count  # optimiser steps each side *applied* before its final loss
    nvml_a: dict = field(default_factory=lambda: dict(_NOT_SAMPLED))  # NvmlSampler summary of A alone
    nvml_b: dict = field(default_factory=lambda: dict(_NOT_SAMPLED))
    # The accuracy check's loss per applied optimiser step, each side (TensorBoard draws them).
    losses_a: list[Measured] = field(default_factory=list)
    losses_b: list[Measured] = field(default_factory=list)
    # Training steps each side's GradScaler skipped (overflowing gradients) on the way to `steps`
    # applied ones; 0 without a scaler, and in documents written before they were counted.
    skipped_a: Count = 0
    skipped_b: Count = 0
    # The agreement rule's measurements (perfsuite.training.agreement): B's trajectory distance from
    # A, each perturbed A run's, and what is wrong with B whatever its trajectory. `loss_tolerance`
    # is then the rule's floor. None: a document written before 2026-11-29, judged by its final losses.
    loss_distance: Measured | None = None
    loss_noise: list[Measured] = field(default_factory=list)
    loss_problems: list[Text] = field(default_factory=list)

    @property
    def bound_a(self) -> Bound:
        return where_time_went(self.device, self.nvml_a)

    @property
    def bound_b(self) -> Bound:
        return where_time_went(self.device, self.nvml_b)

    def bound_line(self) -> str | None:
        """Where each side's time went, in one line; None off CUDA, where there is no verdict."""
        if not self.device.startswith("cuda"):
            return None
        return "; ".join(
            f"{p}: {b.verdict}: {b.reason}"
            for p, b in ((self.precision_a, self.bound_a), (self.precision_b, self.bound_b))
        )

    @property
    def loss_rel_diff(self) -> float:
        if not (math.isfinite(self.final_loss_a) and math.isfinite(self.final_loss_b)):
            return math.inf
        return abs(self.final_loss_b - self.final_loss_a) / max(abs(self.final_loss_a), 1e-12)

    @property
    def loss_allowed(self) -> float:
        """The trajectory distance B may reach: the agreement rule's, or the old final-loss tolerance."""
        if self.loss_distance is None:
            return self.loss_tolerance
        return max(ENVELOPE_FACTOR * max(self.loss_noise, default=0.0), self.loss_tolerance)

    @property
    def accuracy_ok(self) -> bool:
        if self.loss_distance is None:  # written before the agreement rule
            return self.loss_rel_diff <= self.loss_tolerance
        return not self.loss_problems and self.loss_distance <= self.loss_allowed

    def _agreement(self, legacy: str) -> str:
        if self.loss_distance is None:
            return f"{legacy} {self.loss_tolerance:.0%}"
        return (
            f"trajectory {self.loss_distance:.1%} apart, allowed {self.loss_allowed:.1%} from "
            f"{self.precision_a} perturbed by the rounding"
        )

    @property
    def memory_ratio(self) -> float:
        return self.saved_bytes_b / self.saved_bytes_a if self.saved_bytes_a else math.nan

    def _skips(self) -> str:
        """The training steps each side ran beyond the applied ones, its GradScaler having skipped them."""
        said = [
            f"{p} ran {n} more, skipped by its GradScaler"
            for p, n in ((self.precision_a, self.skipped_a), (self.precision_b, self.skipped_b))
            if n
        ]
        return f" ({'; '.join(said)})" if said else ""

    def verdict(self) -> str:
        ci = "" if self.speedup_ci is None else f" (95% CI {self.speedup_ci[0]:.2f}-{self.speedup_ci[1]:.2f})"
        if not self.accuracy_ok:
            return (
                f"{self.precision_b} diverges from {self.precision_a}: final loss {self.final_loss_b:.4g} vs "
                f"{self.final_loss_a:.4g} after {self.steps} applied steps{self._skips()} "
                f"({self._agreement('tolerance')})" + "".join(f"; {p}" for p in self.loss_problems)
            )
        return (
            f"speed-up {self.speedup:.2f}x{ci} of {self.precision_b} over {self.precision_a} at equal loss "
            f"({self.final_loss_b:.4g} vs {self.final_loss_a:.4g} after {self.steps} applied steps{self._skips()}, "
            f"{self._agreement('within')})" + self._scaler_sync()
        )

    def _scaler_sync(self) -> str:
        """What an fp16 step pays on a GPU that bf16's does not (issue 54: the H200's 0.89x fp16
        verdict said nothing of it): GradScaler.step reads its inf check with .item() before an
        optimiser that is not fused, one host synchronisation every step."""
        if "fp16" not in (self.precision_a, self.precision_b) or not self.device.startswith("cuda"):
            return ""
        return (
            "; fp16's GradScaler synchronises with the host every step (its inf check is read before a "
            "non-fused optimiser steps): part of fp16's time here, which a fused optimiser avoids"
        )

    @property
    def speedup(self) -> float:
        """Median of the per-pair time ratios A/B: computed from the raw pairs, never stored alone."""
        return stats.median(self.pair_ratios)

    @property
    def speedup_ci(self) -> tuple[float, float] | None:
        return stats.median_ci(self.pair_ratios)

    @property
    def worded(self) -> str:
        """verdict(), as the document keeps it for its readers."""
        return self.verdict()


def interleaved_times(step_a: Callable, step_b: Callable, clock: Clock, pairs: int, cfg: RunConfig):
    """Warm both, then up to `pairs` pairs of blocks in A B / B A alternation, within
    `cfg.max_time` from the start of warm-up (at least 2 pairs); per-step seconds each, and the
    block size used."""
    start = clock.now()
    n = calibrate([step_a, step_b], clock, cfg).block_size
    left = max(cfg.max_time - (clock.now() - start), 0.0)
    ta, tb = interleaved_blocks(step_a, step_b, clock, n, pairs=pairs, budget_s=left, min_pairs=2)
    return ta, tb, n


def _run_for(step: Callable, clock: Clock, n: int, seconds: float) -> None:
    start = clock.now()
    while clock.now() - start < seconds:
        clock.time_block(step, n)  # blocks as timed: the same synchronisation gaps as the measurement


def side_utilisation(
    step: Callable,
    clock: Clock,
    n: int,
    index: int | None,
    interval_s: float = 0.05,
    settle_s: float = UTIL_SETTLE_S,
    window_s: float = UTIL_WINDOW_S,
) -> dict:
    """NVML summary of GPU `index` while `step` runs alone in blocks of `n`; without NVML (or
    with `index` None: not CUDA) the sampler's "unavailable" summary, and the step never runs."""
    sampler = NvmlSampler(index=index, interval_s=interval_s)
    with sampler:
        if sampler.reason:  # the sampler could not start: nothing to wait for
            return sampler.summary()
        _run_for(step, clock, n, settle_s)
        sampler.samples.clear()  # these readings still average in what ran before this side
        _run_for(step, clock, n, window_s)
    return sampler.summary()


def compare_precisions(
    workload: str,
    params: Mapping[str, Any],
    device: str,
    clock: Clock,
    precision_a: str = "fp32",
    precision_b: str = "bf16",
    pairs: int = 20,
    steps: int = 30,
    loss_tolerance: float = DEFAULT_FLOOR,
    cfg: RunConfig | None = None,
    setup_b: Callable[..., TrainingSetup] | None = None,
) -> AmpComparison:
    """`setup_b` replaces how run B is built (tests use it to break a run on purpose)."""
    import torch

    if pairs < 2 or steps < 5:
        raise ValueError("need at least 2 pairs and 5 steps")
    cfg = cfg or RunConfig(max_time=20.0)
    pa, pb = {**params, "precision": precision_a}, {**params, "precision": precision_b}
    build_b = setup_b or (lambda p, d, seed: training_setup(workload, p, d, seed))

    # Speed and memory on the fixed first batch.
    sa, sb = training_setup(workload, pa, device, seed=0), build_b(pb, device, 0)
    step_a = make_train_step(sa.parts, *sa.batch(0), forward=sa.forward)
    step_b = make_train_step(sb.parts, *sb.batch(0), forward=sb.forward)
    saved_a, saved_b = saved_tensor_bytes(step_a), saved_tensor_bytes(step_b)
    cuda_peaks: list[int | None] = [None, None]
    if device.startswith("cuda"):
        for i, s in enumerate((step_a, step_b)):
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            s()
            torch.cuda.synchronize(device)
            cuda_peaks[i] = torch.cuda.max_memory_allocated(device)
    ta, tb, n = interleaved_times(step_a, step_b, clock, pairs, cfg)
    ratios = [a / b for a, b in zip(ta, tb)]
    index = (torch.device(device).index or 0) if device.startswith("cuda") else None
    nvml_a, nvml_b = (side_utilisation(s, clock, n, index, cfg.nvml_interval) for s in (step_a, step_b))

    # Accuracy: fresh runs from the same initial weights, fitting the same batch, to equal applied
    # steps, beside runs of A from perturbed weights (a GradScaler that never stops skipping raises
    # ScalerDiverged: no final loss to compare).
    agreement = loss_agreement(
        workload,
        params,
        device,
        precision_b,
        steps,
        reference_precision=precision_a,
        setup_b=setup_b,
        floor=loss_tolerance,
    )
    run_a, run_b = agreement.reference, agreement.candidate
    losses_a, losses_b = run_a.losses, run_b.losses
    return AmpComparison(
        workload=workload,
        params=dict(params),
        device=device,
        precision_a=precision_a,
        precision_b=precision_b,
        pair_ratios=ratios,
        time_a_s=ta,
        time_b_s=tb,
        saved_bytes_a=saved_a,
        saved_bytes_b=saved_b,
        cuda_peak_a=cuda_peaks[0],
        cuda_peak_b=cuda_peaks[1],
        final_loss_a=final_loss(losses_a),
        final_loss_b=final_loss(losses_b),
        loss_tolerance=loss_tolerance,
        steps=steps,
        nvml_a=nvml_a,
        nvml_b=nvml_b,
        losses_a=[float(x) for x in losses_a],
        losses_b=[float(x) for x in losses_b],
        skipped_a=run_a.skipped,
        skipped_b=run_b.skipped,
        loss_distance=agreement.distance,
        loss_noise=list(agreement.noise),
        loss_problems=agreement.problems,
    )


@dataclass(frozen=True)
class Amp(Measure):
    """A case measured as a precision comparison (perfsuite.run.execute.check_cases checks both
    precisions before anything runs; the case's max_time bounds the interleaved pairs)."""

    precision_a: str
    precision_b: str
    pairs: int = 20
    steps: int = 30
    loss_tolerance: float = DEFAULT_FLOOR
    kind = "amp"

    def variants(self, case: Case) -> list[dict[str, Any]]:
        return [{**case.params, "precision": p} for p in (self.precision_a, self.precision_b)]

    def measure(self, case: Case, cfg: RunConfig, ctx: Context) -> AmpComparison:
        with pinned(cfg.cpus, cfg.threads_on(cfg.device)):  # the threads a record of this run gets
            return compare_precisions(
                case.workload.name,
                dict(case.params),
                cfg.device,
                ctx.clock or clock_for(cfg.device),
                self.precision_a,
                self.precision_b,
                pairs=self.pairs,
                steps=self.steps,
                loss_tolerance=self.loss_tolerance,
                cfg=cfg,
            )
