"""The child perfsuite.measuring.instructions runs under Callgrind: build the case's step, warm it,
turn Callgrind's instrumentation on for this process, warm the instrumented step, and collect only
around the counted steps. Prints one JSON line: {"status": "ok"} or {"status": "failed", "reason"}.

    valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no ... \
        python -m perfsuite.measuring.instructions_child JOB.json
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        import torch

        from perfsuite.core import registry
        from perfsuite.core.discover import load_entry_points, load_file, workload_in
        from perfsuite.measuring.instructions import INSTRUMENTED_WARMUP, WARMUP
        from perfsuite.measuring.timing import synchronize

        # One thread: OpenMP's workers spin while they wait, and how long they spin is the
        # scheduler's, not the step's; one thread executes what the step does, once.
        torch.set_num_threads(1)
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
        built = workload.build(params, job["device"])
        for _ in range(WARMUP):
            built.fn()
        synchronize(job["device"])
        on = subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, text=True)
        if on.returncode != 0:
            raise RuntimeError(f"callgrind_control -i on failed: {(on.stderr or on.stdout).strip()[-200:]}")
        for _ in range(INSTRUMENTED_WARMUP):
            built.fn()
        synchronize(job["device"])
        # The garbage collector off over the counted steps, after a full collection: where a
        # collection falls depends on every allocation since the interpreter started (the
        # checkout's path in each file name, the build), so identical code counted in two checkouts
        # differed by up to 0.2% (a notes-only commit 2,143,039 against its parent's 2,146,759),
        # which hid a +0.5% step and named a wrong commit (reports/work/). The count is the step's.
        gc.collect()
        gc.disable()
        torch._C._valgrind_toggle()
        for _ in range(job["steps"]):
            built.fn()
        synchronize(job["device"])
        torch._C._valgrind_toggle()
        gc.enable()
        if built.teardown is not None:
            built.teardown()
    except BaseException as exc:  # noqa: BLE001 - the parent records the reason; the timing stands
        print(json.dumps({"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:400]}))
        return 1
    print(json.dumps({"status": "ok"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
