"""Swish (x * sigmoid(x)) and Mish (x * tanh(softplus(x))) as autograd Functions.

What the forward saves is a choice, and the point of the exercise:
- save="input": keep x only and recompute sigmoid(x) in backward (less memory, more compute);
- save="input+sigmoid": keep x and sigmoid(x) (one more tensor held until backward).

Both are written from sigmoid(x) = s, which torch computes stably for any x, so nothing
overflows at large |x| (a naive exp(x) does above x = 88 in fp32):
  swish'(x) = s * (1 + x * (1 - s))
  mish: t = tanh(softplus(x)) = s * (2 - s) / (1 + (1 - s)^2)   [since 1 + e^x = 1 / (1 - s)]
        mish'(x) = t + x * (1 - t^2) * s
"""

from __future__ import annotations

import torch

SAVES = ("input", "input+sigmoid")


def _tanh_softplus(s: torch.Tensor) -> torch.Tensor:
    # s(2 - s) rather than 1 - (1 - s)^2: no cancellation when s is tiny (x very negative).
    one_minus = 1 - s
    return s * (2 - s) / (1 + one_minus * one_minus)


class _SwishInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * s * (1 + x * (1 - s))


class _SwishInputSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        return grad * s * (1 + x * (1 - s))


class _MishInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * _tanh_softplus(torch.sigmoid(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        t = _tanh_softplus(s)
        return grad * (t + x * (1 - t * t) * s)


class _MishInputSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * _tanh_softplus(s)

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        t = _tanh_softplus(s)
        return grad * (t + x * (1 - t * t) * s)


_FUNCTIONS = {
    ("swish", "input"): _SwishInput,
    ("swish", "input+sigmoid"): _SwishInputSigmoid,
    ("mish", "input"): _MishInput,
    ("mish", "input+sigmoid"): _MishInputSigmoid,
}


def swish(x: torch.Tensor, save: str = "input") -> torch.Tensor:
    return _FUNCTIONS[("swish", save)].apply(x)


def mish(x: torch.Tensor, save: str = "input") -> torch.Tensor:
    return _FUNCTIONS[("mish", save)].apply(x)


def activation(fn: str, impl: str, save: str = "input"):
    """The callable for fn (swish|mish) and impl (custom|builtin)."""
    if fn not in ("swish", "mish"):
        raise ValueError(f"fn must be swish or mish, got {fn!r}")
    if impl == "builtin":
        return torch.nn.functional.silu if fn == "swish" else torch.nn.functional.mish
    if impl != "custom":
        raise ValueError(f"impl must be custom or builtin, got {impl!r}")
    if save not in SAVES:
        raise ValueError(f"save must be one of {SAVES}, got {save!r}")
    f = _FUNCTIONS[(fn, save)]
    return f.apply
