"""A case's budget spread over N fresh worker processes, as pyperf does it.

The same step measured in two processes differs by more than the samples inside one process
say (placement on the CPUs, memory layout, neighbours: docs/peers.md), and no loop inside
one process averages that away. So with `processes = N` each worker is a fresh process (forked
from the fork server below): it builds the step once and measures 1/N of the budget with the
normal runner (runner.time_case), and the parent merges the N records into one. That record keeps
every process's samples and median; its median and interval come from the process medians
(stats.process_spread), and its `conditions` say how much of the spread is between processes.
Workers run one after another, never side by side: two at once would compete for the CPUs.

Workers are forked from a server process that imported torch once ("forkserver" with torch
preloaded): a fresh process then costs a fork (tens of milliseconds), not an interpreter and a
torch import (2-5 s here), so that measuring every case in several processes, the default
(RunConfig.processes=None), costs one start-up per run and not one per worker. The forked worker
still gets its own heap, its own page placement and its own threads, where the variation between
processes comes from. The budget holds everything after that start-up: the case's `max_time` ends
at one deadline, each worker gets an equal slot of what is left when it starts (a slow one costs
the later ones, not the total), and its fork, build and first call come out of its slot. What a
build counts of the step's work (FLOPs, saved bytes: perfsuite.measuring.counted) the first worker
counts and sends back with its record; the later workers reuse it (for ResNet18 `ci` batch 8 on
the 2-core VM, ~0.7 s of a 2 s slot).
The gate's, bisect's and why's side processes (perfsuite.compare.sides) fork from the same server.

CUDA and the fork server: CUDA cannot be used in a process forked after its parent touched CUDA
(torch marks the child a "bad fork"; even torch.cuda.is_available() in the parent does it). So the
server must make no CUDA call while it preloads, and none does (tests/test_fork_server_cuda.py:
perfsuite.measuring.fork_cuda.preload_cuda_calls finds none); a worker that finds itself in a bad fork refuses a CUDA case
with ForkedAfterCuda, saying so, instead of torch's "Cannot re-initialize CUDA in forked
subprocess" from deep inside a build (or, for --device auto, a silent CPU run: in a bad fork
torch.cuda.is_available() is False).

Flags that change what an fp32 step computes (TF32, cuDNN's benchmark and deterministic modes,
deterministic algorithms: perfsuite.measuring.tf32.torch_flags) are set by a user in the calling
process (the API, a conftest, an asv `setup`), but a worker is forked from the server, not from
the caller: the job carries the caller's flags, and the worker sets them before it builds the step.
"""

from __future__ import annotations

import math
import multiprocessing
import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.discover import entry_point_workloads, loaded_paths
from perfsuite.core.errors import USER_CODE_ERRORS, ConfigError, Unsupported, exception_text
from perfsuite.core.record import Record
from perfsuite.core.units import fmt_seconds
from perfsuite.core.workload import Workload
from perfsuite.measuring import energy
from perfsuite.measuring.nvml import pooled as pooled_nvml
from perfsuite.measuring.runner import conditions_warnings
from perfsuite.measuring.tf32 import torch_flags
from perfsuite.stats import summary as stats

# Forked from a server that preloaded these (an import that fails there is skipped, as
# multiprocessing does); the server never runs a torch op, so no thread pool is inherited.
START_METHOD = "forkserver"
# perfsuite.cli: a child of the `perfsuite` script runs that script again as __mp_main__ (it imports
# perfsuite.cli); preload: last, it freezes what the others imported and gives back the Ctrl-C
# handler the server started without (_start_server).
# torch._dynamo: FlopCounterMode's first use imports it (with sympy), 1.8-2.2 s on this VM, paid by
# every process that counts a step's FLOPs: the first worker of a run, and each of a gate's and a
# bisect probe's side processes (six per probe); imported here once, a child's first count takes 30 ms.
PRELOAD = (
    "perfsuite.measuring.preload_first",  # from here a Ctrl-C ends the server quietly (_start_server)
    "torch",
    "torch._dynamo",
    "torchvision",
    "scipy.stats",
    "perfsuite.measuring.runner",
    "perfsuite.measuring.workers",
    "perfsuite.measuring.system",
    "perfsuite.core.discover",
    "perfsuite.compare.side_worker",
    "perfsuite.cli",
    "perfsuite.measuring.preload",
)
_server_warm = False  # whether this process's fork server has started and preloaded
_preload: tuple[str, ...] = PRELOAD  # what this process's fork server imports (start_server_soon may drop one)
# A merged record warns when most of a process median's variance is between processes.
BETWEEN_WARN_SHARE = 0.5


class WorkerFailed(RuntimeError):
    """A worker raised or died; execute.run_cases records it as the case's failure."""


@dataclass(frozen=True)
class Job:
    """What one worker needs: picklable, so it crosses into a spawned interpreter."""

    workload: Workload | str  # a registry name when registered (the child looks it up), else the object
    params: dict
    cfg: RunConfig  # this worker's share: processes=1, max_time = total / N
    env: dict | None
    peak: dict | None
    clock: Any = None  # tests pass a fake clock; None: the device's clock
    # The user's workload files loaded in the parent: a fresh interpreter loads them again, so
    # that a user workload is found by name there as it is here.
    load: tuple[str, ...] = ()
    deadline: float | None = None  # time.monotonic() by which this worker's slot ends (set-up included)
    # What an earlier worker's builds counted of the step's work (perfsuite.measuring.counted): the
    # same in every worker, so only the first pays for counting it inside its slot.
    counts: dict | None = None
    # The caller's numerics flags (perfsuite.measuring.tf32.torch_flags), set in the worker before
    # it builds: the fork server's are torch's defaults, whatever the caller set. None: leave them.
    flags: dict | None = None


def worker_main(conn, job: Job) -> None:
    """Runs in the worker: measure the share with the normal runner, send back the record."""
    try:
        from pathlib import Path

        from perfsuite.core import registry
        from perfsuite.core.discover import load_entry_points, load_file
        from perfsuite.measuring import runner, tf32
        from perfsuite.measuring.fork_cuda import refuse_bad_fork

        refuse_bad_fork(job.cfg.device)
        # Before the user's files load and the step is built: a build may read them (cudnn.benchmark).
        flag_warnings = tf32.apply_torch_flags(job.flags) if job.flags is not None else []
        with warnings.catch_warnings():
            # The parent loaded these very files and showed what they warn of at import (a
            # deprecated torch API in the user's model): once, not again per worker.
            warnings.simplefilter("ignore")
            for path in job.load:
                load_file(Path(path))
            load_entry_points()  # a package's workloads, as the parent found them
        from perfsuite.measuring import counted

        workload = registry.get(job.workload) if isinstance(job.workload, str) else job.workload
        with counted.shared(job.counts) as made:
            rec = runner.time_case(
                workload, job.params, job.cfg, env=job.env, peak=job.peak, clock=job.clock, deadline=job.deadline
            )
        if flag_warnings:
            rec = replace(rec, warnings=(*rec.warnings, *flag_warnings))
        conn.send(("ok", rec.to_dict(), made))
    except Unsupported as exc:
        conn.send(("unsupported", str(exc)))
    except USER_CODE_ERRORS as exc:  # the parent makes it (a step's sys.exit too) the case's failure
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        conn.send(("error", f"{exception_text(exc)}{where}"))
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group: the parent reports it, quietly
    finally:
        conn.close()


def _portable(workload: Workload) -> Workload | str:
    """The workload as a worker will find it: by name when the worker registers it too (perfsuite's
    own, an installed package's entry point, or declared in a file discovery loaded, which the
    worker loads again), else the object
    itself (pickled by reference: the worker imports the user's module, as their script did)."""
    from pathlib import Path

    try:
        if registry.get(workload.name) is not workload:
            return workload
    except ConfigError:
        return workload
    source = Path(workload.source.rsplit(":", 1)[0]).resolve() if workload.source else None
    if (
        workload.builtin
        or workload.name in entry_point_workloads()
        or (source is not None and str(source) in loaded_paths())
    ):
        return workload.name
    return workload


def _run_worker(ctx, target: Callable, job: Job, label: str) -> tuple[Record, int, dict | None]:
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, job), name=f"perfsuite-{label.replace(' ', '-')}")
    proc.start()
    child.close()  # the parent's copy: once the worker exits, recv() ends with EOFError, never hangs
    try:
        try:
            kind, payload, *counts = parent.recv()  # a worker body may send no counts
        except EOFError:
            proc.join()
            raise WorkerFailed(
                f"{label} (pid {proc.pid}) exited with code {proc.exitcode} before sending its record"
            ) from None
        proc.join()
    finally:
        if proc.is_alive():  # interrupted: do not leave a worker measuring behind us
            proc.terminate()
            proc.join()
        parent.close()
    if kind == "unsupported":
        raise Unsupported(payload)
    if kind != "ok":
        raise WorkerFailed(f"{label} (pid {proc.pid}): {payload}")
    return Record.from_dict(payload), proc.pid, (counts[0] if counts else None)


def _noop() -> None:
    return None


def context(start_method: str | None = None):
    """The multiprocessing context workers start in; a fork server is started (and torch imported
    in it) on first use, before any budget starts: that is the run's start-up, paid once."""
    global _server_warm
    method = start_method or START_METHOD
    ctx = multiprocessing.get_context(method)
    if method == "forkserver" and not _server_warm:
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(list(_preload))
        _start_server(forkserver)  # Ctrl-C ignored by the server until its preload is done
        # (typeshed declares Process on each concrete context, not on the BaseContext get_context returns)
        warm = ctx.Process(target=_noop, name="perfsuite-forkserver-warm")  # type: ignore[attr-defined]
        warm.start()
        warm.join()
        _server_warm = True
    return ctx


def processes_advice(spread, cfg: RunConfig, n: int) -> str:
    """The next step after a multi-process run that missed its target: the processes the observed
    spread of process medians needs (a t interval on n - 1 degrees of freedom: 2 processes pay
    t = 12.7, 5 pay 2.8), or, past a few dozen, that separate runs cannot reach it here."""
    from scipy.stats import t

    cv = max(math.sqrt(spread.between_var + spread.within_var) / spread.median, 1e-9)
    need = next(
        (
            k
            for k in range(max(n + 1, 3), 65)
            if t.ppf(0.5 + cfg.confidence / 2, k - 1) * cv / math.sqrt(k) <= cfg.target_rel_ci
        ),
        None,
    )
    slot = cfg.max_time / n
    if need is None:
        return (
            f"the process medians spread {cv:.1%} (CV), too much for +-{cfg.target_rel_ci:.1%} from separate "
            "processes on this machine: widen --target-ci, or compare versions in one interleaved "
            "`perfsuite gate` (paired, immune to this spread)"
        )
    return (
        f"next: --processes {need} --max-time {need * slot:.0f} (the medians spread {cv:.1%}; each "
        "process adds a degree of freedom to the interval)"
    )


def start_server_soon(vision: bool = True) -> None:
    """Start the fork server without waiting for it, when a command will need it: the server
    imports torch while this process finds the workloads and imports torch too, instead of after
    it. `vision=False` leaves torchvision out of its imports, for a user's workloads that do not
    use it: it costs as much as torch itself (6.7 s against 6.1 s on the loaded 2-core VM,
    2026-11-27), paid before the first sample of every run (issue 36: a `--max-time 4` run took
    31-37 s). context() later waits for the server to be ready."""
    global _preload
    if START_METHOD != "forkserver" or _server_warm:
        return
    from multiprocessing import forkserver

    _preload = PRELOAD if vision else tuple(m for m in PRELOAD if m != "torchvision")
    multiprocessing.get_context(START_METHOD).set_forkserver_preload(list(_preload))
    _start_server(forkserver)


def _start_server(forkserver) -> None:
    """Start the fork server with Ctrl-C ignored, a disposition its interpreter inherits across
    exec: multiprocessing protects the server from ^C only once its preload is done, and a Ctrl-C
    to the terminal's process group in the seconds before (Python's start, torch's import)
    printed a KeyboardInterrupt traceback from the server beside the command's quiet
    "interrupted" (issue 51). preload_first, imported first, lets a Ctrl-C end it quietly while
    it imports; preload.py, imported last, gives it Python's own handler back for the workers it
    forks. Here Ctrl-C is ignored only while the server is forked and executed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, before)


def worker_count(workload: Workload, cfg: RunConfig, params: dict | None = None) -> int:
    """The worker processes `workload` is measured in: `cfg.workers`, except that the default (None)
    keeps in one process a workload allowing one build at a time (Workload.max_builds=1: a large
    model, ranks of a process group: its build would not fit a worker's slot, nor its memory
    twice) and a case with `compile=True` (issue 54: each worker compiled the step again, five
    compiles of 0.7-0.8 s each at --max-time 10, out of the workers' slots)."""
    if cfg.processes is None and (workload.max_builds == 1 or (params or {}).get("compile") is True):
        return 1
    return cfg.workers


def run_in_workers(
    workload: Workload,
    params: dict,
    cfg: RunConfig,
    *,
    env: dict | None = None,
    peak: dict | None = None,
    clock=None,
    target: Callable = worker_main,
    start_method: str | None = None,
) -> Record:
    """Measure one case in `cfg.workers` fresh workers, one after another; one merged record.
    The whole takes `cfg.max_time` (after the fork server's start-up): each worker's slot ends at
    a deadline, an equal share of what is left when it starts."""
    import time

    n = cfg.workers
    share = replace(
        cfg,
        processes=1,
        max_time=cfg.max_time / n,
        min_time=cfg.min_time / n,
        builds=cfg.builds if cfg.builds is not None else 1,
    )

    job = Job(_portable(workload), dict(params), share, env, peak, clock, loaded_paths(), flags=torch_flags())
    if cfg.processes is None:  # workers by default only: those asked for explicitly fail as they always did
        from perfsuite.measuring import runner

        here = replace(cfg, processes=1)
        if worker_count(workload, cfg, params) == 1:
            return runner.time_case(workload, params, here, env=env, peak=peak, clock=clock)
        try:
            pickle.dumps(job.workload)
        except Exception as exc:  # noqa: BLE001 - a closure, a lambda, a local class: anything pickle refuses
            rec = runner.time_case(workload, params, here, env=env, peak=peak, clock=clock)
            return replace(
                rec,
                warnings=(
                    *rec.warnings,
                    f"measured in this process, not in {n} worker processes: "
                    f"the workload cannot be sent to one ({type(exc).__name__}: {exc}); "
                    "the interval cannot see the variation between processes",
                ),
            )
    ctx = context(start_method)
    end = time.monotonic() + cfg.max_time
    runs = []
    for i in range(n):
        now = time.monotonic()
        deadline = now + max(end - now, 0.0) / (n - i)
        rec, pid, counts = _run_worker(ctx, target, replace(job, deadline=deadline), f"worker {i + 1}/{n}")
        runs.append((rec, pid))
        job = replace(job, counts=job.counts or counts)  # the first worker's counts serve the rest
    return merge([r for r, _ in runs], [pid for _, pid in runs], cfg)


def _weighted(records: list[Record], key: str) -> float | None:
    """Mean of a per-process reading, weighted by each process's timed seconds."""
    pairs = [(r.conditions.get(key), r.conditions.get("timed_wall_s") or 0.0) for r in records]
    known = [(v, w) for v, w in pairs if v is not None]
    total = sum(w for _, w in known)
    return sum(v * w for v, w in known) / total if known and total > 0 else None


def merge(records: list[Record], pids: list[int], cfg: RunConfig) -> Record:
    """One record from the workers' records: every sample pooled (in process order), each
    process's samples and conditions kept, the median and CI from the process medians."""
    n, first = len(records), records[0]
    # A process's unit is the median it reports (that of its builds' medians, with several builds).
    spread = stats.process_spread([r.samples_s for r in records], cfg.confidence, medians=[r.median_s for r in records])
    # A process's median is computed from its samples and builds (Record.process_medians), not kept.
    procs = [
        {
            "pid": pid,
            "samples_s": list(r.samples_s),
            "block_size": r.block_size,
            "converged": r.converged,
            "warmup_settled": r.warmup.get("settled"),
            "first_call_s": r.warmup.get("first_call_s"),
            "conditions": r.conditions,
            "warnings": list(r.warnings),
        }
        for r, pid in zip(records, pids)
    ]
    # CPUs and threads as the workers had them; steal and other load over all their timed regions.
    conditions = {
        **first.conditions,
        "processes": n,
        **{
            key: _weighted(records, key)
            for key in ("steal_fraction", "others_cpus", "busy_fraction", "minor_faults_per_step")
        },
        "timed_wall_s": sum(r.conditions.get("timed_wall_s") or 0.0 for r in records),
        "load_avg": records[-1].conditions.get("load_avg"),
        # Joules and steps summed over the processes (perfsuite.measuring.energy.pooled).
        "energy": energy.pooled([r.conditions["energy"] for r in records if r.conditions.get("energy")]),
        "between_share": spread.between_share,
        "between_cv": spread.between_cv,
        "within_cv": spread.within_cv,
        "ci_method": spread.ci_method,
    }
    # Every process's builds, tagged with the process they ran in (a process measured in one build
    # counts as one); `samples_s` pooled in process order is then their samples pooled in order.
    builds = [
        {**b, "process": i} for i, r in enumerate(records) for b in (r.builds or [{"samples_s": list(r.samples_s)}])
    ]
    conditions["builds"] = len(builds)
    conditions.pop("reference", None)  # each process keeps its own; the run's is their median
    refs: list[Any] = [r.conditions.get("reference") for r in records]  # all(refs): none is None
    if all(refs) and len({ref["kernel"] for ref in refs}) == 1:
        conditions["reference"] = {
            "kernel": refs[0]["kernel"],
            "median_s": stats.median([ref["median_s"] for ref in refs]),
        }
    warnings = conditions_warnings(conditions) if first.conditions else []
    hw = spread.rel_ci_halfwidth
    converged = hw <= cfg.target_rel_ci
    if not converged:
        warnings.append(
            f"did not converge: the {cfg.confidence:.0%} CI from {n} process medians is +-{hw:.2%} "
            f"(target +-{cfg.target_rel_ci:.2%}); " + processes_advice(spread, cfg, n)
        )
    if spread.between_share > BETWEEN_WARN_SHARE and spread.between_cv > cfg.target_rel_ci:
        warnings.append(
            f"between processes: {spread.between_share:.0%} of a process median's variance "
            f"(CV {spread.between_cv:.1%}); more processes narrow the CI, longer ones do not"
        )
    # Each process's own convergence and load warnings are superseded by the merged ones above.
    superseded = ("did not converge", "hypervisor steal", "other processes kept")
    by_text: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        for w in r.warnings:
            if not w.startswith(superseded):
                by_text.setdefault(w, []).append(i + 1)
    for w, which in by_text.items():  # one line for what several processes said alike
        who = f"process {which[0]}/{n}" if len(which) == 1 else f"processes {','.join(map(str, which))} of {n}"
        warnings.append(f"{who}: {w}")
    # One code on one machine dispatches the same operators in every process; where they differ the
    # step's work depends on something else (which batch came last, a data-dependent branch).
    digests = {r.signature["digest"] for r in records if r.signature}
    if len(digests) > 1:
        warnings.append(
            f"the work signature differs between processes ({len(digests)} distinct): the step's "
            "operators depend on more than its code; the record keeps the first process's"
        )
    memory: dict = {}
    for r in records:  # the largest peak of any process
        for k, v in r.memory.items():
            memory[k] = (
                max(memory[k], v)
                if isinstance(v, (int, float)) and isinstance(memory.get(k), (int, float))
                else memory.get(k, v)
            )
    overheads = [r.config["clock_overhead_s"] for r in records if r.config.get("clock_overhead_s") is not None]
    config = {
        **cfg.to_dict(),
        "clock_overhead_s": stats.median(overheads) if overheads else None,
        "rel_ci_halfwidth": hw,
        "measure_s": sum(r.config.get("measure_s") or 0.0 for r in records),
    }
    return Record(
        workload=first.workload,
        params=first.params,
        device=first.device,
        timing_method=first.timing_method,
        block_size=first.block_size,
        samples_s=tuple(s for r in records for s in r.samples_s),
        work=first.work,
        warmup=first.warmup,
        memory=memory,
        nvml=pooled_nvml([r.nvml for r in records]),
        env=first.env,
        peak=first.peak,
        config=config,
        converged=converged,
        warnings=tuple(warnings),
        extra=first.extra,
        conditions=conditions,
        processes=tuple(procs),
        builds=tuple(builds) if len(builds) > len(records) else None,
        signature=next((r.signature for r in records if r.signature), None),
    )


def describe(record: Record) -> str | None:
    """One console line on a worker record's spread: how much of it is between processes."""
    s = record.spread
    if s is None:
        return None
    return (
        f"{record.label()}: {len(s.medians)} processes, medians {fmt_seconds(min(s.medians))} to "
        f"{fmt_seconds(max(s.medians))}; {s.between_share:.0%} of a process median's variance is between "
        f"processes (CV {s.between_cv:.1%} between, {s.within_cv:.1%} within); "
        f"median {fmt_seconds(s.median)}, {s.confidence:.0%} CI {fmt_seconds(s.ci_low)} to "
        f"{fmt_seconds(s.ci_high)} ({s.ci_method})"
    )
