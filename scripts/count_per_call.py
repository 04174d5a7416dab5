"""Is the call Callgrind counts steady? Instructions of each call after the warm-up (issue 56).

    python scripts/count_per_call.py --out reports/work/count-cost/per-call-DATE.json

For each case, one Counter (one server under Callgrind) counts 1, 2, 3 and 4 steps after the
child's warm-up (perfsuite.measuring.instructions_child.WARMUP); the differences of the totals are
the counts of the 1st, 2nd, 3rd and 4th counted call. Each total is deterministic (the same code
counts the same in every child of a server); this says how far one call is from the next.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "my-project"
CASES = [
    ("tiny_mlp", {"batch_size": 32, "width": 256}, [str(EXAMPLE / "bench" / "tiny_mlp.py")], str(EXAMPLE)),
    ("resnet", {"size": "ci", "batch_size": 2}, [], None),
]


def main() -> int:
    from perfsuite.measuring import instructions
    from perfsuite.measuring.instructions_child import WARMUP

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = []
    for name, params, files, root in CASES:
        with instructions.Counter() as counter:
            totals = []
            for steps in (1, 2, 3, 4):
                t0 = time.monotonic()
                job = {"workload": name, "params": params, "device": "cpu", "load": [], "steps": steps,
                       "files": files, "root": root}  # fmt: skip
                got = counter.count(job)
                totals.append(got.get("total"))
                print(name, steps, got.get("total"), got["status"], round(time.monotonic() - t0, 1), flush=True)
        calls = [totals[0]] + [b - a for a, b in zip(totals, totals[1:])] if None not in totals else []
        print(name, f"each counted call after {WARMUP} warm-up calls:", calls, flush=True)
        rows.append({"case": name, "params": params, "warmup": WARMUP, "totals": totals, "per_call": calls})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
