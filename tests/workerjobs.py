"""A worker body for tests of the spawn road: it measures with the runner's timing algorithm and a
fake clock, and imports no torch, so a spawned interpreter starts in well under a second."""

from __future__ import annotations

import os

from perfsuite.core.record import Record, Work


def fake_worker(conn, job) -> None:
    from perfsuite.core import registry
    from perfsuite.measuring.runner import time_blocks

    workload = registry.get(job.workload) if isinstance(job.workload, str) else job.workload
    m = time_blocks(lambda: None, job.clock, job.cfg)
    rec = Record(
        workload=workload.name,
        params=job.params,
        device="cpu",
        timing_method=job.clock.method,
        block_size=m.block_size,
        samples_s=m.samples_s,
        work=Work(items_per_step=1, item_unit="calls"),
        conditions={
            "processes": job.cfg.processes,
            "found_by_name": isinstance(job.workload, str),
            "share_s": job.cfg.max_time,
            "pid": os.getpid(),
        },
    )
    conn.send(("ok", rec.to_dict()))
    conn.close()
