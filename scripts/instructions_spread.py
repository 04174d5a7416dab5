"""The spread of Callgrind's instruction count over separate processes, and its cost per case.

    python scripts/instructions_spread.py --out reports/work/instructions-spread.json [--repeats 5]

Counts each case `--repeats` times (default 3), each in a fresh process under Callgrind
(perfsuite.measuring.instructions.count), and writes every count, the CV and the seconds each
took. Issue 56's goal: CV <= 0.1% over 5 processes, <= 60 s a count for a ci-size step on the
2-core VM. Load beside it does not change a count; it only lengthens the seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = [
    ("matmul", {"n": 256}),
    ("autoencoder", {"batch_size": 8}),
    ("resnet", {"size": "ci", "batch_size": 8}),
]


def main() -> int:
    from perfsuite.measuring.instructions import count

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default=",".join(n for n, _ in CASES))
    args = ap.parse_args()
    wanted = args.cases.split(",")
    rows = []
    for name, params in [c for c in CASES if c[0] in wanted]:
        counts = [count(name, params, "cpu") for _ in range(args.repeats)]
        per = [c["per_step"] for c in counts if c["status"] == "ok"]
        cv = statistics.pstdev(per) / statistics.mean(per) if len(per) > 1 else None
        rows.append({"workload": name, "params": params, "counts": counts, "cv": cv,
                     "max_seconds": max(c["seconds"] for c in counts)})  # fmt: skip
        print(f"{name} {params}: per step {[f'{p:,.0f}' for p in per]}, CV {cv:.5%}, "
              f"seconds {[c['seconds'] for c in counts]}", flush=True)  # fmt: skip
        args.out.write_text(json.dumps({"cases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
