"""Training set-ups by workload name: model parts, forward and a batch source, for the paired
precision comparison and the resume test (the benchmark steps reuse the same builders)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from perfsuite.errors import ConfigError
from perfsuite.training.step import TrainParts


@dataclass
class TrainingSetup:
    parts: TrainParts
    forward: Callable
    batch: Callable[[int], tuple]  # i -> (x, y): the same i gives the same batch on every run


def _batches(batch_size: int, device: str, autoencoder: bool, channels_last: bool = False):
    from perfsuite.data.cifar import synthetic_cifar10, to_tensors

    def batch(i: int):
        images, labels = synthetic_cifar10(batch_size, seed=1000 + i)
        x, y = to_tensors(images, labels, device, normalize=not autoencoder, channels_last=channels_last)
        return (x, x) if autoencoder else (x, y)

    return batch


def training_setup(workload: str, params: Mapping[str, Any], device: str, seed: int = 0,
                   lr_scale: float = 1.0) -> TrainingSetup:
    """Built with the torch RNG seeded by `seed`: the same seed gives the same initial weights.
    `lr_scale` exists for tests that need a deliberately broken run."""
    import torch

    from perfsuite import registry

    params = registry.get(workload).resolve(params)
    torch.manual_seed(seed)
    if workload == "resnet":
        from perfsuite.workloads import resnet

        parts = resnet.build_parts(params, device)
        batch = _batches(params["batch_size"], device, False, params["channels_last"])
        forward = parts.model
    elif workload == "autoencoder":
        import torch.nn.functional as F

        from perfsuite.training.precision import Precision
        from perfsuite.workloads import autoencoder

        model = autoencoder.build_model(params["variant"]).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        parts = TrainParts(model, lambda recon, x: F.mse_loss(recon.float(), x), opt, None,
                           Precision(params["precision"], device))

        def forward(x):
            return model["decoder"](model["encoder"](x))

        batch = _batches(params["batch_size"], device, True)
    else:
        raise ConfigError(f"workload {workload!r} is not a training workload (resnet, autoencoder)")
    for group in parts.optimizer.param_groups:
        group["lr"] *= lr_scale
        if "initial_lr" in group:
            group["initial_lr"] *= lr_scale
    if parts.scheduler is not None and lr_scale != 1.0:
        parts.scheduler.base_lrs = [lr * lr_scale for lr in parts.scheduler.base_lrs]
    return TrainingSetup(parts, forward, batch)


def train_losses(setup: TrainingSetup, start: int, stop: int, fixed_batch: bool = False) -> list[float]:
    """Run steps start..stop-1, step i on batch i (or all on batch 0); the losses, read after
    each step (this is not a timed loop)."""
    from perfsuite.training.step import make_train_step

    losses = []
    for i in range(start, stop):
        x, y = setup.batch(0 if fixed_batch else i)
        loss = make_train_step(setup.parts, x, y, forward=setup.forward)()
        losses.append(float(loss.detach().float()))
    return losses
