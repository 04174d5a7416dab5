"""Bisect by instructions against bisect by time, on synthetic histories with small work steps
(issue 56, item 4).

Each history is examples/my-project as a git repository of --commits commits after its first
(notes only), and in a step history one commit at a random place that adds *work* to every forward:
a Python loop of K iterations, K sized to a known share of the step's instructions from two counts
(the step as it is, and with a large K). Kinds:

  step1    +1% instructions at a random commit     step05   +0.5% at a random commit
  aa       no change at all

On each: `perfsuite bisect --instructions` (Callgrind, one count per commit) and `perfsuite bisect`
(time, its defaults), good = the first commit, bad = HEAD, with --busy processes beside both (a
shared runner). A tool finds the step when it names exactly that commit; on an A/A history any
commit named is a false finding.

    python scripts/count_bisect_quality.py --out reports/work/count-bisect.json [--histories 1] [--busy 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from history_quality import EXAMPLE, Neighbour, _env, make_repo  # noqa: E402

LOOP = """

PAD = {k}  # Python iterations added to every forward: work the instruction count sees


def _pad() -> int:
    total = 0
    for i in range(PAD):
        total += i
    return total
"""
SHARES = {"step1": 0.01, "step05": 0.005, "aa": None}


def _write_model(repo: Path, k: int) -> None:
    text = (EXAMPLE / "myproj" / "model.py").read_text()
    text = text.replace("import torch\n", "import torch\n" + LOOP.format(k=k), 1)
    text = text.replace(
        "        return self.body(x)", "        if PAD:\n            _pad()\n        return self.body(x)"
    )
    (repo / "myproj" / "model.py").write_text(text)


def per_iteration(folder: Path) -> tuple[float, float]:
    """(instructions per step of the plain step, instructions per loop iteration), from two counts."""
    from perfsuite.core.discover import workload_in
    from perfsuite.measuring.instructions import count

    def counted(k: int) -> float:
        repo = folder / f"calibrate-{k}"
        shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
        _write_model(repo, k)
        workload_in([str(repo / "bench" / "tiny_mlp.py")], "tiny_mlp", str(repo))  # loads, or says why
        got = count(
            "tiny_mlp", {"batch_size": 32}, "cpu", files=[str(repo / "bench" / "tiny_mlp.py")], code_root=str(repo)
        )
        assert got["status"] == "ok", got
        return float(got["per_step"])

    base, big = counted(0), counted(20_000)
    return base, (big - base) / 20_000


def bisect(repo: Path, good: str, bad: str, instructions: bool, threshold: float | None = None) -> dict:
    cmd = [sys.executable, "-m", "perfsuite", "bisect", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu"]
    cmd += ["--good", good, "--bad", bad, "--no-why"] + (["--instructions"] if instructions else [])
    cmd += ["--threshold", str(threshold)] if threshold is not None else []
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=repo, env=_env(), capture_output=True, text=True, timeout=3600)
    text = " ".join(done.stdout.split())
    named = re.findall(r"first commit: ([0-9a-f]{12})", text) or re.findall(
        r"first (?:slower|faster) commit:? ([0-9a-f]{12})", text
    )
    return {"exit": done.returncode, "named": named[-1] if named else None, "seconds": round(time.monotonic() - t0),
            "tail": text[-600:]}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--histories", type=int, default=1, help="histories of each kind")
    ap.add_argument("--commits", type=int, default=8)
    ap.add_argument("--busy", type=int, default=1, help="busy processes beside every bisection")
    ap.add_argument("--kinds", default="step1,step05,aa")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--count-threshold",
        type=float,
        default=None,
        help="bisect --instructions's --threshold (default its own, 0.5%%: a +0.5%% step sits on it)",
    )
    ap.add_argument("--no-time", action="store_true", help="bisect by count only")
    ap.add_argument("--no-count", action="store_true", help="bisect by time only (the count's side measured apart)")
    ap.add_argument(
        "--time-histories",
        type=int,
        default=None,
        help="bisect by time only the first N histories of each kind (default: all); the rest by count only",
    )
    ap.add_argument(
        "--calibrated",
        default=None,
        metavar="STEP,ITERATION",
        help="instructions of the plain step and of one loop iteration from an earlier run's first line "
        "(skips the two calibrating counts)",
    )
    args = ap.parse_args()
    if args.no_count and args.no_time:
        ap.error("--no-count and --no-time together leave nothing to bisect")
    rng = random.Random(args.seed)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="count-bisect-") as tmp:
        if args.calibrated:
            base, per_iter = (float(x) for x in args.calibrated.split(","))
        else:
            base, per_iter = per_iteration(Path(tmp))
        print(f"step: {base:,.0f} instructions; a loop iteration: {per_iter:.1f}", flush=True)
        for h in range(args.histories):  # one history of each kind a pass: a cut run has every kind
            for kind in args.kinds.split(","):
                share = SHARES[kind]
                k = round(share * base / per_iter) if share else 0
                at = rng.randrange(args.commits) if share else None
                folder = Path(tmp) / f"{kind}-{h}"
                folder.mkdir()
                shas, changed = make_repo(
                    folder,
                    args.commits,
                    at,
                    k,
                    _write_model,
                    lambda n: f"model: {n} Python iterations more per forward",
                )
                busy = Neighbour(args.busy)
                busy.start()
                try:
                    by_count = (
                        {"exit": None, "named": None, "seconds": 0, "tail": "not run (--no-count)"}
                        if args.no_count
                        else bisect(folder / "project", shas[0], shas[-1], True, args.count_threshold)
                    )
                    timed = not args.no_time and (args.time_histories is None or h < args.time_histories)
                    by_time = (
                        {"exit": None, "named": None, "seconds": 0, "tail": "not run (--no-time)"}
                        if not timed
                        else bisect(folder / "project", shas[0], shas[-1], False)
                    )
                finally:
                    busy.stop()
                row = {"kind": kind, "share": share, "k": k, "changed": changed, "count": by_count, "time": by_time,
                       "load_1min": round(os.getloadavg()[0], 2)}  # fmt: skip
                for tool in ("count", "time"):
                    if row[tool]["exit"] is None:
                        continue
                    named = row[tool]["named"]
                    row[tool]["right"] = bool(changed) and named is not None and changed.startswith(named)
                    row[tool]["false"] = named is not None and not (changed and changed.startswith(named))
                rows.append(row)
                print(f"{kind} #{h}: changed {changed and changed[:12]}; count named {by_count['named']} "
                      f"({by_count['seconds']}s), time named {by_time['named']} ({by_time['seconds']}s)", flush=True)  # fmt: skip
                args.out.write_text(json.dumps({"step_instructions": base, "per_iteration": per_iter, "busy": args.busy,
                                                "count_threshold": args.count_threshold, "rows": rows}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
