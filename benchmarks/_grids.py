"""The cases the asv and pytest-benchmark front-ends run, per workload and size.

This lives beside the asv benchmarks, not in the perfsuite package, because asv imports the
benchmarks of the working tree against perfsuite as installed at *older* commits: the grid
must not depend on what those commits contain. It imports nothing at module level.

`ci` fits a 2-core CPU in seconds per case; `cpu` is a realistic CPU run; `gpu` the seed's
sizes. Every registered workload appears here (a test checks it).
"""

from __future__ import annotations

from typing import Any

SIZES = ("ci", "cpu", "gpu")

# Parameter grids per workload: {name: {size: {param: [values]}}}; a missing size uses "ci".
GRIDS: dict[str, dict[str, dict[str, list[Any]]]] = {
    "noop": {"ci": {}},
    "matmul": {
        "ci": {"n": [256], "dtype": ["fp32", "bf16"]},
        "cpu": {"n": [256, 1024], "dtype": ["fp32", "bf16"]},
        "gpu": {"n": [4096, 8192], "dtype": ["fp32", "bf16", "fp16"]},
    },
    "autoencoder": {
        "ci": {"size": ["ci"], "variant": ["fc", "conv"], "precision": ["fp32", "bf16", "fp16"]},
        "cpu": {"size": ["cpu"], "variant": ["fc", "conv"], "precision": ["fp32", "bf16", "fp16"]},
        "gpu": {"size": ["gpu"], "variant": ["fc", "conv"], "precision": ["fp32", "bf16", "fp16"]},
    },
    "resnet": {
        "ci": {"size": ["ci"], "model": ["resnet18"], "precision": ["fp32", "bf16", "fp16"]},
        "cpu": {"size": ["cpu"], "model": ["resnet18", "resnet34"], "precision": ["fp32", "bf16", "fp16"]},
        "gpu": {"size": ["gpu"], "model": ["resnet18", "resnet34"], "precision": ["fp32", "bf16", "fp16"]},
    },
    "mar": {"ci": {"n": [1000]}, "cpu": {"n": [1000, 10000]}, "gpu": {"n": [1000, 10000]}},
    "checkpoint": {"ci": {"op": ["save", "load"]}},
    "activation": {
        "ci": {"fn": ["swish", "mish"], "impl": ["custom", "builtin"], "numel": [1 << 16]},
        "cpu": {"fn": ["swish", "mish"], "impl": ["custom", "builtin"], "numel": [1 << 20, 1 << 24],
                "dtype": ["fp32", "bf16"]},
        "gpu": {"fn": ["swish", "mish"], "impl": ["custom", "builtin"], "numel": [1 << 20, 1 << 24],
                "dtype": ["fp32", "bf16"]},
    },
    "qwen": {
        "ci": {"shape": ["tiny"], "batch_size": [1, 4], "dtype": ["fp32", "bf16"]},
        "cpu": {"shape": ["0.5b"], "batch_size": [1, 8], "dtype": ["fp32", "bf16"]},
        "gpu": {"shape": ["0.5b"], "batch_size": [1, 8, 32], "dtype": ["fp32", "bf16", "fp16"]},
    },
    "dataloader": {
        "ci": {"images": [128], "num_workers": [0, 2], "batch_size": [32]},
        "cpu": {"num_workers": [0, 1, 2, 4], "batch_size": [32, 128]},
        "gpu": {"size": ["gpu"], "num_workers": [0, 2, 4, 8], "batch_size": [128, 256], "pin_memory": [False, True]},
    },
    # Distributed (perfsuite.distributed): each case is one torchrun launch of its ranks, measured
    # through perfsuite.run.execute.run_cases; world_size=1 gives the scaling baseline of the same run.
    "ddp": {
        "ci": {"model": ["autoencoder"], "batch_size": [16], "world_size": [1, 2]},
        "cpu": {"model": ["resnet"], "size": ["ci"], "world_size": [1, 2]},
        "gpu": {"model": ["resnet"], "size": ["gpu"], "world_size": [1, 2]},
    },
    "allreduce": {
        "ci": {"bytes": [1 << 16], "world_size": [2]},
        "cpu": {"op": ["all_reduce", "all_gather", "reduce_scatter"], "bytes": [1 << 20, 1 << 26], "world_size": [2]},
        "gpu": {"bytes": [1 << 10, 1 << 20, 1 << 30], "world_size": [1, 2]},
    },
}


# The AMP comparison (`perfsuite amp`): fp32 against each lower precision, per training workload.
# fp16 needs CUDA: on a CPU its cases are skipped with the reason.
AMP_GRIDS: dict[str, dict[str, list[Any]]] = {
    "ci": {"workload": ["autoencoder", "resnet"], "precision": ["bf16", "fp16"]},
    "cpu": {"workload": ["autoencoder", "resnet"], "precision": ["bf16", "fp16"]},
    "gpu": {"workload": ["autoencoder", "resnet"], "precision": ["bf16", "fp16"]},
}


# Worker processes per case (perfsuite.measure.workers, issue 16) for the asv front-end, as suites/cpu.yaml
# has them: the cases whose history is compared across commits, where one unlucky process's
# memory layout or placement would otherwise show as a change. The rest (1 here) take perfsuite's
# default: RunConfig.processes=None, 2 worker processes at these 5 s budgets (issue 26).
PROCESSES: dict[str, int] = {"matmul": 3, "resnet": 3}


def worker_processes(workload: str) -> int:
    # Not named `processes`: asv reads a module-level `processes` as its own setting.
    return PROCESSES.get(workload, 1)


def amp_grid(size: str) -> dict[str, list[Any]]:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    return AMP_GRIDS[size]


def grid(workload: str, size: str) -> dict[str, list[Any]]:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    by_size = GRIDS[workload]
    return by_size.get(size, by_size["ci"])


def cases(workload: str, size: str) -> list[dict[str, Any]]:
    """Cartesian product of the grid, last parameter varying fastest."""
    out: list[dict[str, Any]] = [{}]
    for key, values in grid(workload, size).items():
        out = [{**case, key: v} for case in out for v in values]
    return out


def asv_size() -> str:
    """asv needs its params at import, before torch can say whether there is a GPU: a GPU host
    sets PERFSUITE_ASV_SIZE=gpu (docker/ does); everywhere else the `ci` grid is used."""
    import os

    size = os.environ.get("PERFSUITE_ASV_SIZE", "ci")
    if size not in SIZES:
        raise ValueError(f"PERFSUITE_ASV_SIZE must be one of {', '.join(SIZES)}, got {size!r}")
    return size
