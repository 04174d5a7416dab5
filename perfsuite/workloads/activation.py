"""Swish/Mish: the hand-written autograd Functions against torch's built-ins."""

from __future__ import annotations

from functools import partial

import perfsuite
from perfsuite.core.check_failed import CheckFailed, need
from perfsuite.workloads.base import torch_dtype

# FLOPs per element, counted by hand from the formulas in perfsuite/ops/activations.py
# (sigmoid as 4: exp, add, reciprocal, negate). Used for both impls so ratios stay honest.
FLOPS_PER_ELEMENT = {
    ("swish", "forward"): 5,
    ("swish", "backward"): 5 + 9,
    ("mish", "forward"): 12,
    ("mish", "backward"): 12 + 20,
}


# The hand-written Swish and Mish (perfsuite/ops/activations.py), both ways of saving for
# backward: `gradcheck` in float64, and values and gradients against torch's F.silu/F.mish on
# fresh inputs including |x| up to 1e4 (where a naive exp overflows).
def activation_gradcheck(fn: str, save: str, device: str = "cpu") -> str:
    import torch
    from torch.autograd.gradcheck import GradcheckError  # (torch.autograd.gradcheck is the function)

    from perfsuite.ops.activations import activation

    x = torch.randn(64, dtype=torch.float64, device=device, requires_grad=True)
    try:
        torch.autograd.gradcheck(activation(fn, "custom", save), (x,))
    except GradcheckError as exc:
        raise CheckFailed(str(exc).splitlines()[0]) from None
    return "analytical gradient = numerical (float64, 64 points)"


ORACLES = {"swish": "silu", "mish": "mish"}


def activation_matches_builtin(fn: str, save: str, device: str = "cpu", seed: int = 0) -> str:
    import torch
    import torch.nn.functional as F

    from perfsuite.ops.activations import activation

    oracle = getattr(F, ORACLES[fn])
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([5 * torch.randn(10_000, generator=g), torch.tensor([-1e4, -200.0, -90.0, 90.0, 200.0, 1e4])]).to(
        device
    )
    mine, ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    y, y_ref = activation(fn, "custom", save)(mine), oracle(ref)
    gy = torch.randn(y.shape, generator=g).to(device)
    (y * gy).sum().backward()
    (y_ref * gy).sum().backward()
    need(
        bool(torch.isfinite(y).all() and mine.grad is not None and torch.isfinite(mine.grad).all()),
        "non-finite output or gradient",
    )
    for what, a, b, rtol, atol in (("values", y, y_ref, 1e-5, 1e-6), ("gradients", mine.grad, ref.grad, 1e-4, 1e-5)):
        try:
            torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
        except AssertionError as exc:
            raise CheckFailed(f"{what} differ from F.{ORACLES[fn]}: " + " ".join(str(exc).split())[:200]) from None
    return f"values and gradients = F.{ORACLES[fn]} on 10,006 inputs, |x| up to 1e4"


def _checks() -> dict:
    out = {}
    for fn in ("swish", "mish"):
        for save in ("input", "input+sigmoid"):
            # Partials, not lambdas: a workload crosses into worker processes pickled.
            out[f"gradcheck {fn} save={save}"] = partial(activation_gradcheck, fn, save)
            out[f"{fn} save={save} = builtin"] = partial(activation_matches_builtin, fn, save)
    return out


@perfsuite.workload(
    params={
        "fn": perfsuite.param("swish", choices=("swish", "mish")),
        "impl": perfsuite.param("custom", choices=("custom", "builtin")),
        "numel": perfsuite.param(1 << 20, min=1, max=1 << 28, help="elements (2^10 .. 2^24)"),
        "dtype": perfsuite.param("fp32", choices=("fp32", "bf16")),
        "save": perfsuite.param(
            "input", choices=("input", "input+sigmoid"), help="custom only: what forward keeps for backward"
        ),
        "pass": perfsuite.param("backward", choices=("forward", "backward"), help="forward, or forward+backward"),
    },
    checks=_checks(),
    grids={
        "ci": {"fn": ["swish", "mish"], "impl": ["custom", "builtin"], "numel": [1 << 16]},
        "cpu": {
            "fn": ["swish", "mish"],
            "impl": ["custom", "builtin"],
            "numel": [1 << 20, 1 << 24],
            "dtype": ["fp32", "bf16"],
        },
        "gpu": {
            "fn": ["swish", "mish"],
            "impl": ["custom", "builtin"],
            "numel": [1 << 20, 1 << 24],
            "dtype": ["fp32", "bf16"],
        },
    },
    plan={"check_s": {"cpu": 4.0, "cuda": 3.6}},
)
def activation(device: str, **params):
    """Swish/Mish as hand-written autograd Functions or torch's built-ins"""
    # **params: one parameter is named `pass`, which Python cannot take as an argument's name.
    import torch

    from perfsuite.ops.activations import activation as function

    f = function(params["fn"], params["impl"], params["save"])
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
    return perfsuite.Step(
        step,
        items=n,
        unit="elements",
        flops=float(FLOPS_PER_ELEMENT[(params["fn"], params["pass"])] * n),
        flops_method="analytic",
        bytes=float(x.element_size() * n * (2 if params["pass"] == "forward" else 5)),
        dtype=params["dtype"] if params["dtype"] != "fp64" else "fp32",
    )
