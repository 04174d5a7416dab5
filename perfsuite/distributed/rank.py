"""What every rank runs: `python -m perfsuite.distributed JOBDIR`, started by torchrun.

JOBDIR/job.json says what to run (launch.py writes it). Each rank:
1. joins the process group from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...):
   the case's backend for the step (gloo on CPU; NCCL on CUDA, on cuda:N+LOCAL_RANK for a case
   on cuda:N: rank_device), and a gloo group for the timing's own barriers and readings;
2. measures the case with the normal runner (runner.time_case): the workload builds its step on
   this rank (ddp: the model in DistributedDataParallel; allreduce: one collective), and the
   clock (RankClock) starts every timed block at a barrier and hands every rank the slowest
   rank's reading, so that warm-up, block size and stopping are decided identically on every
   rank (a rank that stopped early would leave the others waiting in a collective);
3. gathers each rank's own block times to rank 0, which writes JOBDIR/result.json: the one
   record of the case.

Each rank keeps JOBDIR/rank-R.json up to date: its pid, host, and the stage it reached
(init, build, measure, gather, done), or `failed` with its error; the launcher reads them to say
why a case failed or hung.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import Unsupported
from perfsuite.distributed.ddp_model import checked_module, wrap
from perfsuite.measuring import runner
from perfsuite.measuring.runner import conditions_warnings
from perfsuite.stats import summary as stats
from perfsuite.storage.write import write_text
from perfsuite.training.setup import training_setup

STAGES = ("init", "build", "measure", "profile", "gather", "done")


# ---- the rank's world --------------------------------------------------------------------------


@dataclass
class RankContext:
    """This rank's place in the world, and the groups a case uses."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node: int
    nnodes: int
    backend: str
    device: str
    group: Any = None  # the step's collectives (None: the default group)
    ctrl: Any = None  # gloo: barriers and clock readings
    owned: bool = True  # init_process_group was ours (else: groups made in an attached world)
    # Set by a workload's builder: the step with its phases marked, profiled once after measuring
    # (ddp: the communication share). None: nothing to profile.
    profile_step: Callable[[Callable], Callable[[], object]] | None = None
    info: dict = field(default_factory=dict)  # what the builder wants in the record (e.g. DDP buckets)


_CURRENT: RankContext | None = None


def current() -> RankContext:
    """The rank a distributed workload's step is being built on."""
    if _CURRENT is None:
        raise Unsupported(
            "a distributed case runs in ranks started by perfsuite's launcher "
            "(perfsuite run, a suite, asv's track classes), not in this process"
        )
    return _CURRENT


def world_from_env() -> dict | None:
    """torchrun's description of this process's world, or None outside torchrun."""
    env = os.environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    world = int(env["WORLD_SIZE"])
    local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    return {
        "rank": int(env["RANK"]),
        "world_size": world,
        "local_rank": int(env.get("LOCAL_RANK", 0)),
        "local_world_size": local_world,
        "node": int(env.get("GROUP_RANK", 0)),
        "nnodes": int(env.get("GROUP_WORLD_SIZE", max(1, world // max(local_world, 1)))),
    }


def rank_device(device: str, local_rank: int) -> str:
    """The device a rank runs on: on CUDA the ranks of a node take consecutive GPUs from the
    case's (`cuda:2` with two ranks per node: cuda:2 and cuda:3); on the CPU they share it."""
    if not device.startswith("cuda"):
        return device
    base = device.partition(":")[2]
    return f"cuda:{int(base or 0) + local_rank}"


def open_context(job: dict, attached: bool = False) -> RankContext:
    """Join the world (or, attached, make the case's groups in the world perfsuite already joined)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    w = world_from_env()
    if w is None:
        raise RuntimeError("not started by torchrun: RANK and WORLD_SIZE are not set")
    backend, device = job["backend"], rank_device(job["device"], w["local_rank"])
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    timeout = timedelta(seconds=float(job["timeout_s"]))
    group: Any  # ProcessGroups (group None: the default group)
    ctrl: Any
    if attached:
        group = dist.new_group(backend=backend, timeout=timeout)
        ctrl = dist.new_group(backend="gloo", timeout=timeout)
    else:
        kwargs: dict[str, Any] = {"device_id": torch.device(device)} if backend == "nccl" else {}
        dist.init_process_group(backend, timeout=timeout, **kwargs)
        group = None
        ctrl = None if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    ctx = RankContext(backend=backend, device=device, group=group, ctrl=ctrl, owned=not attached, **w)
    want = job["params"]
    if want.get("world_size") not in (None, ctx.world_size) or want.get("nnodes") not in (None, ctx.nnodes):
        raise RuntimeError(
            f"the case asks for world_size={want.get('world_size')}, nnodes={want.get('nnodes')}; "
            f"torchrun started {ctx.world_size} ranks on {ctx.nnodes} node(s)"
        )
    return ctx


def close_context(ctx: RankContext) -> None:
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if ctx.owned:
        dist.destroy_process_group()
    else:
        for g in (ctx.group, ctx.ctrl):
            if g is not None:
                dist.destroy_process_group(g)


# ---- the clock -------------------------------------------------------------------------------------


class RankClock:
    """The device's clock, with every rank in step.

    `time_block`: a barrier (untimed), this rank's block on the device clock, then the readings'
    maximum over the ranks (untimed): the block lasted as long as its slowest rank. `now`: rank
    0's clock. Every rank sees the same readings, so the runner's algorithm (warm-up, block size,
    when to stop) takes the same path on every rank. Each rank's own reading is kept in
    `readings` (block size, seconds).
    """

    def __init__(self, inner, group=None, on_first: Callable[[], None] | None = None) -> None:
        import torch

        self.inner, self.group, self.on_first = inner, group, on_first
        self.method = inner.method
        self.readings: list[tuple[int, float]] = []
        self._buf = torch.zeros(1, dtype=torch.float64)

    def time_block(self, fn, n: int) -> float:
        import torch.distributed as dist

        if self.on_first is not None:  # the step is built: this rank is measuring
            self.on_first()
            self.on_first = None
        dist.barrier(group=self.group)
        t = self.inner.time_block(fn, n)
        self.readings.append((n, t))
        self._buf[0] = t
        dist.all_reduce(self._buf, op=dist.ReduceOp.MAX, group=self.group)
        return float(self._buf[0])

    def now(self) -> float:
        import torch.distributed as dist

        self._buf[0] = time.perf_counter()
        dist.broadcast(self._buf, src=0, group=self.group)
        return float(self._buf[0])


# ---- status files --------------------------------------------------------------------------------


class Status:
    """JOBDIR/rank-R.json: where this rank is; written whole and renamed, so never half-read."""

    def __init__(self, jobdir: Path | None, rank: int) -> None:
        self.path = None if jobdir is None else Path(jobdir) / f"rank-{rank}.json"
        self.state = {
            "rank": rank,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "stage": "init",
            "since": time.time(),
        }
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return

        write_text(self.path, json.dumps(self.state))

    def stage(self, name: str) -> None:
        self.state.update(stage=name, since=time.time())
        self._write()

    def failed(self, exc: BaseException) -> None:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else None
        text = f"{type(exc).__name__}: {exc}".strip()
        self.state.update(
            failed_in=self.state["stage"],
            stage="failed",
            since=time.time(),
            error=text.splitlines()[0][:500] if text else type(exc).__name__,
            where=where,
            oom=type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower(),
        )
        self._write()


# ---- a case ----------------------------------------------------------------------------------------


def load_workload(spec: str):
    """A registered workload by name, or `module:attribute` (tests' own workloads)."""
    if ":" in spec:
        import importlib

        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)

    return registry.get(spec)


def scaled_peak(peak: dict | None, devices: int) -> dict | None:
    """The stored one-device roofs times the devices the ranks run on (GPUs: one per rank;
    CPUs: one machine per node, shared by its ranks)."""
    if not peak or devices == 1:
        return peak
    flops = {k: v * devices for k, v in (peak.get("flops_per_s") or {}).items() if v}
    bw = peak.get("bytes_per_s")
    return {**peak, "flops_per_s": flops, "bytes_per_s": bw * devices if bw else bw}


def _rank_cfg(job: dict, ctx: RankContext):

    cfg = dict(job["cfg"])
    cpus = cfg.get("cpus")
    if cpus:  # the CPUs given are shared out among this node's ranks
        mine = cpus[ctx.local_rank :: ctx.local_world_size] or [cpus[ctx.local_rank % len(cpus)]]
        cfg["cpus"] = tuple(mine)
    if not ctx.device.startswith("cuda") and cfg.get("threads") is None:
        cfg["threads"] = 1  # one core per CPU rank, as torchrun's OMP_NUM_THREADS=1: see README "Distributed"
    cfg.update(device=ctx.device, processes=1)
    return RunConfig(**cfg)


def measure_case(job: dict, ctx: RankContext, status: Status) -> dict | None:
    """Every rank measures; rank 0 returns the case's record as a dict, the others None."""
    import torch.distributed as dist

    from perfsuite.measuring.timing import clock_for

    global _CURRENT
    workload = load_workload(job["workload"])
    # No held heap on a rank: settling calls the step until this rank's own faults stop, and a
    # rank that calls a collective step a different number of times than its peers would hang.
    # No machine-speed reference either: its blocks would go through RankClock (a barrier and an
    # all-reduce each) and interleave with the step's readings, which gather matches to the
    # record's timed blocks. A distributed record is compared in seconds.
    cfg = replace(_rank_cfg(job, ctx), heap="default", reference=False)
    clock = RankClock(clock_for(ctx.device, cfg.timing), ctx.ctrl, on_first=lambda: status.stage("measure"))
    comm: dict = {}

    def after(built) -> None:  # every rank: one profiled step, after measuring
        if ctx.profile_step is not None:
            from perfsuite.distributed.comm import profile_comm

            status.stage("profile")
            comm.update(profile_comm(ctx.profile_step, ctx, job.get("trace_dir"), job.get("label", "case")))

    devices = ctx.world_size if ctx.device.startswith("cuda") else ctx.nnodes
    _CURRENT = ctx  # the workload's builder finds its rank here (runner.time_case builds the step)
    try:
        rec = runner.time_case(
            workload,
            job["params"],
            cfg,
            env=job.get("env"),
            peak=scaled_peak(job.get("peak"), devices),
            clock=clock,
            after=after,
        )
    finally:
        _CURRENT = None
    status.stage("gather")
    k, n = len(rec.samples_s), rec.block_size
    timed = clock.readings[-k:]
    if len(timed) != k or any(b != n for b, _ in timed):
        raise RuntimeError("the clock's readings do not match the record's timed blocks")
    own = [t / n for _, t in timed]

    mine = {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "node": ctx.node,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "device": ctx.device,
        "median_s": stats.median(own),
        "samples_s": own,
        "torch_threads": rec.conditions.get("torch_threads"),
        "cpus": rec.conditions.get("cpus"),
        "others_cpus": rec.conditions.get("others_cpus"),
        "busy_fraction": rec.conditions.get("busy_fraction"),
        "host_peak_rss_bytes": rec.memory.get("host_peak_rss_bytes"),
        "cuda_max_allocated_bytes": rec.memory.get("cuda_max_allocated_bytes"),
        "comm": comm or None,
        "warnings": list(rec.warnings),
    }
    gathered: list | None = [None] * ctx.world_size if ctx.rank == 0 else None
    dist.gather_object(mine, gathered, dst=0, group=ctx.ctrl)
    if ctx.rank != 0 or gathered is None:  # (rank 0 gathers)
        return None
    return assemble(rec, gathered, ctx, devices).to_dict()


def _outside_load(ranks: list[dict], node: int, cpus: int | None = None) -> dict:
    """CPUs kept busy by processes other than the case's ranks on `node`, from each rank's
    readings: machine busy (busy_fraction x CPUs) less its own use is what it saw as others."""
    here = [
        r
        for r in ranks
        if r["node"] == node and r.get("others_cpus") is not None and r.get("busy_fraction") is not None
    ]
    if not here:
        return {}
    cpus = cpus or os.cpu_count() or 1
    own = [max(0.0, r["busy_fraction"] * cpus - r["others_cpus"]) for r in here]
    first = here[0]
    return {"others_cpus": max(0.0, first["others_cpus"] - sum(own[1:])), "ranks_cpus": sum(own)}


def assemble(rec, ranks: list[dict], ctx: RankContext, devices: int = 1):
    """Rank 0's record of the case, from its own record (readings agreed over the ranks) and
    every rank's own samples: the slowest rank's samples are the case's, each rank's median and
    samples are in `extra`, global throughput follows from `work` (every rank's items)."""
    ranks = sorted(ranks, key=lambda r: r["rank"])
    slowest = max(ranks, key=lambda r: r["median_s"])
    medians = [r["median_s"] for r in ranks]
    extra = dict(rec.extra)
    extra.update(
        {
            "world_size": ctx.world_size,
            "nnodes": ctx.nnodes,
            "backend": ctx.backend,
            "launch": "attached" if not ctx.owned else "torchrun",
            "rank_medians_s": medians,
            "slowest_rank": slowest["rank"],
            "rank_spread": max(medians) / min(medians) - 1.0,
            # The per-block maximum over ranks (what the runner's decisions saw).
            "block_max_median_s": stats.median(rec.samples_s),
            "ranks": [{k: v for k, v in r.items() if k not in ("warnings", "comm")} for r in ranks],
        }
    )
    median = slowest["median_s"]
    extra["global_throughput"] = rec.work.items_per_step / median
    if "bus_factor" in extra and "bytes" in extra:  # a collective: nccl-tests' algorithm and bus bandwidth
        extra["algbw_Bps"] = extra["bytes"] / median
        extra["busbw_Bps"] = extra["algbw_Bps"] * extra["bus_factor"]
    comms = [r.get("comm") for r in ranks]
    if comms[0]:
        extra["comm"] = {**comms[0], "rank_comm_shares": [c.get("comm_share") if c else None for c in comms]}
    # Each rank's CPU reading counts its sibling ranks as "other processes": the load outside the
    # case is rank 0's reading less what its node's other ranks used themselves.

    outside = _outside_load(ranks, ranks[0]["node"])
    load = ("other processes kept", "hypervisor steal")  # said again below, for the case
    warnings = [w for w in rec.warnings if not w.startswith(load)]
    for r in ranks[1:]:
        warnings += [
            f"rank {r['rank']}: {w}" for w in r["warnings"] if w not in rec.warnings and not w.startswith(load)
        ]
    cpus = rec.conditions.get("cpus") or []
    used = ctx.local_world_size * (rec.conditions.get("torch_threads") or 1)
    if (
        not ctx.device.startswith("cuda")
        and cpus
        and used > len(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else cpus)
    ):
        warnings.append(
            f"oversubscribed: {ctx.local_world_size} ranks x {rec.conditions.get('torch_threads')} "
            f"threads on {len(os.sched_getaffinity(0))} CPUs of this node"
        )
    if extra["rank_spread"] > 0.10:
        warnings.append(f"ranks differ: the slowest rank's median is {extra['rank_spread']:.0%} above the fastest's")
    peak = rec.peak
    if peak and devices > 1:
        peak = {**peak, "why": f"{peak.get('why')}; x{devices} devices"}
    conditions = {
        **rec.conditions,
        "world_size": ctx.world_size,
        "nnodes": ctx.nnodes,
        "ranks_per_node": ctx.local_world_size,
        **outside,
    }
    warnings += conditions_warnings(conditions)
    return replace(
        rec,
        samples_s=tuple(slowest["samples_s"]),
        extra=extra,
        warnings=tuple(warnings),
        conditions=conditions,
        peak=peak,
    )


# ---- correctness: DDP's gradients against one process on the whole batch -------------------------


def _worst(grads, ref_grads) -> tuple[float, float]:
    """Largest absolute difference, and largest relative to each tensor's largest reference value."""
    worst_abs = worst_rel = 0.0
    for g, r in zip(grads, ref_grads):
        diff = (g - r).abs().max().item()
        scale = r.abs().max().item()
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / scale if scale > 0 else diff)
    return worst_abs, worst_rel


def gradient_check(job: dict, ctx: RankContext) -> list[dict] | None:
    """For each model of job["checks"]: each rank takes one DDP backward on its own batch (batch
    `rank` of the training set-up); rank 0 also takes one plain backward on all ranks' batches
    concatenated, from the same initial weights, and compares the gradients. DDP averages the
    ranks' gradients, which for a mean loss over equal batches is the gradient of the whole
    batch. BatchNorm normalises with each rank's own batch statistics in training mode, so a
    model with it is checked with them frozen (eval, where its workload's `ddp=` asks for it):
    the check is of DDP's reduction, not of BatchNorm."""
    import torch
    import torch.distributed as dist

    seed = job["cfg"].get("seed", 0)
    out = []
    for check in job["checks"]:
        model, sub = check["model"], check["sub_params"]
        setup = training_setup(model, sub, ctx.device, seed=seed)
        module = checked_module(model, setup)
        ddp = wrap(module, ctx)
        x, y = setup.batch(ctx.rank)
        with setup.parts.precision.autocast():
            loss = setup.parts.loss_fn(ddp(x), y)
        loss.backward()
        grads = [q.grad.detach().clone() for q in module.parameters()]
        dist.barrier(group=ctx.ctrl)
        if ctx.rank != 0:
            continue
        ref_setup = training_setup(model, sub, ctx.device, seed=seed)
        ref = checked_module(model, ref_setup)
        xs, ys = zip(*(ref_setup.batch(r) for r in range(ctx.world_size)))
        with ref_setup.parts.precision.autocast():
            ref_loss = ref_setup.parts.loss_fn(ref(torch.cat(xs)), torch.cat(ys))
        ref_loss.backward()
        ref_grads = [q.grad for q in ref.parameters()]
        # The check's own sensitivity: rank 0's gradient without DDP's reduction, against the same reference.
        solo_setup = training_setup(model, sub, ctx.device, seed=seed)
        solo = checked_module(model, solo_setup)
        with solo_setup.parts.precision.autocast():
            solo_setup.parts.loss_fn(solo(x), y).backward()
        worst_abs, worst_rel = _worst(grads, ref_grads)
        _, unreduced_rel = _worst([q.grad for q in solo.parameters()], ref_grads)
        out.append(
            {
                "model": model,
                "max_abs_diff": worst_abs,
                "max_rel_diff": worst_rel,
                "unreduced_max_rel_diff": unreduced_rel,
                "tensors": len(grads),
                "world_size": ctx.world_size,
                "loss_rank0": float(loss.detach()),
                "loss_all": float(ref_loss),
            }
        )
    return out if ctx.rank == 0 else None


# ---- the program -----------------------------------------------------------------------------------


def run_job(job: dict, status: Status, attached: bool = False) -> dict | list[dict] | None:
    status.stage("init")
    ctx = open_context(job, attached=attached)
    try:
        status.stage("build")
        if job["kind"] == "case":
            return measure_case(job, ctx, status)
        if job["kind"] == "gradcheck":
            return gradient_check(job, ctx)
        raise ValueError(f"unknown job kind {job['kind']!r}")
    except BaseException as exc:
        # Written before the process group is torn down: closing it drops this rank's sockets, and a
        # peer waiting in a collective then fails too; its status must not predate the cause's.
        status.failed(exc)
        raise
    finally:
        close_context(ctx)


def write_result(jobdir: Path, result: dict) -> None:
    write_text(Path(jobdir) / "result.json", json.dumps(result, allow_nan=False))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: torchrun ... -m perfsuite.distributed JOBDIR", file=sys.stderr)
        return 2
    jobdir = Path(argv[0])
    job = json.loads((jobdir / "job.json").read_text())
    w = world_from_env()
    status = Status(jobdir, w["rank"] if w else 0)
    try:
        result = run_job(job, status)
        if w and w["rank"] == 0:
            write_result(jobdir, {"kind": job["kind"], "result": result})
        status.stage("done")
    except BaseException as exc:  # noqa: BLE001 - the launcher reads it; torchrun sees the exit code
        if status.state["stage"] != "failed":  # run_job already wrote a failure from inside the job
            status.failed(exc)
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":  # as a script, this module is __main__: run the imported one, whose state workloads see
    from perfsuite.distributed.rank import main as _main

    raise SystemExit(_main())
