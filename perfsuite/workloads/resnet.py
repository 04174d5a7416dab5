"""ResNet18/34 training step on CIFAR-10-shaped data (the nn-perf project and the module labs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import perfsuite
from perfsuite.core.errors import Unsupported
from perfsuite.data.cifar import load_batch
from perfsuite.training.checks import TrainingCase, training_checks
from perfsuite.training.precision import PRECISIONS, Precision, check_precision
from perfsuite.training.schedule import sgd_nesterov_with_schedule
from perfsuite.training.setup import TrainingSetup, synthetic_batches
from perfsuite.training.step import TrainParts, compiled_forward, make_train_step
from perfsuite.workloads.base import count_flops, training_bytes

SIZES = ("ci", "cpu", "gpu")
MODELS = ("resnet18", "resnet34")
# ci: a step well under 100 ms on 2 CPU cores; gpu: the seed's batch.
PRESETS = {"ci": {"batch_size": 8}, "cpu": {"batch_size": 64}, "gpu": {"batch_size": 128}}
LR, WARMUP_STEPS, TOTAL_STEPS, LABEL_SMOOTHING = 0.1, 100, 10_000, 0.1


def build_model(name: str, stem: str):
    import torchvision
    from torch import nn

    factory = {"resnet18": torchvision.models.resnet18, "resnet34": torchvision.models.resnet34}
    if name not in factory:
        raise ValueError(f"model must be one of {', '.join(factory)}, got {name!r}")
    model = factory[name](num_classes=10)
    if stem == "cifar":
        # 32x32 inputs keep their resolution: 3x3 stride-1 first conv and no max-pool (~15x the FLOPs).
        model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif stem != "torchvision":
        raise ValueError(f"stem must be torchvision or cifar, got {stem!r}")
    return model


def build_parts(params: Mapping[str, Any], device: str) -> TrainParts:
    """Model, loss, optimiser, schedule and precision: everything but the data."""
    import torch

    model = build_model(params["model"], params["stem"]).to(device)
    if params["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    opt, sched = sgd_nesterov_with_schedule(model.parameters(), LR, WARMUP_STEPS, TOTAL_STEPS)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING)
    return TrainParts(model, loss_fn, opt, sched, Precision(params["precision"], device))


def training(device: str, **params):
    """The parts of the step the workload times, with generated CIFAR-10-shaped batches (the AMP
    comparison, profile-step, trace and the checks build from this)."""
    parts = build_parts(params, device)
    return TrainingSetup(
        parts, parts.model, synthetic_batches(params["batch_size"], device, False, params["channels_last"])
    )


def validate(device: str, **params) -> None:
    """Refuses what this device cannot run (fp16 off CUDA, a CUDA graph it cannot capture) and a
    missing CIFAR-10 folder, before any case is measured."""
    check_precision(params["precision"], device)
    if params["cuda_graph"]:
        from perfsuite.training.graphed import refusal

        reason = refusal(device, params["precision"], params["compile"])
        if reason:
            raise Unsupported(reason)
    if params["data"]:
        from perfsuite.data.cifar import _batch_dir

        _batch_dir(params["data"])  # raises naming the path when missing or not CIFAR-10


# The small case the training checks build, and their steps (perfsuite/training/checks.py): a step
# costs ~0.2 s here. The loss on its fixed batch falls steeply for ~5 steps and a 5-step mean
# taken there swings with tiny precision effects (fp32 vs bf16 on this CPU: 4.2% apart after 6
# steps, 8.2% after 8, 1.2% after 10 and 12), so the AMP check reads it after the fall.
TRAINING_CHECKS = TrainingCase("resnet", {"batch_size": 4}, amp_steps=12, resume_steps=4)


@perfsuite.workload(
    description="ResNet18/34 training step, 10 classes, SGD Nesterov + warm-up/cosine, label smoothing "
    "(cuda_graph=true: the whole step replayed as one captured CUDA graph)",
    params={
        "size": perfsuite.param("ci", choices=SIZES, help="preset: ci | cpu | gpu"),
        "model": perfsuite.param("resnet18", choices=MODELS),
        "stem": perfsuite.param(
            "torchvision", choices=("torchvision", "cifar"), help="ImageNet stem, or 3x3 stride-1 conv without max-pool"
        ),
        "batch_size": perfsuite.param(None, type=int, min=1, help="overrides the size preset"),
        "precision": perfsuite.param("fp32", choices=PRECISIONS, help="fp16 needs CUDA"),
        "channels_last": perfsuite.param(False),
        "compile": perfsuite.param(False, help="torch.compile the model"),
        "cuda_graph": perfsuite.param(
            False, help="capture the whole step once as a CUDA graph and replay it (CUDA; fp32/bf16, not with compile)"
        ),
        "data": perfsuite.param("", help="CIFAR-10 folder in torchvision's format; empty: generated"),
    },
    presets=PRESETS,
    validate=validate,
    trainer=training,
    checks=training_checks(TRAINING_CHECKS),
    grids={
        "ci": {"size": ["ci"], "model": ["resnet18"], "precision": ["fp32", "bf16", "fp16"]},
        "cpu": {"size": ["cpu"], "model": ["resnet18", "resnet34"], "precision": ["fp32", "bf16", "fp16"]},
        "gpu": {"size": ["gpu"], "model": ["resnet18", "resnet34"], "precision": ["fp32", "bf16", "fp16"]},
    },
    # Three worker processes per case, as suites/cpu.yaml has them: its history is compared
    # across commits, where one unlucky process's memory layout would otherwise show as a change.
    asv={"processes": 3, "amp": True},
    fp32_kernels="conv",  # cuDNN convolutions carry nearly all FLOPs (the fc layer is <0.1%)
    # DDP trains the model itself; its gradient check freezes BatchNorm (eval), whose statistics
    # are each rank's own batch's in training mode.
    ddp={"variant": "model", "eval_in_gradient_check": True},
    plan={"build_s": {"cpu": 2.0, "cuda": 1.5}, "check_s": {"cpu": 6.0, "cuda": 2.6}},
)
def resnet(device: str, **params):
    validate(device, **params)
    parts = build_parts(params, device)
    x, y = load_batch(params["data"], params["batch_size"], device, channels_last=params["channels_last"])
    step = make_train_step(parts, x, y)
    # Counted on the eager model: FlopCounterMode does not see inside compiled graphs.
    flops = count_flops(step)
    nbytes = training_bytes(parts.model, step)
    work = dict(
        items=params["batch_size"],
        unit="images",
        flops=flops,
        flops_method="FlopCounterMode",
        bytes=nbytes,
        dtype=params["precision"],
    )
    if params["cuda_graph"]:
        from perfsuite.training.graphed import build_graphed_step

        # The same model and batch, captured after a few warm-up steps on a side stream (at
        # build time, outside the budget); each call replays the whole step. `extra` says what
        # was captured and whether the LR schedule runs inside the graph.
        graphed = build_graphed_step(
            parts.model,
            parts.loss_fn,
            parts.optimizer,
            x,
            y,
            precision=params["precision"],
            device=device,
            base_lr=LR,
            warmup_steps=WARMUP_STEPS,
            total_steps=TOTAL_STEPS,
        )
        return perfsuite.Step(graphed.fn, teardown=graphed.teardown, extra=lambda: dict(graphed.info), **work)
    if params["compile"]:
        # Compiles on the first call of the process's first build (~48 s on 2 cores): the runner
        # takes that call outside the case's budget and records it as the cold start. The other
        # builds run their own model through the same compiled code (training/step.py).
        step = make_train_step(parts, x, y, forward=compiled_forward(parts.model, params, device))
    return perfsuite.Step(step, **work)
