"""Bytes autograd saves for backward during one call: the activation memory a step holds.

Counted through `saved_tensors_hooks`, once per distinct storage (a tensor saved by two ops,
or a view of a saved one, counts once). Exact and device-independent, unlike peak RSS on CPU,
where the allocator's caching hides which run allocated what.
"""

from __future__ import annotations

from collections.abc import Callable

from perfsuite.measuring.counted import once_per_case


@once_per_case(stand_in=0)  # every build of a case saves the same: the first build counts
def saved_tensor_bytes(fn: Callable[[], object]) -> int:
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())
