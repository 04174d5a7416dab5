"""Square matrix multiply: the simplest compute-bound step, and the machine-peak probe."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.workloads.base import DTYPES, BuiltStep, Workload, torch_dtype


def matmul_flops(n: int) -> float:
    """n*n outputs, each n multiply-adds: 2 n^3 FLOPs."""
    return 2.0 * n**3


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    import torch

    n, dtype = params["n"], torch_dtype(params["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)  # preallocated: time the kernel, not malloc

    def step() -> None:
        torch.mm(a, b, out=out)

    elem = a.element_size()
    return BuiltStep(
        fn=step,
        work=Work(
            items_per_step=1,
            item_unit="matmuls",
            flops_per_step=matmul_flops(n),
            flops_method="analytic",
            bytes_per_step=3.0 * n * n * elem,
            dtype=params["dtype"],
        ),
    )


WORKLOAD = register(
    Workload(
        name="matmul",
        description="torch.mm of two preallocated n x n matrices (2 n^3 FLOPs)",
        params=(
            Param("n", int, 1024, min=1, max=32768, help="matrix side"),
            Param("dtype", str, "fp32", choices=DTYPES, help="element type"),
        ),
        builder=build,
        fp32_kernels="matmul",  # cuBLAS: its TF32 flag sets the fp32 roof
    )
)
