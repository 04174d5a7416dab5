"""The two sides of a gate as processes of their own, each in its own checkout, driven in turn.

A base revision is checked out in a temporary git worktree (removed afterwards, also after
Ctrl-C); each side's workload file is loaded in its own interpreter (perfsuite.compare.side_worker)
with that checkout first on sys.path, so `from myproj.model import Net` imports the revision
it belongs to. The parent asks one side, then the other, to time a block of calls; each side
times its own block with its own clock, so the pipe's latency is never part of a step's time,
and while one side runs the other waits on its pipe. perfsuite's own workloads take the same
road: their file in the base checkout is loaded beside the current perfsuite core.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import perfsuite
from perfsuite.core.errors import ConfigError, PerfsuiteError
from perfsuite.measure.timing import Clock


class SideFailed(PerfsuiteError):
    """A side could not build or run its step; the message carries its error. The case's failure
    (perfsuite.run.execute.run_cases records it and goes on to the next case)."""


class SideEnvironmentError(ConfigError):
    """A side runs other code than its checkout's (an installed copy of the project shadows it):
    the environment is wrong for every case, so the gate stops with this error (exit 2)."""


def git_root(path: Path) -> Path:
    res = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    if res.returncode != 0:
        raise ConfigError(f"{path}: not inside a git repository ({res.stderr.strip()})")
    return Path(res.stdout.strip())


def resolve_commit(rev: str, repo: Path, flag: str = "--base") -> str:
    """The commit `rev` (given as `flag`) names; an option-like value never reaches git as an option."""
    if not rev or rev.startswith("-"):
        raise ConfigError(f"{flag} {rev!r}: not a git revision (a revision cannot start with '-')")
    res = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                         cwd=repo, capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        raise ConfigError(f"{flag} {rev}: no such commit in {repo}")
    return res.stdout.strip()


@contextlib.contextmanager
def worktree(repo: Path, commit: str):
    """A detached checkout of `commit`, removed on the way out whatever happens."""
    folder = Path(tempfile.mkdtemp(prefix="perfsuite-base-"))
    path = folder / "tree"
    res = subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(path), commit], cwd=repo,
                         capture_output=True, text=True)
    if res.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(f"cannot check out {commit[:12]} in a worktree: {res.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)


def workload_file(source: str, name: str) -> Path:
    """The file a workload is declared in: a user's `file:line`, or perfsuite's own module."""
    if source:
        return Path(source.rsplit(":", 1)[0]).resolve()
    return Path(perfsuite.__file__).resolve().parent / "workloads" / f"{name}.py"


def file_in(root_now: Path, root_base: Path, file: Path) -> Path:
    """The same file in the base checkout; refused when it is not in the repository."""
    try:
        rel = file.resolve().relative_to(root_now.resolve())
    except ValueError:
        raise ConfigError(f"{file} is not inside the repository {root_now}: the gate compares revisions of "
                          "that repository's code") from None
    return root_base / rel


class Side:
    """A side process holding `builds` builds of one case; `steps` call into it."""

    def __init__(self, label: str, file: Path, workload: str, params: dict, device: str, builds: int,
                 heap: str = "default", threads: int | None = None, root: Path | None = None,
                 wait: bool = True) -> None:
        """`root`: the checkout this side's code must come from (checked once it is built).
        `wait=False` returns once the process is asked to build: call `ready()` before using it,
        so that several sides import torch and build at the same time (start_all)."""
        self.label, self.builds = label, builds
        r_parent, w_child = os.pipe()
        r_child, w_parent = os.pipe()
        env = dict(os.environ, PERFSUITE_SIDE_FDS=f"{r_child},{w_child}",
                   # the current perfsuite core, whichever checkout the side's workload file is in
                   PYTHONPATH=os.pathsep.join([str(Path(perfsuite.__file__).resolve().parents[1]),
                                               os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        # The side's output (the user's prints included) goes to a file, never a pipe nobody reads
        # while the gate runs: a step that prints every call would fill a pipe and hang the gate.
        self._log = tempfile.TemporaryFile()
        # -P: the working folder is not put first on sys.path, so a workload folder's file named
        # like a standard module (bench/types.py) shadows nothing; the user's own folder stays the cwd.
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []
        self.proc = subprocess.Popen([sys.executable, *safe_path, "-m", "perfsuite.compare.side_worker"],
                                     pass_fds=(r_child, w_child), env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log)
        os.close(r_child)
        os.close(w_child)
        self._out = os.fdopen(w_parent, "w")
        self._in = os.fdopen(r_parent, "r")
        self.steps: list[RemoteStep] = []
        self.faults = 0  # minor page faults inside this side's timed blocks
        try:
            self._send({"files": [str(file)], "workload": workload, "params": params, "device": device,
                        "builds": builds, "heap": heap, "threads": threads, "root": str(root) if root else None})
        except BaseException:
            self.close()
            raise
        if wait:
            self.ready()

    def ready(self) -> "Side":
        """Waits for the side's builds; a side that failed to build leaves no process or pipe behind."""
        if not self.steps:
            try:
                self.work = self._receive()["work"]
            except BaseException:
                self.close()
                raise
            self.steps = [RemoteStep(self, j) for j in range(self.builds)]
        return self

    def _send(self, obj: dict) -> None:
        self._out.write(json.dumps(obj) + "\n")
        self._out.flush()

    def _receive(self) -> dict:
        line = self._in.readline()
        if not line:
            self.proc.wait()
            raise SideFailed(f"{self.label}: the side process ended (exit {self.proc.returncode}):\n{self.output()}")
        msg = json.loads(line)
        if "error" in msg:
            if msg.get("kind") == "environment":
                raise SideEnvironmentError(f"{self.label}: {msg['error']}")
            raise SideFailed(f"{self.label}: {msg['error']}\n{msg.get('traceback', '')}")
        return msg

    def output(self, limit: int = 3000) -> str:
        """The end of what the side printed (its errors, the user's prints)."""
        try:
            self._log.seek(0)
            return self._log.read().decode(errors="replace")[-limit:]
        except (OSError, ValueError):
            return ""

    def request(self, obj: dict) -> dict:
        self._send(obj)
        return self._receive()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._send({"op": "quit"})
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self._in, self._out, self._log):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                f.close()


class RemoteStep:
    """One build in a side process: calling it runs one step there (untimed)."""

    def __init__(self, side: Side, build: int) -> None:
        self.side, self.build = side, build

    def __call__(self) -> None:
        self.side.request({"op": "call", "build": self.build})

    def time(self, n: int) -> float:
        answer = self.side.request({"op": "time", "build": self.build, "n": n})
        self.side.faults += answer.get("faults", 0)
        return answer["s"]


class SideClock:
    """The gate's clock over side processes: a remote step's block is timed where it runs."""

    def __init__(self, local: Clock) -> None:
        self.local = local

    def time_block(self, fn, n: int) -> float:
        if isinstance(fn, RemoteStep):
            return fn.time(n)
        return self.local.time_block(fn, n)

    def now(self) -> float:
        return self.local.now()


def start_all(specs: list[dict], running: list, pool: "SidePool | None" = None) -> list[Side]:
    """Sides built at the same time (each `Side(**spec)`): their interpreters start, import torch
    and build while the others do, instead of one after another. Every side started is appended
    to `running` first, so the caller closes them all whichever one fails. Specs marked
    `"keep": True` come from `pool` instead: started once, kept alive for the pool's owner."""
    started = []
    for spec in specs:
        if spec.get("keep") and pool is not None:
            started.append(pool.side({k: v for k, v in spec.items() if k != "keep"}))
            continue
        s = Side(**{k: v for k, v in spec.items() if k != "keep"}, wait=False)
        running.append(s)
        started.append(s)
    for s in started:
        s.ready()
    return started


class SidePool:
    """Side processes kept across gate cases of the same code: a bisection's good revision is
    measured against every candidate, so its sides start once, not once per probe (half of each
    probe's start-up). A side whose process has ended is replaced; `close()` ends them all."""

    def __init__(self) -> None:
        self._free: dict[str, list[Side]] = {}  # spec -> its live sides, handed out in turn
        self._given: dict[str, int] = {}

    def side(self, spec: dict) -> Side:
        key = json.dumps(spec, sort_keys=True, default=str)
        kept = self._free.setdefault(key, [])
        i = self._given.get(key, 0)
        self._given[key] = i + 1
        if i < len(kept) and kept[i].proc.poll() is None:
            kept[i].faults = 0  # page faults are counted per case
            return kept[i]
        s = Side(**spec, wait=False)
        if i < len(kept):
            kept[i].close()
            kept[i] = s
        else:
            kept.append(s)
        return s

    def next_case(self) -> None:
        """The sides of the next case: hand out the kept ones again from the first."""
        self._given.clear()

    def close(self) -> None:
        for kept in self._free.values():
            for s in kept:
                s.close()
        self._free.clear()
        self._given.clear()
