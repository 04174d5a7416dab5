"""An empty step: what the harness itself costs per timed call.

Declared with the public API, as a user's workload is (docs/adding-a-workload.md).
"""

from __future__ import annotations

import perfsuite


def _noop() -> None:
    return None


@perfsuite.workload(grids={"ci": {}})
def noop(device: str):
    """an empty Python function: the harness's per-call overhead"""
    # No FLOPs: the counter finds none, so no meaningless "0% of peak" is reported.
    return perfsuite.Step(_noop, items=1, unit="calls")
