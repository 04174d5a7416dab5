"""NVTX ranges around warm-up and the timed region, for Nsight Systems timelines.

Process-wide start/end ranges (not thread-local push/pop) are used because PyTorch runs
backward on its own device threads: a push/pop range on the Python thread would not enclose
the kernels those threads launch. Without CUDA, or when switched off, the ranges are no-ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


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


# One colour per category, so a timeline reads at a glance (ARGB ints: every NVTX backend takes them).
CATEGORY_COLORS = {
    "training": 0x2CA02C,  # green
    "validation": 0x1F77B4,  # blue
    "forward": 0xFFD700,  # yellow
    "loss": 0xFF7F0E,  # orange
    "metrics": 0x9467BD,  # purple
    "visualization": 0xFF69B4,  # pink
    "data": 0x17BECF,  # cyan
    "memory": 0xFF00FF,  # magenta
}


class Annotator:
    """Coloured, nestable, process-wide NVTX ranges by category; a no-op when disabled.

    Backend: the `nvtx` package (colours; its calls are near-free when no profiler is
    attached, so the on/off overhead can be measured on CPU too), else torch.cuda.nvtx on a
    CUDA machine (no colours), else nothing.
    """

    def __init__(self, enabled: bool = True, backend=None) -> None:
        self.enabled = enabled
        self.backend = backend
        self.kind = "off"
        if not enabled:
            return
        if backend is None:
            try:
                import nvtx  # the `nvtx` package

                backend = nvtx
            except ImportError:
                backend = None
        if backend is not None:
            self.backend, self.kind = backend, "nvtx"
        elif nvtx_available():
            self.kind = "torch.cuda.nvtx"

    @contextmanager
    def range(self, name: str, category: str) -> Iterator[None]:
        if self.kind == "off":
            yield
            return
        if category not in CATEGORY_COLORS:
            raise ValueError(f"unknown NVTX category {category!r}; known: {', '.join(CATEGORY_COLORS)}")
        if self.kind == "nvtx":
            handle = self.backend.start_range(message=name, color=CATEGORY_COLORS[category])
            try:
                yield
            finally:
                self.backend.end_range(handle)
        else:
            with nvtx_range(name):
                yield
