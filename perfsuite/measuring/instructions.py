"""Instructions per step on the CPU: a number the machine's mood does not move.

Time on a shared 2-core VM moves by 2-18% between processes; the instructions a step executes
move by far less (issue 56: rustc-perf gates on them). Where the CPU's hardware counters can count
this process (a PMU, perfsuite.measuring.pmu), a process per count counts its steps' user-space
instructions on them, at the step's own speed (method "pmu"). Most VMs, this one included, expose
no PMU (`perf` sees software events only), so the count is Callgrind's, which simulates the CPU and
works in any VM, at a 100-400x slowdown (method "callgrind"); the two are never compared. `import torch` under Callgrind's instrumentation takes
minutes, so the process under Callgrind (a Counter's server, perfsuite.measuring.instructions_child)
starts with instrumentation off (--instr-atstart=no), imports torch at Valgrind's plain speed (about
43 s here), turns instrumentation on for itself (callgrind_control -i on), and forks a child per
count, which builds and warms the step and collects only around the counted steps (torch's
CALLGRIND_TOGGLE_COLLECT, torch._C._valgrind_toggle). The build, the import and the warm-up are
never counted; a bisection's or a history's commits share one server, so the import is paid once.

What it cannot see: time spent waiting (memory stalls, a slower BLAS kernel with as many
instructions, cache and layout effects, the clock's frequency), and a GPU's work (on CUDA the count
is the host's: launches and Python). Counts are the instructions Valgrind's simulated CPU executes,
which follow the code path of the machine's real CPU features as detected under Valgrind (oneDNN
may pick another kernel under Valgrind than natively: the count compares like with like, two
counts taken here, not a count with a time).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from perfsuite.measuring.instructions_child import JOB, RESULT

CALLGRIND, PMU = "callgrind", "pmu"  # how a count is taken: perfsuite.measuring.instructions.method
# How a count is taken, as far as its number depends on it: 3 is the server of counts whose child
# builds without counting FLOPs or saved bytes (their runs of the step no longer come before the
# warm-up) and warms with 2 calls, 2 the server with them and 3 warm-up calls, 1 a process per
# count. The same code counts about 0.25% apart under 1 and 2, so a count kept from one method is
# not compared with a count of another.
METHOD_VERSION = 3
MIN_VALGRIND = (3, 15)  # --instr-atstart and callgrind_control -i need no newer; older ones are refused
# Counted steps: their total over STEPS is the count per step. The count of one code is the same in
# every child of one server (reports/work/), so one step says it; each instrumented call costs
# 100-400x the step's time (Valgrind emulates no AVX-512: a ResNet18 ci step at batch 2 took 14 s),
# and a count is WARMUP + STEPS of them: 6 made that step's count 85 s, against issue 56's 60 s.
STEPS = 1
TIMEOUT_S = 900.0


def valgrind_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def method() -> str:
    """How this machine counts: PMU where its hardware counters can count this process's
    instructions (perfsuite.measuring.pmu), else CALLGRIND."""
    from perfsuite.measuring import pmu

    return PMU if pmu.refused() is None else CALLGRIND


def described(how: str | None = None) -> str:
    """How this machine counts (or `how`), in words for a console line or a page."""
    from perfsuite.measuring.instructions_child import WARMUP

    if (how or method()) == PMU:
        return (
            "on the CPU's hardware counter (instructions:u; a process a count, seconds each; a count moves "
            "a little from run to run, about 0.2% on rustc-perf's machines)"
        )
    return (
        f"under Callgrind ({WARMUP} warm-up calls and {STEPS} counted; about 45 s to start it, then seconds "
        "a count for a small step and under a minute for the ci suite's ResNet18 on a 2-core VM; the same code "
        "counts the same in every count of one server)"
    )


def unavailable(device: str) -> str | None:
    """Why instructions cannot be counted here (None: they can): what is missing, and how to get it."""
    if not device.startswith("cpu"):
        return f"instruction counts are taken for CPU steps; {device} is not one (its kernels run on the device)"
    if method() == PMU:
        return None
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return "valgrind is not installed (apt install valgrind): Callgrind counts the instructions"
    version = valgrind_version()
    if version is None or version < MIN_VALGRIND:
        got = ".".join(map(str, version)) if version else "an unreadable version"
        return (
            f"valgrind {got} is too old: Callgrind's --instr-atstart needs {'.'.join(map(str, MIN_VALGRIND))} or newer"
        )
    import torch

    if not (hasattr(torch._C, "_valgrind_toggle") and torch._C._valgrind_supported_platform()):
        return f"this torch ({torch.__version__}) was built without Valgrind's client requests"
    return None


def hardware_counters() -> str:
    """What this machine's hardware counters gave, said in the record: counted by them, or why not
    (no PMU, the kernel's refusal: perfsuite.measuring.pmu) and so counted by Callgrind."""
    from perfsuite.measuring import pmu

    why = pmu.refused()
    return "counted by the CPU's hardware counter (instructions:u)" if why is None else f"{why}; counted by Callgrind"


def count(
    workload: str,
    params: dict[str, Any],
    device: str,
    load: Sequence[str] = (),
    steps: int = STEPS,
    timeout_s: float = TIMEOUT_S,
    files: Sequence[str] = (),
    code_root: str | None = None,
    counter: Counter | None = None,
) -> dict[str, Any]:
    """The record's `instructions` block for `steps` calls of the case's step, counted on the CPU's
    hardware counter where a PMU counts, else under Callgrind: {"status": "ok", "per_step", "total",
    "steps", "method", "method_version", "seconds", ...}, or
    {"status": "unavailable" | "failed", "reason"}. Never raises for the step's or Valgrind's
    failure: the timing beside it stands. The workload is found by name after loading `load` (this
    process's workload files), or, given `files`, declared in them with the project's code imported
    from `code_root` (a revision's checkout, as a gate side builds it). `counter`: a Counter kept
    across counts (a bisection's commits: Callgrind's start paid once); None: one for this count."""
    why = unavailable(device)
    if why is not None:
        return {"status": "unavailable", "reason": why, "method": CALLGRIND}  # no PMU counts here either
    job = {"workload": workload, "params": params, "device": device, "load": list(load), "steps": steps,
           "files": list(files), "root": code_root}  # fmt: skip
    if counter is not None:
        return counter.count(job, timeout_s)
    with Counter() as one:
        return one.count(job, timeout_s)


class Counter:
    """One process under Callgrind serving counts (perfsuite.measuring.instructions_child): started
    at the first count, it imports torch once, and forks a child per count from the same state.
    Where a PMU counts (method() is PMU), each count is a process of its own instead, and no
    Valgrind runs; the count folder is held the same way.
    A count that fails or runs past its time stops the server; the next count starts another. Use
    as a context manager: the server stops and the count folder is freed at the end. The server
    ends with the thread that started it (the kernel's parent-death signal follows that thread:
    _dies_with_its_parent), so count from one thread, or from threads that outlive it."""

    def __init__(self) -> None:
        self._folder: contextlib.AbstractContextManager[str] | None = None
        self._path = Path()  # the folder's, while held
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: Path | None = None

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # Ended by an error or Ctrl-C: the server (its own session, which a Ctrl-C does not reach)
        # is killed at once rather than let finish a count of minutes nobody waits for.
        self.close(at_once=exc_type is not None)

    def count(self, job: dict[str, Any], timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        t0 = time.monotonic()
        how = method()
        try:
            if how == PMU:
                total = self._count_by_pmu(job, timeout_s)
            else:
                total = self._count(job, t0 + timeout_s, timeout_s)
        except _CountFailed as exc:
            self._stop(at_once=True)  # a server that failed or ran past its time is not asked again
            return {"status": "failed", "reason": str(exc)[:500], "method": how,
                    "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
        steps = job["steps"]
        return {"status": "ok", "per_step": total / steps, "total": total, "steps": steps, "method": how,
                "method_version": METHOD_VERSION, "seconds": round(time.monotonic() - t0, 1),
                "hardware": hardware_counters()}  # fmt: skip

    def _count_by_pmu(self, job: dict[str, Any], timeout_s: float) -> int:
        """The job counted on the CPU's hardware counter by a process of its own (no Valgrind: the
        step runs at its own speed, so a server saves nothing worth its state), in the count folder."""
        folder = self._held()
        (folder / RESULT).unlink(missing_ok=True)
        (folder / JOB).write_text(json.dumps(job))
        cmd = [sys.executable, "-m", "perfsuite.measuring.instructions_child", "--pmu", str(folder)]
        try:
            done = subprocess.run(cmd, cwd=folder, env=_child_env(), capture_output=True, text=True, timeout=timeout_s,
                                  preexec_fn=_dies_with_its_parent())  # fmt: skip
        except subprocess.TimeoutExpired:
            raise _CountFailed(f"the count on the hardware counter did not finish in {timeout_s:.0f} s") from None
        result = _read_json(folder / RESULT)
        if result.get("status") != "ok" or not isinstance(result.get("total"), int):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            reason = result.get("reason") or f"exit {done.returncode}, no result: {last}"
            raise _CountFailed(f"the step on the hardware counter failed: {reason}")
        return result["total"]

    def close(self, at_once: bool = False) -> None:
        self._stop(at_once)
        if self._folder is not None:
            self._folder.__exit__(None, None, None)
            self._folder = None

    def _count(self, job: dict[str, Any], deadline: float, timeout_s: float) -> int:
        folder = self._start(deadline, timeout_s)
        (folder / RESULT).unlink(missing_ok=True)
        (folder / JOB).write_text(json.dumps(job))
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write("count\n")
            self._proc.stdin.flush()
        except OSError:
            raise _CountFailed(f"the Callgrind process ended: {self._last_words()}") from None
        said = self._next(deadline, timeout_s)
        if said.get("status") != "done":
            raise _CountFailed(f"the Callgrind process said {said}: {self._last_words()}")
        out = folder / f"callgrind.out.{said['pid']}"
        result = _read_json(folder / RESULT)
        total = read_total(out)
        out.unlink(missing_ok=True)
        if result.get("status") != "ok":
            reason = result.get("reason") or f"exit {said.get('exit')}, no result: {self._last_words()}"
            raise _CountFailed(f"the step under Callgrind failed: {reason}")
        if total is None:
            raise _CountFailed("Callgrind wrote no instruction total (was collection toggled?)")
        return total

    def _held(self) -> Path:
        """The count folder, held (its lock taken) from the first count to close()."""
        if self._folder is None:
            held = child_folder()
            self._path = Path(held.__enter__())  # kept only once entered: a refusal leaves none
            self._folder = held
        return self._path

    def _start(self, deadline: float, timeout_s: float) -> Path:
        """The server's folder, the server started (and ready) when it is not running."""
        folder = self._held()
        if self._proc is not None:
            return folder
        self._stderr = folder / "callgrind-stderr.txt"
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
               f"--callgrind-out-file={folder}/callgrind.out.%p", sys.executable, "-m",
               "perfsuite.measuring.instructions_child", str(folder)]  # fmt: skip
        with open(self._stderr, "w") as err:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                          env=_child_env(), cwd=folder, start_new_session=True,
                                          preexec_fn=_dies_with_its_parent())  # fmt: skip
        self._lines = queue.Queue()
        threading.Thread(target=_pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        said = self._next(deadline, timeout_s)
        if said.get("status") != "ready":
            reason = said.get("reason") or self._last_words()
            raise _CountFailed(f"the step under Callgrind failed (exit {self._proc.poll()}): {reason}")
        return folder

    def _next(self, deadline: float, timeout_s: float) -> dict[str, Any]:
        """The server's next JSON line; {} when it ended without one."""
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise _CountFailed(f"Callgrind did not finish in {timeout_s:.0f} s") from None
            if line is None:
                if self._proc is not None:
                    self._proc.wait()
                return {}
            got = _json_line(line)
            if got:
                return got

    def _last_words(self) -> str:
        try:
            lines = self._stderr.read_text().strip().splitlines() if self._stderr else []
        except OSError:
            lines = []
        return lines[-1] if lines else "no output"

    def _stop(self, at_once: bool = False) -> None:
        """The server asked to end (its standard input closed), or killed `at_once` or when it has
        not ended in a minute; with it the children and what they started (its process group)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            if not at_once:
                proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()  # at its end: the pump has read it to the end, or the kill ended it


def _dies_with_its_parent() -> Any:
    """For Popen's preexec_fn: the process is killed when the thread that started it ends, however
    it ends (Linux's PR_SET_PDEATHSIG, kept across exec). A driver killed by SIGKILL (a CI job's
    timeout, the OOM killer) released the count folder's lock while its server went on under
    Callgrind for minutes, and its child counted on in that folder (found 2026-11-30). Done before
    exec, not in the server: the server's own state decides the counts (a handler set up there
    made identical code count up to 85 instructions apart from one child to the next). A child
    counting when its server is killed stops at its next call and writes nothing
    (instructions_child). None where prctl is not there."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None
    parent = os.getpid()

    def in_child() -> None:  # between fork and exec: the call, resolved above, and nothing else
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the request was in place
            os._exit(1)

    return in_child


def _child_env() -> dict[str, str]:
    """The counting process's environment: str hashes seeded alike in every count (a set's or a
    dict's growth then takes one path), and one OpenMP thread."""
    return {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _json_line(line: str) -> dict[str, Any]:
    if not line.startswith("{"):
        return {}
    try:
        got = json.loads(line)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def child_folder_path() -> str:
    return str(Path(tempfile.gettempdir()) / f"perfsuite-count-{os.getuid()}")


# The thread of this process that holds the count folder's lock, if one does: a second Counter in
# that thread would wait on the lock for ever (flock on another descriptor of the same file;
# scripts/count_state.py's first version hung so), so it is refused instead. Another thread waits
# its turn, as another process does.
_holder: int | None = None


@contextlib.contextmanager
def child_folder() -> Iterator[str]:
    """The count's folder (the server's working directory, its job file and Callgrind's output):
    one path for every count, emptied before and after, held under a lock so two counts at once take
    turns. A fresh random folder per count (tempfile's) moved the count of identical code by about
    0.01% (2,145,311 / 2,145,094 / 2,144,880 instructions a step in three counts); under one path the
    same code counted the same to the instruction (reports/work/count-state-2026-11-30.md)."""
    global _holder
    if _holder == threading.get_ident():
        raise RuntimeError(
            "a Counter is already counting in this thread: count with that one (a second would wait for "
            "the first's lock for ever)"
        )
    folder = Path(child_folder_path())
    folder.mkdir(exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _holder = threading.get_ident()
        try:
            _empty(folder)
            yield str(folder)
        finally:
            _holder = None
            _empty(folder)


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


class _CountFailed(Exception):
    """Why the child under Callgrind gave no count."""


def read_total(path: Path) -> int | None:
    """The instructions (Ir) a Callgrind output file counted: its `totals:` line (`summary:` in
    older versions); None when neither is there."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for key in ("totals", "summary"):
        m = re.search(rf"^{key}:\s+(\d+)", text, flags=re.M)
        if m:
            return int(m.group(1))
    return None
