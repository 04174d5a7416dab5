"""Distributed workloads that fail on purpose, for tests/test_distributed.py.

FLAKY runs in the real rank program (perfsuite.distributed.rank) and raises while building on
rank 1. HANGING is started by torchrun with this module as its rank body (`-m distjobs`): the
ranks import no torch, say where they are in perfsuite's status files, and never finish, so a
short timeout ends them. The tests put this folder on PYTHONPATH for the ranks.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

from perfsuite.core.params import Param
from perfsuite.core.record import Work
from perfsuite.core.workload import BuiltStep, Workload
from perfsuite.distributed import launch

HANG_TIMEOUT_S = 15.0
WORLD = (Param("world_size", int, 2), Param("nnodes", int, 1))


def _build(params, device):
    from perfsuite.distributed.rank import current

    if current().rank == 1:
        raise RuntimeError("boom on rank 1")
    return BuiltStep(fn=lambda: None, work=Work(items_per_step=1, item_unit="calls"))


FLAKY = Workload(
    "flaky",
    "rank 1 raises while building",
    WORLD,
    _build,
    max_builds=1,
    launcher=functools.partial(launch.run_distributed, spec="distjobs:FLAKY"),
)
HANGING = Workload(
    "hanging",
    "rank 1 never finishes building",
    WORLD,
    _build,
    max_builds=1,
    launcher=functools.partial(launch.run_distributed, module="distjobs", timeout_s=HANG_TIMEOUT_S),
)


def hanging_rank(jobdir: str) -> None:
    """A rank that never finishes: rank 1 stuck in build, rank 0 waiting for it in measure."""
    from perfsuite.distributed.rank import Status

    rank = int(os.environ["RANK"])
    status = Status(Path(jobdir), rank)
    pids = os.environ.get("DISTJOBS_PIDS")
    if pids:
        (Path(pids) / f"rank-{rank}.pid").write_text(str(os.getpid()))
    status.stage("build")
    if rank == 0:
        status.stage("measure")
    while True:
        time.sleep(1)


if __name__ == "__main__":
    hanging_rank(sys.argv[1])
