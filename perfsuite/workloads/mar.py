"""MAR@k on latent codes: the autoencoder's validation metric, as a benchmark of its own cost."""

from __future__ import annotations

import perfsuite
from perfsuite.core.check_failed import need
from perfsuite.training.evaluation import mar_at_k


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


@perfsuite.workload(
    params={
        "n": perfsuite.param(1000, min=2, max=100_000, help="number of codes (1000, 10000)"),
        "dim": perfsuite.param(128, min=1),
        "classes": perfsuite.param(10, min=1),
        "k": perfsuite.param(5, min=1),
    },
    checks={"MAR@k's best is 1": mar_perfect_and_example},
    grids={"ci": {"n": [1000]}, "cpu": {"n": [1000, 10000]}, "gpu": {"n": [1000, 10000]}},
)
def mar(n: int, dim: int, classes: int, k: int, device: str):
    """MAR@k of latent codes by cosine similarity (autoencoder validation metric)"""
    import torch

    gen = torch.Generator().manual_seed(0)
    codes = torch.randn(n, dim, generator=gen).to(device)
    labels = torch.randint(0, classes, (n,), generator=gen).to(device)

    def step():
        return mar_at_k(codes, labels, k)

    # The similarity matmul dominates: n x n outputs of dim multiply-adds.
    return perfsuite.Step(step, items=n, unit="codes", flops=2.0 * n * n * dim, flops_method="analytic")
