"""A reference for a variant's speed-up that shares no process with the other side: each variant of a
built-in workload's case timed alone in a fresh process (pinned to one core, one torch thread, as a
gate side), eager and the variant in turns A B B A ..., the speed-up per pair from the two
processes' median call times. Nothing else of the study runs beside either process, so a bias of
the interleaved gate from the other side's process (its threads, its spin-waits) cannot be in it.

    python scripts/variant_reference.py qwen -p shape=tiny -p batch_size=8 --variant openvino --pairs 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# The timing core: the last this process may use (as a gate's sides leave the first to the driver);
# on a one-core machine, that one.
CORE = max(os.sched_getaffinity(0))


def child(workload: str, given: list[str], variant: str, seconds: float) -> dict:
    import torch

    from perfsuite.compare.side_worker import pin_every_thread
    from perfsuite.core import registry
    from perfsuite.core.discover import discover
    from perfsuite.core.params import single_values
    from perfsuite.variants.apply import apply

    torch.set_num_threads(1)
    discover([])
    w = registry.get(workload)
    built = [w.build(w.resolve(single_values(given, w)), "cpu")]
    step = built[0].fn if variant == "eager" else apply(built, variant, "cpu").steps[0].fn
    pin_every_thread({CORE})
    for _ in range(10):
        step()
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 20:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"variant": variant, "median_s": statistics.median(times), "calls": len(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("-p", "--param", action="append", default=[])
    ap.add_argument("--variant", required=True)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.workload, args.param, args.variant, args.seconds)))
        return 0
    base = [sys.executable, __file__, args.workload, *sum((["-p", kv] for kv in args.param), []), "--child"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    rows = []
    for k in range(args.pairs):
        got = {}
        for v in ("eager", args.variant) if k % 2 == 0 else (args.variant, "eager"):
            cmd = [*base, "--variant", v, "--seconds", str(args.seconds)]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
            got[v] = json.loads(out.strip().splitlines()[-1])
        speedup = got["eager"]["median_s"] / got[args.variant]["median_s"]
        rows.append({"pair": k, "load_1min": round(os.getloadavg()[0], 2), "speedup": speedup, **{
            f"{v}_median_ms": round(got[v]["median_s"] * 1e3, 3) for v in got}})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    sp = [r["speedup"] for r in rows]
    print(
        json.dumps({"variant": args.variant, "median_speedup": statistics.median(sp), "min": min(sp), "max": max(sp)})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
