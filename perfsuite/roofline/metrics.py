"""The Nsight Compute metrics the roofline reads, and one launch's figures from them.

FLOPs per launch = tensor-path FLOPs + Σ over d/f/h of add + mul + 2·fma (CUDA cores).
Tensor work: `sm__ops_path_tensor_src_*.sum` count FLOPs directly (2 per multiply-add), per
data type. The older convention, 512 FLOPs per `sm__inst_executed_pipe_tensor` instruction,
holds for Volta's HMMA only: an H100 HGMMA instruction does far more (15x low on a ResNet18
step, 128x on a plain matrix product), so instructions never become FLOPs here. A file
without the ops-path metrics whose launch executed tensor instructions has unknown tensor
FLOPs: its count is a lower bound, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = {"d": "fp64", "f": "fp32", "h": "fp16"}
OPS = ("add", "mul", "fma")
# bf16 and fp16 share the tensor datapath and its rate on every NVIDIA part: one pipe.
TENSOR = {
    "sm__ops_path_tensor_src_fp16.sum": "tensor_fp16",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum": "tensor_fp16",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum": "tensor_tf32",
    "sm__ops_path_tensor_src_fp64.sum": "tensor_fp64",
    "sm__ops_path_tensor_src_fp8.sum": "tensor_fp8",
    "sm__ops_path_tensor_src_int8.sum": "tensor_int8",
}
TENSOR_INST = "sm__inst_executed_pipe_tensor.sum"
PIPES = ("fp64", "fp32", "fp16", "tensor_fp64", "tensor_tf32", "tensor_fp16", "tensor_fp8", "tensor_int8")
PIPE_LABEL = {
    "fp64": "FP64",
    "fp32": "FP32",
    "fp16": "FP16 (CUDA cores)",
    "tensor_fp64": "FP64 tensor",
    "tensor_tf32": "TF32 tensor",
    "tensor_fp16": "FP16/BF16 tensor",
    "tensor_fp8": "FP8 tensor",
    "tensor_int8": "INT8 tensor",
    "bf16": "BF16",
    "*": "compute (given)",
}
TIME = "gpu__time_duration.sum"
# Time from cycles when the duration is absent: Nsight Compute's own roofline sections use the
# SM pair; the gpc pair is what older perfsuite lists asked for.
CYCLE_PAIRS = (
    ("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second"),
    ("gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second"),
)
DRAM, DRAM_R, DRAM_W = "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
L2, L1 = "lts__t_bytes.sum", "l1tex__t_bytes.sum"
SM_HZ = "sm__cycles_elapsed.avg.per_second"
# Ceilings a file can carry: per-cycle peaks of the very counters read above, times the clock.
PEAK_COMPUTE = {
    "fp64": [("sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", 2.0)],
    "fp32": [("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", 2.0)],
    "fp16": [("sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained", 2.0)],
    **{
        pipe: [(f"{m}.peak_sustained", 1.0) for m, p in TENSOR.items() if p == pipe]
        for pipe in dict.fromkeys(TENSOR.values())
    },
}
PEAK_MEMORY = {
    "dram": ("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second"),
    "l2": ("lts__t_bytes.sum.peak_sustained", "lts__cycles_elapsed.avg.per_second"),
    "l1": ("l1tex__t_bytes.sum.peak_sustained", "l1tex__cycles_elapsed.avg.per_second"),
}


def flop_metric_names(prefixes=("sm", "smsp")) -> list[str]:
    return [
        f"{pre}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for pre in prefixes for p in PRECISIONS for op in OPS
    ]


# Warp instructions executed: the step's work on the device, counted beside its time in the same
# ncu session (issue 56: a range's instructions and DRAM bytes are its work per step). Optional:
# exports made before it was asked for (the H100 fixtures) lack it.
INST = "smsp__inst_executed.sum"


def profile_metrics() -> list[str]:
    """What `profile-step` asks ncu for: everything this reader uses, ceilings included."""
    peaks = [m for pairs in PEAK_COMPUTE.values() for m, _ in pairs]
    mem = [m for pair in PEAK_MEMORY.values() for m in pair]
    return [TIME, DRAM, L2, L1, *TENSOR, TENSOR_INST, INST, *flop_metric_names(("sm",)), *peaks, *mem, SM_HZ]


# The raw page carries the SM count among the device attributes; it is not asked for (the
# details page lacks it), so a file's tensor ceilings are checked with it only where present.
SM_COUNT = "device__attribute_multiprocessor_count"
WANTED = (
    set(flop_metric_names())
    | set(TENSOR)
    | {TENSOR_INST, TIME, DRAM, DRAM_R, DRAM_W, L2, L1, SM_COUNT}
    | {m for pair in CYCLE_PAIRS for m in pair}
    | set(profile_metrics())
)
DEVICE_NAME = "device__attribute_display_name"


def optional(metric: str) -> bool:
    """Metrics a file may lack, or show as "n/a" (ncu's word for a counter this GPU does not
    have): ceilings and clocks, and the tensor counters, whose absence is reported, not fatal."""
    ceiling = metric.endswith((".peak_sustained", ".per_second")) and metric != SM_HZ  # SM_HZ may time a launch
    return ceiling or metric in TENSOR or metric in (TENSOR_INST, INST, SM_COUNT)


def kind(metric: str) -> str:
    """What a metric measures, for its unit check (ncu_units.to_base)."""
    if metric.endswith(".peak_sustained"):
        return "per_cycle"
    if metric.endswith(".per_second"):
        return "freq"
    if metric.startswith("gpu__time_duration"):
        return "time"
    return "bytes" if "bytes" in metric.split(".")[0] else "count"


class MissingMetric(LookupError):
    pass


@dataclass(frozen=True)
class Figures:
    pipe_flops: dict  # pipe -> FLOPs
    tensor: str  # "measured", "none" (no tensor instruction ran) or "unknown"
    note: str  # why the FLOPs are a lower bound, or ""
    dram: float
    l2: float | None
    l1: float | None
    time_s: float


def _cuda_core_flops(m: dict) -> dict:
    out = {}
    for p, pipe in PRECISIONS.items():
        for pre in ("sm", "smsp"):
            names = [f"{pre}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for op in OPS]
            present = [n in m for n in names]
            if any(present):
                missing = [n for n, ok in zip(names, present) if not ok]
                if missing:
                    raise MissingMetric(missing[0])
                add, mul, fma = (m[n] for n in names)
                out[pipe] = add + mul + 2 * fma
                break
    if not out:
        raise MissingMetric("sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum (any precision)")
    return out


def _tensor(m: dict) -> tuple[dict, str, str]:
    present = [n for n in TENSOR if n in m]
    if present:
        flops: dict = {}
        for n in present:
            flops[TENSOR[n]] = flops.get(TENSOR[n], 0.0) + m[n]
        return flops, "measured", ""
    inst = m.get(TENSOR_INST)
    if inst == 0:
        return {}, "none", ""
    why = f"{inst:.0f} tensor instructions" if inst is not None else f"no {TENSOR_INST}"
    return {}, "unknown", f"lower bound: tensor FLOPs unknown ({why}, no sm__ops_path_tensor_src_* metrics)"


def figures(m: dict) -> Figures:
    """A launch's FLOPs per pipe, bytes and time from its metrics (base units); MissingMetric names
    the first metric it needs and lacks."""
    pipe_flops = _cuda_core_flops(m)
    tensor, status, note = _tensor(m)
    for pipe, f in tensor.items():
        pipe_flops[pipe] = pipe_flops.get(pipe, 0.0) + f
    if DRAM in m:
        dram = m[DRAM]
    elif DRAM_R in m or DRAM_W in m:
        missing = [n for n in (DRAM_R, DRAM_W) if n not in m]
        if missing:
            raise MissingMetric(missing[0])
        dram = m[DRAM_R] + m[DRAM_W]
    else:
        raise MissingMetric(f"{DRAM} (or {DRAM_R} + {DRAM_W})")
    if TIME in m:
        t = m[TIME]
    else:
        pair = next(((c, hz) for c, hz in CYCLE_PAIRS if c in m and hz in m), None)
        if pair is None:
            raise MissingMetric(f"{TIME} (or {' / '.join(CYCLE_PAIRS[0])})")
        t = m[pair[0]] / m[pair[1]]  # the reader refuses a clock rate of zero
    return Figures(pipe_flops, status, note, dram, m.get(L2), m.get(L1), t)
