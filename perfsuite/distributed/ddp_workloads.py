"""What a workload whose cases run in ranks of their own (ddp, allreduce) gives @perfsuite.workload:

    @perfsuite.workload(params=..., launcher=launch, max_builds=1, report=report)

`launch` starts the case's ranks under torchrun and returns its one record (execute.run_cases
calls a workload's launcher instead of measuring in its own process); every rank builds one step
(`max_builds=1`: builds rotated in lockstep would multiply the process groups' models); `report`
is the scaling and bandwidth section every distributed workload shares.
"""

from __future__ import annotations

from perfsuite.distributed.launch import run_distributed
from perfsuite.distributed.report_sections import section


def launch(*args, **kwargs):
    """The launcher of a distributed workload (perfsuite.distributed.launch.run_distributed)."""
    return run_distributed(*args, **kwargs)


def report(records: list, out_dir, options) -> list[str]:
    """Scaling efficiency against world_size=1, and the collectives' algbw/busbw
    (perfsuite/distributed/report_sections.py): every distributed workload's report section."""
    return section(records)
