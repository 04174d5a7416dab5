"""The kind of workload whose cases run in ranks of their own (ddp, allreduce)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from perfsuite.core.workload import Workload
from perfsuite.distributed.launch import run_distributed
from perfsuite.distributed.report import section


def launch(*args, **kwargs):
    return run_distributed(*args, **kwargs)


def report(records: list, out_dir, options) -> list[str]:
    """Scaling efficiency against world_size=1, and the collectives' algbw/busbw
    (perfsuite/distributed/report.py): every distributed workload's report section."""
    return section(records)


@dataclass(frozen=True)
class DistributedWorkload(Workload):
    """A Workload whose `builder` runs on every rank (inside perfsuite.distributed.rank) and whose
    `launcher` starts those ranks: execute.run_cases calls launcher(workload, params, cfg, env=,
    peak=, measured=, trace_dir=) for its one record instead of measuring in this process."""

    launcher: Callable[..., Any] = launch
    # Every rank builds one step: builds rotated in lockstep would multiply the process groups' models.
    max_builds: int | None = 1
    report: Callable[..., list] | None = report
