"""This device's peak: matmul FLOP/s per roof and memory bandwidth, measured and stored.

Every record then reports achieved FLOP/s as a fraction of this measured peak, not of a
datasheet number the machine may never reach (shared cloud cores rarely hold turbo clocks).
Roofs: fp32 and bf16 on CPU; on CUDA also fp16 and tf32 (fp32 inputs on TF32 tensor cores,
several times the true fp32 rate), because cuDNN runs fp32 convolutions as TF32 by default.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timezone

from perfsuite.core import registry
from perfsuite.core.case import Case
from perfsuite.core.config import IN_PROCESS_BUILDS, RunConfig
from perfsuite.core.errors import PerfsuiteError
from perfsuite.core.record import Work
from perfsuite.measuring.tf32 import matmul_tf32
from perfsuite.run.execute import check_cases, run_cases
from perfsuite.storage.peaks import device_key
from perfsuite.workloads.base import BuiltStep, Workload

# Big enough to leave caches and reach steady kernel throughput; small enough for 2 CPU cores.
MATMUL_N = {"cpu": 2048, "cuda": 8192}
# On a CPU a roof's matmul is sized to the machine first: one call of the roof's dtype at PROBE_N
# gives its rate, and n is the largest multiple of PROBE_N up to MATMUL_N whose call takes at most
# CALL_SHARE of the budget. A CPU without native bf16 (AVX2 only: this VM on 2026-11-27) runs bf16
# in ATen's reference gemm at ~0.1 GFLOP/s, where one 2048 call takes minutes and `peak` (the first
# step of `make bench`) never ended.
PROBE_N, CALL_SHARE = 256, 0.1
# Each of the copy's two buffers, at most: far past every cache, so the copy runs at memory speed.
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}
# On CUDA the buffers of every build alive at once (2 x builds) take at most this share of the
# device's free memory: at 2 GiB each, three builds held 12 GiB and `perfsuite peak`, the first
# line of `make bench`, ran out of memory on a 12 GB GPU.
COPY_MEMORY_SHARE = 0.25
# A smaller buffer could stay in the L2 (H100: 50 MB, RTX 4090: 72 MB), and the copy would report
# the cache's speed, not the memory's: each buffer is at least this, and this many times the L2.
MIN_COPY_BYTES, MIN_COPY_L2_MULTIPLE = 64 * 2**20, 8
# CPU fp16 matmul is mostly converted to fp32 and back: no CPU workload runs against that roof.
PEAK_DTYPES = {"cpu": ("fp32", "bf16"), "cuda": ("fp32", "tf32", "bf16", "fp16")}
# Which matmul dtype each roof is measured with; tf32 is fp32 data with TF32 allowed.
_MATMUL_DTYPE = {"tf32": "fp32"}


def roofs(device: str) -> tuple[str, ...]:
    """The roofs `measure_peak` measures on `device` (for the CLI's announcement)."""
    return PEAK_DTYPES["cuda" if device.startswith("cuda") else "cpu"]


def _roof_mode(roof: str, kind: str):
    """On CUDA the fp32 roof is true fp32 and the tf32 roof TF32, whatever the caller had set."""
    if kind == "cuda" and roof in ("fp32", "tf32"):
        return matmul_tf32(roof == "tf32")
    return contextlib.nullcontext()


def copy_bytes(device: str, builds: int) -> int:
    """Bytes of each of the copy's two buffers on `device` with `builds` builds alive at once:
    COPY_BYTES, or on CUDA less where COPY_MEMORY_SHARE of the free memory cannot hold them all."""
    if not device.startswith("cuda"):
        return COPY_BYTES["cpu"]
    import torch

    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    torch.cuda.empty_cache()  # the matmul roofs' cached blocks go back: free memory is then ours to take
    free, total = torch.cuda.mem_get_info(index)
    fits = int(COPY_MEMORY_SHARE * free / (2 * builds)) // 2**20 * 2**20  # whole MiB
    nbytes = min(COPY_BYTES["cuda"], fits)
    l2 = getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0)
    least = max(MIN_COPY_BYTES, MIN_COPY_L2_MULTIPLE * l2)
    if nbytes < least:
        raise PerfsuiteError(
            f"peak: memory bandwidth on {device} needs 2 x {builds} buffers of at least {least / 2**20:.0f} MiB "
            f"(past its {l2 / 2**20:.0f} MiB L2) in {COPY_MEMORY_SHARE:.0%} of the free memory; "
            f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB are free (other processes on this GPU?)"
        )
    return nbytes


def _copy_workload(builds: int) -> Workload:
    """A copy between two buffers, sized once (copy_bytes) when the first of `builds` builds is made,
    on the device and with the memory that is free then; the other builds are made alike."""
    sized: list[int] = []

    def build(params, device) -> BuiltStep:
        import torch

        if not sized:
            sized.append(copy_bytes(device, builds))
        src = torch.ones(sized[0] // 4, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)

        def step() -> None:
            dst.copy_(src)

        # A copy reads every byte once and writes it once.
        return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="copies", bytes_per_step=2.0 * src.numel() * 4))

    return Workload(name="copy", description="large tensor copy", params=(), builder=build, max_builds=builds)


def measure_peak(cfg: RunConfig, env: dict, device: str) -> dict:
    """Each roof's matmul and the copy, measured through the one case loop
    (perfsuite.run.execute.run_cases) like any other case; a roof that fails is an error naming
    it (a peak file without that roof would mislead every fraction computed from it)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    # In this process: a roof's TF32 setting is this process's, and a forked worker would not see it.
    cfg = replace(cfg, processes=1)
    matmul = registry.get("matmul")
    flops, records, sizes = {}, [], {}
    for roof in PEAK_DTYPES[kind]:
        dtype = _MATMUL_DTYPE.get(roof, roof)
        with _roof_mode(roof, kind):
            sizes[roof] = MATMUL_N[kind] if kind == "cuda" else cpu_matmul_n(dtype, cfg.max_time)
            rec = _measure_one(Case(matmul, {"n": sizes[roof], "dtype": dtype}), cfg, env, device, f"the {roof} roof")
        flops[roof] = rec.flops_per_s
        records.append(rec)
    # The runner keeps every build of a case alive at once: the copy's buffers are sized for all of them.
    builds = cfg.builds if cfg.builds is not None else IN_PROCESS_BUILDS
    copy = _measure_one(Case(_copy_workload(builds), {}), replace(cfg, builds=builds), env, device, "memory bandwidth")
    records.append(copy)
    return {
        "device_key": device_key(env, device),
        "flops_per_s": flops,
        "bytes_per_s": copy.work.bytes_per_step / copy.median_s,
        "measured": datetime.now(timezone.utc).isoformat(),
        "matmul_n": sizes,
        "copy_bytes": int(copy.work.bytes_per_step // 2),  # each buffer, as measured
        "copy_builds": builds,
        "torch": env.get("torch"),
        "records": [r.id for r in records],
    }


def cpu_matmul_n(dtype: str, budget_s: float) -> int:
    """The CPU matmul size for a roof of `dtype`: as large as MATMUL_N, as small as one call of
    CALL_SHARE of the budget needs (a warm call at PROBE_N gives the rate; n^3 work per call)."""
    from perfsuite.measuring.timing import clock_for

    matmul = registry.get("matmul")
    built = matmul.build(matmul.resolve({"n": PROBE_N, "dtype": dtype}), "cpu")
    clock = clock_for("cpu", "host")
    built.fn()  # the first call pays one-time set-up (threads, packing buffers)
    per_call = max(clock.time_block(built.fn, 1), 1e-9)
    scale = (CALL_SHARE * budget_s / per_call) ** (1 / 3)
    return int(min(MATMUL_N["cpu"], max(PROBE_N, PROBE_N * int(scale))))


def _measure_one(case: Case, cfg: RunConfig, env: dict, device: str, what: str):
    return run_cases(check_cases([case], device), cfg, env=env).only(
        lambda why: PerfsuiteError(f"peak: {what} cannot be measured on {device}: {why}"),
        lambda error: PerfsuiteError(f"peak: measuring {what} failed: {error}"),
    )
