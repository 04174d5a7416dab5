"""An empty step: what the harness itself costs per timed call."""

from __future__ import annotations

from typing import Any, Mapping

from perfsuite.core.record import Work
from perfsuite.core.registry import register
from perfsuite.workloads.base import BuiltStep, Workload


def _noop() -> None:
    return None


def build(params: Mapping[str, Any], device: str) -> BuiltStep:
    # No FLOPs: None, so no meaningless "0% of peak" is reported.
    return BuiltStep(fn=_noop, work=Work(items_per_step=1, item_unit="calls"))


WORKLOAD = register(
    Workload(name="noop", description="an empty Python function: the harness's per-call overhead",
             params=(), builder=build, grids={"ci": {}})
)
