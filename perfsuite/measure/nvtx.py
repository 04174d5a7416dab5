"""NVTX ranges around warm-up and the timed region, for Nsight Systems timelines.

Process-wide start/end ranges (not thread-local push/pop) are used because PyTorch runs
backward on its own device threads: a push/pop range on the Python thread would not enclose
the kernels those threads launch. Without CUDA, or when switched off, the ranges are no-ops.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


def nvtx_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@contextmanager
def nvtx_range(name: str, enabled: bool = True) -> Iterator[None]:
    if not enabled or not nvtx_available():
        yield
        return
    import torch

    handle = torch.cuda.nvtx.range_start(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_end(handle)
