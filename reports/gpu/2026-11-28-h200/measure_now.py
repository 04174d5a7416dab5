"""perfsuite.measure() on a GPU (new since the last GPU session): a callable, a Step and a
workload's name, each timed by perfsuite and by an independent CUDA-event loop over the same
matmul. Run from the checkout: python reports/gpu/2026-11-28-h200/measure_now.py [cuda|cpu]"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import torch  # noqa: E402

import perfsuite  # noqa: E402

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
n = 4096 if dev.startswith("cuda") else 512
dtype = torch.bfloat16 if dev.startswith("cuda") else torch.float32
x = torch.randn(n, n, device=dev, dtype=dtype)


def independent(rounds=30, block=20):
    """Plain CUDA events (or perf_counter on CPU) around blocks of steps: no perfsuite code."""
    for _ in range(20):
        x @ x
    times = []
    for _ in range(rounds):
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(block):
                x @ x
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 1e3 / block)
        else:
            t = time.perf_counter()
            for _ in range(block):
                x @ x
            times.append((time.perf_counter() - t) / block)
    return statistics.median(times)


records = {
    "callable": perfsuite.measure(lambda: x @ x, device=dev, max_time=3),
    "Step": perfsuite.measure(
        perfsuite.Step(
            fn=lambda: x @ x, items=1, unit="matmuls", flops=2 * n**3, dtype="bf16" if dev != "cpu" else "fp32"
        ),
        device=dev,
        max_time=3,
    ),
    "name": perfsuite.measure(
        "matmul", params={"n": n, "dtype": "bf16" if dev != "cpu" else "fp32"}, device=dev, max_time=3
    ),
}
ref = independent()
print(f"independent loop: {ref * 1e6:.1f} us a matmul ({n}x{n} {dtype})")
for how, r in records.items():
    print(f"--- perfsuite.measure({how}):")
    print(r)
    print(f"    timing {r.timing_method}, {r.processes} process(es); median / independent = {r.stats.median / ref:.3f}")
