"""Learning-rate schedule stepped per iteration: linear warm-up, then cosine decay to zero."""

from __future__ import annotations

import math


def warmup_cosine(warmup_steps: int, total_steps: int):
    """LambdaLR factor: 0 -> 1 linearly over `warmup_steps`, then cosine to 0 at `total_steps`."""
    if warmup_steps < 0 or total_steps < 1 or warmup_steps >= total_steps:
        raise ValueError(f"need 0 <= warmup_steps < total_steps, got {warmup_steps}, {total_steps}")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def sgd_nesterov_with_schedule(params, lr: float, warmup_steps: int, total_steps: int):
    """The seed's recipe: SGD, Nesterov momentum 0.9, weight decay 5e-4, warm-up + cosine per step."""
    import torch

    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(warmup_steps, total_steps))
    return opt, sched
