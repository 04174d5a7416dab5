"""One side of a gate, in a process of its own, forked from perfsuite's fork server.

Two revisions of the user's code cannot share one interpreter's module table (both import
`myproj.model`), so the gate runs each side here, in its own checkout, and drives the two in
alternation (perfsuite.compare.sides). This process builds the side's workload from the files
it is given (under registry capture: its names never clash with the registry's), holds the
heap, and answers requests on a private pipe: call a build once, time n calls of it, or (for
`perfsuite why`) profile a window of its steps and read one step's peak memory
(perfsuite.profiling.ops), outside any timed block.

The process is forked from the server perfsuite's worker processes come from
(perfsuite.measuring.workers.context: torch, torchvision and perfsuite's core imported once), so a
side costs a fork and its builds, not an interpreter and a torch import (2-5 s each here: a
bisection starts three sides per probe). Requests and answers are dicts on a private
multiprocessing pipe; the user's own prints go to a log file, never into the protocol.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path

from perfsuite.core.discover import workload_in
from perfsuite.core.errors import Unsupported, exception_text
from perfsuite.measuring import counted, heap
from perfsuite.measuring.fork_cuda import ForkedAfterCuda, refuse_bad_fork
from perfsuite.measuring.system import pinned


def _cwd() -> str | None:
    """The working folder, or None when it was deleted under the command (issue 51: a module-level
    os.getcwd() here ended such a run with a traceback, exit 1)."""
    try:
        return os.getcwd()
    except OSError:
        return None


# Imported by the fork server (perfsuite.measuring.workers.PRELOAD), before any parent's state reaches
# a child: multiprocessing gives each child its parent's sys.path, and the parent's holds the
# working tree's root (discovery put it there), where a base revision must not find modules.
# A side's path is this one, as a fresh `python -P` with perfsuite's core first would have it:
# no working folder (a workload folder's bench/types.py shadows nothing), no parent's additions.
CORE_ROOT = str(Path(__file__).resolve().parents[2])
FRESH_PATH = [CORE_ROOT, *(p for p in sys.path if p and p != CORE_ROOT and p != _cwd())]
# What the server imported before any side's code (torch, torchvision, scipy, perfsuite's core):
# a checkout's package of one of those names cannot be a side's own (it is already in sys.modules).
PRELOADED = frozenset(name.partition(".")[0] for name in sys.modules)


def build_side(files: list[str], name: str, params: dict, device: str, builds: int, code_root: str | None = None):
    """`builds` built steps of workload `name` declared in `files`, the project's own code imported
    from `code_root` (the side's checkout; None: the files' own project). The workload file may come
    from another checkout than the code (the working tree's, measuring an older revision's code)."""
    w = workload_in(files, name, code_root)
    w.validate_case(params, device)

    build = counted.alike(lambda: w.build(params, device))  # the first build counts the step's work
    return w, [build() for _ in range(builds)]


def foreign_imports(root: Path) -> list[str]:
    """The checkout's own top-level packages (in root or root/src) that this process imported from
    somewhere else: an editable or a regular install would make the base side run the working
    tree's code (or an installed copy) while claiming to be the base revision."""
    out = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for pkg in base.iterdir():
            mod = sys.modules.get(pkg.name) if (pkg / "__init__.py").exists() else None
            where = getattr(mod, "__file__", None)
            if where and root.resolve() not in Path(where).resolve().parents:
                out.append(
                    f"{pkg.name} from {where}"
                    + (
                        " (imported by perfsuite's fork server before any side's code: a revision of that "
                        "package itself cannot be a side)"
                        if pkg.name in PRELOADED
                        else ""
                    )
                )
    return out


def shifted_layout(seed: int | None = None) -> list:
    """Allocations of random sizes, made before the build and held for the side's life, so that
    where the build's tensors, heap chunks and Python objects land differs from one side process
    to the next.

    Every side is forked from one fork server: without this, each process of one revision inherits
    the same address space and makes the same allocations in the same order, so all of them share
    one memory layout, and that layout's effect on the step (cache sets, 4K aliasing between
    buffers, the allocator's free lists: several percent, Mytkowicz et al., ASPLOS 2009) is the
    same in every pairing. A change that only moves allocations (renaming a class, an unused
    buffer) then reads as a confident difference that every pairing agrees on (issue 49). With a
    layout drawn per process (as Stabilizer does per run, ASPLOS 2013), the pairings are
    independent draws of layout, and their disagreement measures what layout does."""
    import mmap
    import random

    import torch

    rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))
    held: list = [
        bytearray(rng.randrange(1, 1 << 16)),  # glibc's heap: later small and medium chunks move
        torch.empty(rng.randrange(1, 1 << 16), dtype=torch.uint8),  # torch's CPU allocator
        mmap.mmap(-1, rng.randrange(1, 256) * mmap.PAGESIZE),  # later mappings (large tensors, libraries)
    ]
    held += [object() for _ in range(rng.randrange(1, 4096))]  # pymalloc's pools
    return held


def waits_per_call(step, calls: int = 5) -> float:
    """The median number of times one call of `step` gave up the CPU of its own accord (voluntary
    context switches: waiting on a lock, a pipe, a DataLoader's workers, a file, a sleep). A step
    that never waits does all its work in this process, so its thread's CPU time measures it;
    one that waits is measured by the wall clock (sides.SideClock). Being preempted by other
    work on the core is involuntary and does not count."""
    import resource
    import statistics

    counts = []
    for _ in range(calls):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        step()
        counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before)
    return float(statistics.median(counts))


def serve(conn, job: dict) -> int:
    from perfsuite.measuring.timing import clock_for

    try:  # forked from the same server as the workers: the same guard against a CUDA-touched server
        refuse_bad_fork(job["device"])
    except ForkedAfterCuda as exc:
        conn.send({"kind": "environment", "error": str(exc)})
        return 1
    heap.apply(job.get("heap", "default"))
    if job.get("flags") is not None:  # the caller's numerics flags, before the build picks kernels
        from perfsuite.measuring.tf32 import apply_torch_flags

        for warning in apply_torch_flags(job["flags"]):
            print(f"perfsuite side: {warning}", file=sys.stderr)
    layout = shifted_layout() if job.get("layout", "random") == "random" else []  # held until the side ends
    if job.get("seed") is not None:  # sides compared by their outputs build the same weights and inputs
        seeded(job["seed"])
    applied = None
    if job.get("cpus") and job.get("allowed"):
        # Built on the CPUs the gate was given, not the driver's core it forked on: a runtime that
        # reads the process's affinity when it compiles binds its threads to that set at each call,
        # whatever the side is pinned to later (OpenVINO bound its calling thread to the driver's
        # core, so its side and eager's timed on different cores; reports/variants/).
        try:
            os.sched_setaffinity(0, set(job["allowed"]))
        except OSError:  # a CPU taken away since (a cpuset changed): built where it is
            pass
    with pinned(None, job.get("threads")):
        try:
            w, built = build_side(
                job["files"], job["workload"], job["params"], job["device"], job["builds"], job.get("root")
            )
            if job.get("variant"):  # the variant's steps replace the workload's (perfsuite.variants)
                from perfsuite.variants.apply import apply

                applied = apply(built, job["variant"], job["device"])
                built = applied.steps
        except Unsupported as exc:  # the variant (or the case) cannot run here: a refusal, not a failure
            conn.send({"error": str(exc), "kind": "unsupported"})
            return 1
        except Exception as exc:  # noqa: BLE001 - the side's own code: its error goes back to the gate
            conn.send({"error": exception_text(exc), "traceback": traceback.format_exc()})
            return 1
        foreign = foreign_imports(Path(job["root"])) if job.get("root") else []
        if foreign:
            conn.send(
                {
                    "kind": "environment",  # the user's environment, not this case: bad input
                    "error": f"this side must run the code of {job['root']}, but it imported "
                    f"{'; '.join(foreign)} (an installed copy of the project: an editable "
                    "install or a regular one shadows the checkout; uninstall it, or gate "
                    "from an environment without it)",
                }
            )
            return 1
        steps = [b.fn for b in built]
        clock = clock_for(job["device"], "host")  # host-inclusive, as the in-process gate times
        settled = None
        if heap.held():  # run the builds until they stop faulting, before the parent's budget starts
            settled = heap.settle(steps + steps[::-1], clock.now, job.get("settle_s", 10.0))
        if job.get("cpus"):
            # The timing core(s) shared by every side (sides.side_cpus), from here on: the builds and
            # the settling above ran wherever the scheduler put them, all sides at once.
            pin_every_thread(set(job["cpus"]))
        waits = waits_per_call(steps[0]) if job["device"].startswith("cpu") else None
        if applied is not None and applied.facts["own_threads"]:
            waits = max(waits or 0.0, 1.0)  # its runtime's threads do the work: timed by the wall clock
        conn.send(
            {
                "ok": True,
                "work": dataclasses.asdict(built[0].work),
                "settle": settled,
                "waits": waits,
                "variant": applied.facts if applied is not None else None,
            }
        )
        if not _answered(conn, job, steps, clock, applied):
            return 1
        for b in built:
            if b.teardown is not None:
                b.teardown()
    del layout
    return 0


def _answered(conn, job: dict, steps: list, clock, applied) -> bool:
    """Answer the parent's requests until it quits or goes away (True), or until a step raises or a
    timed block ran off the timing cores (False: the error is sent, the side ends)."""
    cpus = set(job["cpus"]) if job.get("cpus") else None
    while True:
        try:
            req = conn.recv()
        except EOFError:  # the parent went away: nothing left to answer
            return True
        if req["op"] == "quit":
            return True
        try:
            watched = cpus is not None and req["op"] == "time"
            ran_before = thread_cpu_ns() if watched else {}
            reply = answer(req, steps, clock, job["device"], applied)
            moved = off_cores(cpus, ran_before) if watched and cpus is not None else None
            if moved:  # the block ran where the other side could not: its time is not comparable
                conn.send({"error": moved})
                return False
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - a step that raises ends this side with its error
            conn.send({"error": exception_text(exc), "traceback": traceback.format_exc()})
            return False


def pin_every_thread(cpus: set[int]) -> None:
    """Every thread of this process on `cpus`, not only the calling one: sched_setaffinity(0) moves
    the caller alone, and a runtime's thread pool started during the build (ONNX Runtime's,
    OpenVINO's) kept running on the driver's core, a second core the other side did not have."""
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread at least
        threads = [0]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def thread_cpu_ns(tasks: str = "/proc/self/task") -> dict[int, int]:
    """Each thread of this process: the nanoseconds it has run on a CPU (schedstat's first field;
    where the kernel keeps no schedstat, stat's user and system ticks, coarser but never silent)."""
    out: dict[int, int] = {}
    try:
        tids = os.listdir(tasks)
    except OSError:
        return out
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    for tid in tids:
        try:
            with open(f"{tasks}/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
            continue
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile, no schedstat
            pass
        try:
            with open(f"{tasks}/{tid}/stat") as f:  # the fields after the name in parentheses
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = int((int(fields[11]) + int(fields[12])) * tick_ns)  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return out


def off_cores(cpus: set[int], ran_before: dict[int, int]) -> str | None:
    """Why a timed block may have run off the sides' timing cores `cpus`, or None: a thread of this
    process that ran during the block (its CPU time grew since `ran_before`, thread_cpu_ns) and is
    allowed on another core. A runtime that sets its own threads' affinity moves them: OpenVINO with
    its CPU pinning on reset the calling thread to every core at each inference, so its side ran on
    the second core the other side did not have, and its paired speed-up read 1.8-2.1x where one
    core gives it 1.5-1.6x (reports/variants/). An idle thread allowed elsewhere takes nothing."""
    for tid, ns in thread_cpu_ns().items():
        if ns - ran_before.get(tid, 0) < 100_000:  # under 0.1 ms in the block: idle
            continue
        try:
            allowed = os.sched_getaffinity(tid)
        except OSError:  # a thread that ended meanwhile
            continue
        if not allowed <= cpus:
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    tid_name = f"{tid} ({f.read().strip()})"
            except OSError:
                tid_name = str(tid)
            return (
                f"the step ran thread {tid_name} of its side off the timing core(s) {sorted(cpus)} (allowed on "
                f"{sorted(allowed)}): a runtime that sets its own CPU affinity (OpenVINO's ENABLE_CPU_PINNING, "
                "OMP_PROC_BIND or KMP_AFFINITY, taskset in the step) runs on cores the other side does not "
                "have, and its time would not be comparable; switch its pinning off"
            )
    return None


def seeded(seed: int) -> None:
    """Every generator a workload's build may draw from, seeded: two sides of the same code then
    hold the same weights and inputs, so their outputs can be compared (a variant against eager)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def answer(req: dict, steps: list, clock, device: str, applied=None) -> dict:
    """The reply to one request of the parent (the step's error raises: it ends the side)."""
    op = req["op"]
    if op in ("output", "evaluate", "latencies"):
        return _variant_answer(req, steps, device, applied)
    if op == "call":
        steps[req["build"]]()
        return {"ok": True}
    if op == "time":
        before = heap.minor_faults()
        cpu0 = time.thread_time_ns()
        s = clock.time_block(steps[req["build"]], req["n"])
        # This thread's CPU time over the same block: what the gate reads on the CPU when the step
        # runs on this one thread and never waits (sides.SideClock), the preemption by other work on
        # the core left out. The thread's, not the process's: another thread of the process (a pool
        # left from before the side was pinned to one thread) spinning beside the block counted in
        # the process's time and pulled a 2x slowdown down to 1.27 (tests/test_bisect.py).
        cpu_s = (time.thread_time_ns() - cpu0) * 1e-9
        return {"s": s, "cpu_s": cpu_s, "faults": heap.minor_faults() - before}
    if op == "profile":
        from perfsuite.profiling.ops import profile_ops

        return {"ops": profile_ops(steps[req["build"]], req["steps"], device, req.get("warmup", 1))}
    if op == "signature":  # what one call dispatches, after the side's timed blocks
        from perfsuite.measuring.signature import take

        # the operators only: no kernel counts, whose profiler would be in one side's process first
        return {"signature": take(steps[req["build"]])}
    if op == "energy":  # joules per step over a second-long region, after the timed blocks
        from perfsuite.measuring.energy import unavailable
        from perfsuite.measuring.step_energy import step_energy

        try:
            return {"energy": step_energy(steps[req["build"]], device, float(req["seconds"]))}
        except Exception as exc:  # noqa: BLE001 - a counter's failure is a reason, never the side's end
            return {"energy": unavailable(f"reading the counter failed: {exception_text(exc).splitlines()[0][:300]}")}
    if op == "memory":
        from perfsuite.profiling.ops import step_peak_memory

        return {"memory": step_peak_memory(steps[req["build"]], device)}
    return {"error": f"unknown request {op!r}"}


def _variant_answer(req: dict, steps: list, device: str, applied) -> dict:
    """What a variant study asks a side after its pairs: the output on the workload's inputs, the
    workload's evaluation, or calls timed one by one for about `seconds` (latency percentiles)."""
    from perfsuite.measuring.timing import synchronize

    if applied is None:
        return {"error": f"request {req['op']!r} needs a side built with a variant"}
    if req["op"] == "output":
        from perfsuite.variants.fidelity import digest, primary

        return {"output": digest(primary(applied.output()))}
    if req["op"] == "evaluate":
        return {"evaluation": applied.evaluate() if applied.evaluate is not None else None}
    times: list[float] = []
    end = time.perf_counter() + float(req["seconds"])
    while len(times) < int(req["max"]) and (len(times) < int(req["min"]) or time.perf_counter() < end):
        t0 = time.perf_counter()
        steps[req.get("build", 0)]()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return {"latencies": times}


def side_main(conn, log_path: str, job: dict) -> None:
    """The forked side: its output to `log_path`, a fresh interpreter's sys.path, then serve the parent."""
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)  # the user's prints (and errors) go to the log the parent reads on failure
    os.dup2(log, 2)
    os.close(log)
    sys.path[:] = FRESH_PATH  # the side's checkout goes first when its workload file is loaded
    try:
        code = serve(conn, job)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent reports it
        code = 1
    finally:
        conn.close()
    sys.exit(code)
