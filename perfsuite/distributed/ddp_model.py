"""The model a DDP case trains, as the training workload that offers it declares it: `ddp=` on its
@perfsuite.workload names the parameter that picks the model's variant, the module DDP wraps
(default: the set-up's model) and whether the gradient check runs it in eval mode.

The ddp workload and the ranks' gradient check (perfsuite.distributed.rank, .launch) ask the
workload here, through the registry: nothing in perfsuite.distributed names a workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError


def models() -> list[str]:
    """The training workloads that offer a DDP model, by name."""
    return [name for name in registry.names() if registry.get(name).ddp]


def offered(model: str) -> Mapping[str, Any]:
    """What workload `model` declares of its DDP model (perfsuite.core.workload.DDP_KEYS)."""
    declared = registry.get(model).ddp
    if not declared:
        raise ConfigError(
            f"workload {model!r} offers no DDP model (ddp= on its declaration); these do: {', '.join(models())}"
        )
    return declared


def variants(model: str) -> tuple:
    """The values of the parameter that picks `model`'s variant, its default first."""
    p = next(p for p in registry.get(model).params if p.name == offered(model)["variant"])
    return (p.default, *(c for c in p.choices or () if c != p.default))  # (it has choices: Workload checks)


def sub_params(params: Mapping[str, Any]) -> dict:
    """The parameters of the single-process workload this case trains (its size preset applies);
    those not given (or None) take the workload's own defaults."""
    model = params["model"]
    sub = {k: params.get(k) for k in ("size", "precision", "batch_size")}
    sub[offered(model)["variant"]] = params.get("variant") or variants(model)[0]
    return {k: v for k, v in sub.items() if v is not None}


def forward_module(model: str, setup):
    """The module DDP wraps: the one the workload declares (`ddp["module"](setup)`), else the
    set-up's model; the same parameters the set-up's optimiser holds."""
    make = offered(model).get("module")
    return make(setup) if make is not None else setup.parts.model


def checked_module(model: str, setup):
    """The module the gradient check compares: forward_module, in eval mode where the workload
    asks for it (BatchNorm normalises with each rank's own batch statistics in training mode)."""
    module = forward_module(model, setup)
    if offered(model).get("eval_in_gradient_check"):
        module.eval()
    return module


def wrap(module, ctx):
    from torch.nn.parallel import DistributedDataParallel

    ids = [int(ctx.device.split(":")[1])] if ctx.device.startswith("cuda") else None
    return DistributedDataParallel(module, device_ids=ids, process_group=ctx.group)
