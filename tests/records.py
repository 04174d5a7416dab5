"""Hand-built records for tests that need stored results without measuring."""

from __future__ import annotations

import numpy as np

from perfsuite.core.record import Record, Work

ENV = {
    "torch": "2.14.1",
    "cuda": None,
    "cudnn": None,
    "gpu_name": None,
    "driver": None,
    "cpu_model": "Test CPU",
    "logical_cores": 2,
    "torch_threads": 2,
    "python": "3.11.7",
}


def make_record(
    median_s: float = 1e-3,
    n: int = 60,
    seed: int = 0,
    sigma: float = 0.03,
    params: dict | None = None,
    env: dict | None = None,
    **kw,
) -> Record:
    rng = np.random.default_rng(seed)
    samples = [float(x) for x in median_s * rng.lognormal(0.0, sigma, size=n)]
    return Record(
        workload=kw.pop("workload", "matmul"),
        params=params if params is not None else {"n": 256, "dtype": "fp32"},
        device="cpu",
        timing_method="perf_counter_ns",
        block_size=1,
        samples_s=samples,
        work=Work(items_per_step=8, item_unit="images", flops_per_step=2e9, flops_method="analytic"),
        env=dict(ENV if env is None else env),
        converged=True,
        **kw,
    )


def make_build_record(medians: list[float], n: int = 20, seed: int = 0, sigma: float = 0.01, **kw) -> Record:
    """A record of len(medians) builds of the step, build i's samples centred on medians[i]."""
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    groups = [[float(x) for x in m * rng.lognormal(0.0, sigma, size=n)] for m in medians]
    builds = [{"samples_s": g, "process": 0} for g in groups]
    return replace(make_record(seed=seed, **kw), samples_s=[x for g in groups for x in g], builds=builds)
