"""TF32 on CUDA: whether fp32 matmuls (cuBLAS) and convolutions (cuDNN) may use TF32 tensor
cores, read and set. The runner reads the flags to pick a case's roof; the peak sets them to
measure the true fp32 and the TF32 roofs apart.

With them, the other flags that change what a step computes or which kernels it gets (cuDNN's
benchmark and deterministic modes, the float32 matmul precision, deterministic algorithms):
torch_flags reads them all, for every record's `conditions` (perfsuite.measuring.runner), and
apply_torch_flags sets them in a worker process to the caller's (perfsuite.measuring.workers: a
worker is forked from the fork server, which never saw what the caller set)."""

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
            raise RecordError(
                f"torch.backends.cuda.matmul.allow_tf32 stays {m.allow_tf32} when set to {enabled} "
                "(is TORCH_ALLOW_TF32_CUBLAS_OVERRIDE set?): cannot measure this roof"
            )
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
    return {
        "matmul": _tf32_allowed(backends.cuda.matmul, lambda: backends.cuda.matmul),
        "cudnn": _tf32_allowed(backends.cudnn, lambda: backends.cudnn.conv),
    }


# What torch_flags reads, and the order apply_torch_flags sets them in: the matmul precision first,
# because setting it also sets matmul's TF32 flag (and `allow_tf32 = True` would turn "medium" into
# "high"); the TF32 flags after it only where they still differ.
FLAGS = (
    "float32_matmul_precision",
    "matmul_tf32",
    "cudnn_tf32",
    "cudnn_benchmark",
    "cudnn_deterministic",
    "deterministic_algorithms",
    "deterministic_warn_only",
    "cublas_workspace_config",
)


def _matmul_precision(torch) -> str | None:
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:  # torch >= 2.9 refuses it once the legacy and fp32_precision APIs were mixed:
        return None  # the matmul_tf32 flag then says what matters (whether TF32 is allowed)


def torch_flags() -> dict:
    """This process's flags that change what a step computes or which kernels it gets: whether fp32
    matmuls (cuBLAS) and convolutions (cuDNN) may run as TF32, torch's float32 matmul precision,
    cuDNN's benchmark (autotuned algorithms) and deterministic modes, deterministic algorithms
    (and warn-only), and CUBLAS_WORKSPACE_CONFIG (which deterministic cuBLAS needs). Reading them
    touches no CUDA, and they read the same on a CPU build."""
    import os
    import warnings

    import torch

    with warnings.catch_warnings():  # a torch that deprecates the legacy flags says so on every read
        warnings.simplefilter("ignore")
        tf32 = tf32_flags(torch.backends)
        return {
            "float32_matmul_precision": _matmul_precision(torch),
            "matmul_tf32": tf32["matmul"],
            "cudnn_tf32": tf32["cudnn"],
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        }


def _set_tf32(legacy, op, enabled: bool) -> None:
    try:
        legacy.allow_tf32 = enabled
    except RuntimeError:  # torch >= 2.9 after the fp32_precision API was used: set it that way
        op().fp32_precision = "tf32" if enabled else "ieee"


def apply_torch_flags(flags: dict) -> list[str]:
    """Set this process's flags to `flags` (torch_flags() of another process, e.g. the caller of a
    worker); a warning for each one that still reads differently afterwards (an environment
    override such as TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, or a torch without the setting)."""
    import os
    import warnings

    import torch

    b = torch.backends
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if flags.get("float32_matmul_precision") is not None:
            torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
        now = torch_flags()
        if now["matmul_tf32"] != flags["matmul_tf32"]:
            _set_tf32(b.cuda.matmul, lambda: b.cuda.matmul, flags["matmul_tf32"])
        if now["cudnn_tf32"] != flags["cudnn_tf32"]:
            # (torch.backends.cudnn's module is replaced by a class at import: conv is on that class)
            _set_tf32(b.cudnn, lambda: b.cudnn.conv, flags["cudnn_tf32"])  # type: ignore[attr-defined]
        b.cudnn.benchmark = flags["cudnn_benchmark"]
        b.cudnn.deterministic = flags["cudnn_deterministic"]
        torch.use_deterministic_algorithms(
            flags["deterministic_algorithms"], warn_only=flags["deterministic_warn_only"]
        )
        # Read by cuBLAS when it first makes a workspace, so set before the step is built.
        if flags["cublas_workspace_config"] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = flags["cublas_workspace_config"]
    now = torch_flags()
    # A precision the caller's torch would not say (None: APIs mixed) was not set, so is not compared.
    return [
        f"torch flag {name} is {now[name]!r} in this process, {flags[name]!r} in the calling process: "
        "it could not be set here"
        for name in FLAGS
        if name in flags
        and now[name] != flags[name]
        and not (name == "float32_matmul_precision" and flags[name] is None)
    ]
