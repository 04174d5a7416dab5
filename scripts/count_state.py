"""Does the instruction count of identical code depend on where it is checked out? (issue 56)

    python scripts/count_state.py --out reports/work/count-state/after.json [--repeat 2]

examples/my-project copied into checkouts of one path length that differ as a history's commits do:
`a` as it is, `b` and `c` with a notes file (different text), `d` a copy of `b` under another name.
Each is counted by `perfsuite.measuring.instructions.count` as bisect --instructions counts a
revision (its workload file and code root), all four and `b` again by one Counter (one server under
Callgrind, as a bisection counts its commits), in each of `--servers` servers one after the other
(as two runs count). Printed: each count, and the largest differences between counts of identical
code: in one server among identical trees (b, d: the same files), among all four, and between servers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "my-project"
NOTES = {"a": None, "b": "note 1\n", "c": "note 2\n", "d": "note 1\n"}


def main() -> int:
    from perfsuite.measuring.instructions import Counter, count

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--servers", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="count-state-") as tmp:
        for name, note in NOTES.items():
            repo = Path(tmp) / f"{name}-project"
            shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".asv", "__pycache__", ".perfsuite"))
            if note:
                (repo / "NOTES.md").write_text(note)
        for server in range(args.servers):  # each a Counter of its own: a server, as one run has
            with Counter() as counter:
                for name in [*NOTES, "b"]:  # b again at the end: the same code late in a server's life
                    repo = Path(tmp) / f"{name}-project"
                    got = count("tiny_mlp", {"batch_size": 32}, "cpu", files=[str(repo / "bench" / "tiny_mlp.py")],
                                code_root=str(repo), counter=counter)  # fmt: skip
                    rows.append({"checkout": name, "server": server, "per_step": got.get("per_step"),
                                 "status": got["status"], "seconds": got.get("seconds"),
                                 "reason": got.get("reason")})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)

    def spread(xs: list[float]) -> float | None:
        return (max(xs) - min(xs)) / min(xs) if xs else None

    same = {  # b, c and d hold identical files but the note's text; a lacks the notes file
        "identical_trees_in_one_server": max(
            spread([x["per_step"] for x in rows if x["server"] == k and x["checkout"] in "bd" and x["per_step"]]) or 0
            for k in range(args.servers)
        ),
        "any_checkout_in_one_server": max(
            spread([x["per_step"] for x in rows if x["server"] == k and x["per_step"]]) or 0
            for k in range(args.servers)
        ),
        "between_servers": spread([x["per_step"] for x in rows if x["checkout"] == "b" and x["per_step"]]),
    }
    for what, v in same.items():
        print(f"largest difference, {what.replace('_', ' ')}: {v:.5%}" if v is not None else f"{what}: no count")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "largest_difference": same}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
