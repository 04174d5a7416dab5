"""Autoencoder (the encoding_101 project): fully connected or convolutional, optionally annotated
with the seed's coloured NVTX hierarchy.

phase=train: one training step. phase=validate: the validation pass: encode `val_size` images,
MAR@5 of the codes, and a reconstruction grid written to disk (PNG). phase=epoch: `batches`
training steps then the validation pass. data=resident: batches already on the device;
data=host: batches in pinned host memory, copied to the device inside the step under a
"Data Transfer" range (CPU->GPU; on a CPU device the same copy, host to host).

NVTX, by category colour (perfsuite.measuring.nvtx.CATEGORY_COLORS):
  Training Step (training) > Data Transfer (data, host only), Data Unpack (data), Memory Ops
  (memory: releasing the gradients), Forward Pass (forward) > Encoder Forward, Decoder Forward;
  Loss Computation (loss), Backward Pass, Optimizer Step (training)
  Validation (validation) > Data Transfer (host only), MAR@5 Computation (metrics),
  Visualization (visualization)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import perfsuite
from perfsuite.data.cifar import load_batch
from perfsuite.measuring.nvtx import Annotator
from perfsuite.training.checks import TrainingCase, training_checks
from perfsuite.training.evaluation import mar_at_k
from perfsuite.training.precision import PRECISIONS, Precision, check_precision
from perfsuite.training.setup import TrainingSetup, synthetic_batches
from perfsuite.training.step import TrainParts, make_train_step
from perfsuite.workloads.base import count_flops, training_bytes

SIZES = ("ci", "cpu", "gpu")
VARIANTS = ("fc", "conv")
PRESETS = {
    "ci": {"batch_size": 64, "val_size": 256, "batches": 2},
    "cpu": {"batch_size": 256, "val_size": 1000, "batches": 8},
    "gpu": {"batch_size": 1024, "val_size": 1000, "batches": 16},
}


def build_model(variant: str):
    """encoder and decoder as separate modules, so each can be annotated."""
    from torch import nn

    if variant == "fc":
        encoder = nn.Sequential(nn.Flatten(), nn.Linear(3072, 1024), nn.ReLU(), nn.Linear(1024, 128))
        decoder = nn.Sequential(
            nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 3072), nn.Sigmoid(), nn.Unflatten(1, (3, 32, 32))
        )
    elif variant == "conv":
        encoder = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 8 * 8, 128),
        )
        decoder = nn.Sequential(
            nn.Linear(128, 64 * 8 * 8),
            nn.ReLU(),
            nn.Unflatten(1, (64, 8, 8)),
            nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 4, stride=2, padding=1),
            nn.Sigmoid(),
        )
    else:
        raise ValueError(f"variant must be fc or conv, got {variant!r}")
    return nn.ModuleDict({"encoder": encoder, "decoder": decoder})


class HostBatch:
    """A batch in pinned host memory (pinned only where CUDA can use it) and its device buffer:
    `copy()` is the host-to-device transfer a training loop does for every batch."""

    def __init__(self, images, labels, device: str) -> None:
        import torch

        pin = device.startswith("cuda") and torch.cuda.is_available()
        self.host = images.cpu().pin_memory() if pin else images.cpu().clone()
        self.labels = labels.to(device)
        self.device_buf = torch.empty_like(self.host, device=device)

    def copy(self):
        return self.device_buf.copy_(self.host, non_blocking=True), self.labels


# make_train_step's phases -> the seed's NVTX ranges and their colour categories.
PHASE_RANGES = {
    "zero_grad": ("Memory Ops", "memory"),
    "forward": ("Forward Pass", "forward"),
    "loss": ("Loss Computation", "loss"),
    "backward": ("Backward Pass", "training"),
    "optimizer_step": ("Optimizer Step", "training"),
}


def _reconstruction_loss(recon, x):
    # The pixels are the target, in [0, 1]; the loss in fp32 whatever the autocast dtype.
    import torch.nn.functional as F

    return F.mse_loss(recon.float(), x)


def build_parts(params: Mapping[str, Any], device: str) -> TrainParts:
    """Model, loss, Adam and precision: everything but the data."""
    import torch

    model = build_model(params["variant"]).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return TrainParts(model, _reconstruction_loss, opt, None, Precision(params["precision"], device))


def training(device: str, **params):
    """The parts of the step the workload times, with generated batches (the AMP comparison,
    profile-step, trace and the checks build from this)."""
    parts = build_parts(params, device)
    model = parts.model

    def forward(x):
        return model["decoder"](model["encoder"](x))

    return TrainingSetup(parts, forward, synthetic_batches(params["batch_size"], device, True))


def make_step(parts: TrainParts, x, annotator: Annotator, host: HostBatch | None = None):
    """The training step (perfsuite.training.step.make_train_step, the one every command runs)
    with the NVTX hierarchy: Training Step > [Data Transfer], Data Unpack, Memory Ops, Forward
    Pass > (Encoder Forward, Decoder Forward), Loss Computation, Backward Pass, Optimizer Step.
    With `host`, the batch is copied from pinned host memory into `x` first."""
    rng = annotator.range
    enc, dec = parts.model["encoder"], parts.model["decoder"]

    def forward(inp):
        with rng("Encoder Forward", "forward"):
            code = enc(inp)
        with rng("Decoder Forward", "forward"):
            return dec(code)

    inner = make_train_step(
        parts, x, x, forward=forward, phase=lambda name: rng(*PHASE_RANGES[name]), mark_zero_grad=True
    )

    def step():
        with rng("Training Step", "training"):
            if host is not None:
                with rng("Data Transfer", "data"):
                    host.copy()  # into `x`, the step's input and target
            with rng("Data Unpack", "data"):
                pass  # the batch is already (input, target) on the device: the range marks the phase
            return inner()

    return step


def validation_pass(
    model,
    images,
    labels,
    annotator: Annotator,
    k: int = 5,
    host: HostBatch | None = None,
    save_to=None,
    precision: Precision | None = None,
) -> dict:
    """Validation > ([Data Transfer], MAR@k Computation, Visualization): recall of the latent
    codes (perfsuite.training.evaluation.mar_at_k: 1 is the best) and a grid of 16 images over their
    reconstructions, written to `save_to` (a PNG) when given. With `host`, the images are
    copied from pinned host memory first."""
    import contextlib

    import torch
    from torchvision.utils import make_grid, save_image

    autocast = precision.autocast if precision is not None else contextlib.nullcontext
    with annotator.range("Validation", "validation"), torch.no_grad():
        if host is not None:
            with annotator.range("Data Transfer", "data"):
                images, labels = host.copy()
        with autocast():
            codes = model["encoder"](images)
        with annotator.range(f"MAR@{k} Computation", "metrics"):
            mar = mar_at_k(codes, labels, k)
        with annotator.range("Visualization", "visualization"):
            with autocast():
                recon = model["decoder"](codes[:16])
            grid = make_grid(torch.cat([images[:16].float(), recon.float()]), nrow=16)
            if save_to is not None:
                save_image(grid, save_to)
    return {"mar": mar, "grid": grid}


def validate(device: str, **params) -> None:
    check_precision(params["precision"], device)


def ddp_module(setup):
    """The module DDP wraps: the encoder then the decoder (the parameters the set-up's optimiser holds)."""
    from torch import nn

    class EncodeDecode(nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner["decoder"](self.inner["encoder"](x))

    return EncodeDecode(setup.parts.model)


# The small case the training checks build, and their steps (perfsuite/training/checks.py).
TRAINING_CHECKS = TrainingCase("autoencoder", {"variant": "conv", "batch_size": 8}, amp_steps=10, resume_steps=6)


@perfsuite.workload(
    params={
        "size": perfsuite.param("ci", choices=SIZES, help="preset: ci | cpu | gpu"),
        "variant": perfsuite.param("fc", choices=VARIANTS, help="3072-1024-128 MLP or conv"),
        "batch_size": perfsuite.param(None, type=int, min=1, help="overrides the size preset"),
        "precision": perfsuite.param("fp32", choices=PRECISIONS, help="fp16 needs CUDA"),
        "nvtx": perfsuite.param("off", choices=("on", "off"), help="coloured NVTX hierarchy"),
        "phase": perfsuite.param(
            "train",
            choices=("train", "validate", "epoch"),
            help="a training step, the validation pass (MAR@5 + reconstruction grid), or an epoch of both",
        ),
        "data": perfsuite.param(
            "resident",
            choices=("resident", "host"),
            help="batches on the device, or pinned host batches copied in the step",
        ),
        "val_size": perfsuite.param(
            None, type=int, min=2, max=100_000, help="validation images (MAR@5 over their codes)"
        ),
        "batches": perfsuite.param(None, type=int, min=1, max=10_000, help="phase=epoch: training steps per epoch"),
        "vis_dir": perfsuite.param("", help="folder for the reconstruction grid; empty: a temporary one"),
    },
    presets=PRESETS,
    validate=validate,
    trainer=training,
    checks=training_checks(TRAINING_CHECKS),
    grids={
        size: {"size": [size], "variant": ["fc", "conv"], "precision": ["fp32", "bf16", "fp16"]}
        for size in ("ci", "cpu", "gpu")
    },
    asv={"amp": True},
    fp32_kernels=("variant", {"fc": "matmul", "conv": "conv"}),  # conv: ~78% of its FLOPs in convolutions
    ddp={"variant": "variant", "module": ddp_module},
    plan={"check_s": {"cpu": 4.0, "cuda": 3.2}},
)
def autoencoder(device: str, **params):
    """autoencoder on 3x32x32 images, MSE loss, Adam: training step, validation (MAR@5), or epoch"""
    import tempfile
    from pathlib import Path

    validate(device, **params)
    setup = training(device, **params)
    model, prec = setup.parts.model, setup.parts.precision
    ann = Annotator(enabled=params["nvtx"] == "on")
    host = params["data"] == "host"
    phase, bs = params["phase"], params["batch_size"]
    n_train = params["batches"] if phase == "epoch" else 1
    train_steps = []
    for i in range(n_train if phase != "validate" else 0):
        x, _ = setup.batch(i)
        hb = HostBatch(x, x, device) if host else None
        train_steps.append(make_step(setup.parts, hb.device_buf if hb else x, ann, host=hb))

    teardown = None
    validation = None
    if phase in ("validate", "epoch"):
        images, labels = load_batch("", params["val_size"], device, seed=10_000, normalize=False)
        val_host = HostBatch(images, labels, device) if host else None
        if params["vis_dir"]:
            out_dir = Path(params["vis_dir"])
            out_dir.mkdir(parents=True, exist_ok=True)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="perfsuite-autoencoder-")
            out_dir, teardown = Path(tmp.name), tmp.cleanup
        grid_path = out_dir / f"reconstructions-{params['variant']}.png"
        last = {}

        def validation():
            last.update(
                validation_pass(model, images, labels, ann, k=5, host=val_host, save_to=grid_path, precision=prec)
            )
            return last["mar"]

    if phase == "train":
        step = train_steps[0]
        items = bs
    elif phase == "validate":
        step = validation
        items = params["val_size"]
    else:

        def step():
            for s in train_steps:
                s()
            return validation()

        items = bs * len(train_steps) + params["val_size"]
    flops = count_flops(step)  # runs the step once, in a case's first build only (measure.counted)
    nbytes = training_bytes(model, step) if phase == "train" else None
    extra = None
    if validation is not None:

        def extra():
            return {"mar_at_5": last.get("mar"), "reconstructions": str(grid_path)}

    return perfsuite.Step(
        step,
        items=items,
        unit="images",
        flops=flops,
        flops_method="FlopCounterMode",
        bytes=nbytes,
        dtype="fp32" if params["precision"] == "fp32" else params["precision"],
        teardown=teardown,
        extra=extra,
    )
