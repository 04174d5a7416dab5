"""Evaluation metrics computed on device tensors."""

from __future__ import annotations


def mar_at_k(codes, labels, k: int = 5, chunk: int = 1024) -> float:
    """Mean recall at k over latent codes, by cosine similarity, normalised so that 1 is the best.

    For each code: how many of its k nearest neighbours (itself excluded) share its class,
    divided by min(k, number of *other* codes of its class) -- the most hits possible -- and
    averaged over all codes. A perfect embedding scores 1 whatever the class sizes (dividing by
    the class size alone, as the seed did, caps 10 classes of 100 codes at 5/99 = 0.05).
    Codes whose class has no other member have no defined recall and are left out.
    Similarities are computed `chunk` rows at a time so 10,000 codes need ~40 MB, not 400 MB.
    """
    import torch

    if codes.ndim != 2 or labels.ndim != 1 or len(codes) != len(labels):
        raise ValueError(f"codes must be N x D and labels N, got {tuple(codes.shape)} and {tuple(labels.shape)}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = len(codes)
    if n < 2:
        raise ValueError("need at least two codes")
    kk = min(k, n - 1)
    unit = torch.nn.functional.normalize(codes.float(), dim=1)
    same_class_total = torch.bincount(labels)[labels] - 1  # other members of each code's class
    hits = torch.empty(n, device=codes.device)
    for start in range(0, n, chunk):
        sim = unit[start : start + chunk] @ unit.T
        rows = torch.arange(sim.shape[0], device=codes.device)
        sim[rows, rows + start] = float("-inf")  # a code is not its own neighbour
        nn = sim.topk(kk, dim=1).indices
        hits[start : start + chunk] = (labels[nn] == labels[start : start + chunk, None]).sum(dim=1).float()
    valid = same_class_total > 0
    if not bool(valid.any()):
        raise ValueError("no class has two or more codes: recall is undefined")
    possible = same_class_total.clamp(max=kk).float()
    return float((hits[valid] / possible[valid]).mean())
