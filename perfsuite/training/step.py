"""One training step as a closure over a model, its optimiser and a batch already on the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ContextManager

from perfsuite.training.precision import Precision


@dataclass
class TrainParts:
    model: object
    loss_fn: Callable
    optimizer: object
    scheduler: object | None
    precision: Precision


PHASES = ("forward", "loss", "backward", "optimizer_step")


def make_train_step(parts: TrainParts, x, y, forward: Callable | None = None,
                    phase: Callable[[str], ContextManager] | None = None,
                    mark_zero_grad: bool = False) -> Callable[[], object]:
    """forward + loss + backward + optimiser step (+ scheduler step). Returns the loss tensor
    without `.item()`: reading it would synchronise the device inside the timed region.

    `phase(name)` wraps each of PHASES (NVTX ranges for Nsight, record_function for
    torch.profiler); without it nothing is added to the step. `mark_zero_grad` also wraps
    releasing the gradients in phase("zero_grad") (the autoencoder's "Memory Ops" range)."""
    model, loss_fn, opt, sched, prec = parts.model, parts.loss_fn, parts.optimizer, parts.scheduler, parts.precision
    fwd = model if forward is None else forward  # not `or`: a compiled module has no truth value
    if phase is None:
        def step():
            opt.zero_grad(set_to_none=True)
            with prec.autocast():
                loss = loss_fn(fwd(x), y)
            # The schedule advances only after a real optimiser step (a GradScaler may skip one).
            if prec.backward_and_step(loss, opt) and sched is not None:
                sched.step()
            return loss

        return step

    def marked_step():
        if mark_zero_grad:
            with phase("zero_grad"):
                opt.zero_grad(set_to_none=True)
        else:
            opt.zero_grad(set_to_none=True)
        with prec.autocast():
            with phase("forward"):
                out = fwd(x)
            with phase("loss"):
                loss = loss_fn(out, y)
        with phase("backward"):
            prec.backward(loss)
        with phase("optimizer_step"):
            if prec.step(opt) and sched is not None:
                sched.step()
        return loss

    return marked_step
