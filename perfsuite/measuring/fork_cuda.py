"""CUDA and the workers' fork server: a process forked after its parent touched CUDA cannot use
it ("Cannot re-initialize CUDA in forked subprocess"). The fork server must preload nothing that
touches CUDA; refuse_bad_fork says so clearly in a worker or side process when it did, and
preload_cuda_calls finds which import did (issue 40)."""

from __future__ import annotations

from perfsuite.core.errors import PerfsuiteError


class ForkedAfterCuda(PerfsuiteError):
    """This process was forked from a fork server that had touched CUDA: CUDA cannot work here."""


def refuse_bad_fork(device: str) -> None:
    """Raise ForkedAfterCuda when this process may not use CUDA because the process it was forked
    from had touched it, and `device` would need it ("auto" included: in a bad fork it would
    quietly become the CPU). A CPU case never needs CUDA and goes on."""
    import torch

    if device.strip().lower() == "cpu" or not torch.cuda._is_in_bad_fork():
        return
    raise ForkedAfterCuda(
        f"--device {device}: this worker process was forked from perfsuite's fork server after the server had "
        "initialised CUDA (or only asked torch.cuda.is_available()), and CUDA cannot be initialised again in a "
        "forked process (torch would fail with 'Cannot re-initialize CUDA in forked subprocess', or report no "
        "GPU). One of the modules the server preloads "
        "(perfsuite.measuring.workers.PRELOAD, or a module one of them imports) touched CUDA when imported, e.g. a "
        "module-level torch.cuda.is_available(); which one cannot be known from inside the worker. To find it: "
        "python -c 'from perfsuite.measuring.workers import PRELOAD; from perfsuite.measuring.fork_cuda import "
        "preload_cuda_calls; print(preload_cuda_calls(PRELOAD))' "
        "(each CUDA call made while importing them, with the module and line). Meanwhile --processes 1 "
        "measures in the calling process, without the fork server"
    )


# Run in a fresh interpreter by preload_cuda_calls: torch first (importing it touches no CUDA),
# then every CUDA entry point replaced by a recorder that answers as a machine without a GPU
# would, then the modules imported in order, as the fork server imports them.
_CUDA_PROBE = """
import json, os, sys, traceback
import torch

calls, importing, TORCH = [], [None], os.path.dirname(torch.__file__) + os.sep


def where():
    # The innermost frame outside torch (the line that called into it), else torch's own; never
    # this probe's nor importlib's frozen frames (named "<...>").
    frames = [f for f in reversed(traceback.extract_stack()[:-2]) if not f.filename.startswith("<")]
    f = next((f for f in frames if not f.filename.startswith(TORCH)), frames[0] if frames else None)
    return f and f"{f.filename}:{f.lineno}"


def recorder(name, answer):
    def call(*args, **kwargs):
        calls.append({"call": name, "importing": importing[0], "at": where()})
        return answer
    return call


torch.cuda._lazy_init = recorder("torch.cuda._lazy_init", None)
torch.cuda.is_available = recorder("torch.cuda.is_available", False)
torch.cuda.device_count = recorder("torch.cuda.device_count", 0)
for name, answer in (("_cuda_getDeviceCount", 0), ("_cuda_init", None)):
    if hasattr(torch._C, name):  # a CUDA build: what is_available() and init() call underneath
        setattr(torch._C, name, recorder("torch._C." + name, answer))
failed = {}
for name in sys.argv[1:]:
    importing[0] = name
    try:
        __import__(name)
    except ImportError as exc:  # skipped, as the fork server skips it
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"calls": calls, "initialized": torch.cuda.is_initialized(), "failed": failed}))
"""


def preload_cuda_calls(modules, timeout_s: float = 300.0) -> dict:
    """What importing the fork server's preload (`modules`: perfsuite.measuring.workers.PRELOAD) does to CUDA, seen in
    a fresh interpreter: `calls`, each CUDA call made (which function, the module being imported,
    and the file:line outside torch that made it), `initialized` (torch.cuda.is_initialized() afterwards) and `failed`
    (modules whose import failed, as the server would skip them). Any call at all would make every
    worker a bad fork on a GPU host (refuse_bad_fork)."""
    import json
    import subprocess
    import sys

    names = list(modules)
    done = subprocess.run(
        [sys.executable, "-c", _CUDA_PROBE, *names], capture_output=True, text=True, timeout=timeout_s
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the preload probe exited with code {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])
