"""The two sides of a gate as processes of their own, each in its own checkout, driven in turn.

A base revision is checked out in a temporary git worktree (removed afterwards, also after
Ctrl-C); each side's workload file is loaded in a process of its own (perfsuite.compare.side_worker,
forked from the fork server that already imported torch) with that checkout first on sys.path, so
`from myproj.model import Net` imports the revision it belongs to. The parent asks one side,
then the other, to time a block of calls; each side times its own block with its own clock, so
the pipe's latency is never part of a step's time, and while one side runs the other waits on
its pipe. perfsuite's own workloads take the same
road: their file in the base checkout is loaded beside the current perfsuite core.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from perfsuite.compare.side_worker import side_main
from perfsuite.core.errors import ConfigError, PerfsuiteError, Unsupported
from perfsuite.measuring.system import pinned
from perfsuite.measuring.tf32 import torch_flags
from perfsuite.measuring.timing import Clock
from perfsuite.measuring.workers import context


class SideFailed(PerfsuiteError):
    """A side could not build or run its step; the message carries its error. The case's failure
    (perfsuite.run.execute.run_cases records it and goes on to the next case)."""


class SideUnsupported(Unsupported):
    """The side's variant (or case) cannot run here: a refusal with its reason, not a failure."""


class SideEnvironmentError(ConfigError):
    """A side runs other code than its checkout's (an installed copy of the project shadows it):
    the environment is wrong for every case, so the gate stops with this error (exit 2)."""


# The CPUs this process may use when perfsuite was imported, before placed() narrows them.
_ALLOWED = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()


def side_cpus(device: str, threads: int | None) -> tuple[int, ...] | None:
    """The CPUs every side process is pinned to on the CPU: the last `threads` (1) of those allowed,
    so that the sides, which time one at a time, all run on the same core(s), and the driving
    process on the others (placed). Unpinned, where a side ran depended on the scheduler, and a
    gate's three processes of one side could share the driver's core: A/A gates of side processes
    ended "same" in 1 of 6 against 5 of 6 pinned (2026-11-27). None on a GPU, or when no CPU would
    be left for the driver."""
    n = threads or 1
    if not device.startswith("cpu") or len(_ALLOWED) <= n:
        return None
    return _ALLOWED[-n:]


def check_compute_mode(device: str) -> None:
    """A ConfigError before anything starts when `device` is a GPU in a compute mode that admits
    one process (Exclusive_Process, common under Slurm) or none (Prohibited): a gate, bisection or
    history runs both sides' processes on it at once, and each side failed "busy or unavailable"
    (issue 54). Nothing is checked where NVML cannot say."""
    if not device.startswith("cuda"):
        return
    from perfsuite.measuring.nvml import compute_mode

    index = int(device.partition(":")[2] or 0)
    mode = compute_mode(index)
    if mode in ("Exclusive_Process", "Exclusive_Thread", "Prohibited"):
        raise ConfigError(
            f"{device} is in compute mode {mode}: the gate runs the base's and the new side's processes on it "
            "at once, which this mode does not allow. Use a GPU in Default mode (`nvidia-smi -i N -c DEFAULT` "
            "as root, or ask the cluster for it), or compare two separate runs (`perfsuite run` then `compare`)"
        )


@contextlib.contextmanager
def placed(device: str, threads: int | None):
    """This process (the driver of the sides) on the CPUs side_cpus leaves free, for the block;
    on a GPU that cannot hold the two sides' processes at once, refused first (check_compute_mode)."""
    check_compute_mode(device)
    mine = side_cpus(device, threads)
    with pinned(tuple(c for c in _ALLOWED if c not in mine) if mine else None):
        yield


class Side:
    """A side process holding `builds` builds of one case; `steps` call into it."""

    def __init__(
        self,
        label: str,
        file: Path,
        workload: str,
        params: dict,
        device: str,
        builds: int,
        heap: str = "default",
        threads: int | None = None,
        root: Path | None = None,
        wait: bool = True,
        variant: str | None = None,
        seed: int | None = None,
    ) -> None:
        """`root`: the checkout this side's code must come from (checked once it is built).
        `wait=False` returns once the process is asked to build: call `ready()` before using it,
        so that several sides build at the same time (start_all). `variant`: the side times that
        variant of the step (perfsuite.variants); `seed`: its build draws from seeded generators."""
        import multiprocessing.util

        self.label, self.builds = label, builds
        # Forked from the fork server the worker processes come from (torch already imported there:
        # started once per parent, before any budget), never from this process, whose module table
        # holds the working tree's code: "forkserver" whatever the workers' start method is.
        ctx = context("forkserver")
        # The side's output (the user's prints included) goes to a file, never a pipe nobody reads
        # while the gate runs: a step that prints every call would fill a pipe and hang the gate.
        # Its name is removed once the side has opened it (ready); this process reads it by fd.
        self._log_fd: int | None
        self._log_path: str | None
        self._log_fd, self._log_path = tempfile.mkstemp(prefix="perfsuite-side-", suffix=".log")
        self.steps: list[RemoteStep] = []
        self.faults = 0  # minor page faults inside this side's timed blocks
        self._conn: Any = None  # the pipe's Connection, once made
        self._closed = False
        try:
            self._conn, child = ctx.Pipe(duplex=True)
            job = {
                "files": [str(file)],
                "workload": workload,
                "params": params,
                "device": device,
                "builds": builds,
                "heap": heap,
                "threads": threads,
                "root": str(root) if root else None,
                "cpus": side_cpus(device, threads),
                "allowed": list(_ALLOWED),  # where it builds: the CPUs this process had before placed()
                # The caller's numerics flags (TF32, cuDNN benchmark, determinism), as workers get
                # them (issue 54): a side forked from the fork server has torch's defaults instead.
                "flags": torch_flags(),
                "variant": variant,
                "seed": seed,
            }
            self.proc = ctx.Process(
                target=side_main, args=(child, self._log_path, job), name=f"perfsuite-side-{label}".replace(" ", "-")
            )
            try:
                self.proc.start()
            finally:
                child.close()  # the parent's copy: once the side exits, recv() ends with EOFError
        except BaseException:
            self._release()
            raise
        # At exit, before multiprocessing joins its children: a side nobody closed sees its pipe
        # end and exits, instead of waiting for a request while this process waits for it.
        multiprocessing.util.Finalize(self, self._conn.close, exitpriority=10)
        if wait:
            self.ready()

    def alive(self) -> bool:
        return not self._closed and self.proc.is_alive()

    def ready(self) -> Side:
        """Waits for the side's builds; a side that failed to build leaves no process or pipe behind."""
        if not self.steps:
            try:
                msg = self._receive()
                self.work, self.settle = msg["work"], msg.get("settle")  # settle: heap.settle's account
                self.waits = msg.get("waits")  # voluntary waits per call (side_worker.waits_per_call)
                self.variant = msg.get("variant")  # the variant's build and cold-call account
            except BaseException:
                self.close()
                raise
            self._unlink_log()  # the side has it open: nothing is left behind if this process dies
            self.steps = [RemoteStep(self, j) for j in range(self.builds)]
        return self

    def _receive(self) -> dict:
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):  # the side ended (a reset connection when it left requests unread)
            self.proc.join()
            raise SideFailed(
                f"{self.label}: the side process ended (exit {self.proc.exitcode}):\n{self.output()}"
            ) from None
        if "error" in msg:
            if msg.get("kind") == "unsupported":
                raise SideUnsupported(f"{self.label}: {msg['error']}")
            if msg.get("kind") == "environment":
                raise SideEnvironmentError(f"{self.label}: {msg['error']}")
            raise SideFailed(f"{self.label}: {msg['error']}\n{msg.get('traceback', '')}")
        return msg

    def output(self, limit: int = 3000) -> str:
        """The end of what the side printed (its errors, the user's prints)."""
        if self._log_fd is None:  # released
            return ""
        try:
            size = os.fstat(self._log_fd).st_size
            return os.pread(self._log_fd, limit, max(0, size - limit)).decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def request(self, obj: dict) -> dict:
        try:
            self._conn.send(obj)
        except (OSError, ValueError):  # the side has gone: _receive says with what exit and output
            pass
        return self._receive()

    def close(self) -> None:
        """Ends the side (asked first, killed after 30 s); closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, ValueError):
            self._conn.send({"op": "quit"})
        self.proc.join(timeout=30)
        if self.proc.exitcode is None:
            self.proc.kill()
            self.proc.join()
        self._release()

    def _unlink_log(self) -> None:
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._log_path)
            self._log_path = None

    def _release(self) -> None:
        self._unlink_log()
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.close()
        if self._log_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._log_fd)
            self._log_fd = None
        with contextlib.suppress(AttributeError, ValueError):
            self.proc.close()  # its sentinel and the server's pipe for it (a live one: left alone)


class RemoteStep:
    """One build in a side process: calling it runs one step there (untimed)."""

    def __init__(self, side: Side, build: int) -> None:
        self.side, self.build = side, build

    def __call__(self) -> None:
        self.side.request({"op": "call", "build": self.build})

    def time(self, n: int, cpu_time: bool = False) -> float:
        """Seconds of a block of `n` calls, timed in the side: its wall time, or with `cpu_time`
        the CPU time of the side's thread that ran the block."""
        answer = self.side.request({"op": "time", "build": self.build, "n": n})
        self.side.faults += answer.get("faults", 0)
        return answer["cpu_s"] if cpu_time and "cpu_s" in answer else answer["s"]


# What the gate's blocks are timed with on the CPU when every side's step does its work without
# waiting (SideClock.for_sides): the CPU time of each side's timing thread.
CPU_TIME = "thread_time_ns"


class SideClock:
    """The gate's clock over side processes: a remote step's block is timed where it runs, by the
    wall clock, or (`cpu_time`) by the CPU time of the side's timing thread."""

    def __init__(self, local: Clock, cpu_time: bool = False, method: str | None = None) -> None:
        self.local, self.cpu_time = local, cpu_time
        # What timed the blocks, a Clock's method (perfsuite.measuring.timing): the sides' own.
        self.method = CPU_TIME if cpu_time else method or local.method

    @classmethod
    def for_device(cls, device: str) -> SideClock:
        """The driving process's clock for sides on `device`: the wall clock here, never a CUDA
        one. The sides time their blocks on the device themselves (CUDA: synchronise and wall);
        a CUDA clock here synchronised ~50 times a calibration, which made this process a CUDA
        context of its own: one more context's memory, and on a GPU in exclusive-process mode
        every side then failed "busy or unavailable" (issue 54)."""
        from perfsuite.measuring.timing import CudaSyncWallClock, PerfCounterClock

        local = PerfCounterClock()
        return cls(local, method=CudaSyncWallClock.method if device.startswith("cuda") else local.method)

    def for_sides(self, processes: list, device: str, threads: int | None) -> SideClock:
        """The clock for a case's side processes: CPU time on the CPU when the step runs on one
        thread and no side's step waits of its own accord (Side.waits), else the wall clock.

        On a core that other work shares, a block's wall time holds the time the side was
        preempted: a 2.4 ms transformer forward read 6.4 ms (IQR 62% of the median) beside one
        busy process on its core and 12.0 ms beside three, where the thread's CPU time read
        2.6 and 2.9 ms (IQR 12-13%) (reports/gate/load/). Which side a burst falls on is chance,
        and with few side processes it is a bias that every pair of a pairing shares (issue 49).
        What the other work leaves in CPU time (caches, TLBs) is shared by both sides of a pair.
        A step that waits (a DataLoader's workers, I/O, several threads) does work that its CPU
        time does not see, so it keeps the wall clock."""
        waits = [getattr(s, "waits", None) for s in processes]
        cpu = (
            device.startswith("cpu")
            and (threads or 1) == 1
            and bool(waits)
            and all(w is not None and w < 0.5 for w in waits)
        )
        return SideClock(self.local, cpu, self.method)

    def time_block(self, fn, n: int) -> float:
        if isinstance(fn, RemoteStep):
            return fn.time(n, self.cpu_time)
        return self.local.time_block(fn, n)

    def now(self) -> float:
        return self.local.now()


def start_all(specs: list[dict], running: list, pool: SidePool | None = None) -> list[Side]:
    """Sides built at the same time (each `Side(**spec)`): each forks, imports its checkout's code
    and builds while the others do, instead of one after another. Every side started is appended
    to `running` first, so the caller closes them all whichever one fails. Specs marked
    `"keep": True` come from `pool` instead, and specs whose "keep" is a SidePool from that pool:
    started once, kept alive for the pool's owner."""
    started = []
    for spec in specs:
        keep = spec.get("keep")
        owner = keep if isinstance(keep, SidePool) else pool if keep else None
        if owner is not None:
            started.append(owner.side({k: v for k, v in spec.items() if k != "keep"}))
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
        if i < len(kept) and kept[i].alive():
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
