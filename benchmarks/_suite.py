"""Builds asv benchmark classes for a perfsuite workload. No measuring logic lives here.

One measured run per case feeds the `track_*` metrics: `setup_cache` runs perfsuite's runner
once for every case of the class (asv calls it once per class and environment) and keeps the
records; the `track_*` methods only read them. `time_step` is asv's own re-run of the same
step (asv insists on timing `time_*` itself); it is kept cheap with few repeats, and on CUDA
its clock synchronises the device (the `timer` attribute).

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


def _key(params) -> str:
    return repr(tuple(params))


def make_suite(workload: str, grid: dict, budget_s: float = 5.0):
    """An asv class over `grid` ({param: [values]}, at most the device's size)."""
    names = list(grid)

    class Suite:
        param_names = names
        params = [grid[n] for n in names] if names else []
        timer = staticmethod(device_timer)
        timeout = 900
        # time_step: asv's re-run, kept short.
        repeat = (1, 5, 2.0)
        number = 0
        warmup_time = 0.5

        def setup_cache(self):
            from perfsuite import registry
            from perfsuite.config import RunConfig, resolve_device
            from perfsuite.env import fingerprint
            from perfsuite.errors import PerfsuiteError, Unsupported
            from perfsuite.params import expand_sweep
            from perfsuite.runner import run_case

            out: dict = {}
            try:
                w = registry.get(workload)
            except PerfsuiteError as exc:  # an older commit without this workload
                return {"_skip": str(exc)}
            device = resolve_device("auto")
            env = fingerprint()
            for case in expand_sweep(grid):
                key = _key(case[n] for n in names)
                try:
                    w.check(case, device)
                    rec = run_case(w, case, RunConfig(device=device, max_time=budget_s), env=env)
                    out[key] = rec.to_dict()
                except Unsupported as exc:
                    out[key] = {"_skip": str(exc)}
                except Exception as exc:  # a failed case is a skip with its reason, the rest go on
                    out[key] = {"_skip": f"failed: {type(exc).__name__}: {exc}"}
            return out

        def setup(self, cache, *params):
            if "_skip" in cache:
                raise NotImplementedError(cache["_skip"])
            rec = cache.get(_key(params))
            if rec is None or "_skip" in rec:
                raise NotImplementedError((rec or {}).get("_skip", "case was not measured"))
            self.record = rec

        def _step(self, params):
            # Built lazily, only for time_step: the track_* methods need no model.
            if getattr(self, "_fn", None) is None:
                from perfsuite import registry
                from perfsuite.config import resolve_device

                case = dict(zip(names, params))
                self._built = registry.get(workload).build(case, resolve_device("auto"))
                self._fn = self._built.fn
            return self._fn

        def time_step(self, cache, *params):
            self._step(params)()

        def track_median_s(self, cache, *params):
            return self.record["derived"]["stats"]["median"]

        track_median_s.unit = "seconds"

        def track_seconds_per_item(self, cache, *params):
            work = self.record["work"]
            return self.record["derived"]["stats"]["median"] / work["items_per_step"]

        track_seconds_per_item.unit = "seconds/item"

        def track_seconds_per_tflop(self, cache, *params):
            flops = self.record["work"]["flops_per_step"]
            if not flops:
                return math.nan
            return self.record["derived"]["stats"]["median"] / (flops / 1e12)

        track_seconds_per_tflop.unit = "s/TFLOP"

        def track_peak_rss_delta(self, cache, *params):
            return self.record["memory"].get("host_peak_delta_bytes")

        track_peak_rss_delta.unit = "bytes"

        def track_cuda_max_allocated(self, cache, *params):
            v = self.record["memory"].get("cuda_max_allocated_bytes")
            return math.nan if v is None else v

        track_cuda_max_allocated.unit = "bytes"

    def setup_time(self, *args):
        # Build the model outside timing. asv calls a method's own `setup` with the params but
        # without the setup_cache value, so only the last len(names) arguments are params.
        self._step(args[len(args) - len(names):] if names else ())

    Suite.time_step.setup = setup_time
    Suite.__name__ = Suite.__qualname__ = f"{workload.capitalize()}Suite"
    return Suite
