"""How far a variant's answers are from the baseline's: its output on the same inputs (largest
absolute and relative error, top-1 agreement) and the workload's own metrics (accuracy, F1) as a
fraction of eager's. A variant holds accuracy when every one of those fractions reaches the floor
(MLPerf's rule: 99% of the FP32 reference)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfsuite.core.errors import PerfsuiteError

FLOOR = 0.99
# Keys of a workload's evaluation that are not metrics: predictions are compared, not scored.
PREDICTIONS = "predictions"


class WrongOutput(PerfsuiteError):
    """A variant's output that cannot be the model's answer: another shape, or not finite."""


def primary(out: Any) -> np.ndarray:
    """The model's main output as float32 on the host: a tensor, a model output's `logits`, the
    first of a tuple or list, the first value of a dict."""
    seen = 0
    while not hasattr(out, "shape") and seen < 8:
        seen += 1
        if hasattr(out, "logits"):
            out = out.logits
        elif isinstance(out, (tuple, list)) and out:
            out = out[0]
        elif isinstance(out, dict) and out:
            out = next(iter(out.values()))
        else:
            raise WrongOutput(f"the model's output ({type(out).__name__}) holds no tensor to compare")
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    return np.asarray(out, dtype=np.float32)


def compare(base: np.ndarray, other: np.ndarray) -> dict:
    """{max_abs, max_rel, top1}: the largest absolute difference, that over the largest absolute
    baseline value, and the fraction of rows whose arg-max agrees (None for a scalar or one-wide
    output). WrongOutput for another shape or a value that is not finite."""
    if base.shape != other.shape:
        raise WrongOutput(f"output shape {tuple(other.shape)}, the baseline's is {tuple(base.shape)}")
    if not np.isfinite(other).all():
        bad = int((~np.isfinite(other)).sum())
        raise WrongOutput(f"{bad} of {other.size} output values are not finite (NaN or inf)")
    diff = np.abs(base.astype(np.float64) - other.astype(np.float64))
    scale = float(np.abs(base).max()) if base.size else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    top1 = None
    if base.ndim >= 1 and base.shape[-1] > 1:
        top1 = float((base.argmax(-1) == other.argmax(-1)).mean())
    return {
        "max_abs": max_abs,
        "max_rel": max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf),
        "top1": top1,
    }


def metrics_of(evaluation: dict | None) -> dict[str, float]:
    """The numeric metrics of a workload's evaluation (its predictions left out)."""
    out = {}
    for k, v in (evaluation or {}).items():
        if k != PREDICTIONS and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[k] = float(v)
    return out


def prediction_agreement(base: dict | None, other: dict | None) -> float | None:
    """The fraction of the evaluation's predictions the variant shares with eager (None without them)."""
    a, b = (base or {}).get(PREDICTIONS), (other or {}).get(PREDICTIONS)
    if not a or not b or len(a) != len(b):
        return None
    return sum(x == y for x, y in zip(a, b)) / len(a)


def held(
    outputs: dict, metrics: dict[str, float], base_metrics: dict[str, float], floor: float
) -> tuple[dict, list[str]]:
    """Each fraction of the baseline the variant keeps ({name: fraction}) and the ones below
    `floor`: top-1 agreement over the evaluation's predictions where it has them, else over the
    step's outputs, and each metric over eager's."""
    kept: dict[str, float] = {}
    agree = outputs.get("eval_top1") if outputs.get("eval_top1") is not None else outputs.get("top1")
    if agree is not None:
        kept["top1_agreement"] = agree
    for k, base in base_metrics.items():
        if k in metrics and base > 0:
            kept[k] = metrics[k] / base
    below = [f"{k} {v:.3f} of eager's" for k, v in kept.items() if v < floor]
    return kept, below
