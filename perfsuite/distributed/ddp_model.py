"""The model a DDP case trains, as both the ddp workload and the ranks' gradient check build it.

Here, not in perfsuite/workloads/ddp.py, so that the rank code (perfsuite.distributed.rank,
.launch) needs nothing from the workloads above it.
"""

from __future__ import annotations

from typing import Any, Mapping

MODELS = {"resnet": ("resnet18", "resnet34"), "autoencoder": ("fc", "conv")}


def sub_params(params: Mapping[str, Any]) -> dict:
    """The parameters of the single-process workload this case trains (its size preset applies)."""
    model = params["model"]
    variant = params["variant"] or MODELS[model][0]
    sub = {"size": params["size"], "precision": params["precision"], "batch_size": params["batch_size"]}
    sub["model" if model == "resnet" else "variant"] = variant
    return {k: v for k, v in sub.items() if v is not None}


def forward_module(model: str, setup):
    """The module DDP wraps: the model itself, or for the autoencoder its encoder then decoder
    (the same parameters the set-up's optimiser holds)."""
    if model == "resnet":
        return setup.parts.model
    from torch import nn

    class EncodeDecode(nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner["decoder"](self.inner["encoder"](x))

    return EncodeDecode(setup.parts.model)


def wrap(module, ctx):
    from torch.nn.parallel import DistributedDataParallel

    ids = [int(ctx.device.split(":")[1])] if ctx.device.startswith("cuda") else None
    return DistributedDataParallel(module, device_ids=ids, process_group=ctx.group)
