"""Starting a distributed case's ranks, and turning what they leave behind into a record or a failure.

`run_distributed` is the launcher of the distributed workloads (Workload.launcher): execute.
run_cases calls it for a `ddp` or `allreduce` case. It writes the case into a job folder and
starts the ranks with torchrun (`python -m torch.distributed.run --standalone --nnodes 1
--nproc-per-node N -m perfsuite.distributed JOBDIR`) in a session of their own, and waits
at most `timeout_s`. Then:
- rank 0 wrote result.json: the record comes back (with scaling efficiency against a
  world_size=1 case measured earlier in the same run);
- a rank failed: DistributedFailure naming the first rank that failed, the stage it was in and
  its error (the others usually fail after it, of a closed connection);
- the time ran out: the whole session (torchrun and every rank) is terminated, then killed, and
  DistributedFailure says which ranks had not finished and where each was.
execute.run_cases records a DistributedFailure like any failed case, and goes on.

nnodes > 1 cannot be started from one process: those cases run when perfsuite itself was
started by torchrun on that many nodes (attach.py; README "Distributed"); elsewhere they are
skipped with that reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.core.record import Record
from perfsuite.distributed import ddp_model
from perfsuite.distributed.attach import attached_world, run_on_world
from perfsuite.distributed.launch_error import DistributedFailure
from perfsuite.storage import write

RANK_MODULE = "perfsuite.distributed"  # __main__.py: rank.main
# Starting the ranks (torchrun, then torch in every rank) and building the step come before the
# budget: on a loaded 2-core machine that alone is 10-20 s.
START_ALLOWANCE_S = 120.0
GRACE_S = 5.0  # between SIGTERM and SIGKILL of a timed-out launch
# torchrun's variables: a launch from inside a torchrun world must not inherit the outer world.
TORCHRUN_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "OMP_NUM_THREADS",
)


def backend_for(params: Mapping[str, Any], device: str) -> str:
    backend = params.get("backend", "auto")
    if backend == "auto":
        return "nccl" if device.startswith("cuda") else "gloo"
    return backend


def default_timeout(cfg) -> float:
    """How long a case's ranks may take in all: start-up and build, then the budget (a first call
    and a profiled step can each exceed it), with room to spare."""
    return START_ALLOWANCE_S + 3.0 * cfg.max_time


def check_world(params: Mapping[str, Any], device: str) -> None:
    """Bad worlds are bad input; worlds this machine or launch cannot give are skipped with the reason."""
    w, nnodes = params["world_size"], params["nnodes"]
    if w % nnodes:
        raise ConfigError(f"parameter 'world_size': {w} ranks do not divide over nnodes={nnodes} nodes")
    backend = backend_for(params, device)
    if backend == "nccl" and not device.startswith("cuda"):
        raise Unsupported(f"backend nccl needs CUDA; device is {device} (backend=auto takes gloo on CPU)")
    per_node = w // nnodes
    if device.startswith("cuda"):
        import torch

        from perfsuite.distributed.rank import rank_device

        have = torch.cuda.device_count()
        # The ranks take consecutive GPUs from the case's device (rank_device): cuda:N needs N + per_node.
        first, last = rank_device(device, 0), rank_device(device, per_node - 1)
        if int(last.split(":")[1]) >= have:
            raise Unsupported(
                f"{per_node} ranks per node on {device} need {per_node} GPUs, {first} to {last}; this node has {have}"
            )

    world = attached_world()
    if nnodes > 1 and (world is None or (world["world_size"], world["nnodes"]) != (w, nnodes)):
        where = (
            "this perfsuite was not started by torchrun"
            if world is None
            else f"this perfsuite runs in a torchrun world of {world['world_size']} ranks on {world['nnodes']} node(s)"
        )
        raise Unsupported(
            f"nnodes={nnodes} needs a launch on every node ({where}): run the suite with "
            f"`torchrun --nnodes {nnodes} --nproc-per-node {per_node} --rdzv-backend c10d "
            "--rdzv-endpoint HOST:PORT -m perfsuite run --suite ...` on each (README, Distributed)"
        )


def make_job(
    workload,
    params: dict,
    cfg,
    device: str,
    *,
    env=None,
    peak=None,
    trace_dir=None,
    kind: str = "case",
    timeout_s: float | None = None,
    spec: str | None = None,
    label: str = "",
) -> dict:
    return job_for(
        kind,
        spec or workload.name,
        workload.resolve(params),
        cfg,
        device,
        env=env,
        peak=peak,
        trace_dir=trace_dir,
        timeout_s=timeout_s,
        label=label or workload.name,
    )


def job_for(
    kind: str,
    name: str,
    resolved: dict,
    cfg,
    device: str,
    *,
    env=None,
    peak=None,
    trace_dir=None,
    timeout_s: float | None = None,
    label: str = "",
) -> dict:
    """What the ranks read from job.json: `kind` "case" (measure workload `name` at `resolved`, a
    registered name or module:attribute) or "gradcheck" (rank.gradient_check)."""
    return {
        "kind": kind,
        "workload": name,
        "params": resolved,
        "cfg": {**cfg.to_dict(), "device": device},
        "device": device,
        "backend": backend_for(resolved, device),
        "env": env,
        "peak": peak,
        "trace_dir": str(trace_dir) if trace_dir else None,
        "timeout_s": float(timeout_s or default_timeout(cfg)),
        "label": label or name,
    }


def torchrun_command(nproc: int, jobdir: Path, module: str = RANK_MODULE) -> list[str]:
    """One node's launch: torchrun's own rendezvous on a free local port (--standalone)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--max-restarts",
        "0",
        "-m",
        module,
        str(jobdir),
    ]


def clean_env() -> dict:
    """This process's environment without an outer torchrun world's variables."""
    return {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}


def read_status(jobdir: Path) -> list[dict]:
    out = []
    for p in sorted(Path(jobdir).glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            pass
    return out


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    keep = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("*", "USDT:"))]
    return " | ".join(keep[-lines:])[-800:]


# What a rank's collective raises when another rank went away: an echo of the cause, never the cause.
PEER_LOSS_MARKERS = (
    "closed by peer",
    "reset by peer",
    "connection refused",
    "broken pipe",
    "ncclremoteerror",
    "remote process exited",
)


def _lost_a_peer(error: str) -> bool:
    text = error.lower()
    return any(m in text for m in PEER_LOSS_MARKERS)


def failure_reason(
    statuses: list[dict],
    nproc: int,
    *,
    timed_out: float | None = None,
    exit_code: int | None = None,
    log: Path | None = None,
) -> str:
    """What went wrong, from the ranks' status files: the first rank that failed and its error, or
    (timed out) which ranks had not finished and the stage each was in."""
    now = time.time()
    by_rank = {s["rank"]: s for s in statuses}
    failed = sorted(
        (s for s in statuses if s.get("stage") == "failed"),
        key=lambda s: (_lost_a_peer(s.get("error", "")), s.get("since", 0)),
    )
    if timed_out is not None:
        waiting = [
            f"rank {r} in {by_rank[r]['stage']} for {now - by_rank[r]['since']:.0f}s"
            if r in by_rank
            else f"rank {r} never started"
            for r in range(nproc)
            if by_rank.get(r, {}).get("stage") != "done"
        ]
        text = f"timed out after {timed_out:.0f}s: " + ", ".join(waiting)
        if failed:
            text += f"; first failure: rank {failed[0]['rank']} in {failed[0].get('failed_in')}: {failed[0]['error']}"
        return text
    if failed:
        f = failed[0]
        where = f" (at {f['where']})" if f.get("where") else ""
        others = [str(s["rank"]) for s in failed[1:]]
        also = f"; then rank(s) {', '.join(others)} failed too" if others else ""
        return f"rank {f['rank']} failed in {f.get('failed_in')}: {f['error']}{where}{also}"
    gone = [
        f"rank {r} (pid {by_rank[r]['pid']}) in {by_rank[r]['stage']}" if r in by_rank else f"rank {r}"
        for r in range(nproc)
        if by_rank.get(r, {}).get("stage") != "done"
    ]
    tail = _tail(log) if log is not None else ""
    return f"torchrun exited with code {exit_code}; not finished: {', '.join(gone) or 'none'}" + (
        f"; log: {tail}" if tail else ""
    )


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the launch's session (torchrun and its ranks), then kill what is left."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # torchrun has gone; ranks it left behind in the session go with SIGKILL below.
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def launch_local(
    job: dict, nproc: int, *, timeout_s: float | None = None, module: str = RANK_MODULE, keep: Path | None = None
) -> Any:
    """Start `nproc` ranks of `job` on this machine and wait for rank 0's result (its payload);
    DistributedFailure with the reason otherwise. `keep`: the job folder to use (kept after)."""
    timeout_s = float(timeout_s or job["timeout_s"])
    with tempfile.TemporaryDirectory(prefix="perfsuite-ddp-") as tmp:
        jobdir = Path(keep or tmp)
        write.make_dir(jobdir, "job folder")
        write.write_text(jobdir / "job.json", json.dumps(job, allow_nan=False))
        log = jobdir / "torchrun.log"
        with write.new_file(log) as out:
            proc = subprocess.Popen(
                torchrun_command(nproc, jobdir, module),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=clean_env(),
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop(proc)
                raise DistributedFailure(failure_reason(read_status(jobdir), nproc, timed_out=timeout_s)) from None
            except BaseException:  # Ctrl-C: no rank left measuring behind us
                _stop(proc)
                raise
        result = jobdir / "result.json"
        if code != 0 or not result.exists():
            raise DistributedFailure(failure_reason(read_status(jobdir), nproc, exit_code=code, log=log))
        return json.loads(result.read_text())["result"]


def scaling(rec, measured) -> dict | None:
    """Scaling efficiency against the world_size=1 case of the same parameters measured earlier
    in this run: throughput / (world_size x the one rank's throughput)."""
    w = rec.extra.get("world_size")
    if not w or w == 1:
        return None
    same = {k: v for k, v in rec.params.items() if k not in ("world_size", "nnodes")}
    for base in reversed(measured):
        if (
            base.workload == rec.workload
            and base.device == rec.device
            and base.extra.get("world_size") == 1
            and {k: v for k, v in base.params.items() if k not in ("world_size", "nnodes")} == same
        ):
            speedup = rec.throughput / base.throughput
            return {
                "baseline_id": base.id,
                "baseline_median_s": base.median_s,
                "baseline_throughput": base.throughput,
                "speedup": speedup,
                "efficiency": speedup / w,
            }
    return None


def run_distributed(
    workload,
    params: dict,
    cfg,
    *,
    env=None,
    peak=None,
    measured=(),
    trace_dir=None,
    clock=None,
    timeout_s: float | None = None,
    spec: str | None = None,
    module: str = RANK_MODULE,
):
    """The launcher of a distributed workload (Workload.launcher): one record of the case."""
    from perfsuite.core.config import resolve_device

    if (cfg.processes or 1) > 1:  # asked for; None (automatic workers) does not apply to ranks
        raise ConfigError(f"{workload.name}: --processes {cfg.processes} does not apply: its ranks are its processes")
    if clock is not None:
        raise ConfigError(f"{workload.name}: a distributed case is timed by its ranks' own clocks")
    device = resolve_device(cfg.device)
    resolved = workload.resolve(params)
    label = f"{workload.name}[{','.join(f'{k}={v}' for k, v in resolved.items())}]"
    job = make_job(
        workload,
        params,
        cfg,
        device,
        env=env,
        peak=peak,
        trace_dir=trace_dir,
        timeout_s=timeout_s,
        spec=spec,
        label=label,
    )
    world = attached_world()
    if world is not None and (world["world_size"], world["nnodes"]) == (resolved["world_size"], resolved["nnodes"]):
        payload = run_on_world(job)
    else:
        check_world(resolved, device)  # nnodes > 1 outside a matching world: skipped with how to run it
        payload = launch_local(job, resolved["world_size"], module=module)
    rec = Record.from_dict(payload)
    scale = scaling(rec, measured)
    if scale is not None:
        rec = replace(rec, extra={**rec.extra, "scaling": scale, "scaling_efficiency": scale["efficiency"]})
    return rec


def gradient_check(
    models=None, world_size: int = 2, *, device: str = "cpu", timeout_s: float = 180.0, backend: str = "auto", **params
) -> list[dict]:
    """DDP's gradients over `world_size` ranks against one process on the concatenated batch
    (rank.gradient_check), for each training workload in `models` (default: every one that offers
    a DDP model, ddp_model.models()) in one launch, at `params` (size, precision, batch_size,
    variant, as the ddp workload takes them): rank 0's findings, one dict per model (max_abs_diff,
    max_rel_diff, and unreduced_max_rel_diff: rank 0's own gradient's distance, what a missing
    reduction would look like)."""
    world = {"world_size": world_size, "nnodes": 1, "backend": backend}
    checks = []
    for m in models or ddp_model.models():
        sub = ddp_model.sub_params({**params, "model": m})
        registry.get(m).resolve(sub)  # bad values are named here, before any rank starts
        checks.append({"model": m, "sub_params": sub})
    job = job_for(
        "gradcheck",
        "gradcheck",
        world,
        RunConfig(device=device),
        device,
        timeout_s=timeout_s,
        label="DDP gradient check",
    )
    job["checks"] = checks
    return launch_local(job, world_size)
