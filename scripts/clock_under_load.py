"""A short step's wall time and CPU time, quiet and beside busy processes on its core.

    python scripts/clock_under_load.py [--hogs 1,3] [--steps 300]

Issue 49: why the gate's side processes time a step that never waits by their CPU time on the
CPU (perfsuite.compare.sides.SideClock.for_sides). A two-layer transformer forward (the shape of
scripts/gate_sides.py's tiny_gpt) runs on the last CPU, one torch thread; each step is timed by
perf_counter_ns and thread_time_ns at once, quiet and then with N processes spinning on the same
CPU. Prints each clock's median and IQR / median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hogs", default="1,3", help="busy processes beside the step, one run per count")
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()

    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(
        torch.nn.Embedding(512, 128), torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    ).eval()
    idx = torch.randint(0, 512, (4, 64))

    def step():
        with torch.no_grad():
            model(idx)

    for _ in range(50):
        step()

    def measure(tag: str) -> None:
        wall, cpu = [], []
        for _ in range(args.steps):
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            step()
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - t0)
        for name, xs in (("wall", wall), ("cpu", cpu)):
            q = statistics.quantiles(xs, n=4)
            med = statistics.median(xs)
            print(f"{tag}: {name} median {med / 1e6:.3f} ms, IQR/median {(q[2] - q[0]) / med:.3f}", flush=True)

    measure("quiet")
    for n in (int(x) for x in args.hogs.split(",")):
        hogs = [
            subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"]) for _ in range(n)
        ]
        try:
            time.sleep(1.0)
            measure(f"{n} busy on its core")
        finally:
            for h in hogs:
                h.kill()
                h.wait()


if __name__ == "__main__":
    main()
