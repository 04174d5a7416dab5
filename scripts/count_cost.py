"""What one instruction count costs: the server's start, and each count in a started server.

    python scripts/count_cost.py --out reports/work/count-cost/AFTER.json [--cases resnet-ci,autoencoder-ci]

For each case, one Counter (perfsuite.measuring.instructions): its first count pays Callgrind's
start and the imports, the next `--repeats` counts are what a bisection or a history pays a
commit. Writes each count's seconds and instructions per step (equal within one server), the
method version and the machine's load. Issue 56's goal: at most 60 s a count for a ci-size step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# label: (workload, params). The ci suite's CPU cases (suites/ci.yaml: "a ci-size step"), and the
# larger cases counted before.
CASES = {
    "resnet-ci": ("resnet", {"size": "ci", "batch_size": 2}),
    "autoencoder-ci": ("autoencoder", {"size": "ci", "batch_size": 16, "variant": "conv"}),
    "matmul-ci": ("matmul", {"n": 128}),
    "matmul": ("matmul", {"n": 256}),
    "autoencoder": ("autoencoder", {"batch_size": 8}),
    "resnet": ("resnet", {"size": "ci", "batch_size": 8}),
}


def main() -> int:
    from perfsuite.measuring import instructions

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=1, help="counts after the first, in the same server")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    rows = []
    for name in args.cases.split(","):
        workload, params = CASES[name]
        job = {"workload": workload, "params": params, "device": "cpu", "load": [], "steps": instructions.STEPS,
               "files": [], "root": None}  # fmt: skip
        with instructions.Counter() as counter:
            counts = []
            for _ in range(1 + args.repeats):
                t0, load = time.monotonic(), os.getloadavg()[0]
                got = counter.count(job)
                counts.append({"seconds": round(time.monotonic() - t0, 1), "load_1m": round(load, 2),
                               "per_step": got.get("per_step"), "status": got["status"],
                               "reason": got.get("reason")})  # fmt: skip
                print(name, counts[-1], flush=True)
        rows.append({"case": name, "workload": workload, "params": params, "counts": counts})
        # after each case: a run stopped later keeps what it measured
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"method_version": instructions.METHOD_VERSION, "steps": instructions.STEPS, "cases": rows}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
