"""How often `perfsuite bisect` names the right commit, how long it takes, and how often it names
one in a history without a slowdown (issue 24, reports/bisect/).

    python scripts/bisect_quality.py --trials 10 --aa 10 --out reports/bisect/quality.json

Each trial makes a fresh git repository with a user workload `rn` that runs perfsuite's ResNet18
`ci` training step followed by EXTRA 256x256 matmuls (the gate self-check's padding,
perfsuite.compare.paired_gate.padding_matmul), and 16 commits after the first: one commit, at a random
index, sets EXTRA to the count that adds `--slowdown` (default 5%) of the step; the others touch a
notes file. A/A histories have no such commit. `perfsuite bisect` runs with its defaults (or the
flags given after `--`), `--no-why`, from the repository, as a user would.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
WORKLOAD = '''import perfsuite
from perfsuite.compare.paired_gate import padding_matmul
from perfsuite.core import registry

EXTRA = 0


@perfsuite.workload(params={"size": "ci"})
def rn(size: str, device: str):
    """perfsuite's ResNet18 training step, then EXTRA padding matmuls."""
    built = registry.get("resnet").build({"size": size}, device)
    mm = padding_matmul()

    def step():
        built.fn()
        for _ in range(EXTRA):
            mm()

    return perfsuite.Step(step, items=built.work.items_per_step, unit="samples")
'''


def git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def extra_for(fraction: float) -> tuple[int, float]:
    """Matmuls that add `fraction` of the ResNet18 ci step, as the gate's self-check counts them."""
    sys.path.insert(0, str(REPO))
    import torch

    from perfsuite.compare.paired_gate import injected_slowdown
    from perfsuite.core import registry
    from perfsuite.measuring.timing import PerfCounterClock

    torch.set_num_threads(1)
    step = registry.get("resnet").build({"size": "ci"}, "cpu").fn
    _, count, est = injected_slowdown(step, fraction, PerfCounterClock())
    return count, est


def history(root: Path, n: int, slower_at: int | None, extra: int) -> list[str]:
    root.mkdir(parents=True)
    (root / "bench").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "q"\nversion = "0"\n\n[tool.perfsuite]\nworkloads = ["bench"]\n'
    )
    (root / "bench" / "rn.py").write_text(WORKLOAD)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    shas = []
    for i in range(n):
        if i == slower_at:
            f = root / "bench" / "rn.py"
            f.write_text(f.read_text().replace("EXTRA = 0", f"EXTRA = {extra}"))
        else:
            (root / "NOTES.md").write_text(f"{i}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"commit {i}")
        shas.append(git(root, "rev-parse", "HEAD"))
    return shas


def one(kind: str, i: int, extra: int, flags: list[str], rng: random.Random) -> dict:
    with tempfile.TemporaryDirectory(prefix="bisect-quality-") as tmp:
        root = Path(tmp) / "repo"
        at = rng.randrange(16) if kind == "slow" else None
        shas = history(root, 16, at, extra)
        log = Path(tmp) / "log.bisect.json"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        t0 = time.monotonic()
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "perfsuite",
                "bisect",
                "rn",
                "--good",
                "HEAD~16",
                "--bad",
                "HEAD",
                "--device",
                "cpu",
                "--no-why",
                "--log",
                str(log),
                *flags,
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - t0
        doc = json.loads(log.read_text())["results"][0] if log.exists() else {}
        named = ((doc.get("answer") or {}).get("commit") or {}).get("sha")
        out = {
            "kind": kind,
            "trial": i,
            "slower_at": at,
            "truth": shas[at] if at is not None else None,
            "named": named,
            "named_at": shas.index(named) if named in shas else None,
            "right": named == (shas[at] if at is not None else None),
            "exit": res.returncode,
            "seconds": seconds,
            "probes": len(doc.get("probes", [])),
            "stdout": res.stdout[-3000:],
            "stderr": res.stderr[-2000:],
            "log": doc,
        }
        print(
            f"{kind} {i}: slower at {at}, named {out['named_at']} ({'right' if out['right'] else 'WRONG'}), "
            f"exit {res.returncode}, {seconds:.0f}s, {out['probes']} probes",
            flush=True,
        )
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--aa", type=int, default=10)
    p.add_argument("--slowdown", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("flags", nargs="*", help="after --: flags for perfsuite bisect (default: its defaults)")
    args = p.parse_args()
    extra, est = extra_for(args.slowdown)
    print(f"{extra} padding matmuls: about {est:.1%} of the step", flush=True)
    rng = random.Random(args.seed)
    runs = []
    order = ["slow"] * args.trials + ["aa"] * args.aa
    rng.shuffle(order)  # slow and A/A histories interleaved: a quiet hour does not favour one kind
    counts = {"slow": 0, "aa": 0}
    for kind in order:
        runs.append(one(kind, counts[kind], extra, args.flags, rng))
        counts[kind] += 1
        slow = [r for r in runs if r["kind"] == "slow"]
        aa = [r for r in runs if r["kind"] == "aa"]
        summary = {
            "slowdown_requested": args.slowdown,
            "slowdown_estimated": est,
            "matmuls": extra,
            "flags": args.flags,
            "right": sum(r["right"] for r in slow),
            "trials": len(slow),
            "aa_named_none": sum(r["named"] is None for r in aa),
            "aa": len(aa),
            "seconds_slow": [r["seconds"] for r in slow],
            "seconds_aa": [r["seconds"] for r in aa],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))  # after every bisect
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
