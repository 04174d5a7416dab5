"""Does a low precision keep the loss? One rule for `perfsuite check`'s AMP check and `perfsuite amp`.

Until issue 55 both asked whether the final losses (mean of the last 5) of fp32 and bf16 were
within 5% after 12 (or 30) applied steps from the same weights on the same batch. On a CPU with
bf16 in hardware (AMX) a healthy ResNet18 ended 5.5% apart, every time, and `make bench` failed;
on CPUs that emulate bf16 the same runs happened to end closer. A fixed tolerance on a freshly
initialised network is not a statement about the precision: two fp32 runs whose weights differ by
bf16's rounding (one part in 256) ended 1-15% apart per step here, because early training
amplifies any perturbation (reports/amp-check/).

So the tolerance is measured, not assumed. Beside the reference run (fp32) and the low-precision
run, PERTURBED_RUNS fp32 runs start from the reference weights each multiplied by (1 + u z), u the
low precision's unit roundoff and z standard normal (a seed each): how far *precision alone*
moves this model's trajectory on this machine. The low-precision run keeps the loss when its
trajectory's distance from the reference (the mean relative difference of the losses at each
applied step after the first) is within ENVELOPE_FACTOR times the farthest perturbed run, and
never less than a floor.

A trajectory cannot see every AMP defect (a loss computed in bf16 trains nearly alike), so three
properties of the low-precision run are checked directly:
- its loss has as many bits as the reference's (autocast computes losses in fp32);
- every parameter that gets a non-zero gradient in the reference gets one (a cast or a detach
  that drops gradients);
- fp16 trains with a GradScaler (fp16 gradients below 6e-5 lose bits and below 6e-8 vanish).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.training.applied import AppliedLosses, losses_at_applied_steps
from perfsuite.training.setup import TrainingSetup, training_setup

# Unit roundoff (half an ulp of 1) of each precision's significand: the size of the perturbation
# that stands for "this precision's rounding".
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "bf16": 2.0**-8, "fp16": 2.0**-11}
PERTURBED_RUNS = 3
# The low-precision run may wander this many times as far as the farthest perturbed fp32 run:
# with 3 perturbed runs the farthest of them is itself a noisy estimate of the spread (a ResNet18's
# ranged 0.08-0.14 over six seeds; bf16 read 0.094).
ENVELOPE_FACTOR = 2.0
# The least distance allowed, for a model whose perturbed runs stay almost on the reference (a
# small autoencoder: 0.1% apart) and whose low precision still moves a little more.
DEFAULT_FLOOR = 0.02


def trajectory_distance(losses: list[float], reference: list[float]) -> float:
    """Mean relative difference of the losses at each applied step after the first (the first is
    the same weights, only the forward's precision differs); inf when either is not finite."""
    pairs = list(zip(losses, reference))[1:] or list(zip(losses, reference))
    if not pairs or not all(math.isfinite(a) and math.isfinite(b) for a, b in pairs):
        return math.inf
    return sum(abs(a - b) / max(abs(b), 1e-12) for a, b in pairs) / len(pairs)


def perturb_weights(setup: TrainingSetup, size: float, seed: int) -> None:
    """Multiply every floating-point parameter by (1 + size z), z standard normal from `seed`."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in setup.parts.model.parameters():
            if p.is_floating_point():
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p.device, p.dtype)
                p.mul_(1 + size * noise)


@dataclass(frozen=True)
class LossAgreement:
    """The reference and low-precision runs, the perturbed runs' distances and the verdict."""

    reference_precision: str
    precision: str
    steps: int
    reference: AppliedLosses
    candidate: AppliedLosses
    distance: float  # the candidate's trajectory against the reference's
    noise: tuple[float, ...]  # each perturbed reference run's distance
    floor: float

    @property
    def allowed(self) -> float:
        return max(ENVELOPE_FACTOR * max(self.noise, default=0.0), self.floor)

    @property
    def problems(self) -> list[str]:
        """What is wrong with the low-precision run whatever its trajectory, in words."""
        out = []
        ref, low = self.reference, self.candidate
        if low.loss_bits < ref.loss_bits:
            out.append(
                f"the loss is computed in {low.loss_dtype}, {self.reference_precision}'s in {ref.loss_dtype}: "
                f"compute it in float32 (autocast does for its loss functions; cast the logits with .float())"
            )
        lost = [n for n in low.without_grad if n not in ref.without_grad]
        if lost:
            shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
            out.append(
                f"{len(lost)} parameter(s) get no gradient in {self.precision} that do in "
                f"{self.reference_precision}: {shown}"
            )
        if self.precision == "fp16" and not low.scaled:
            out.append("fp16 trains without a GradScaler: gradients below 6e-5 lose bits and below 6e-8 vanish")
        return out

    @property
    def ok(self) -> bool:
        return not self.problems and self.distance <= self.allowed

    def describe(self) -> str:
        """One line: the distance against what precision alone explains, and any problem."""
        skips = f"; {self.precision}'s GradScaler skipped {self.candidate.skipped}" if self.candidate.skipped else ""
        noise = ", ".join(f"{d:.1%}" for d in self.noise)
        line = (
            f"{self.precision} {self.distance:.1%} from {self.reference_precision} over {self.steps} applied "
            f"steps{skips}, allowed {self.allowed:.1%} ({self.reference_precision} with its weights "
            f"perturbed by {self.precision}'s rounding: {noise}; x{ENVELOPE_FACTOR:g}, floor {self.floor:.0%})"
        )
        return "; ".join([line, *self.problems])


def loss_agreement(
    workload: str,
    params: Mapping[str, Any],
    device: str,
    precision: str,
    steps: int,
    *,
    reference_precision: str = "fp32",
    setup_b: Callable[..., TrainingSetup] | None = None,
    seed: int = 1,
    floor: float = DEFAULT_FLOOR,
    perturbed_runs: int = PERTURBED_RUNS,
) -> LossAgreement:
    """Train the reference, the low precision (`setup_b` builds it: tests break it on purpose) and
    `perturbed_runs` perturbed references from the same initial weights (`seed`) on the same fixed
    batch to `steps` applied steps each. Raises ScalerDiverged when a GradScaler never stops skipping."""

    def build(prec: str) -> TrainingSetup:
        return training_setup(workload, {**params, "precision": prec}, device, seed=seed)

    ref = losses_at_applied_steps(build(reference_precision), steps, reference_precision)
    low_setup = (setup_b or (lambda p, d, s: training_setup(workload, p, d, s)))(
        {**params, "precision": precision}, device, seed
    )
    low = losses_at_applied_steps(low_setup, steps, precision)
    size = max(UNIT_ROUNDOFF.get(precision, 0.0), UNIT_ROUNDOFF.get(reference_precision, 0.0))
    noise = []
    for k in range(perturbed_runs):
        s = build(reference_precision)
        perturb_weights(s, size, seed=k)
        noise.append(trajectory_distance(losses_at_applied_steps(s, steps, reference_precision).losses, ref.losses))
    return LossAgreement(
        reference_precision,
        precision,
        steps,
        ref,
        low,
        trajectory_distance(low.losses, ref.losses),
        tuple(noise),
        floor,
    )
