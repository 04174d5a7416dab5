"""MAR@k on latent codes: the autoencoder's validation metric, as a benchmark of its own cost."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.core.checks import need
from perfsuite.workloads.base import BuiltStep, Workload
from perfsuite.training.mar import mar_at_k


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    import torch


    gen = torch.Generator().manual_seed(0)
    n, dim = params["n"], params["dim"]
    codes = torch.randn(n, dim, generator=gen).to(device)
    labels = torch.randint(0, params["classes"], (n,), generator=gen).to(device)

    def step():
        return mar_at_k(codes, labels, params["k"])

    # The similarity matmul dominates: n x n outputs of dim multiply-adds.
    return BuiltStep(fn=step, work=Work(items_per_step=n, item_unit="codes", flops_per_step=2.0 * n * n * dim,
                                        flops_method="analytic"))


def mar_perfect_and_example(device: str = "cpu") -> str:
    """MAR@k is 1 for codes that cluster perfectly by class, and about chance for random ones."""
    import torch


    # Ten classes of 100 codes, each class its own direction: every neighbour shares the class.
    labels = torch.arange(10).repeat_interleave(100)
    codes = torch.nn.functional.one_hot(labels, 16).float() + 0.01 * torch.randn(1000, 16)
    perfect = mar_at_k(codes.to(device), labels.to(device), 5)
    need(abs(perfect - 1.0) < 1e-6, f"perfectly clustered codes give MAR@5 = {perfect:.4f}, not 1")
    # Random codes: a neighbour shares the class about one time in ten.
    chance = mar_at_k(torch.randn(1000, 16).to(device), labels.to(device), 5)
    need(0.02 < chance < 0.3, f"random codes give MAR@5 = {chance:.3f}, expected about 0.1")
    return f"1.0 for perfectly clustered codes, {chance:.2f} for random ones (chance: 0.1)"


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
        checks={"MAR@k's best is 1": mar_perfect_and_example},
        grids={"ci": {"n": [1000]}, "cpu": {"n": [1000, 10000]}, "gpu": {"n": [1000, 10000]}},
    )
)
