"""Autoencoder training step (the encoding_101 project): fully connected or convolutional,
optionally annotated with a coloured NVTX hierarchy, plus its validation pass (MAR@5)."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.measure.nvtx import Annotator
from perfsuite.params import Param
from perfsuite.record import Work
from perfsuite.registry import register
from perfsuite.training.precision import PRECISIONS, Precision, check_precision
from perfsuite.workloads.base import BuiltStep, Workload, count_flops, training_bytes

SIZES = ("ci", "cpu", "gpu")
PRESETS = {"ci": {"batch_size": 64}, "cpu": {"batch_size": 256}, "gpu": {"batch_size": 1024}}


def build_model(variant: str):
    """encoder and decoder as separate modules, so each can be annotated."""
    from torch import nn

    if variant == "fc":
        encoder = nn.Sequential(nn.Flatten(), nn.Linear(3072, 1024), nn.ReLU(), nn.Linear(1024, 128))
        decoder = nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 3072), nn.Sigmoid(),
                                nn.Unflatten(1, (3, 32, 32)))
    elif variant == "conv":
        encoder = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(64 * 8 * 8, 128),
        )
        decoder = nn.Sequential(
            nn.Linear(128, 64 * 8 * 8), nn.ReLU(), nn.Unflatten(1, (64, 8, 8)),
            nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 4, stride=2, padding=1), nn.Sigmoid(),
        )
    else:
        raise ValueError(f"variant must be fc or conv, got {variant!r}")
    return nn.ModuleDict({"encoder": encoder, "decoder": decoder})


def make_step(model, optimizer, precision: Precision, batch, annotator: Annotator):
    """One training step with the NVTX hierarchy: Training Step > Data Unpack, Forward Pass >
    (Encoder Forward, Decoder Forward), Loss Computation, Backward Pass, Optimizer Step."""
    import torch.nn.functional as F

    rng = annotator.range
    enc, dec = model["encoder"], model["decoder"]

    def step():
        with rng("Training Step", "training"):
            with rng("Data Unpack", "data"):
                x, _ = batch
            optimizer.zero_grad(set_to_none=True)
            with precision.autocast():
                with rng("Forward Pass", "forward"):
                    with rng("Encoder Forward", "forward"):
                        code = enc(x)
                    with rng("Decoder Forward", "forward"):
                        recon = dec(code)
                with rng("Loss Computation", "loss"):
                    loss = F.mse_loss(recon.float(), x)
            with rng("Backward Pass", "training"):
                precision.backward(loss)
            with rng("Optimizer Step", "training"):
                precision.step(optimizer)
        return loss

    return step


def validation_pass(model, images, labels, annotator: Annotator, k: int = 5) -> dict:
    """Validation > (MAR@k Computation, Visualization): recall of latent codes and a
    reconstruction grid (returned as a tensor; writing it to disk is the caller's business)."""
    import torch
    from torchvision.utils import make_grid

    from perfsuite.metrics import mar_at_k

    with annotator.range("Validation", "validation"), torch.no_grad():
        codes = model["encoder"](images)
        with annotator.range(f"MAR@{k} Computation", "metrics"):
            mar = mar_at_k(codes, labels, k)
        with annotator.range("Visualization", "visualization"):
            recon = model["decoder"](codes[:16])
            grid = make_grid(torch.cat([images[:16], recon]), nrow=16)
    return {"mar": mar, "grid": grid}


def check(params: Mapping[str, Any], device: str) -> None:
    check_precision(params["precision"], device)


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    import torch

    from perfsuite.data.cifar import load_batch

    check(params, device)
    model = build_model(params["variant"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # Autoencoder targets are the pixels themselves, in [0, 1]: not normalised.
    batch = load_batch("", params["batch_size"], device, normalize=False)
    prec = Precision(params["precision"], device)
    step = make_step(model, opt, prec, batch, Annotator(enabled=params["nvtx"] == "on"))
    flops = count_flops(step)  # also the first warm-up step
    nbytes = training_bytes(model, step)
    return BuiltStep(fn=step, work=Work(items_per_step=params["batch_size"], item_unit="images",
                                        flops_per_step=flops, flops_method="FlopCounterMode",
                                        bytes_per_step=nbytes, dtype="fp32" if params["precision"] == "fp32" else params["precision"]))


WORKLOAD = register(
    Workload(
        name="autoencoder",
        description="autoencoder training step on 3x32x32 images, MSE loss, Adam",
        params=(
            Param("size", str, "ci", choices=SIZES, help="preset: ci | cpu | gpu"),
            Param("variant", str, "fc", choices=("fc", "conv"), help="3072-1024-128 MLP or conv"),
            Param("batch_size", int, None, min=1, help="overrides the size preset"),
            Param("precision", str, "fp32", choices=PRECISIONS, help="fp16 needs CUDA"),
            Param("nvtx", str, "off", choices=("on", "off"), help="coloured NVTX hierarchy"),
        ),
        builder=build,
        checker=check,
        presets=PRESETS,
    )
)
