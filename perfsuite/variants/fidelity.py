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


# Output values a side sends for comparison: a language model's logits over its vocabulary (8 x 128 x
# 151k floats: 620 MB) would not cross a pipe; above this many, an even stride of them is compared
# (the same positions on both sides), while the arg-max of every row is still compared in full.
MAX_VALUES = 1 << 22


def digest(out: np.ndarray) -> dict:
    """What a side sends of its output: its shape, how many values are not finite, the arg-max of
    every row (None for a scalar or one-wide output) and at most MAX_VALUES of its values."""
    flat = out.reshape(-1)
    stride = max(1, -(-flat.size // MAX_VALUES))
    return {
        "shape": tuple(out.shape),
        "nonfinite": int((~np.isfinite(out)).sum()),
        "top1": out.argmax(-1) if out.ndim >= 1 and out.shape[-1] > 1 else None,
        "values": np.ascontiguousarray(flat[::stride]),
        "stride": stride,
    }


def compare(base: dict, other: dict) -> dict:
    """{max_abs, max_rel, top1} of two digests: the largest absolute difference, that over the
    largest absolute baseline value (over every value, or an even stride of them past MAX_VALUES),
    and the fraction of rows whose arg-max agrees (None for a scalar or one-wide output).
    WrongOutput for another shape or a value that is not finite."""
    if tuple(base["shape"]) != tuple(other["shape"]):
        raise WrongOutput(f"output shape {tuple(other['shape'])}, the baseline's is {tuple(base['shape'])}")
    if other["nonfinite"]:
        size = int(np.prod(other["shape"]))
        raise WrongOutput(f"{other['nonfinite']} of {size} output values are not finite (NaN or inf)")
    a, b = base["values"], other["values"]
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    scale = float(np.abs(a).max()) if a.size else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    top1 = None
    if base["top1"] is not None and other["top1"] is not None:
        top1 = float((base["top1"] == other["top1"]).mean())
    rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return {"max_abs": max_abs, "max_rel": rel, "top1": top1}


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
