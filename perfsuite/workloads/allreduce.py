"""Collective bandwidth: one all_reduce, all_gather or reduce_scatter of `bytes` per step, over
`world_size` ranks started by torchrun (perfsuite.distributed), as NVIDIA's nccl-tests measure it.

`bytes` is the whole buffer, as nccl-tests' "size" column: all_reduce reduces `bytes` on every
rank; all_gather gathers `bytes / world_size` from each rank into `bytes`; reduce_scatter reduces
`bytes` and leaves `bytes / world_size` on each rank (rounded down to whole elements, a multiple
of world_size; `extra.bytes` is what was moved). With nccl-tests' definitions, over the slowest
rank's median step time t:

    algbw = bytes / t
    busbw = algbw x 2(n-1)/n     all_reduce
    busbw = algbw x (n-1)/n      all_gather, reduce_scatter

so busbw can be compared with the link's bandwidth whatever n is (and with nccl-tests' own
output). The record's throughput is algbw (work counts bytes per step); `extra` holds both.
"""

from __future__ import annotations

import perfsuite
from perfsuite.distributed.ddp_workloads import launch, report
from perfsuite.distributed.launch import check_world
from perfsuite.distributed.rank import current
from perfsuite.workloads.base import DTYPES, torch_dtype

OPS = ("all_reduce", "all_gather", "reduce_scatter")
MIN_BYTES, MAX_BYTES = 1 << 10, 1 << 30


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md): what each rank's link carries per byte."""
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")


def validate(device: str, **params) -> None:
    check_world(params, device)


@perfsuite.workload(
    description="one collective per step (all_reduce | all_gather | reduce_scatter) over world_size ranks "
    "(torchrun; gloo on CPU, NCCL on CUDA): algbw and busbw as nccl-tests define them",
    params={
        "op": perfsuite.param("all_reduce", choices=OPS),
        "bytes": perfsuite.param(1 << 20, min=MIN_BYTES, max=MAX_BYTES, help="whole buffer, 1 KiB .. 1 GiB"),
        "dtype": perfsuite.param("fp32", choices=DTYPES),
        "world_size": perfsuite.param(2, min=1, max=4096, help="ranks in all (nnodes x ranks per node)"),
        "nnodes": perfsuite.param(
            1, min=1, max=1024, help="nodes; >1 runs where perfsuite was started by torchrun on that many nodes"
        ),
        "backend": perfsuite.param("auto", choices=("auto", "gloo", "nccl"), help="auto: nccl on CUDA, gloo on CPU"),
    },
    validate=validate,
    grids={
        "ci": {"bytes": [1 << 16], "world_size": [2]},
        "cpu": {"op": ["all_reduce", "all_gather", "reduce_scatter"], "bytes": [1 << 20, 1 << 26], "world_size": [2]},
        "gpu": {"bytes": [1 << 10, 1 << 20, 1 << 30], "world_size": [1, 2]},
    },
    asv={"max_time": 2.0, "tracks": ["seconds_per_bus_gb"]},
    launcher=launch,
    max_builds=1,  # every rank builds one step: builds rotated in lockstep would multiply the groups' buffers
    report=report,
)
def allreduce(device: str, **params):
    """Runs on every rank (perfsuite.distributed.rank), inside the rank's process group."""
    import torch
    import torch.distributed as dist

    ctx = current()
    n, op = ctx.world_size, params["op"]
    dtype = torch_dtype(params["dtype"])
    elem = torch.empty((), dtype=dtype).element_size()
    count = params["bytes"] // elem
    count -= count % n  # all_gather and reduce_scatter split the buffer evenly over the ranks
    if count == 0:
        raise ValueError(f"bytes={params['bytes']} holds fewer than {n} {params['dtype']} elements")
    group = ctx.group
    # Zeros: a sum of zeros stays finite however many steps run (ones would overflow fp16).
    full = torch.zeros(count, dtype=dtype, device=ctx.device)
    part = torch.zeros(count // n, dtype=dtype, device=ctx.device)
    if op == "all_reduce":

        def step() -> None:
            dist.all_reduce(full, group=group)
    elif op == "all_gather":  # torch 2.14 names it all_gather_single; all_gather_into_tensor before
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def step() -> None:
            gather(full, part, group=group)
    else:
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

        def step() -> None:
            scatter(part, full, group=group)

    nbytes = count * elem
    info = {
        "op": op,
        "bytes": nbytes,
        "requested_bytes": params["bytes"],
        "elements": count,
        "bus_factor": bus_factor(op, n),
    }
    # A collective moves bytes: no FLOPs to count (and counting would run one more collective).
    return perfsuite.Step(
        step,
        items=nbytes,
        unit="B",
        bytes=nbytes,
        flops_method="unknown",
        dtype=params["dtype"],
        extra=lambda: dict(info),
    )
