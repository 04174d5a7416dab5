"""Complete training state to disk and back: model, optimiser, scheduler, grad scaler,
step/epoch, best metric and every RNG, so a resumed run continues bit-exactly.

Saving is atomic (temporary file, then rename). Loading uses `torch.load(weights_only=True)`
and restores all or nothing: on any failure the objects are put back as they were.
"""

from __future__ import annotations

import copy
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from perfsuite.core.errors import PerfsuiteError
from perfsuite.storage import write

FORMAT = "perfsuite.checkpoint"
# 1: RNG states as tensors (moved by map_location: CUDA states could not be restored on CUDA)
# 2: RNG states as bytes. Both are read. Since 2026-11-28 the RNG also names the CUDA device the
#    model was on ("cuda_step", an optional key older readers ignore).
VERSION = 2
READABLE_VERSIONS = (1, 2)


class CheckpointError(PerfsuiteError):
    """A checkpoint file is missing, corrupt, truncated or does not fit the objects."""


def _rng_bytes(state) -> bytes:
    """An RNG state as plain bytes: `torch.load(map_location=...)` moves tensors, never bytes,
    and the generators accept only CPU ByteTensors back (a CUDA state mapped onto the GPU is
    refused with "RNG state must be a torch.ByteTensor")."""
    return state.detach().cpu().contiguous().numpy().tobytes()  # RNG states are uint8 already


def _byte_tensor(state):
    """A CPU ByteTensor from bytes (this version) or from a tensor on any device (version 1 files)."""
    import torch

    if isinstance(state, (bytes, bytearray)):
        return torch.frombuffer(bytearray(state), dtype=torch.uint8)
    return state.detach().to("cpu", torch.uint8).contiguous()


def _cuda_index(model) -> int | None:
    """The CUDA device the model, so the step training it, runs on; None off CUDA."""
    import itertools

    for tensor in itertools.chain(model.parameters(), model.buffers()):
        return tensor.device.index if tensor.device.type == "cuda" else None
    return None


def _rng_state(cuda_step: int | None = None) -> dict:
    """Every generator's state; `cuda_step`: the device whose generator the step draws from."""
    import torch

    # (a tuple: the legacy default; numpy's stubs give get_state() the dict of legacy=False)
    np_state = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    state: dict[str, Any] = {
        "torch": _rng_bytes(torch.get_rng_state()),
        # numpy's state holds an ndarray, which weights_only loading refuses: store its bytes.
        "numpy": {
            "name": np_state[0],
            "keys": np_state[1].astype(np.uint32).tobytes(),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached": float(np_state[4]),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [_rng_bytes(s) for s in torch.cuda.get_rng_state_all()]
        state["cuda_step"] = cuda_step
    return state


def _numpy_keys(keys) -> np.ndarray:
    if isinstance(keys, (bytes, bytearray)):
        return np.frombuffer(bytes(keys), dtype=np.uint32).copy()
    return keys.detach().cpu().numpy().astype(np.uint32)  # version 1: an int64 tensor


def _set_rng_state(state: dict, cuda_step: int | None = None) -> None:
    """Put every generator back; the saved step's CUDA generator goes to `cuda_step`, the device
    the model is on now: a run saved on cuda:1 and resumed on cuda:0 draws on where it left off."""
    import torch

    torch.set_rng_state(_byte_tensor(state["torch"]))
    n = state["numpy"]
    np.random.set_state((n["name"], _numpy_keys(n["keys"]), n["pos"], n["has_gauss"], n["cached"]))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        states = [_byte_tensor(s) for s in state["cuda"]]
        torch.cuda.set_rng_state_all(states)
        saved = state.get("cuda_step")  # absent in older files: each generator back on its own device
        if saved is not None and cuda_step is not None and saved != cuda_step and saved < len(states):
            torch.cuda.set_rng_state(states[saved], cuda_step)


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    best_metric: float | None = None


def save_checkpoint(
    path: str | os.PathLike, *, model, optimizer, scheduler=None, scaler=None, progress: Progress
) -> int:
    """Write the full training state atomically; returns the file size in bytes."""
    import torch

    path = Path(path)
    state = {
        "format": FORMAT,
        "version": VERSION,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "step": progress.step,
        "epoch": progress.epoch,
        "best_metric": progress.best_metric,
        "rng": _rng_state(_cuda_index(model)),
    }

    write.make_dir(path.parent, "checkpoint folder")
    with write.atomic(path) as f:  # temporary file, fsync, rename; a symlink there is refused
        torch.save(state, f)
    return path.stat().st_size


def load_checkpoint(
    path: str | os.PathLike, *, model, optimizer, scheduler=None, scaler=None, map_location=None
) -> Progress:
    """Restore everything `save_checkpoint` wrote, or nothing (and raise CheckpointError)."""
    import torch

    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - truncated zip, garbage, a pickle with disallowed globals ...
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a perfsuite checkpoint")
    if state.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(
            f"{path}: checkpoint version {state.get('version')!r}, this perfsuite reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    for key, obj in (("scheduler", scheduler), ("scaler", scaler)):
        if (state.get(key) is None) != (obj is None):
            raise CheckpointError(f"{path}: checkpoint {'lacks' if obj is not None else 'has'} a {key} state")

    targets = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}
    backup = {k: copy.deepcopy(o.state_dict()) for k, o in targets.items() if o is not None}
    cuda_step = _cuda_index(model)
    rng_backup = _rng_state(cuda_step)
    try:
        for key, obj in targets.items():
            if obj is not None:
                obj.load_state_dict(state[key])
        _set_rng_state(state["rng"], cuda_step)
    except Exception as exc:  # noqa: BLE001 - whatever failed, the objects get their state back
        for key, obj in targets.items():
            if obj is not None:
                obj.load_state_dict(backup[key])
        _set_rng_state(rng_backup, cuda_step)
        raise CheckpointError(
            f"{path}: does not fit this model/optimiser ({type(exc).__name__}: {exc}); nothing restored"
        ) from None
    return Progress(step=int(state["step"]), epoch=int(state["epoch"]), best_metric=state["best_metric"])


class EarlyStopping:
    """Tracks the best metric and says when `patience` evaluations passed without improvement."""

    def __init__(self, patience: int, mode: str = "min", min_delta: float = 0.0) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be min or max, got {mode!r}")
        self.patience, self.mode, self.min_delta = patience, mode, min_delta
        self.best: float | None = None
        self.bad_evals = 0

    def update(self, metric: float) -> bool:
        """Record one evaluation; True when it is a new best (save the best model then)."""
        better = self.best is None or (
            metric < self.best - self.min_delta if self.mode == "min" else metric > self.best + self.min_delta
        )
        if better:
            self.best, self.bad_evals = metric, 0
        else:
            self.bad_evals += 1
        return better

    @property
    def should_stop(self) -> bool:
        return self.bad_evals >= self.patience
