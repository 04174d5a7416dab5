"""One training step marked for Nsight Systems / Nsight Compute, and a torch.profiler window
with the step's time split.

NVTX: process-wide start/end ranges (torch.cuda.nvtx.range_start/range_end), not thread-local
push/pop. Autograd runs backward on its own device threads; a push/pop range opened on the
Python thread is not on those threads' stacks, so ncu's --nvtx-include would not match the
backward kernels. A start/end range covers every kernel launched, by any thread, between its
start and end; the synchronisations before and after the step keep other steps' kernels out.
"""

from __future__ import annotations

from perfsuite.measuring.nvtx import nvtx_range
from perfsuite.roofline.metrics import profile_metrics

# Everything `perfsuite roofline` reads, from one list: time, bytes per level, tensor-path FLOPs
# (sm__ops_path_tensor_src_*), CUDA-core FLOPs, and the peak rates and clocks that give the roofs.
ROOFLINE_METRICS = ",".join(profile_metrics())


def process_range(name: str, cuda: bool):
    """A process-wide start/end range on a CUDA machine (perfsuite.measuring.nvtx), else nothing."""
    return nvtx_range(name, enabled=cuda)


# nsys starts an NVTX capture range only on registered strings unless the application runs with
# this variable at 0; torch.cuda.nvtx passes plain strings, so without it the capture never began
# and the report held no kernel. (`argv` measures in its own process: profile-step marks the step
# there; nsys does not follow processes forked without an exec.)
NSYS_ANY_NVTX_STRING = "NSYS_NVTX_PROFILER_REGISTER_ONLY=0"


def nsight_commands(argv: str) -> list[str]:
    return [
        (
            f"nsys profile --trace=cuda,nvtx,osrt --capture-range=nvtx --nvtx-capture=train_step "
            f"--capture-range-end=stop --env-var={NSYS_ANY_NVTX_STRING} -o reports/nsys/step {argv}"
        ),
        # A bare range name selects a start/end range; push/pop ranges would need a trailing '/'.
        # --clock-control none: by default ncu locks the clocks to base, so its times (and the
        # FLOP/s and % of roof from them) disagree with perfsuite's, measured at the clocks it ran at.
        (
            f'ncu --clock-control none --nvtx --nvtx-include "train_step" --metrics {ROOFLINE_METRICS} '
            f"--export reports/ncu/step {argv}"
        ),
        "ncu --import reports/ncu/step.ncu-rep --csv --page details > reports/ncu/step.csv",
        "perfsuite roofline reports/ncu/step.csv   # roofs from the file; else --device NAME or --peak-compute/--peak-bw",
    ]


def split_from_profile(prof, wall_s: float) -> dict:
    """Seconds per phase from record_function events, and idle = the rest of the step."""
    totals = {p: 0.0 for p in ("forward", "loss", "backward", "optimizer_step")}
    for evt in prof.key_averages():
        name = evt.key
        if name.startswith("phase:") and name[6:] in totals:
            totals[name[6:]] += evt.cpu_time_total * 1e-6  # microseconds
    busy = sum(totals.values())
    return {**totals, "data_loading": 0.0, "idle": max(0.0, wall_s - busy), "wall": wall_s}
