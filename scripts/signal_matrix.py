"""Every signal leaves nothing behind (issue 51, item 2): SIGINT, SIGTERM and SIGHUP sent at
several moments of `run`, `gate`, `bisect`, `why` and `history` on a copy of examples/my-project
with four commits, and what each left: its exit status, a traceback, git worktrees, temporary
folders, processes of the command still alive, a store that cannot be opened, and (for `run`)
the records it said it saved.

SIGINT goes to the command's whole process group, as a terminal's Ctrl-C does; SIGTERM and SIGHUP
to the command's own process only, as `kill PID` or a CI runner's cancel does (the command must
end its own children). Each moment is seconds after the start: during imports, during set-up and
checkouts, while measuring.

    python scripts/signal_matrix.py --out reports/hostile/signals.md     # every cell (~10 min)

tests/test_signals.py runs a fixed sample of the cells with the same `interrupt_once`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "my-project"
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
EXIT = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}

# Each command long enough that every moment below falls inside it, even on a quiet machine.
COMMANDS = {
    "run": ["run", "tiny_mlp", "-p", "batch_size=32,128", "--device", "cpu", "--max-time", "6"],
    "gate": ["gate", "tiny_mlp", "-p", "batch_size=32", "--base", "HEAD~1", "--device", "cpu", "--max-time", "60"],
    "bisect": ["bisect", "tiny_mlp", "-p", "batch_size=32", "--good", "HEAD~3", "--bad", "HEAD", "--device", "cpu",
               "--max-time", "30"],
    "why": ["why", "tiny_mlp", "-p", "batch_size=32", "--base", "HEAD~1", "--device", "cpu", "--rounds", "8"],
    "history": ["history", "tiny_mlp", "-p", "batch_size=32", "--range", "HEAD~3..HEAD", "--device", "cpu",
                "--max-time", "30"],
}  # fmt: skip
MOMENTS = (0.7, 3.0, 8.0)  # importing; set-up and checkouts; measuring


def make_project(where: Path) -> Path:
    """examples/my-project as a git repository with four commits (three that only touch notes)."""
    root = where / "my-project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".asv", "__pycache__", ".perfsuite", "results"))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for i in range(4):
        (root / "NOTES.md").write_text(f"note {i}\n")
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run([*GIT, "commit", "-qm", f"commit {i}"], cwd=root, check=True)
    return root


def _marked(marker: str) -> list[int]:
    """Processes whose environment carries the marker: the command and everything it started."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                out.append(int(proc.name))
        except OSError:
            continue
    return out


def interrupt_once(project: Path, command: str, sig: str, after: float, python: str = sys.executable) -> dict:
    """Start `command` in `project`, send `sig` `after` seconds later, and say what was left."""
    marker = f"PERFSUITE_SIGNAL_PROBE={uuid.uuid4().hex}"
    tmp = Path(tempfile.mkdtemp(prefix="sigtmp-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp)}
    env[marker.split("=")[0]] = marker.split("=")[1]
    argv = list(COMMANDS[command])
    if command == "run":
        out_file = tmp.parent / f"{tmp.name}-run.json"
        argv += ["--out", str(out_file)]
    start = time.monotonic()
    proc = subprocess.Popen(
        [python, "-m", "perfsuite", *argv],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: SIGINT to the group is a terminal's Ctrl-C
        # Python's defaults for the signals, whatever this process inherited (`nohup`, a test
        # runner started in the background ignores SIGINT)
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGHUP)],
    )
    finished_first = False
    while time.monotonic() - start < after:
        if proc.poll() is not None:
            finished_first = True
            break
        time.sleep(0.05)
    signum = getattr(signal, sig)
    if not finished_first:
        if sig == "SIGINT":
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
    try:
        out, err = proc.communicate(timeout=180)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        hung = True
    ended = time.monotonic() - start
    deadline = time.monotonic() + 10  # children may take a moment to see their parent go
    alive = _marked(marker)
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = _marked(marker)
    for pid in alive:  # leave nothing running for the next cell, but count it
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True, text=True).stdout
    subprocess.run(["git", "worktree", "prune"], cwd=project, capture_output=True)
    # torch's own compile cache (torchinductor_<user>) is meant to outlive a run; anything else is left behind
    left_tmp = sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")) if tmp.exists() else []
    shutil.rmtree(tmp, ignore_errors=True)
    store = subprocess.run(
        [python, "-m", "perfsuite", "store", "info"], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    cell = {
        "command": command,
        "signal": sig,
        "after_s": after,
        "ended_s": round(ended, 1),
        "finished_first": finished_first,
        "exit": proc.returncode,
        # 128 + n from the command's own handler; -n where the signal ended it before perfsuite
        # had started anything (Python still importing): a shell reports 128 + n for both
        "exit_ok": finished_first or proc.returncode in (EXIT[sig], -getattr(signal, sig)),
        "hung": hung,
        "traceback": "Traceback" in out + err,
        "worktrees_left": len(worktrees.splitlines()) - 1,
        "tmp_left": left_tmp,
        "processes_left": len(alive),
        "store_opens": store.returncode == 0 or "no store there yet" in store.stderr,
        "tail": (out + err)[-600:],
    }
    if command == "run":
        said = [line for line in (out + err).splitlines() if "case(s) saved to" in line or "saved " in line]
        kept = 0
        if out_file.exists():
            kept = len(json.loads(out_file.read_text()).get("records", []))
            out_file.unlink()
        cell["run_saved_said"] = said[-1] if said else ""
        cell["run_records_kept"] = kept
        # "interrupted: N of M case(s) saved" must be what the file holds
        if said and "interrupted:" in said[-1]:
            cell["run_kept_ok"] = int(said[-1].split("interrupted:")[1].split("of")[0]) == kept
        else:
            cell["run_kept_ok"] = (kept == 0) or finished_first or "saved" in (said[-1] if said else "")
    cell["clean"] = bool(
        cell["exit_ok"]
        and not hung
        and not cell["traceback"]
        and cell["worktrees_left"] == 0
        and not left_tmp
        and cell["processes_left"] == 0
        and cell["store_opens"]
        and cell.get("run_kept_ok", True)
    )
    return cell


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="a Markdown table of every cell (and a .json beside it)")
    p.add_argument("--commands", default=",".join(COMMANDS))
    args = p.parse_args()
    cells = []
    with tempfile.TemporaryDirectory() as where:
        project = make_project(Path(where))
        for command in args.commands.split(","):
            for sig in EXIT:
                for after in MOMENTS:
                    cell = interrupt_once(project, command, sig, after)
                    cells.append(cell)
                    print(json.dumps({k: v for k, v in cell.items() if k != "tail"}), flush=True)
    args.out.with_suffix(".json").write_text(json.dumps(cells, indent=1) + "\n")
    lines = [
        "| command | signal | sent at (s) | ended (s) | exit | traceback | worktrees left | temp left | processes left | store opens | run kept | clean |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['command']} | {c['signal']} | {c['after_s']} | {c['ended_s']} | "
            f"{c['exit']}{' (finished first)' if c['finished_first'] else ''} | {c['traceback']} | "
            f"{c['worktrees_left']} | {len(c['tmp_left'])} | {c['processes_left']} | {c['store_opens']} | "
            f"{c.get('run_kept_ok', '')} | {'yes' if c['clean'] else '**no**'} |"
        )
    n_clean = sum(c["clean"] for c in cells)
    lines.append(f"\n{n_clean} of {len(cells)} cells clean.")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{n_clean} of {len(cells)} cells clean -> {args.out}")


if __name__ == "__main__":
    main()
