"""Roofs: one compute ceiling per pipe (FP64, FP32, FP16 CUDA cores, TF32/FP16-BF16/FP8/INT8/
FP64 tensor cores) and one bandwidth per memory level (DRAM, L2, L1), and the judgement of a
point against them.

Where they come from, per roof, first found wins: `--peak-compute`/`--peak-bw` (what the user
says), the file (ncu's `…peak_sustained` rates times the highest clock seen, as Nsight
Compute's own roofline sections compute them), the `--device` datasheet table, this GPU's
`perfsuite peak` record (measured matmul rates and copy bandwidth).

The file's tensor rates are checked against the dense rate per SM of its compute capability
(devices.DENSE_TENSOR_PER_SM_CYCLE): on an H100 (Nsight Compute 2025.3) the
`sm__ops_path_tensor_src_*.sum.peak_sustained` of TF32, FP16/BF16, FP8 and INT8 are twice the
dense rate (the 2:4-sparse one: 4096 TF32 FLOP per SM per cycle where the datasheet's 494.7
TFLOP/s is 2048), FP64's is not; the ops-path counts are dense FLOPs, so against those roofs
a kernel at full tensor rate showed 50% of its roof. Twice the dense rate is halved (and the
source says so); a rate that matches neither, or a GPU without a known dense rate, is kept
and noted as unchecked.

A point whose work ran on several pipes is judged against the roof of that mix: the least
time its FLOPs could take is Σ FLOPs_pipe / peak_pipe, so its roof is Σ FLOPs / that time;
for single-pipe work this is that pipe's peak. Attainable time also has one floor per memory
level (bytes / bandwidth); the largest floor is the limiter, and `pct_of_roof` is that floor
over the measured time. An aggregate (kernel family, NVTX range, step) is judged the way the
chart shows it: by its summed FLOPs, bytes and time, at its own intensities.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfsuite.roofline.devices import DENSE_TENSOR_PER_SM_CYCLE, KNOWN_DEVICES
from perfsuite.roofline.metrics import PEAK_COMPUTE, PEAK_MEMORY, PIPE_LABEL, SM_COUNT, SM_HZ

LEVELS = ("dram", "l2", "l1")


@dataclass(frozen=True)
class Verdict:
    roof: float | None  # FLOP/s ceiling of the point's pipe mix
    attainable: float | None  # FLOP/s the roofs allow at its intensities
    pct: float | None  # least possible time / measured time, in percent
    limiter: str  # compute, dram, l2 or l1
    bound: str  # classic DRAM roofline: compute or memory


@dataclass
class Ceilings:
    compute: dict = field(default_factory=dict)  # pipe -> FLOP/s; "*" = every pipe
    memory: dict = field(default_factory=dict)  # level -> B/s
    source: dict = field(default_factory=dict)  # pipe or level -> where it came from
    notes: dict = field(default_factory=dict)  # pipe -> why its roof may be off (shown where it ran)

    def pipe_roof(self, pipe: str) -> float | None:
        return self.compute.get("*") or self.compute.get(pipe)

    def compute_roof(self, pipes: dict) -> float | None:
        """The roof of a mix of FLOPs per pipe; None when a pipe that ran has no known roof."""
        flops = sum(pipes.values())
        if flops <= 0:
            return None
        used = [pipe for pipe, f in pipes.items() if f > 0]
        if len(used) == 1:  # exactly that pipe's roof, without a round trip through a division
            return self.pipe_roof(used[0])
        least = 0.0
        for pipe, f in pipes.items():
            if f > 0:
                roof = self.pipe_roof(pipe)
                if not roof:
                    return None
                least += f / roof
        return flops / least

    def judge(self, p) -> Verdict:
        floors = {}
        roof = self.compute_roof(p.pipes())
        if p.flops > 0:
            if roof is None:
                return Verdict(None, None, None, "", "")
            floors["compute"] = p.flops / roof
        for level, nbytes in (("dram", p.dram_bytes), ("l2", p.l2_bytes), ("l1", p.l1_bytes)):
            if nbytes and self.memory.get(level):
                floors[level] = nbytes / self.memory[level]
        dram = self.memory.get("dram")
        ai = p.intensity
        if p.flops <= 0:  # a copy or a fill: nothing but memory traffic
            bound = "memory" if p.dram_bytes > 0 else ""
        else:
            bound = "" if (roof is None or not dram or ai is None) else ("compute" if ai >= roof / dram else "memory")
        if not p.exact:
            # Tensor FLOPs unknown: the compute floor is a lower bound, so neither the limiter nor
            # the share of the roof is known. Only "compute" survives a higher FLOP count.
            return Verdict(roof, None, None, "", bound if bound == "compute" else "")
        if not floors:
            return Verdict(roof, None, None, "", bound)
        limiter = max(floors, key=floors.__getitem__)
        least = floors[limiter]
        attainable = p.flops / least if least > 0 and p.flops > 0 else None
        pct = 100.0 * least / p.time_s if p.time_s > 0 else None
        return Verdict(roof, attainable, pct, limiter, bound)

    def missing(self, points) -> list[str]:
        """Pipes some point ran on that have no roof."""
        return sorted({pipe for p in points for pipe, f in p.pipes().items() if f > 0 and not self.pipe_roof(pipe)})


def merge(*sources: Ceilings) -> Ceilings:
    out = Ceilings()
    for c in sources:
        for key, v in c.compute.items():
            if v and key not in out.compute:
                out.compute[key], out.source[key] = v, c.source.get(key, "")
                if key in c.notes:
                    out.notes[key] = c.notes[key]
        for key, v in c.memory.items():
            if v and key not in out.memory:
                out.memory[key], out.source[key] = v, c.source.get(key, "")
    return out


def from_file(launches) -> Ceilings:
    """Rates the export carries: peak per cycle x the highest clock any launch ran at."""

    def best(per_cycle: str, hz: str, mult: float = 1.0) -> float:
        return max(
            (
                l.metrics[per_cycle] * mult * l.metrics[hz]
                for l in launches
                if per_cycle in l.metrics and hz in l.metrics
            ),
            default=0.0,
        )

    out = Ceilings()
    for pipe, pairs in PEAK_COMPUTE.items():
        v = max(best(m, SM_HZ, mult) for m, mult in pairs)
        if v:
            out.compute[pipe], out.source[pipe] = v, "file"
    for level, (per_cycle, hz) in PEAK_MEMORY.items():
        v = best(per_cycle, hz)
        if v:
            out.memory[level], out.source[level] = v, "file"
    _check_tensor(out, launches)
    return out


# How far a file's rate per SM may sit from 1x or 2x the dense rate and still count as it: the
# rates are integers per SM per cycle, so anything but an exact multiple is another rate.
_RATIO_TOLERANCE = 0.01
_FFMA_PEAK = PEAK_COMPUTE["fp32"][0][0]


def _check_tensor(out: Ceilings, launches) -> None:
    """Halve the file's tensor roofs that are twice the dense rate of its GPU; note the ones
    that cannot be checked (see the module docstring)."""
    tensor = [pipe for pipe in out.compute if pipe.startswith("tensor_")]
    if not tensor:
        return
    cc = next((l.cc for l in launches if l.cc), "")
    dense, lanes = DENSE_TENSOR_PER_SM_CYCLE.get(cc, ({}, 0))
    sms = max((l.metrics[SM_COUNT] for l in launches if SM_COUNT in l.metrics), default=0.0)
    if not sms and lanes:  # the file's own FP32 peak is its SMs x FP32 lanes per cycle
        sms = max((l.metrics[_FFMA_PEAK] for l in launches if _FFMA_PEAK in l.metrics), default=0.0) / lanes
    for pipe in tensor:
        label = PIPE_LABEL.get(pipe, pipe)
        if not cc or pipe not in dense or not sms:
            if not cc:
                why = "no CC column in the file"
            elif pipe not in dense:
                why = f"no dense {label} rate known for compute capability {cc}"
            else:
                why = "no SM count (device__attribute_multiprocessor_count or the FFMA peak)"
            out.source[pipe] = "file, unchecked"
            out.notes[pipe] = (
                f"{label} roof from the file unchecked ({why}): Nsight Compute's tensor peaks were twice "
                "the dense rate on an H100; check it against the datasheet, or give --peak-compute"
            )
            continue
        per_cycle = max(l.metrics[m] * mult for m, mult in PEAK_COMPUTE[pipe] for l in launches if m in l.metrics)
        ratio = per_cycle / sms / dense[pipe]
        if abs(ratio - 2.0) <= 2.0 * _RATIO_TOLERANCE:
            out.compute[pipe] /= 2.0
            out.source[pipe] = "file ÷2: ncu's rate is the 2:4-sparse one"
        elif abs(ratio - 1.0) > _RATIO_TOLERANCE:
            out.source[pipe] = "file, unchecked"
            out.notes[pipe] = (
                f"{label} roof from the file is {per_cycle / sms:.0f} FLOP per SM per cycle where compute "
                f"capability {cc} does {dense[pipe]} dense: kept as given, unchecked"
            )


def from_device(name: str) -> Ceilings:
    tflops, gbs = KNOWN_DEVICES[name]
    src = f"datasheet {name}"
    # float("66.9e12") is 6.69e13 exactly as written; 66.9 * 1e12 is not.
    return Ceilings(
        {k: float(f"{v!r}e12") for k, v in tflops.items()},
        {"dram": float(f"{gbs!r}e9")},
        {**{k: src for k in tflops}, "dram": src},
    )


def given(tflops: float | None, gbs: float | None) -> Ceilings:
    out = Ceilings()
    if tflops:
        out.compute["*"], out.source["*"] = float(f"{tflops!r}e12"), "--peak-compute"
    if gbs:
        out.memory["dram"], out.source["dram"] = float(f"{gbs!r}e9"), "--peak-bw"
    return out


# `perfsuite peak` roofs (matmul dtypes) -> pipes; fp32 is measured with TF32 off.
_PEAK_ROOFS = {"fp32": "fp32", "tf32": "tensor_tf32", "fp16": "tensor_fp16", "bf16": "tensor_fp16"}


def from_peak_file(peaks: dict, device_name: str) -> tuple[Ceilings, str]:
    """This GPU's measured roofs: the peak-file entry of the file's device, or the only CUDA
    entry when the export does not name its device. (Ceilings, the entry's name) or empty."""
    cuda = {k: v for k, v in peaks.items() if k.startswith("cuda|") and isinstance(v, dict)}
    key = f"cuda|{device_name}" if device_name else (next(iter(cuda)) if len(cuda) == 1 else "")
    entry = cuda.get(key)
    if not entry:
        return Ceilings(), ""
    out, src = Ceilings(), f"perfsuite peak ({key[5:]})"
    for roof, v in (entry.get("flops_per_s") or {}).items():
        pipe = _PEAK_ROOFS.get(roof)
        if pipe and isinstance(v, (int, float)) and v > out.compute.get(pipe, 0):
            out.compute[pipe], out.source[pipe] = float(v), src
    bw = entry.get("bytes_per_s")
    if isinstance(bw, (int, float)) and bw > 0:
        out.memory["dram"], out.source["dram"] = float(bw), src
    return out, key[5:]
