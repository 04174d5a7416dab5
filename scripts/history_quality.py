"""`perfsuite history` against asv on the same synthetic histories (issue 37, item 4).

Each history is a user's repository (examples/my-project, the `[tool.perfsuite]` API) of
--commits commits after its first: notes-only commits, and in a "step" history one commit at a
random place that makes the model's forward slower by a known fraction of the step (a busy wait
sized from the step's median measured first). Kinds:

  step10     +10% at a random commit          step3      +3% at a random commit
  aa         no change at all                 neighbour  no change; a CPU-heavy neighbour
                                                          process starts halfway through
  step3busy  +3% at a random commit, on a machine with one busy process at nice 19 from start to
             end (a CI job beside it on one core): where a step's own short pair misses it

Both tools walk the same repository:
  perfsuite  `perfsuite history tiny_mlp -p batch_size=32 --range FIRST..HEAD` (paired, each
             commit against the one before), its confirmed regressions read from its log;
  asv        `asv run --python=same --set-commit-hash=SHA` on each commit checked out in turn
             (one separate run per commit, asv's default timing), then asv's own regression
             detection as `asv publish` runs it: step_detect.detect_steps on the series, then
             detect_regressions at asv's default threshold of 5%.
A regression counts as found at the right commit when the tool names exactly that commit.

    python scripts/history_quality.py --histories 10 --commits 20 --out reports/history/

Writes OUT/history-quality.json (every history: the commit that changed, what each tool named,
the points rechecked, wall times), keeps each history's own log in OUT/logs/, and prints the table. It measures for a long time: about (budget + 5 s) per commit
for perfsuite and asv's run per commit, per history.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my-project"
GIT = ["git", "-c", "user.email=h@example.invalid", "-c", "user.name=h"]
ASV_BENCH = "bench_workloads.TinyMlpTime.time_step"
SPIN = """
import time as _time

EXTRA_S = {extra!r}  # seconds of busy waiting added to every forward


def _spin(seconds: float) -> None:
    end = _time.perf_counter() + seconds
    while _time.perf_counter() < end:
        pass
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _write_model(repo: Path, extra_s: float) -> None:
    model = repo / "myproj" / "model.py"
    text = (EXAMPLE / "myproj" / "model.py").read_text()
    text = text.replace("import torch\n", "import torch\n" + SPIN.format(extra=extra_s), 1)
    text = text.replace(
        "        return self.body(x)", "        if EXTRA_S:\n            _spin(EXTRA_S)\n        return self.body(x)"
    )
    model.write_text(text)


def make_repo(
    folder: Path, commits: int, change_at: int | None, extra_s: float, write_model=None, change_said=None
) -> tuple[list[str], str | None]:
    """The project's first commit, then `commits` commits; commit `change_at` (0-based) adds
    `extra_s` to every forward. Returns (every sha, first first; the changed commit's sha).
    `write_model(repo, amount)` and `change_said(amount)`: another kind of change (default: a busy
    wait of `extra_s` seconds; scripts/count_bisect_quality.py adds Python iterations)."""
    write_model = write_model or _write_model
    repo = folder / "project"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
    (repo / ".gitignore").write_text(".asv/\n.perfsuite/\n__pycache__/\n")
    write_model(repo, 0.0)
    # the one case both tools measure (asv would time every case of the workload's sweep)
    bench = repo / "bench" / "tiny_mlp.py"
    text = bench.read_text()
    assert '"batch_size": [32, 128]' in text, "examples/my-project's tiny_mlp sweep changed: update this script"
    bench.write_text(text.replace('"batch_size": [32, 128]', '"batch_size": [32]'))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "the project")
    shas, changed = [_git(repo, "rev-parse", "HEAD")], None
    for i in range(commits):
        if i == change_at:
            write_model(repo, extra_s)
            message = change_said(extra_s) if change_said else f"model: {extra_s * 1e6:.0f} us more per forward"
        else:
            (repo / "NOTES.md").write_text(f"note {i}\n")
            message = f"notes {i}"
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", message)
        shas.append(_git(repo, "rev-parse", "HEAD"))
        if i == change_at:
            changed = shas[-1]
    return shas, changed


class Neighbour:
    """CPU-heavy processes (`count`, default one per core, at niceness `nice`) started on
    demand, stopped at the end."""

    def __init__(self, count: int | None = None, nice: int = 0) -> None:
        self.procs: list[subprocess.Popen] = []
        # None: one per core. 0 is none (`count or ...` made --busy 0 start one per core).
        self.count, self.nice = (os.cpu_count() or 2) if count is None else count, nice

    def start(self) -> None:
        if not self.procs:
            spin = ["nice", "-n", str(self.nice), sys.executable, "-c", "while True: pass"]
            self.procs = [subprocess.Popen(spin) for _ in range(self.count)]

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
        self.procs = []


def baseline_step_s(repo: Path, budget: float) -> float:
    out = repo / "baseline.json"
    subprocess.run(
        [sys.executable, "-m", "perfsuite", "run", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu",
         "--max-time", str(budget), "--out", str(out)],
        cwd=repo, env=_env(), check=True, capture_output=True, text=True,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    out.unlink()
    samples = sorted(doc["records"][0]["samples_s"])
    return samples[len(samples) // 2]


def run_perfsuite(repo: Path, shas: list[str], budget: float, neighbour: Neighbour | None, keep: Path) -> dict:
    log = repo.parent / "history.json"
    cmd = [sys.executable, "-m", "perfsuite", "history", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu",
           "--range", f"{shas[0]}..{shas[-1]}", "--max-time", str(budget), "--builds", "2", "--no-why",
           "--log", str(log), "--html", str(repo.parent / "history.html")]  # fmt: skip
    stop = threading.Event()

    def halfway() -> None:  # the neighbour starts once half the commits are measured
        while not stop.wait(0.5):
            try:
                points = json.loads(log.read_text())["results"][0]["points"]
            except (OSError, ValueError, KeyError, IndexError):
                continue
            if len(points) >= (len(shas) - 1) // 2:
                neighbour.start()  # type: ignore[union-attr]
                return

    watcher = threading.Thread(target=halfway, daemon=True) if neighbour else None
    if watcher:
        watcher.start()
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=repo, env=_env(), capture_output=True, text=True)
    wall = time.monotonic() - t0
    stop.set()
    if neighbour:
        neighbour.stop()
    if res.returncode not in (0, 1):
        raise RuntimeError(f"perfsuite history exited {res.returncode}: {res.stderr[-2000:]}")
    sys.path.insert(0, str(ROOT))
    from perfsuite.compare.kinds import load_result

    (state,) = load_result(log, "history")
    keep.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, keep)  # the history's own log, every pair's verdict in it
    return {
        # The commits it blames: each confirmed point's (the commit a bisection inside it named),
        # and each confirmed drift's first commit like its end, where a bisection inside it named one.
        "named": [p.blamed for p in state.regressions()] + [w.culprit for w in state.drifts() if w.culprit],
        "rechecked": {p.sha: p.recheck.median_ratio for p in state.points if p.recheck is not None},
        "drift": [[w.start, w.end] for w in state.drifts() if not w.culprit],  # confirmed, not bisected to one
        "drift_bisected": {w.culprit: [w.start, w.end] for w in state.drifts() if w.culprit},
        "ratios": {p.sha: p.ratio for p in state.points},
        "wall_s": wall,
        "exit": res.returncode,
    }


def run_asv(repo: Path, shas: list[str], neighbour: Neighbour | None) -> dict:
    asv = [str(Path(sys.executable).parent / "asv")]
    subprocess.run([*asv, "machine", "--yes"], cwd=repo, env=_env(), capture_output=True, check=True)
    values, walls = [], []
    for i, sha in enumerate(shas):
        if neighbour and i == len(shas) // 2:
            neighbour.start()
        _git(repo, "checkout", "-q", sha)
        t0 = time.monotonic()
        res = subprocess.run(
            [*asv, "run", "--python=same", f"--set-commit-hash={sha}", "--bench", "TinyMlpTime.time_step"],
            cwd=repo, env=_env(), capture_output=True, text=True,
        )  # fmt: skip
        walls.append(time.monotonic() - t0)
        if res.returncode != 0:
            raise RuntimeError(f"asv run at {sha[:12]} exited {res.returncode}: {res.stderr[-2000:]}")
        files = [f for f in (repo / ".asv" / "results").glob(f"*/{sha[:8]}-*.json")]
        doc = json.loads(files[0].read_text())
        values.append(doc["results"][ASV_BENCH][0][0])  # batch_size=32, the first of its params
    _git(repo, "checkout", "-q", "main")
    if neighbour:
        neighbour.stop()
    from asv import step_detect

    steps = step_detect.detect_steps(values)
    _, _, jumps = step_detect.detect_regressions(steps, 0.05)
    named = sorted({shas[after] for _before, after, *_ in (jumps or [])})
    return {"named": named, "values": values, "wall_s": sum(walls), "wall_per_commit_s": sum(walls) / len(walls)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--histories", type=int, default=10, help="histories per kind (default 10)")
    ap.add_argument("--commits", type=int, default=20, help="commits after the first (default 20)")
    ap.add_argument("--kinds", default="step10,step3,aa,neighbour")
    ap.add_argument("--max-time", type=float, default=3.0, help="perfsuite's seconds per pair (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-asv", action="store_true", help="perfsuite history alone")
    ap.add_argument("--asv-only", action="store_true",
                    help="asv alone, on histories already measured by perfsuite without it: each is rebuilt "
                         "from its row (the same commit changed, by the same busy wait) and asv walks it")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "history")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dest = args.out / "history-quality.json"
    rows = json.loads(dest.read_text())["histories"] if dest.exists() else []
    sizes = {"step10": 0.10, "step3": 0.03, "aa": 0.0, "neighbour": 0.0, "step3busy": 0.03}
    if args.asv_only:
        return asv_beside(rows, args, sizes, dest)
    for kind in args.kinds.split(","):
        for h in range(args.histories):
            if any(r["kind"] == kind and r["index"] == h and r["seed"] == args.seed for r in rows):
                continue  # measured by an earlier run of this script: resume
            rng = random.Random(f"{args.seed}-{kind}-{h}")
            with tempfile.TemporaryDirectory(prefix="perfsuite-history-quality-") as tmp:
                folder = Path(tmp)
                probe, _ = make_repo(folder / "probe", 0, None, 0.0)
                step_s = baseline_step_s(folder / "probe" / "project", 3.0)
                change_at = rng.randrange(args.commits // 4, 3 * args.commits // 4) if sizes[kind] else None
                shas, changed = make_repo(folder, args.commits, change_at, sizes[kind] * step_s)
                repo = folder / "project"
                with _busy(kind):
                    ps = run_perfsuite(repo, shas, args.max_time, Neighbour() if kind == "neighbour" else None,
                                       args.out / "logs" / f"{kind}-{h}-seed{args.seed}.history.json")  # fmt: skip
                    av = None if args.no_asv else run_asv(repo, shas, Neighbour() if kind == "neighbour" else None)
            row = {"kind": kind, "index": h, "seed": args.seed, "commits": args.commits, "step_s": step_s,
                   "changed": changed, "changed_at": change_at, "perfsuite": ps, "asv": av,
                   "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
            rows.append(row)
            dest.write_text(json.dumps({"histories": rows}, indent=1))
            print(_line(row), flush=True)
    print(table(rows))
    print(unchanged(rows))
    return 0


@contextlib.contextmanager
def _busy(kind: str):
    """A `*busy` kind's neighbour: one CPU-heavy process at nice 19 while the tool walks."""
    busy = Neighbour(count=1, nice=19) if kind.endswith("busy") else None
    if busy:
        busy.start()
    try:
        yield
    finally:
        if busy:
            busy.stop()


def asv_beside(rows: list[dict], args: argparse.Namespace, sizes: dict, dest: Path) -> int:
    """asv on the histories perfsuite measured without it, rebuilt from their rows: the same
    number of commits, the same commit changed by the same busy wait (the row's step times its
    kind's fraction), so both tools judge the same code history (the shas differ: new commits)."""
    for row in rows:
        if row["kind"] not in args.kinds.split(",") or row["index"] >= args.histories or row["asv"] is not None:
            continue
        with tempfile.TemporaryDirectory(prefix="perfsuite-history-quality-") as tmp:
            shas, changed = make_repo(Path(tmp), row["commits"], row["changed_at"], sizes[row["kind"]] * row["step_s"])
            with _busy(row["kind"]):
                av = run_asv(Path(tmp) / "project", shas, Neighbour() if row["kind"] == "neighbour" else None)
        # asv's named commits are mapped to the perfsuite run's shas by their place in the history
        # (the rebuilt history's commits are new objects with the same content)
        ps_order = list(row["perfsuite"]["ratios"])  # the measured commits, oldest first
        av["named"] = [_other(ps_order, shas, sha) for sha in av["named"]]
        assert changed is None or _other(ps_order, shas, changed) == row["changed"], "rebuilt out of place"
        row["asv"] = {**av, "rebuilt": True, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        dest.write_text(json.dumps({"histories": rows}, indent=1))
        print(_line(row), flush=True)
    print(table(rows))
    return 0


def _other(ps_order: list[str], shas: list[str], sha: str) -> str:
    """The perfsuite run's sha at the rebuilt sha's place (shas[0] is the range's base, which
    perfsuite does not measure: ps_order[i] is shas[i + 1])."""
    i = shas.index(sha)
    return ps_order[i - 1] if 1 <= i <= len(ps_order) else f"rebuilt:{sha}"


def unchanged(rows: list[dict]) -> str:
    """perfsuite's ratios at the commits that changed nothing: their geometric mean (a kept,
    warm A side against a fresh B side would pull it above 1), their spread, and each A/A
    history's chained ratio at its end (what such a bias would add up to over 20 commits)."""
    import math
    import statistics

    logs, ends = [], []
    for r in rows:
        ratios = {sha: x for sha, x in r["perfsuite"]["ratios"].items() if x}
        logs += [math.log(x) for sha, x in ratios.items() if sha != r["changed"]]
        if r["changed"] is None:
            ends.append(math.exp(sum(math.log(x) for x in ratios.values())))
    if not logs:
        return ""
    q = statistics.quantiles(logs, n=40)
    return (
        f"unchanged commits: {len(logs)}, geometric mean ratio {math.exp(statistics.fmean(logs)):.4f}, "
        f"95% of them within {math.exp(q[0]):.3f}-{math.exp(q[-1]):.3f}; chained ratio at the end of each "
        f"history without a change: {', '.join(f'{e:.3f}' for e in ends)}"
    )


def _score(row: dict, tool: str) -> tuple[bool | None, int]:
    """(named the changed commit; false regressions: other commits named, and perfsuite's confirmed
    slow drifts whose stretch does not hold the changed commit: a drift fails CI too)."""
    got = row[tool]
    if got is None:
        return None, 0
    named = set(got["named"])
    right = row["changed"] in named if row["changed"] else None
    order = {sha: i for i, sha in enumerate(got.get("ratios") or {})}  # measured commits, oldest first
    false_drifts = [
        (a, b) for a, b in got.get("drift") or [] if not order.get(a, -1) < order.get(row["changed"], -2) <= order[b]
    ]
    return right, len(named - {row["changed"]}) + len(false_drifts)


def _per_commit(row: dict, tool: str) -> float:
    """Wall seconds per commit: perfsuite's pairs over the commits after the base; asv runs the
    base too (one run per commit, commits + 1 runs)."""
    got = row[tool]
    return got["wall_per_commit_s"] if "wall_per_commit_s" in got else got["wall_s"] / row["commits"]


def _line(row: dict) -> str:
    out = f"{row['kind']:<9} #{row['index']}: changed at {row['changed_at']}"
    for tool in ("perfsuite", "asv"):
        right, false = _score(row, tool)
        if row[tool] is not None:
            out += f" | {tool}: right={right} false={false} wall/commit={_per_commit(row, tool):.1f}s"
    return out


def table(rows: list[dict]) -> str:
    lines = ["kind       histories  tool       found at the right commit  with a false regression  wall s/commit"]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        of = [r for r in rows if r["kind"] == kind]
        for tool in ("perfsuite", "asv"):
            scored = [(_score(r, tool), r) for r in of if r[tool] is not None]
            if not scored:
                continue
            right = sum(1 for (ok, _), _r in scored if ok)
            false = sum(1 for (_, f), _r in scored if f)
            wall = sum(_per_commit(r, tool) for _, r in scored) / len(scored)
            found = f"{right}/{len(scored)}" if of[0]["changed_at"] is not None else "-"
            lines.append(
                f"{kind:<10} {len(of):>9}  {tool:<10} {found:>25}  {false:>15}/{len(scored):<7}  {wall:>12.1f}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
