"""Swish/Mish: the hand-written autograd Functions against torch's built-ins."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.workloads.base import BuiltStep, Workload, torch_dtype

# FLOPs per element, counted by hand from the formulas in perfsuite/ops/activations.py
# (sigmoid as 4: exp, add, reciprocal, negate). Used for both impls so ratios stay honest.
FLOPS_PER_ELEMENT = {("swish", "forward"): 5, ("swish", "backward"): 5 + 9,
                     ("mish", "forward"): 12, ("mish", "backward"): 12 + 20}


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    import torch

    from perfsuite.ops.activations import activation

    f = activation(params["fn"], params["impl"], params["save"])
    gen = torch.Generator().manual_seed(0)
    x = (4 * torch.randn(params["numel"], generator=gen)).to(device=device, dtype=torch_dtype(params["dtype"]))
    if params["pass"] == "forward":
        def step():
            with torch.no_grad():
                return f(x)
    else:
        x.requires_grad_(True)
        grad = torch.ones_like(x)

        def step():
            y = f(x)
            # torch.autograd.grad leaves x.grad alone: no accumulation buffer to allocate.
            return torch.autograd.grad(y, x, grad)

    n = params["numel"]
    return BuiltStep(fn=step, work=Work(items_per_step=n, item_unit="elements",
                                        flops_per_step=float(FLOPS_PER_ELEMENT[(params["fn"], params["pass"])] * n),
                                        flops_method="analytic",
                                        bytes_per_step=float(x.element_size() * n * (2 if params["pass"] == "forward" else 5)),
                                        dtype=params["dtype"] if params["dtype"] != "fp64" else "fp32"))


WORKLOAD = register(
    Workload(
        name="activation",
        description="Swish/Mish as hand-written autograd Functions or torch's built-ins",
        params=(
            Param("fn", str, "swish", choices=("swish", "mish")),
            Param("impl", str, "custom", choices=("custom", "builtin")),
            Param("numel", int, 1 << 20, min=1, max=1 << 28, help="elements (2^10 .. 2^24)"),
            Param("dtype", str, "fp32", choices=("fp32", "bf16")),
            Param("save", str, "input", choices=("input", "input+sigmoid"),
                  help="custom only: what forward keeps for backward"),
            Param("pass", str, "backward", choices=("forward", "backward"), help="forward, or forward+backward"),
        ),
        builder=build,
    )
)
