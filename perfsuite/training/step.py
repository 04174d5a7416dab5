"""One training step as a closure over a model, its optimiser and a batch already on the device."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite.training.precision import Precision

if TYPE_CHECKING:
    import torch


@dataclass
class TrainParts:
    model: Any  # a torch.nn.Module (a ModuleDict is indexed by its parts)
    loss_fn: Callable
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    precision: Precision


PHASES = ("forward", "loss", "backward", "optimizer_step")


def make_train_step(
    parts: TrainParts,
    x,
    y,
    forward: Callable | None = None,
    phase: Callable[[str], AbstractContextManager] | None = None,
    mark_zero_grad: bool = False,
) -> Callable[[], Any]:
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


# compile=true: one torch.compile per process per (model class, the case's params, device).
# The runner builds a case several times in one process (IN_PROCESS_BUILDS) and keeps the builds
# alive together, rotating between them, each with its own weights and optimiser state: so the
# compiled code is what is shared, not a module (one module re-initialised per build would make
# the builds one). Dynamo keeps its compiled frames on the code object, guarded on the module's
# type and the tensors' shapes, dtypes and devices, not on the module object, so one compiled
# `_call_module` runs every build's own module without tracing again (torch 2.14 on this CPU:
# 3 builds of a ResNet18 step, 1 frame compiled, each build's model freed with its build).
# Worker processes reuse inductor's on-disk caches (FX graph, AOTAutograd, autotuning, Triton:
# TORCHINDUCTOR_CACHE_DIR, by default /tmp/torchinductor_$USER, shared by every process of the
# user and kept between runs): ResNet18 batch 2 in two workers here, the first call took 66 s
# cold in the first and 3.6 s in the second.
_compiled: dict[tuple, Callable] = {}


def _call_module(module, /, *args, **kwargs):  # positional-only: a keyword input named `module` passes through
    return module(*args, **kwargs)


def compiled_forward(model, params: Mapping[str, Any], device: str) -> Callable:
    """`model`'s forward through this process's torch.compile for its class, `params` and
    `device` (made on first use). Compiling happens on the first call, which the runner takes as
    the cold start."""
    import torch

    key = (type(model).__module__, type(model).__qualname__, tuple(sorted(params.items())), str(device))
    if key not in _compiled:
        _compiled[key] = torch.compile(_call_module)
    return functools.partial(_compiled[key], model)
