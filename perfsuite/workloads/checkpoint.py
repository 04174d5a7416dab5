"""Checkpoint save and load of a training state: time and file size."""

from __future__ import annotations

import tempfile
from pathlib import Path

import perfsuite
from perfsuite.training.checks import resume_bit_exact
from perfsuite.training.state_file import Progress, load_checkpoint, save_checkpoint
from perfsuite.workloads import resnet
from perfsuite.workloads.resnet import TRAINING_CHECKS


def resume_check(device: str) -> str:
    """Its step saves and loads a ResNet's training state: resuming from it must be bit-exact."""
    return resume_bit_exact(TRAINING_CHECKS, device)


@perfsuite.workload(
    params={
        "model": perfsuite.param("resnet18", choices=resnet.MODELS),
        "op": perfsuite.param("save", choices=("save", "load")),
    },
    checks={"resume is bit-exact (resnet)": resume_check},
    grids={"ci": {"op": ["save", "load"]}},
    plan={"check_s": {"cpu": 2.0, "cuda": 1.3}},
)
def checkpoint(model: str, op: str, device: str):
    """save or load the full training state (model, optimiser, scheduler, RNG) of a ResNet"""
    parts = resnet.build_parts(
        {"model": model, "stem": "torchvision", "channels_last": False, "precision": "fp32"}, device
    )
    tmpdir = tempfile.TemporaryDirectory(prefix="perfsuite-ckpt-")
    path = Path(tmpdir.name) / "state.pt"
    kw = dict(model=parts.model, optimizer=parts.optimizer, scheduler=parts.scheduler)
    # One real training step first, so the optimiser has its momentum buffers to save.
    import torch

    x = torch.randn(2, 3, 32, 32, device=device)
    parts.loss_fn(parts.model(x), torch.tensor([0, 1], device=device)).backward()
    parts.optimizer.step()
    size = save_checkpoint(path, progress=Progress(step=1), **kw)

    if op == "save":

        def step():
            save_checkpoint(path, progress=Progress(step=1), **kw)
    else:

        def step():
            load_checkpoint(path, map_location=device, **kw)

    # Time and bytes: a file written or read has no FLOPs to count.
    return perfsuite.Step(
        step, items=1, unit="checkpoints", bytes=float(size), flops_method="unknown", teardown=tmpdir.cleanup
    )
