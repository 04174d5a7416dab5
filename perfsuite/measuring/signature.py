"""The work signature of a step: which operators one call dispatches, with their shapes and dtypes,
how often, and the bytes their outputs newly allocate, counted outside the timed region.

Time on a shared machine moves by 2-18% between processes; what the step *does* does not. Two
runs of the same code on the same machine dispatch the same operators on the same shapes, so a
difference in the signature is a difference in work, stated exactly ("+3 aten.cumsum.default
(64x8192) float32"), with no interval because it has none. What it cannot see: work inside one
operator (another BLAS kernel, a cache or layout effect, the clock's frequency), Python between
operators (an instruction count sees that: perfsuite.measuring.instructions).

On a GPU the same call also runs under torch.profiler's CUDA activity where it can, and the
signature keeps the kernels the device ran (`kernels`: launches a step, including those a replayed
CUDA graph holds) and its copies and fills (`copies`: memcpy/memset). They are compared beside the
digest, not in it, as other work: a library may pick another kernel for the same operator (cuDNN's
heuristics and autotuning), so two runs of the same code may differ in them. The gate's sides take
no kernel counts: the profiler's first use in one side process, not yet in the other, could move
the pairs after it.

The count runs one call of the step under a TorchDispatchMode, after the timed blocks (the
step's own warm-up and first-call effects are behind it), on the build that was measured. The
operators the autograd engine runs for backward are seen too: the mode is part of the thread
state the engine carries to its threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

METHOD = "TorchDispatchMode: one call after the timed blocks"
# Distinct (operator, shapes, dtype) entries kept in a record: a large model dispatches a few
# hundred; more than this is summarised by the digest and the counts alone.
MAX_ENTRIES = 2000


def _shape_text(x: Any) -> str | None:
    shape = getattr(x, "shape", None)
    return None if shape is None else "x".join(str(int(d)) for d in shape) or "scalar"


def _entry(func: Any, args: tuple, kwargs: Mapping[str, Any]) -> tuple[str, str, str]:
    import torch
    from torch.utils._pytree import tree_leaves

    tensors = [a for a in tree_leaves((args, dict(kwargs))) if isinstance(a, torch.Tensor)]
    shapes = ",".join(s for s in (_shape_text(t) for t in tensors) if s is not None)
    dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else "-"
    return str(func), shapes, dtype


def _counting_mode():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Counting(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: Counter[tuple[str, str, str]] = Counter()
            self.bytes_allocated = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.calls[_entry(func, args, kwargs)] += 1
            inputs = {
                t.untyped_storage().data_ptr()
                for t in tree_leaves((args, kwargs))
                if isinstance(t, torch.Tensor) and t.device.type != "meta"
            }
            out = func(*args, **kwargs)
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type != "meta":
                    storage = t.untyped_storage()
                    if storage.data_ptr() not in inputs:  # a new allocation, not a view or in-place
                        self.bytes_allocated += storage.nbytes()
            return out

    return Counting()


def take(fn: Callable[[], object], device: str = "cpu") -> dict[str, Any]:
    """The signature of one call of `fn`: a record's `signature` block (SignatureShape); on a CUDA
    `device`, with the kernels and copies the device ran in that call where the profiler saw them."""
    mode = _counting_mode()
    on_gpu = device.startswith("cuda")
    with _device_activity(on_gpu) as events, mode:  # the profiler outside the dispatch mode
        fn()
        if on_gpu:
            import torch

            torch.cuda.synchronize(device)  # every kernel of the call ended inside the profile
    entries = sorted([op, shapes, dtype, n] for (op, shapes, dtype), n in mode.calls.items())
    out = {
        "digest": digest(entries),
        "calls": sum(mode.calls.values()),
        "distinct": len(entries),
        "bytes_allocated": mode.bytes_allocated,
        "entries": entries[:MAX_ENTRIES],
        "method": METHOD,
    }
    return {**out, **device_work(events())} if on_gpu else out


@contextlib.contextmanager
def _device_activity(on: bool) -> Iterator[Callable[[], list]]:
    """torch.profiler's CUDA activity over the block when `on`, best effort: yields what gives its
    events once the block has ended, none where the profiler cannot trace the device (no CUPTI, its
    privilege, another profiler such as nsys holding it): the operators' signature stands alone."""
    seen: list = []
    prof = None
    if on:
        try:
            from torch.profiler import ProfilerActivity, profile, supported_activities

            if ProfilerActivity.CUDA in supported_activities():
                prof = profile(activities=[ProfilerActivity.CUDA])
                prof.__enter__()
        except Exception:  # noqa: BLE001 - no device activity: nothing claimed about kernels
            prof = None
    try:
        yield lambda: seen
    finally:
        if prof is not None:
            try:
                prof.__exit__(None, None, None)
                seen.extend(prof.events())
            except Exception:  # noqa: BLE001 - as above
                seen.clear()


def device_work(events: list) -> dict[str, int]:
    """The kernels and the copies (memcpy, memset) among a profile's events that ran on the device;
    empty where none did (a profile that saw nothing of the device says nothing about it)."""
    kernels = copies = 0
    for e in events:
        if "CUDA" not in str(getattr(e, "device_type", "")):
            continue
        name = str(getattr(e, "name", ""))
        if name.startswith(("Memcpy", "Memset", "[memcpy", "[memset")):
            copies += 1
        else:
            kernels += 1
    return {"kernels": kernels, "copies": copies} if kernels or copies else {}


def digest(entries: list) -> str:
    """A short hash of the entries: equal signatures have equal digests."""
    text = json.dumps(entries, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
