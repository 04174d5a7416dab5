"""Checkpoint save and load of a training state: time and file size."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Mapping

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.workloads.base import BuiltStep, Workload
from perfsuite.training.checkpoint import Progress
from perfsuite.training.checkpoint import load_checkpoint
from perfsuite.training.checkpoint import save_checkpoint
from perfsuite.training.checks import resume_bit_exact
from perfsuite.workloads import resnet
from perfsuite.workloads.resnet import TRAINING_CHECKS


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    parts = resnet.build_parts({"model": params["model"], "stem": "torchvision", "channels_last": False,
                                "precision": "fp32"}, device)
    tmpdir = tempfile.TemporaryDirectory(prefix="perfsuite-ckpt-")
    path = Path(tmpdir.name) / "state.pt"
    kw = dict(model=parts.model, optimizer=parts.optimizer, scheduler=parts.scheduler)
    # One real training step first, so the optimiser has its momentum buffers to save.
    import torch

    x = torch.randn(2, 3, 32, 32, device=device)
    parts.loss_fn(parts.model(x), torch.tensor([0, 1], device=device)).backward()
    parts.optimizer.step()
    size = save_checkpoint(path, progress=Progress(step=1), **kw)

    if params["op"] == "save":
        def step():
            save_checkpoint(path, progress=Progress(step=1), **kw)
    else:
        def step():
            load_checkpoint(path, map_location=device, **kw)

    return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="checkpoints", bytes_per_step=float(size)),
                     teardown=tmpdir.cleanup)


def resume_check(device: str) -> str:
    """Its step saves and loads a ResNet's training state: resuming from it must be bit-exact."""
    return resume_bit_exact(TRAINING_CHECKS, device)


WORKLOAD = register(
    Workload(
        name="checkpoint",
        description="save or load the full training state (model, optimiser, scheduler, RNG) of a ResNet",
        params=(
            Param("model", str, "resnet18", choices=("resnet18", "resnet34")),
            Param("op", str, "save", choices=("save", "load")),
        ),
        builder=build,
        checks={"resume is bit-exact (resnet)": resume_check},
        grids={"ci": {"op": ["save", "load"]}},
    )
)
