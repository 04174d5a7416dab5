"""What a short `perfsuite run` spends outside its budget, with and without the early fork server.

    python scripts/setup_cost.py --trials 5 --max-time 4 --out reports/setup/setup-cost.json

Runs `perfsuite run tiny_mlp --max-time T` in a copy of examples/my-project, alternating two
arms in fresh interpreters: as shipped (the fork server starts as soon as the command knows it
will fork, so its torch import overlaps the parent's), and with that early start switched off
(the server starts when the first worker is needed, as before issue 36). The overhead is the
wall time minus the budget; the medians of both arms and their ratio come from the same
stretch of the machine's load (the arms alternate), kept beside each trial.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARMS = {
    "as shipped (early server, torchvision only when needed)": "",
    "before (server on first use, torchvision always, torch._dynamo imported by the first count)": "from perfsuite.measuring import workers; workers.start_server_soon = lambda *a, **k: None; "
    "workers.PRELOAD = workers._preload = tuple(m for m in workers.PRELOAD if m != 'torch._dynamo'); ",
}


def _run(project: Path, arm: str, max_time: float, out: Path) -> float:
    code = (
        f"import sys; {ARMS[arm]}from perfsuite.cli.app import main; "
        f"sys.exit(main(['--machine-log', 'none', 'run', 'tiny_mlp', '-p', 'batch_size=32', '--device', 'cpu', '--max-time', "
        f"'{max_time}', '--out', '{out}']))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"{arm}: exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--max-time", type=float, default=4.0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    trials = []
    with tempfile.TemporaryDirectory(prefix="setup-cost-") as tmp:
        project = Path(tmp) / "my-project"
        shutil.copytree(ROOT / "examples" / "my-project", project, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
        for i in range(args.trials):
            arms = list(ARMS) if i % 2 == 0 else list(ARMS)[::-1]
            for arm in arms:
                wall = _run(project, arm, args.max_time, Path(tmp) / f"r{i}-{arm[0]}.json")
                trials.append(
                    {
                        "trial": i,
                        "arm": arm,
                        "wall_s": wall,
                        "overhead_s": wall - args.max_time,
                        "load_1m": os.getloadavg()[0],
                    }
                )
                print(f"{i} {arm}: {wall:.1f}s (load {os.getloadavg()[0]:.1f})", flush=True)
    summary = {arm: statistics.median(t["overhead_s"] for t in trials if t["arm"] == arm) for arm in ARMS}
    out = {
        "max_time": args.max_time,
        "trials": trials,
        "median_overhead_s": summary,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
