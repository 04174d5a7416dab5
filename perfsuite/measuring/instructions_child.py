"""The process perfsuite.measuring.instructions runs under Callgrind: a server of counts. It imports
torch and perfsuite once, at Valgrind's plain speed (about 43 s of the 50-60 s one count took when
each count was a process of its own), turns Callgrind's instrumentation on for itself, and says it
is ready. Then, for each line on its standard input, it forks a child, which inherits the imports
and the instrumentation: the child reads the job (JOB in the folder), builds the case's step, warms
it, and collects only around the counted steps; Callgrind writes each child's count to its own file
(callgrind.out.<pid>). The child's result goes to RESULT, and the server answers one JSON line per
job: {"status": "done", "pid", "exit"}.

Every child starts from the same state (the server's, which does the same work before each fork),
so identical code counts the same in every child, whatever was counted before it.

Where the CPU's hardware counters can count (perfsuite.measuring.pmu), no Valgrind runs: the
driver starts `python -m perfsuite.measuring.instructions_child --pmu FOLDER` per count, which
builds and warms the step as a child here does and counts its steps on the counter.

    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \
        --callgrind-out-file=FOLDER/callgrind.out.%p python -m perfsuite.measuring.instructions_child FOLDER
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

JOB, RESULT, CHILD_OUTPUT = "job.json", "result.json", "child-output.txt"
# Calls before the counted ones: the first does the lazy initialisation (oneDNN's primitives, an
# optimiser's state). Later calls still differ a little from one to the next (the interpreter's
# specialisation settling: 0.1-2%, reports/work/count-cost/per-call-2026-11-30.json), alike in every
# child, so a count compares one code with another at the same call: the third.
WARMUP = 2
# Imported once by the server, at Valgrind's plain speed, so no child imports them instrumented: the
# workers' fork server's list (torch._dynamo among them: torch.optim imports it at an optimizer's
# first build, which took 42 s of a child's 50 s instrumented), and what loading a workload file
# imports (the built-in workloads, the declaration API, the FLOP counter).
PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch.optim",
    "torch.utils.flop_counter",
    "torchvision",
    "scipy.stats",
    "perfsuite.core.discover",
    "perfsuite.measuring.runner",
    "perfsuite.measuring.timing",
    "perfsuite.workloads",
    "perfsuite.user",
    "perfsuite.cli",
)


def _failed(exc: BaseException) -> str:
    """A failure as the driver reads it (JSON): the timing beside the count stands, with this reason."""
    return json.dumps({"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:400]})


def serve(folder: Path) -> int:
    try:
        import importlib

        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:  # torchvision where it is not installed: a child imports what it needs
                continue
        import torch

        # One thread: OpenMP's workers spin while they wait, and how long they spin is the
        # scheduler's, not the step's; one thread executes what the step does, once. Set before
        # any operator runs, so no pool exists to be forked.
        torch.set_num_threads(1)
        on = subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, text=True)
        if on.returncode != 0:
            raise RuntimeError(f"callgrind_control -i on failed: {(on.stderr or on.stdout).strip()[-200:]}")
    except BaseException as exc:  # noqa: BLE001 - the driver records the reason; the timing stands
        print(_failed(exc), flush=True)
        return 1
    print(json.dumps({"status": "ready"}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        pid = os.fork()
        if pid == 0:
            os._exit(_count(folder))
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": "done", "pid": pid, "exit": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


class _Orphaned(Exception):
    """The server that forked this child has ended (killed with its driver, which no longer holds the
    count folder's lock): nobody will read this count, and another count may own the folder."""


def _count(folder: Path, pmu_fd: int | None = None) -> int:
    """In the forked child: the job's steps counted; the result written to RESULT. A child whose
    server ended stops at its next call outside the counted steps and writes nothing: it went on
    alone for minutes, and wrote its result into the folder of whatever count came next. With
    `pmu_fd` (a hardware counter of this thread, perfsuite.measuring.pmu), the steps are counted
    on it instead of by Callgrind's collection, and the result holds the total."""
    # The step's own prints go to a file: the server's standard output is the driver's protocol.
    os.dup2(os.open(folder / CHILD_OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 1)
    result = folder / RESULT
    server = os.getppid()
    total: list[int] = []

    def wanted() -> None:  # a system call outside the collected region: it adds nothing to the count
        if os.getppid() != server:
            raise _Orphaned

    try:
        import torch

        from perfsuite.core import registry
        from perfsuite.core.discover import load_entry_points, load_file, workload_in
        from perfsuite.measuring import counted
        from perfsuite.measuring.timing import synchronize

        job = json.loads((folder / JOB).read_text())
        torch.manual_seed(0)
        if job.get("files"):  # a revision's: the workload file, the project's code from its checkout
            workload = workload_in(job["files"], job["workload"], job.get("root"))
        else:
            for path in job["load"]:
                load_file(Path(path))
            load_entry_points()
            workload = registry.get(job["workload"])
        params = workload.resolve(job["params"])
        workload.validate_case(params, job["device"])
        # Its FLOPs and saved bytes are not counted: nobody reads them here, and under Callgrind their
        # runs of the step were most of a ResNet18 ci build (perfsuite.measuring.counted.stood_in).
        with counted.stood_in():
            built = workload.build(params, job["device"])
        wanted()
        for _ in range(WARMUP):  # lazy initialisation and the interpreter's specialisation
            built.fn()
            wanted()
        synchronize(job["device"])
        # The garbage collector off over the counted steps, after a full collection: where a
        # collection falls depends on every allocation since the interpreter started (the
        # checkout's path in each file name, the build), so identical code counted in two checkouts
        # differed by up to 0.2% (a notes-only commit 2,143,039 against its parent's 2,146,759),
        # which hid a +0.5% step and named a wrong commit (reports/work/). The count is the step's.
        gc.collect()
        gc.disable()
        if pmu_fd is None:
            torch._C._valgrind_toggle()
            for _ in range(job["steps"]):
                built.fn()
            synchronize(job["device"])
            torch._C._valgrind_toggle()
        else:
            from perfsuite.measuring import pmu

            with pmu.counting(pmu_fd) as total:
                for _ in range(job["steps"]):
                    built.fn()
                synchronize(job["device"])
        gc.enable()
        if built.teardown is not None:
            built.teardown()
        wanted()
    except _Orphaned:
        return 1
    except BaseException as exc:  # noqa: BLE001 - the driver records the reason; the timing stands
        result.write_text(_failed(exc))
        return 1
    result.write_text(json.dumps({"status": "ok", **({"total": total[0]} if total else {})}))
    return 0


def count_by_pmu(folder: Path) -> int:
    """The PMU's road (no Valgrind): this process counts the job in FOLDER on the CPU's hardware
    counter of its one thread, as a Callgrind child would, and writes the result with its total."""
    from perfsuite.measuring import pmu

    try:
        import torch

        torch.set_num_threads(1)  # one thread: the counter follows this thread only, as Callgrind's count
        # one CPU: on a hybrid CPU a hardware event counts on one kind of core only, so a thread
        # the scheduler moved to the other kind would go partly uncounted
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        fd = pmu.open_counter()
    except BaseException as exc:  # noqa: BLE001 - the driver records the reason; the timing stands
        (folder / RESULT).write_text(_failed(exc))
        return 1
    try:
        return _count(folder, fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    if sys.argv[1] == "--pmu":
        sys.exit(count_by_pmu(Path(sys.argv[2])))
    sys.exit(serve(Path(sys.argv[1])))
