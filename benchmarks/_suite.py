"""Builds asv benchmark classes for a perfsuite workload. No measuring logic lives here.

Two classes per workload, because asv gives them different lives:
- `...Track`: `setup_cache` (defined in each bench module: asv keys the cache by the source
  line of `setup_cache`, so a shared definition would make every workload share one cache)
  runs perfsuite's runner once per case and keeps the records; the `track_*` methods only
  read them. One measured run feeds all tracked metrics.
- `...Time`: `time_step` is asv's own timing of the same step (asv insists on timing
  `time_*` itself). It is a re-run, kept cheap with few repeats; `setup` builds the step
  outside timing, and on CUDA the `timer` synchronises the device.

asv reads a larger number as worse. So no throughput or FLOP/s is tracked as such (a drop
would be shown as an improvement); their inverses are: seconds per item and seconds per
TFLOP, which rise when throughput falls.
"""

from __future__ import annotations

import math
import time

_CUDA = None


def device_timer() -> float:
    """perf_counter that first waits for queued CUDA work, so asv's clock sees device time."""
    global _CUDA
    if _CUDA is None:
        import torch

        _CUDA = torch.cuda.is_available()
    if _CUDA:
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()


def _key(values) -> str:
    return repr(tuple(values))


def _workload_or_skip(workload: str):
    from perfsuite import registry
    from perfsuite.errors import PerfsuiteError

    try:
        return registry.get(workload)
    except PerfsuiteError as exc:  # an older commit without this workload
        raise NotImplementedError(str(exc)) from None


def _errors():
    """(PerfsuiteError, Unsupported) as the installed perfsuite has them: commits older than
    `Unsupported` are benchmarked too (asv runs today's benchmarks on old code)."""
    from perfsuite import errors

    return errors.PerfsuiteError, getattr(errors, "Unsupported", errors.PerfsuiteError)


def _check(w, case: dict, device: str) -> None:
    check = getattr(w, "check", None)  # older Workloads had no check()
    if check is not None:
        check(case, device)


def measure_cases(workload: str, grid: dict, budget_s: float) -> dict:
    """perfsuite records of every case in `grid`, keyed by parameter values; skips keep reasons."""
    from perfsuite import registry
    from perfsuite.config import RunConfig, resolve_device
    from perfsuite.env import fingerprint
    from perfsuite.runner import run_case

    PerfsuiteError, Unsupported = _errors()

    names = list(grid)
    try:
        w = registry.get(workload)
    except PerfsuiteError as exc:
        return {"_skip": str(exc)}
    device = resolve_device("auto")
    env = fingerprint()
    cases: list[dict] = [{}]
    for key, values in grid.items():
        cases = [{**c, key: v} for c in cases for v in values]
    out: dict = {}
    for case in cases:
        key = _key(case[n] for n in names)
        try:
            _check(w, case, device)
            out[key] = run_case(w, case, RunConfig(device=device, max_time=budget_s), env=env).to_dict()
        except Unsupported as exc:
            out[key] = {"_skip": str(exc)}
        except Exception as exc:  # a failed case becomes a skip with its reason; the rest go on
            out[key] = {"_skip": f"failed: {type(exc).__name__}: {exc}"}
    return out


def make_track_suite(workload: str, grid: dict):
    names = list(grid)

    class Track:
        param_names = names
        params = [grid[n] for n in names]
        timeout = 900

        def setup(self, cache, *params):
            if "_skip" in cache:
                raise NotImplementedError(cache["_skip"])
            rec = cache.get(_key(params))
            if rec is None or "_skip" in rec:
                raise NotImplementedError((rec or {}).get("_skip", "case was not measured"))
            self.record = rec

        def track_median_s(self, cache, *params):
            return self.record["derived"]["stats"]["median"]

        track_median_s.unit = "seconds"

        def track_seconds_per_item(self, cache, *params):
            return self.record["derived"]["stats"]["median"] / self.record["work"]["items_per_step"]

        track_seconds_per_item.unit = "seconds/item"

        def track_seconds_per_tflop(self, cache, *params):
            flops = self.record["work"]["flops_per_step"]
            return math.nan if not flops else self.record["derived"]["stats"]["median"] / (flops / 1e12)

        track_seconds_per_tflop.unit = "s/TFLOP"

        def track_peak_rss(self, cache, *params):
            # The process's peak resident memory during the timed region. Its growth over the
            # region's start (the record's host_peak_delta_bytes) is often 0 or a few KiB, and
            # asv would call 0 -> 8 KiB a regression (seen with `make regress`).
            return self.record["memory"].get("host_peak_rss_bytes")

        track_peak_rss.unit = "bytes"

        def track_cuda_max_allocated(self, cache, *params):
            v = self.record["memory"].get("cuda_max_allocated_bytes")
            return math.nan if v is None else v

        track_cuda_max_allocated.unit = "bytes"

    return Track


def make_time_suite(workload: str, grid: dict):
    names = list(grid)

    class Time:
        param_names = names
        params = [grid[n] for n in names]
        timer = staticmethod(device_timer)
        timeout = 600
        repeat = (1, 5, 2.0)  # a cheap re-run: the tracked median comes from perfsuite's run
        warmup_time = 0.5

        def setup(self, *params):
            from perfsuite.config import resolve_device

            PerfsuiteError, Unsupported = _errors()
            w = _workload_or_skip(workload)
            case = dict(zip(names, params))
            device = resolve_device("auto")
            try:
                _check(w, case, device)
                self.built = w.build(case, device)
            except (Unsupported, PerfsuiteError, ImportError) as exc:
                raise NotImplementedError(f"{type(exc).__name__}: {exc}") from None

        def teardown(self, *params):
            if getattr(self, "built", None) is not None and self.built.teardown is not None:
                self.built.teardown()

        def time_step(self, *params):
            self.built.fn()

    return Time
