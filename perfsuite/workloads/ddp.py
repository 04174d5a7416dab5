"""Data-parallel training: the resnet or autoencoder step in DistributedDataParallel, over
`world_size` ranks on `nnodes` nodes, started by torchrun (perfsuite.distributed).

A workload of its own rather than a `world_size` parameter of resnet and autoencoder: their
case keys (every resolved parameter) and stored histories stay as they are, the one launch path
is chosen by the workload and not by a parameter value, both models are reached through
perfsuite.training.setup, and world_size=1 (the scaling baseline) is the same DDP code path on
one rank.

Each rank trains on its own batch (`batch_size` images per rank: batch `rank` of the training
set-up's generated data) and DDP averages the gradients. One record per case: the slowest
rank's step time, global throughput (world_size x batch_size images per step), each rank's
median, the communication share of one profiled step, and scaling efficiency against a
world_size=1 case of the same run.
"""

from __future__ import annotations

import perfsuite
from perfsuite.core.errors import ConfigError
from perfsuite.distributed.ddp_model import forward_module, sub_params, wrap
from perfsuite.distributed.ddp_workloads import launch, report
from perfsuite.distributed.launch import check_world
from perfsuite.distributed.rank import current
from perfsuite.training.precision import PRECISIONS, check_precision
from perfsuite.training.setup import training_setup
from perfsuite.training.step import make_train_step
from perfsuite.workloads import autoencoder, resnet
from perfsuite.workloads.base import count_flops, training_bytes

BACKENDS = ("auto", "gloo", "nccl")
# The training workloads whose model a case can train, each with the variants its `ddp=`
# declaration's parameter offers (perfsuite/distributed/ddp_model.py asks them the rest).
MODELS = {"resnet": resnet.MODELS, "autoencoder": autoencoder.VARIANTS}


def _bucket_view(ddp) -> dict:
    """DDP's gradient buckets as it reports them (after the first backward has rebuilt them)."""
    try:
        data = ddp._get_ddp_logging_data()
    except Exception:  # noqa: BLE001 - a private API: the record says it is missing, nothing more
        return {"bucket_cap_bytes": getattr(ddp, "bucket_bytes_cap", None)}
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
    sizes = [int(s) for s in str(sizes).split(",") if s.strip().isdigit()]
    return {
        "bucket_cap_bytes": getattr(ddp, "bucket_bytes_cap", None),
        "buckets": len(sizes) or None,
        "bucket_sizes_bytes": sizes or None,
    }


def validate(device: str, **params) -> None:
    model, variant = params["model"], params["variant"]
    if variant and variant not in MODELS[model]:
        raise ConfigError(
            f"parameter 'variant': {variant!r} is not a variant of {model} "
            f"({', '.join(MODELS[model])}; empty: {MODELS[model][0]})"
        )
    check_precision(params["precision"], device)
    check_world(params, device)


@perfsuite.workload(
    description="resnet or autoencoder training step in DistributedDataParallel over world_size ranks "
    "(torchrun; gloo on CPU, NCCL on CUDA): slowest rank's step, global throughput, "
    "scaling efficiency, communication share",
    params={
        "model": perfsuite.param("resnet", choices=tuple(MODELS), help="the training step: resnet | autoencoder"),
        "variant": perfsuite.param(
            "",
            choices=("",) + MODELS["resnet"] + MODELS["autoencoder"],
            help="resnet18|resnet34 (resnet), fc|conv (autoencoder); empty: the first",
        ),
        "size": perfsuite.param("ci", choices=("ci", "cpu", "gpu"), help="the model's size preset (batch per rank)"),
        "batch_size": perfsuite.param(None, type=int, min=1, help="images per rank; overrides the size preset"),
        "precision": perfsuite.param("fp32", choices=PRECISIONS, help="fp16 needs CUDA"),
        "world_size": perfsuite.param(2, min=1, max=4096, help="ranks in all (nnodes x ranks per node)"),
        "nnodes": perfsuite.param(
            1, min=1, max=1024, help="nodes; >1 runs where perfsuite was started by torchrun on that many nodes"
        ),
        "backend": perfsuite.param("auto", choices=BACKENDS, help="auto: nccl on CUDA, gloo on CPU"),
    },
    validate=validate,
    # Each case is one torchrun launch of its ranks; world_size=1 gives the scaling baseline.
    grids={
        "ci": {"model": ["autoencoder"], "batch_size": [16], "world_size": [1, 2]},
        "cpu": {"model": ["resnet"], "size": ["ci"], "world_size": [1, 2]},
        "gpu": {"model": ["resnet"], "size": ["gpu"], "world_size": [1, 2]},
    },
    asv={"tracks": ["inverse_scaling_efficiency", "comm_share"]},
    launcher=launch,
    max_builds=1,  # every rank builds one step: builds rotated in lockstep would multiply the groups' models
    report=report,
)
def ddp(device: str, **params):
    """Runs on every rank (perfsuite.distributed.rank), inside the rank's process group."""
    ctx = current()
    model = params["model"]
    setup = training_setup(model, sub_params(params), ctx.device)
    module = forward_module(model, setup)
    wrapped = wrap(module, ctx)
    x, y = setup.batch(ctx.rank)  # this rank's own batch
    step = make_train_step(setup.parts, x, y, forward=wrapped)
    w = ctx.world_size
    batch = int(x.shape[0])
    # Counted on this rank's step (both run it once, with its collectives, on every rank), for all ranks.
    flops = count_flops(step) * w
    nbytes = training_bytes(module, step) * w
    ctx.profile_step = lambda phase: make_train_step(setup.parts, x, y, forward=wrapped, phase=phase)

    def extra() -> dict:
        return {
            "model": model,
            "variant": params["variant"] or MODELS[model][0],
            "per_rank_batch": batch,
            "global_batch": batch * w,
            **_bucket_view(wrapped),
        }

    return perfsuite.Step(
        step,
        items=batch * w,
        unit="images",
        flops=flops,
        flops_method="FlopCounterMode",
        bytes=nbytes,
        dtype=params["precision"],
        extra=extra,
    )
