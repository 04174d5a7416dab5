"""Losses at *applied* optimiser steps: how two precisions' training runs are lined up.

fp16's GradScaler starts at scale 65536 and skips every step whose scaled gradients overflow,
halving the scale each time: a ResNet skips its first 4 steps (emulated on CPU), so after N
training steps it has applied N - 4 updates. Compared with fp32 at equal *training* steps its
loss is read at another point of the fall (17.9% apart on CPU, 20.0% on an H100). A skipped step
changes nothing (no update, no scheduler step: Precision.step), so dropping its loss lines the
two runs up. `perfsuite check`'s AMP check and `perfsuite amp`'s accuracy half both compare this
way (perfsuite.training.checks, perfsuite.compare.amp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfsuite.core.errors import PerfsuiteError
from perfsuite.training.setup import TrainingSetup
from perfsuite.training.step import make_train_step


class ScalerDiverged(PerfsuiteError):
    """A GradScaler kept skipping steps after its scale fell below 1: the gradients overflow even
    unscaled, which is divergence, not loss-scale warm-up."""


@dataclass(frozen=True)
class AppliedLosses:
    losses: list[float]  # loss i was computed on the weights after i applied updates
    skipped: int  # training steps the GradScaler skipped on the way (0 without one)
    # What perfsuite.training.agreement checks beside the losses: the loss tensor's dtype and its
    # bits, the parameters left without a non-zero gradient by the first applied step, and
    # whether a GradScaler scaled the loss.
    loss_dtype: str = "float32"
    loss_bits: int = 32
    without_grad: tuple[str, ...] = ()
    scaled: bool = False


def max_skips(scaler) -> int:
    """How many skipped steps are warm-up: from its initial scale, that many halvings bring the
    scale below 1, and a step that still overflows then overflows unscaled."""
    return 0 if scaler is None else max(0, math.ceil(math.log2(scaler.get_scale()))) + 1


def losses_at_applied_steps(setup: TrainingSetup, steps: int, label: str) -> AppliedLosses:
    """Train `setup` (a perfsuite.training.setup.TrainingSetup) on its fixed batch 0 until the
    optimiser has *applied* `steps` updates; the loss of each applied step and how many steps the
    GradScaler skipped. Raises ScalerDiverged (its message starts with `label`) past max_skips.

    A skip is read from the scale, as GradScaler.update defines it: halved exactly when an inf/NaN
    was found and the step skipped (it only grows otherwise). This reads the device after every
    step, which is fine here: nothing is timed."""
    scaler = setup.parts.precision.scaler
    bound = max_skips(scaler)
    step = make_train_step(setup.parts, *setup.batch(0), forward=setup.forward)
    losses: list[float] = []
    skipped = 0
    dtype = None
    without_grad: tuple[str, ...] = ()
    while len(losses) < steps:
        before = scaler.get_scale() if scaler is not None else 0.0  # (read only with a scaler)
        out = step()
        loss = float(out.detach().float())
        if scaler is not None and scaler.get_scale() < before:
            skipped += 1
            if skipped > bound:
                raise ScalerDiverged(
                    f"{label}: the GradScaler skipped {skipped} steps (scale now "
                    f"{scaler.get_scale():g}): its gradients overflow even unscaled"
                )
            continue
        if not losses:
            dtype, without_grad = out.dtype, _without_grad(setup.parts.model)
        losses.append(loss)
    import torch

    dtype = dtype or torch.float32
    return AppliedLosses(
        losses,
        skipped,
        str(dtype).removeprefix("torch."),
        torch.finfo(dtype).bits if dtype.is_floating_point else 0,
        without_grad,
        scaler is not None,
    )


def _without_grad(model) -> tuple[str, ...]:
    """Trainable parameters whose gradient after the last step is missing or all zero."""
    return tuple(
        name
        for name, p in model.named_parameters()
        if p.requires_grad and (p.grad is None or not bool(p.grad.detach().ne(0).any()))
    )


def final_loss(losses: list[float]) -> float:
    """What the comparison calls the final loss: the mean of the last 5 steps."""
    tail = min(5, len(losses))
    return sum(losses[-tail:]) / tail
