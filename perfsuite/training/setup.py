"""Training set-ups by workload name: model parts, forward and a batch source, for the paired
precision comparison and the resume test (the benchmark steps reuse the same builders)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.data.cifar import synthetic_cifar10, to_tensors
from perfsuite.training.step import TrainParts, make_train_step


@dataclass
class TrainingSetup:
    parts: TrainParts
    forward: Callable
    batch: Callable[[int], tuple[Any, Any]]  # i -> (x, y): the same i gives the same batch on every run


def synthetic_batches(batch_size: int, device: str, autoencoder: bool, channels_last: bool = False):
    """i -> (x, y): CIFAR-10-shaped batch i, the same on every run (an autoencoder's target is x)."""

    def batch(i: int):
        images, labels = synthetic_cifar10(batch_size, seed=1000 + i)
        x, y = to_tensors(images, labels, device, normalize=not autoencoder, channels_last=channels_last)
        return (x, x) if autoencoder else (x, y)

    return batch


def training_setup(
    workload: str, params: Mapping[str, Any], device: str, seed: int = 0, lr_scale: float = 1.0
) -> TrainingSetup:
    """Built with the torch RNG seeded by `seed`: the same seed gives the same initial weights.
    `lr_scale` exists for tests that need a deliberately broken run. The workload builds its own
    parts (its `trainer`): this module imports no concrete workload."""
    import torch

    w = registry.get(workload)
    if w.trainer is None:
        trainers = ", ".join(n for n in registry.names() if registry.get(n).trainer is not None)
        raise ConfigError(f"workload {workload!r} is not a training workload ({trainers})")
    params = w.resolve(params)
    torch.manual_seed(seed)
    setup = w.trainer(params, device)
    parts = setup.parts
    for group in parts.optimizer.param_groups:
        group["lr"] *= lr_scale
        if "initial_lr" in group:
            group["initial_lr"] *= lr_scale
    if parts.scheduler is not None and lr_scale != 1.0:
        parts.scheduler.base_lrs = [lr * lr_scale for lr in parts.scheduler.base_lrs]
    return setup


def train_losses(setup: TrainingSetup, start: int, stop: int, fixed_batch: bool = False) -> list[float]:
    """Run steps start..stop-1, step i on batch i (or all on batch 0); the losses, read after
    each step (this is not a timed loop)."""
    losses = []
    for i in range(start, stop):
        x, y = setup.batch(0 if fixed_batch else i)
        loss = make_train_step(setup.parts, x, y, forward=setup.forward)()
        losses.append(float(loss.detach().float()))
    return losses
