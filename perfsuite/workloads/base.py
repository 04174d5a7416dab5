"""Helpers the concrete workloads share: dtypes, FLOP counting, training-step byte estimates.

Every workload is declared with `@perfsuite.workload`. The core types (`Workload`, `BuiltStep`)
live in perfsuite/core/workload.py; they are re-exported here because the workload files of
older revisions, which `perfsuite gate` loads beside this core for a built-in, import them from
this module (and called `register(Workload(...))` themselves).
"""

from __future__ import annotations

from collections.abc import Callable

from perfsuite.core.workload import Builder, BuiltStep, Checker, Workload  # noqa: F401 (re-export)
from perfsuite.measuring.flops import count_flops  # noqa: F401 (re-export for the workload modules)
from perfsuite.measuring.saved import saved_tensor_bytes

DTYPES = ("fp32", "bf16", "fp16")


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def training_bytes(model, step: Callable[[], object]) -> float:
    """Estimated memory traffic of one training step (see perfsuite/roofline/cpu.py): parameters
    read, gradients written, one optimiser state read and written (4 x parameter bytes), and
    the activations saved for backward written and read back (2 x saved bytes)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return float(4 * params + 2 * saved_tensor_bytes(step))
