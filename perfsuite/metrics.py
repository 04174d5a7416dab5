"""Evaluation metrics computed on device tensors."""

from __future__ import annotations


def mar_at_k(codes, labels, k: int = 5, chunk: int = 1024) -> float:
    """Mean average recall at k over latent codes, by cosine similarity.

    For each code: how many of its k nearest neighbours (itself excluded) share its class,
    divided by the number of *other* codes of its class; averaged over all codes. Codes whose
    class has no other member have no defined recall and are left out of the average.
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
        sim = unit[start:start + chunk] @ unit.T
        rows = torch.arange(sim.shape[0], device=codes.device)
        sim[rows, rows + start] = float("-inf")  # a code is not its own neighbour
        nn = sim.topk(kk, dim=1).indices
        hits[start:start + chunk] = (labels[nn] == labels[start:start + chunk, None]).sum(dim=1).float()
    valid = same_class_total > 0
    if not bool(valid.any()):
        raise ValueError("no class has two or more codes: recall is undefined")
    return float((hits[valid] / same_class_total[valid].float()).mean())
