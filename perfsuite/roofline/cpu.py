"""This machine's own roofline from stored records: the measured matmul peak and copy
bandwidth as ceilings, each record's counted FLOPs per step and estimated bytes per step.

Bytes per step, when the workload did not state them: every parameter is read and its
gradient written once per training step, and an optimiser with one state per parameter
(SGD momentum, half of Adam's) reads and writes it: about 4 x parameter bytes, plus the
activations saved for backward, written in forward and read in backward (2 x saved bytes).
For inference, parameter bytes plus the input. A lower bound: caches that miss more raise it.
The estimate is stored by the workloads that can make it (`work.bytes_per_step`).
"""

from __future__ import annotations

from perfsuite.core.record import Record
from perfsuite.roofline.points import Point


def record_points(records: list[Record]) -> tuple[list[Point], dict]:
    pts, peaks = [], {}
    for r in records:
        if not r.work.flops_per_step or not r.work.bytes_per_step or not r.peak:
            continue
        t = r.stats.median
        # A short chart label: workload, its distinguishing parameter, and the precision.
        detail = next((str(r.params[k]) for k in ("variant", "model", "impl", "n", "batch_size") if k in r.params), "")
        short = " ".join(x for x in (r.workload, detail, r.work.dtype) if x)
        pts.append(
            Point(r.label(), short, "", r.work.flops_per_step, r.work.bytes_per_step, None, None, t, r.work.dtype)
        )
        peaks[r.work.dtype] = (r.peak.get("flops_per_s"), r.peak.get("bytes_per_s"))
    return pts, peaks
