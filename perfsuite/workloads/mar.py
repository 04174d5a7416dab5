"""MAR@k on latent codes: the autoencoder's validation metric, as a benchmark of its own cost."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.workloads.base import BuiltStep, Workload


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    import torch

    from perfsuite.training.mar import mar_at_k

    gen = torch.Generator().manual_seed(0)
    n, dim = params["n"], params["dim"]
    codes = torch.randn(n, dim, generator=gen).to(device)
    labels = torch.randint(0, params["classes"], (n,), generator=gen).to(device)

    def step():
        return mar_at_k(codes, labels, params["k"])

    # The similarity matmul dominates: n x n outputs of dim multiply-adds.
    return BuiltStep(fn=step, work=Work(items_per_step=n, item_unit="codes", flops_per_step=2.0 * n * n * dim,
                                        flops_method="analytic"))


WORKLOAD = register(
    Workload(
        name="mar",
        description="MAR@k of latent codes by cosine similarity (autoencoder validation metric)",
        params=(
            Param("n", int, 1000, min=2, max=100_000, help="number of codes (1000, 10000)"),
            Param("dim", int, 128, min=1),
            Param("classes", int, 10, min=1),
            Param("k", int, 5, min=1),
        ),
        builder=build,
    )
)
