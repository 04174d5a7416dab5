"""One training step as a closure over a model, its optimiser and a batch already on the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from perfsuite.training.precision import Precision


@dataclass
class TrainParts:
    model: object
    loss_fn: Callable
    optimizer: object
    scheduler: object | None
    precision: Precision


def make_train_step(parts: TrainParts, x, y, forward: Callable | None = None) -> Callable[[], object]:
    """forward + loss + backward + optimiser step (+ scheduler step). Returns the loss tensor
    without `.item()`: reading it would synchronise the device inside the timed region."""
    model, loss_fn, opt, sched, prec = parts.model, parts.loss_fn, parts.optimizer, parts.scheduler, parts.precision
    fwd = forward or model

    def step():
        opt.zero_grad(set_to_none=True)
        with prec.autocast():
            loss = loss_fn(fwd(x), y)
        prec.backward_and_step(loss, opt)
        if sched is not None:
            sched.step()
        return loss

    return step
