"""DataLoader throughput over a real image folder: whole epochs of decode + augment + collate,
alone (`mode=load`) or feeding a ResNet18 training step (`mode=train`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.data.imagefolder import GENERATED, ImageFolderDataset, generated_folder, train_transform
from perfsuite.stats import summary as stats
from perfsuite.workloads.dataloader_report import section

CACHE_DIR = Path.home() / ".cache" / "perfsuite" / "datasets"
PRESETS = {
    "ci": {"batch_size": 64, "images": 512},
    "cpu": {"batch_size": 128, "images": 2560},
    "gpu": {"batch_size": 256, "images": 2560},
}


def dataset_root(params: Mapping[str, Any]) -> Path:
    name = params["dataset"]
    if name in GENERATED:
        count = params["images"] if name == "cifar-like" else min(params["images"], GENERATED[name].count)
        return generated_folder(name, CACHE_DIR, count)
    return Path(name)


def validate(device: str, **params) -> None:
    if params["persistent_workers"] and params["num_workers"] == 0:
        raise ConfigError("parameter 'persistent_workers': needs num_workers >= 1")
    if params["pin_memory"] and not device.startswith("cuda"):
        raise Unsupported(
            f"parameter 'pin_memory': pinned memory only helps copies to a CUDA device; device is {device}"
        )
    if params["dataset"] not in ("cifar-like", "imagenet-like"):
        from perfsuite.data.imagefolder import scan

        scan(params["dataset"])  # a missing or empty folder is named now, before any case runs


def make_loader(params: Mapping[str, Any], device: str):
    import torch

    root = dataset_root(params)
    ds = ImageFolderDataset(root)
    side = int(ds[0][0].shape[-1])
    ds.transform = train_transform(side)
    kw: dict[str, Any] = {}
    if params["num_workers"] > 0:
        # Only meaningful with workers (torch rejects prefetch_factor without them).
        kw.update(prefetch_factor=params["prefetch_factor"], persistent_workers=params["persistent_workers"])
    # (a map-style dataset, __getitem__ and __len__, though not derived from torch's Dataset)
    return torch.utils.data.DataLoader(
        ds,  # type: ignore[arg-type]  # map-style, not derived from Dataset
        batch_size=params["batch_size"],
        shuffle=True,
        num_workers=params["num_workers"],
        pin_memory=params["pin_memory"],
        drop_last=False,
        **kw,
    ), ds


def current(device: str):
    """`device` made the current CUDA device while loader iterators run: with pin_memory a loader
    pins batches in a thread set to the device current when the iterator starts (device 0 unless
    someone set it), so a run on cuda:N would open a context and pin from GPU 0."""
    import contextlib

    import torch

    return torch.cuda.device(device) if torch.device(device).type == "cuda" else contextlib.nullcontext()


def to_device(batch, device: str):
    """A loader's batch on `device`, as a training loop moves it: `non_blocking`, so that a
    pinned batch's copy runs asynchronously (a pageable one is copied synchronously either way)."""
    x, y = batch
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def report(records: list, out_dir, options: Mapping[str, Any]) -> list[str]:
    """Over a sweep: the knee (the cheapest configuration within 5% of the best throughput) and
    throughput against workers (perfsuite/workloads/dataloader_report.py)."""
    if len(records) < 2:
        return []

    return section(records, out_dir)


@perfsuite.workload(
    params={
        "size": perfsuite.param("ci", choices=("ci", "cpu", "gpu")),
        "dataset": perfsuite.param("cifar-like", help="cifar-like | imagenet-like | PATH to class sub-folders"),
        "num_workers": perfsuite.param(0, min=0, max=64),
        "batch_size": perfsuite.param(None, type=int, min=1),
        "pin_memory": perfsuite.param(False),
        "persistent_workers": perfsuite.param(False),
        "prefetch_factor": perfsuite.param(2, min=1),
        "mode": perfsuite.param("load", choices=("load", "train"), help="loader alone, or feeding ResNet18"),
        "images": perfsuite.param(None, type=int, min=1, help="generated datasets only: how many images"),
    },
    presets=PRESETS,
    validate=validate,
    report=report,
    grids={
        "ci": {"images": [128], "num_workers": [0, 2], "batch_size": [32]},
        "cpu": {"num_workers": [0, 1, 2, 4], "batch_size": [32, 128]},
        "gpu": {"size": ["gpu"], "num_workers": [0, 2, 4, 8], "batch_size": [128, 256], "pin_memory": [False, True]},
    },
    # Once per suite: the generated image folder.
    plan={"build_s": 2.0, "once_s": 10.0},
)
def dataloader(device: str, **params):
    """DataLoader epochs over a real PNG/JPEG folder with v2 augmentations (alone or feeding ResNet18)"""
    import torch

    validate(device, **params)
    loader, ds = make_loader(params, device)
    # Off the CPU a batch is only usable once it is on the device: the copy is part of loading
    # it, and the only thing `pin_memory` changes (an epoch without it measures only the pinning).
    copy = torch.device(device).type != "cpu"
    extra: dict = {"images": len(ds), "dataset_root": str(dataset_root(params)), "host_to_device_copy": copy}

    # Worker start-up, apart from steady state: time to the first batch of a fresh iterator.
    t0 = time.perf_counter()
    with current(device):
        it = iter(loader)
        next(it)
    extra["first_batch_s"] = time.perf_counter() - t0
    del it

    waits: list[float] = []
    if params["mode"] == "load":
        if copy:

            def step():
                with current(device):
                    for batch in loader:
                        to_device(batch, device)
        else:

            def step():
                for _ in loader:
                    pass
    else:
        from perfsuite.training.step import make_train_step
        from perfsuite.workloads import resnet

        parts = resnet.build_parts(
            {"model": "resnet18", "stem": "torchvision", "channels_last": False, "precision": "fp32"}, device
        )

        def step():
            # How long the model waits on the loader, per epoch: bookkeeping of two clock reads
            # per batch, negligible against a training step.
            wait = 0.0
            start = time.perf_counter()
            t = start
            with current(device):
                for x, y in loader:
                    wait += time.perf_counter() - t
                    x, y = to_device((x, y), device)
                    make_train_step(parts, x, y)()
                    t = time.perf_counter()
            waits.append(wait / (time.perf_counter() - start))

    def extra_metrics() -> dict:
        out = dict(extra)
        if waits:
            out["data_wait_fraction"] = stats.median(waits)
        return out

    # Images per epoch: decoding and augmenting have no FLOPs the counter would see.
    return perfsuite.Step(step, items=len(ds), unit="images", flops_method="unknown", extra=extra_metrics)
