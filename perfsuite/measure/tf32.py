"""TF32 on CUDA: whether fp32 matmuls (cuBLAS) and convolutions (cuDNN) may use TF32 tensor
cores, read and set. The runner reads the flags to pick a case's roof; the peak sets them to
measure the true fp32 and the TF32 roofs apart."""

from __future__ import annotations

import contextlib

from perfsuite.core.errors import RecordError


@contextlib.contextmanager
def matmul_tf32(enabled: bool, backends=None):
    """Allow (or forbid) TF32 for CUDA fp32 matmuls inside the block, restoring the flag after.

    The legacy `allow_tf32` flag, as most user code sets it (torch refuses to mix it with the
    newer `fp32_precision` API). `backends` defaults to torch.backends; tests pass a fake.
    """
    if backends is None:
        import torch

        backends = torch.backends
    m = backends.cuda.matmul
    old = m.allow_tf32
    m.allow_tf32 = enabled
    try:
        # TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 forces TF32 on: the fp32 roof would then be TF32's.
        if m.allow_tf32 != enabled:
            raise RecordError(f"torch.backends.cuda.matmul.allow_tf32 stays {m.allow_tf32} when set to {enabled} "
                              "(is TORCH_ALLOW_TF32_CUBLAS_OVERRIDE set?): cannot measure this roof")
        yield
    finally:
        m.allow_tf32 = old


def _tf32_allowed(legacy, op) -> bool:
    try:
        return bool(legacy.allow_tf32)
    except RuntimeError:  # torch >= 2.9 refuses the legacy flag once the fp32_precision API was used;
        return op().fp32_precision == "tf32"  # the op's own setting then reports what its parents set


def tf32_flags(backends) -> dict[str, bool]:
    """Whether CUDA fp32 matmuls (cuBLAS) and convolutions (cuDNN) may run as TF32 right now;
    `backends` is torch.backends (tests pass a fake)."""
    # The new API's objects are looked up only when needed: torch before 2.9 lacks cudnn.conv.
    return {"matmul": _tf32_allowed(backends.cuda.matmul, lambda: backends.cuda.matmul),
            "cudnn": _tf32_allowed(backends.cudnn, lambda: backends.cudnn.conv)}
