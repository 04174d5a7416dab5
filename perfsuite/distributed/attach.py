"""perfsuite started by torchrun: the same suite file on several nodes.

On a cluster every node runs the same command, e.g. under Slurm

    srun torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint $HEAD:29500 -m perfsuite run --suite cluster --out results/cluster

and every process of that world joins it (`join`, called by `perfsuite run`). Rank 0 runs the
suite as it would alone and writes every result; the other ranks follow: for each distributed
case whose world_size and nnodes are this world's, rank 0 sends the job to all of them and every
rank runs it (perfsuite.distributed.rank, in new groups of the world), so the case's record is
the same as from a launch on one node. Cases on one node (nnodes=1) are started by rank 0 with
its own local torchrun, as without a world; single-process cases run on rank 0 alone.

A rank that fails inside a case makes the others' collectives fail after the case's timeout (its
groups are made with it); rank 0 records that failure and goes on. A rank that never returns is
bounded by the cluster's own time limit: there is no process here that could stop it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from perfsuite.distributed.launch_error import DistributedFailure
from perfsuite.distributed.rank import Status, run_job, world_from_env

# How long the followers wait for rank 0's next case: rank 0 may measure single-process cases
# for hours in between.
FOLLOW_TIMEOUT = timedelta(days=7)
_JOINED = False


def attached_world() -> dict | None:
    """This process's torchrun world, once joined (`join`); None otherwise."""
    return world_from_env() if _JOINED else None


def started_by_torchrun() -> bool:
    return world_from_env() is not None and "TORCHELASTIC_RUN_ID" in os.environ


def join(main: Callable[[], int]) -> int:
    """Every rank of a torchrun world calls this with the command's body: rank 0 runs it, the
    others serve its distributed cases until it ends."""
    global _JOINED
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=FOLLOW_TIMEOUT)
    _JOINED = True
    try:
        if dist.get_rank() == 0:
            try:
                return main()
            finally:
                dist.broadcast_object_list([None], src=0)  # the followers' end
        return follow()
    finally:
        _JOINED = False
        dist.destroy_process_group()


def follow() -> int:
    """A follower's loop: run each job rank 0 sends, until it sends None."""
    import torch.distributed as dist

    failed = 0
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0)
        job = box[0]
        if job is None:
            return 1 if failed else 0
        try:
            run_job(job, Status(None, dist.get_rank()), attached=True)
        except Exception:  # noqa: BLE001 - rank 0 records the case's failure; this rank serves the next
            import traceback

            traceback.print_exc()
            failed += 1


def run_on_world(job: dict) -> Any:
    """Rank 0: run `job` on every rank of the joined world; the case's record as a dict."""
    import torch.distributed as dist

    dist.broadcast_object_list([job], src=0)
    try:
        result = run_job(job, Status(None, 0), attached=True)
    except Exception as exc:  # noqa: BLE001 - one failure message, as from a local launch
        raise DistributedFailure(
            f"rank 0 in an attached world of {dist.get_world_size()}: {type(exc).__name__}: {exc}"
        ) from exc
    return result
