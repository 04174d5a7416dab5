"""Instructions per step on the CPU, counted by Callgrind: a number the machine's mood does not move.

Time on a shared 2-core VM moves by 2-18% between processes; the instructions a step executes
move by far less (issue 56: rustc-perf gates on them). This VM exposes no hardware counters
(`perf` sees software events only), so the count is Callgrind's, which simulates the CPU and
works in any VM, at a 20-100x slowdown. `import torch` under Callgrind's instrumentation takes
minutes, so the child starts with instrumentation off (--instr-atstart=no), builds and warms the
step at Valgrind's plain speed, turns instrumentation on for itself (callgrind_control -i on), warms
the newly instrumented step, and collects only around the counted steps (torch's
CALLGRIND_TOGGLE_COLLECT, torch._C._valgrind_toggle). The build, the import and the warm-up are
never counted.

What it cannot see: time spent waiting (memory stalls, a slower BLAS kernel with as many
instructions, cache and layout effects, the clock's frequency), and a GPU's work (on CUDA the count
is the host's: launches and Python). Counts are the instructions Valgrind's simulated CPU executes,
which follow the code path of the machine's real CPU features as detected under Valgrind (oneDNN
may pick another kernel under Valgrind than natively: the count compares like with like, two
counts taken here, not a count with a time).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

METHOD = "callgrind"
MIN_VALGRIND = (3, 15)  # --instr-atstart and callgrind_control -i need no newer; older ones are refused
# Counted steps: their total over STEPS is the count per step. The count of one code is the same in
# every process (reports/work/: CV 0.000-0.002% over five), so a few steps say it; each instrumented
# call costs 20-100x the step's time (ResNet18 `ci` batch 8 ran past 7 minutes with 8 of them).
STEPS = 3
WARMUP = 3  # calls before instrumentation: lazy initialisation and the interpreter's specialisation
# Instrumented calls before collecting: Callgrind translates the code on its first instrumented
# call, which adds no guest instructions, so none is needed; kept as a constant the child reads.
INSTRUMENTED_WARMUP = 0
TIMEOUT_S = 900.0


def valgrind_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def unavailable(device: str) -> str | None:
    """Why instructions cannot be counted here (None: they can): what is missing, and how to get it."""
    if not device.startswith("cpu"):
        return f"instruction counts are taken for CPU steps; {device} is not one (its kernels run on the device)"
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
    """What this machine offers beyond Callgrind, said in the record: perfsuite counts with
    Callgrind either way (a PMU's count would differ from Callgrind's, and no machine here has one
    to test that road on)."""
    events = Path("/sys/bus/event_source/devices/cpu/events/instructions")
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        paranoid = None
    if not events.exists():
        return "no hardware counters exposed (no PMU: a VM without virtual counters)"
    return f"a PMU is exposed (perf_event_paranoid {paranoid}); perfsuite counts with Callgrind all the same"


def count(
    workload: str,
    params: dict[str, Any],
    device: str,
    load: Sequence[str] = (),
    steps: int = STEPS,
    timeout_s: float = TIMEOUT_S,
    files: Sequence[str] = (),
    code_root: str | None = None,
) -> dict[str, Any]:
    """The record's `instructions` block for `steps` calls of the case's step, counted in a child
    under Callgrind: {"status": "ok", "per_step", "total", "steps", "method", "seconds", ...}, or
    {"status": "unavailable" | "failed", "reason"}. Never raises for the step's or Valgrind's
    failure: the timing beside it stands. The child finds the workload by name after loading
    `load` (this process's workload files), or, given `files`, declared in them with the project's
    code imported from `code_root` (a revision's checkout, as a gate side builds it)."""
    why = unavailable(device)
    if why is not None:
        return {"status": "unavailable", "reason": why, "method": METHOD}
    t0 = time.monotonic()
    job = {"workload": workload, "params": params, "device": device, "load": list(load), "steps": steps}
    with tempfile.TemporaryDirectory(prefix="perfsuite-callgrind-") as tmp:
        try:
            total = _run_child({**job, "files": list(files), "root": code_root}, Path(tmp), timeout_s)
        except _CountFailed as exc:
            return {
                "status": "failed",
                "reason": str(exc)[:500],
                "method": METHOD,
                "seconds": round(time.monotonic() - t0, 1),
            }
    return {
        "status": "ok",
        "per_step": total / steps,
        "total": total,
        "steps": steps,
        "method": METHOD,
        "seconds": round(time.monotonic() - t0, 1),
        "hardware": hardware_counters(),
    }


class _CountFailed(Exception):
    """Why the child under Callgrind gave no count."""


def _run_child(job: dict[str, Any], tmp: Path, timeout_s: float) -> int:
    """The child under Callgrind, in the empty folder `tmp` (so `python -m` puts no project of the
    caller's on the path: a revision's code comes from its code root, as in a gate side); the
    instructions it collected."""
    spec, out = tmp / "job.json", tmp / "callgrind.out"
    spec.write_text(json.dumps(job))
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no"]
    cmd += [f"--callgrind-out-file={out}", sys.executable, "-m", "perfsuite.measuring.instructions_child", str(spec)]
    # str hashes seeded alike in every count: a set's or a dict's growth then takes one path
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=tmp)
    except subprocess.TimeoutExpired:
        raise _CountFailed(f"Callgrind did not finish in {timeout_s:.0f} s") from None
    said = _child_said(done.stdout)
    if done.returncode != 0 or said.get("status") != "ok":
        reason = said.get("reason") or (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise _CountFailed(f"the step under Callgrind failed (exit {done.returncode}): {reason}")
    total = read_total(out)
    if total is None:
        raise _CountFailed("Callgrind wrote no instruction total (was collection toggled?)")
    return total


def _child_said(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                got = json.loads(line)
            except ValueError:
                continue
            if isinstance(got, dict):
                return got
    return {}


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
