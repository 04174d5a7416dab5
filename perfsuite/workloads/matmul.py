"""Square matrix multiply: the simplest compute-bound step, and the machine-peak probe."""

from __future__ import annotations

from functools import partial

import perfsuite
from perfsuite.core.check_failed import need
from perfsuite.workloads.base import DTYPES, torch_dtype


def matmul_flops(n: int) -> float:
    """n*n outputs, each n multiply-adds: 2 n^3 FLOPs."""
    return 2.0 * n**3


MATMUL_TOL = {"fp32": 1e-4, "bf16": 2e-2, "fp16": 2e-3}


def matmul_agrees(dtype: str, device: str = "cpu", n: int = 128) -> str:
    """The product agrees with a float64 reference within the dtype's tolerance."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g, dtype=torch.float64), torch.randn(n, n, generator=g, dtype=torch.float64)
    got = torch.mm(a.to(device, torch_dtype(dtype)), b.to(device, torch_dtype(dtype))).double().cpu()
    ref = a.to(torch_dtype(dtype)).double() @ b.to(torch_dtype(dtype)).double()
    err = float((got - ref).norm() / ref.norm())
    need(err <= MATMUL_TOL[dtype], f"relative error {err:.2e} above {MATMUL_TOL[dtype]:.0e}")
    return f"{n}x{n} {dtype}: relative error {err:.1e} against float64 (tolerance {MATMUL_TOL[dtype]:.0e})"


@perfsuite.workload(
    params={
        "n": perfsuite.param(1024, min=1, max=32768, help="matrix side"),
        "dtype": perfsuite.param("fp32", choices=DTYPES, help="element type"),
    },
    checks={f"{dt} = float64 reference": partial(matmul_agrees, dt) for dt in ("fp32", "bf16")},
    grids={
        "ci": {"n": [256], "dtype": ["fp32", "bf16"]},
        "cpu": {"n": [256, 1024], "dtype": ["fp32", "bf16"]},
        "gpu": {"n": [4096, 8192], "dtype": ["fp32", "bf16", "fp16"]},
    },
    # Three worker processes per case, as suites/cpu.yaml has them: its history is compared
    # across commits, where one unlucky process's memory layout would otherwise show as a change.
    asv={"processes": 3},
    fp32_kernels="matmul",  # cuBLAS: its TF32 flag sets the fp32 roof
    plan={"build_s": {"cpu": 1.0, "cuda": 0.5}},
)
def matmul(n: int, dtype: str, device: str):
    """torch.mm of two preallocated n x n matrices (2 n^3 FLOPs)"""
    import torch

    tdtype = torch_dtype(dtype)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=tdtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=tdtype)
    out = torch.empty(n, n, device=device, dtype=tdtype)  # preallocated: time the kernel, not malloc

    def step() -> None:
        torch.mm(a, b, out=out)

    return perfsuite.Step(
        step,
        items=1,
        unit="matmuls",
        flops=matmul_flops(n),
        flops_method="analytic",
        bytes=3.0 * n * n * a.element_size(),
        dtype=dtype,
    )
