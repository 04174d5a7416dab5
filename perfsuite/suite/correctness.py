"""`perfsuite check [WORKLOAD...]`: runs the correctness checks each workload declares (its
file's `checks=`), every one, before a suite measures anything."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from perfsuite.core import registry
from perfsuite.core.check_failed import CheckFailed
from perfsuite.core.errors import USER_CODE_ERRORS, PerfsuiteError, exception_text


@dataclass(frozen=True)
class CheckResult:
    workload: str
    name: str
    ok: bool
    detail: str
    seconds: float

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.workload}: {self.name}: {self.detail} ({self.seconds:.1f}s)"


def checks_for(workload: str) -> list[tuple[str, Callable[[str], str | None]]]:
    """The named checks `workload` declares (its file's `checks=`), in declaration order."""
    return list((registry.get(workload).checks or {}).items())


def run_checks(
    workloads: list[str], device: str = "cpu", report: Callable[[CheckResult], None] | None = None
) -> list[CheckResult]:
    """Every check of `workloads` (unknown names raise PerfsuiteError before anything runs). A
    check that raises anything is a failure with that message: the step is not to be trusted."""
    import torch

    for w in workloads:
        registry.get(w)  # names the unknown workload
    out = []
    for w in workloads:
        for name, fn in checks_for(w):
            torch.manual_seed(0)
            t0 = time.perf_counter()
            try:
                detail, ok = fn(device) or "passed", True
            except CheckFailed as exc:
                detail, ok = str(exc), False
            except PerfsuiteError as exc:
                detail, ok = exception_text(exc), False
            except USER_CODE_ERRORS as exc:  # a crash in the checked code (or its sys.exit) fails its check
                detail, ok = f"error: {exception_text(exc)}", False
            res = CheckResult(w, name, ok, detail, time.perf_counter() - t0)
            out.append(res)
            if report is not None:
                report(res)
    return out


EXIT_FAILED = 3
