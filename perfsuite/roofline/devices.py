"""Datasheet ceilings of known GPUs, for `perfsuite roofline --device NAME`.

Dense peaks (no 2:4 sparsity) in TFLOP/s (TOP/s for INT8) per pipe, and DRAM GB/s, from
NVIDIA's datasheets and architecture whitepapers at their boost clocks. GeForce tensor figures
are the FP32-accumulate ones (what mixed-precision training uses; FP16 accumulate is 2x).
A pipe left out is not known here: a kernel that used it is not judged, and says why.
The file's own ceilings (`…peak_sustained` × clock, see metrics.py) beat these when present
(its tensor ones checked against DENSE_TENSOR_PER_SM_CYCLE below first, see ceilings.py).
"""

from __future__ import annotations

_A100 = {
    "fp64": 9.7,
    "fp32": 19.5,
    "fp16": 78.0,
    "tensor_fp64": 19.5,
    "tensor_tf32": 156.0,
    "tensor_fp16": 312.0,
    "tensor_int8": 624.0,
}
_H100_SXM = {
    "fp64": 33.5,
    "fp32": 66.9,
    "fp16": 133.8,
    "tensor_fp64": 66.9,
    "tensor_tf32": 494.7,
    "tensor_fp16": 989.4,
    "tensor_fp8": 1978.9,
    "tensor_int8": 1978.9,
}
_H100_PCIE = {
    "fp64": 25.6,
    "fp32": 51.2,
    "fp16": 102.4,
    "tensor_fp64": 51.2,
    "tensor_tf32": 378.0,
    "tensor_fp16": 756.0,
    "tensor_fp8": 1513.0,
    "tensor_int8": 1513.0,
}

# name -> (TFLOP/s per pipe, DRAM GB/s)
KNOWN_DEVICES: dict[str, tuple[dict[str, float], float]] = {
    "A100-SXM4-40GB": (_A100, 1555.0),
    "A100-SXM4-80GB": (_A100, 2039.0),
    "A100-PCIE-40GB": (_A100, 1555.0),
    "H100-SXM5-80GB": (_H100_SXM, 3350.0),
    "H100-PCIE-80GB": (_H100_PCIE, 2000.0),
    "V100-SXM2-16GB": ({"fp64": 7.8, "fp32": 15.7, "fp16": 31.4, "tensor_fp16": 125.0}, 900.0),
    "T4": ({"fp32": 8.1, "tensor_fp16": 65.0, "tensor_int8": 130.0}, 320.0),
    "L4": ({"fp32": 30.3, "tensor_tf32": 60.0, "tensor_fp16": 121.0, "tensor_fp8": 242.5, "tensor_int8": 242.5}, 300.0),
    "A10G": ({"fp32": 31.2}, 600.0),
    "RTX-4090": (
        {"fp32": 82.6, "tensor_tf32": 82.6, "tensor_fp16": 165.2, "tensor_fp8": 330.3, "tensor_int8": 660.6},
        1008.0,
    ),
    "RTX-3090": ({"fp32": 35.6, "tensor_tf32": 35.6, "tensor_fp16": 71.0, "tensor_int8": 284.0}, 936.0),
}

# What a file's tensor ceilings are checked against (ceilings.from_file): dense tensor-core
# FLOPs per SM per clock, and FP32 lanes per SM (FFMA per clock, to count SMs from the file's
# own FFMA peak when it lacks device__attribute_multiprocessor_count), by compute capability.
# From NVIDIA's A100 and H100 whitepapers: e.g. A100 TF32 156 TFLOP/s = 108 SMs x 1.41 GHz x
# 1024; H100 FP16 989.4 = 132 x 1.83 GHz x 4096. Other architectures differ per product
# (GeForce parts halve FP16 with FP32 accumulate), so their file ceilings stay unchecked.
DENSE_TENSOR_PER_SM_CYCLE: dict[str, tuple[dict[str, int], int]] = {
    "8.0": ({"tensor_fp64": 128, "tensor_tf32": 1024, "tensor_fp16": 2048, "tensor_int8": 4096}, 64),
    "9.0": (
        {"tensor_fp64": 256, "tensor_tf32": 2048, "tensor_fp16": 4096, "tensor_fp8": 8192, "tensor_int8": 8192},
        128,
    ),
}
