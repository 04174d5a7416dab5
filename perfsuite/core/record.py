"""The one result record: what was measured, the raw samples, and everything derived from them.

Schema history (bump SCHEMA_VERSION and add a line when a field changes meaning or appears):
  1 - 2026-11: first version: spec, raw per-step samples, warm-up, work counts, memory, NVML,
      environment, machine peak, run configuration, convergence, warnings, and `extra`
      (workload-specific measurements such as DataLoader start-up).
      The `peak` block may also carry `roof` (which measured roof applies: on CUDA an fp32 step
      allowed to run as TF32 is judged against the tf32 roof), `tf32` (the flags read at record
      time) and `why`; these keys are additive, so older records read as before.
  2 - 2026-11: `conditions`, how the case was measured: worker processes, CPU affinity and
      whether it was pinned, torch threads, hypervisor steal and other processes' CPU use in
      the timed region; `processes`, with --processes N >= 2, each worker's pid, samples and
      median (`samples_s` is then all of them pooled, and the median and its interval come
      from the process medians). Version 1 records read as version 2 with empty `conditions`
      (not recorded) and no `processes`.
      Distributed cases (workloads ddp and allreduce, perfsuite.distributed) are version-2 records
      with no new field: `samples_s` are the slowest rank's per-step samples, `work` counts every
      rank's items (so throughput is global), `extra` holds world_size, nnodes, backend,
      rank_medians_s, ranks (each rank's pid, host, median and samples), comm (the profiled
      step's communication share), scaling (efficiency against world_size=1 of the same run) and,
      for collectives, algbw_Bps and busbw_Bps; `conditions` adds world_size, nnodes, ranks_per_node.
      Additive, 2026-11-24: `conditions` may carry `heap` ("default" or "steady": glibc's malloc
      held, perfsuite.measure.heap) and `minor_faults_per_step` in the timed region, and
      `warmup` a `heap_settle` account; records without them read as heap "default".
  3 - 2026-11: `builds`, the builds of the step rotated inside the measuring process (issue 26):
      each build's samples, median and the worker process it ran in (0 in a one-process run);
      `samples_s` is then all of them pooled in build order, and without `processes` the median
      and its interval come from the build medians. Versions 1 and 2 read as version 3 with no
      `builds` (one build: the interval is that of the pooled samples, as they were measured).
      Additive, 2026-11-27: `conditions` (and each process's) may carry `reference`, the
      machine-speed reference kernel timed between the blocks (perfsuite.measure.reference):
      kernel, median_s and, per process, samples_s, calls_per_block (a mini-block's) and mini_blocks; `compare` judges
      two records that both carry one on step time per reference time. Additive, 2026-11-28: a
      process's reference may carry at_sample (the step samples before each block), ratio (the
      median of each sample over the reference read nearest it) and, with several builds,
      build_ratios (the same per build): compare's units per reference when present. `conditions` may carry
      `machine_drift` (half_width, runs, hours: perfsuite.storage.machine_drift), which widens
      the reported interval like config.run_drift when larger.
      Additive, 2026-11-28: `conditions` (and each process's) carry `torch_flags` (perfsuite.measure.tf32).

A record validates itself when built and never changes afterwards. Derived numbers (median,
percentiles, throughput, FLOP/s) are computed from the raw samples, never stored as truth:
the `derived` block in the JSON is a convenience for readers and is recomputed on load.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from perfsuite.stats import summary as stats
from perfsuite.core.bound import Bound, where_time_went
from perfsuite.core import documents
from perfsuite.core.errors import RecordError

# The versions live with every other document kind's (perfsuite.core.documents).
SCHEMA_VERSION = documents.RESULTS_VERSION
# Versions from_dict accepts; older ones lack fields that read as "not recorded".
READABLE_VERSIONS = documents.RESULTS_READABLE
RESULTS_FORMAT = documents.RESULTS_FORMAT

_SCALARS = (str, int, float, bool, type(None))

# A process's machine-speed reference of fewer blocks is not used (perfsuite.measure.reference
# records none below it; records written before that are read the same way): a median of two blocks
# is their mean, and one process's 453 us and 50 us (the kernel's steady speed 43 us) made a run's
# reference 3.4x another's and compare's ratio 0.376 for two runs of one commit (issue 36).
REFERENCE_MIN_BLOCKS = 3


def case_key(workload: str, params: dict, device: str) -> tuple:
    """Which case a record, a stored failure or a planned run is: workload, parameters, device."""
    return (workload, tuple(sorted(params.items())), device)


def _need(cond: bool, field_name: str, what: str) -> None:
    if not cond:
        raise RecordError(f"record field {field_name!r}: {what}")


def _check_reference(ref: Any, where: str) -> None:
    """A machine-speed reference (perfsuite.measure.reference), when present: compare divides by it."""
    if ref is None:
        return
    _need(isinstance(ref, dict) and isinstance(ref.get("kernel"), str), where, "must be an object naming its kernel")
    _need(_is_number(ref.get("median_s")) and ref["median_s"] > 0, f"{where}.median_s",
          "must be a positive finite number of seconds")
    if "ratio" in ref:
        _need(_is_number(ref["ratio"]) and ref["ratio"] > 0, f"{where}.ratio", "must be a positive finite number")
    if "build_ratios" in ref:
        _need(isinstance(ref["build_ratios"], list) and all(_is_number(x) and x > 0 for x in ref["build_ratios"]),
              f"{where}.build_ratios", "must be a list of positive finite numbers")
    if "at_sample" in ref:
        at = ref["at_sample"]
        _need(isinstance(at, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in at)
              and at == sorted(at) and len(at) == len(ref.get("samples_s") or []), f"{where}.at_sample",
              "must list one non-decreasing sample count per reference block")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Work:
    """What one step does: the denominators of throughput and FLOP/s."""

    items_per_step: float
    item_unit: str
    flops_per_step: float | None = None
    flops_method: str = "unknown"  # "analytic", "FlopCounterMode" or "unknown"
    bytes_per_step: float | None = None
    dtype: str = "fp32"  # which machine peak applies

    def __post_init__(self) -> None:
        _need(_is_number(self.items_per_step) and self.items_per_step > 0,
              "work.items_per_step", f"must be a positive number, got {self.items_per_step!r}")
        _need(isinstance(self.item_unit, str) and bool(self.item_unit),
              "work.item_unit", "must be a non-empty string")
        for name in ("flops_per_step", "bytes_per_step"):
            v = getattr(self, name)
            _need(v is None or (_is_number(v) and v >= 0), f"work.{name}",
                  f"must be a non-negative number or null, got {v!r}")


@dataclass(frozen=True)
class Record:
    workload: str
    params: dict
    device: str
    timing_method: str
    block_size: int
    samples_s: tuple[float, ...]
    work: Work
    warmup: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    nvml: dict = field(default_factory=lambda: {"status": "unavailable", "reason": "not sampled"})
    env: dict = field(default_factory=dict)
    peak: dict | None = None
    config: dict = field(default_factory=dict)
    converged: bool = False
    warnings: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)  # workload-specific measurements
    conditions: dict = field(default_factory=dict)  # how it was measured (schema 2; empty: not recorded)
    processes: tuple[dict, ...] | None = None  # per worker process, with --processes N >= 2
    builds: tuple[dict, ...] | None = None  # per build of the step, with 2 or more (schema 3)
    schema_version: int = SCHEMA_VERSION
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    def __post_init__(self) -> None:
        # Lists from JSON become tuples so the record is immutable all the way down.
        object.__setattr__(self, "samples_s", tuple(self.samples_s))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        _need(self.schema_version == SCHEMA_VERSION, "schema_version",
              f"this perfsuite reads version {SCHEMA_VERSION}, got {self.schema_version!r}")
        _need(isinstance(self.workload, str) and bool(self.workload), "workload",
              "must be a non-empty string")
        _need(isinstance(self.params, dict), "params", "must be an object")
        for k, v in self.params.items():
            _need(isinstance(k, str) and isinstance(v, _SCALARS), f"params.{k}",
                  f"must be a JSON scalar, got {type(v).__name__}")
            _need(not isinstance(v, float) or math.isfinite(v), f"params.{k}", f"must be finite, got {v!r}")
        _need(isinstance(self.device, str) and bool(self.device), "device", "must be a non-empty string")
        _need(isinstance(self.timing_method, str) and bool(self.timing_method), "timing_method",
              "must be a non-empty string")
        _need(isinstance(self.block_size, int) and not isinstance(self.block_size, bool)
              and self.block_size >= 1, "block_size", f"must be an integer >= 1, got {self.block_size!r}")
        _need(len(self.samples_s) > 0, "samples_s", "must hold at least one sample")
        _need(all(_is_number(s) and s > 0 for s in self.samples_s), "samples_s",
              "every sample must be a positive finite number of seconds")
        _need(isinstance(self.work, Work), "work", "must be a Work")
        _need(isinstance(self.converged, bool), "converged", "must be true or false")
        _need(all(isinstance(w, str) for w in self.warnings), "warnings", "must be strings")
        for name in ("warmup", "memory", "nvml", "env", "config", "extra"):
            _need(isinstance(getattr(self, name), dict), name, "must be an object")
        _need(self.peak is None or isinstance(self.peak, dict), "peak", "must be an object or null")
        _need(isinstance(self.conditions, dict), "conditions", "must be an object")
        _check_reference(self.conditions.get("reference"), "conditions.reference")
        drift = self.conditions.get("machine_drift")
        _need(drift is None or (isinstance(drift, dict) and _is_number(drift.get("half_width"))
                                and drift["half_width"] >= 0), "conditions.machine_drift",
              "must be an object with a half_width >= 0")
        if self.processes is not None:
            object.__setattr__(self, "processes", tuple(self.processes))
            self._check_groups("processes", "worker process")
            for i, p in enumerate(self.processes):
                cond = p.get("conditions")
                _need(cond is None or isinstance(cond, dict), f"processes[{i}].conditions", "must be an object")
                _check_reference((cond or {}).get("reference"), f"processes[{i}].conditions.reference")
        if self.builds is not None:
            object.__setattr__(self, "builds", tuple(self.builds))
            self._check_groups("builds", "build of the step")

    def _check_groups(self, name: str, one: str) -> None:
        groups = getattr(self, name)
        _need(len(groups) >= 2 and all(isinstance(p, dict) for p in groups), name,
              f"must be a list of at least 2 objects (one per {one}) or null")
        pooled: list = []
        for i, p in enumerate(groups):
            samples = p.get("samples_s")
            _need(isinstance(samples, (list, tuple)) and len(samples) > 0
                  and all(_is_number(s) and s > 0 for s in samples), f"{name}[{i}].samples_s",
                  "must be a non-empty list of positive finite seconds")
            _need(_is_number(p.get("median")), f"{name}[{i}].median", "must be a number")
            pooled.extend(samples)
        _need(tuple(pooled) == self.samples_s, "samples_s", f"must be the {name}' samples pooled, in order")

    # ---- derived ---------------------------------------------------------------------------
    @cached_property
    def spread(self) -> stats.ProcessSpread | None:
        """Between- and within-process spread, for a case measured in worker processes."""
        if not self.processes:
            return None
        return stats.process_spread([p["samples_s"] for p in self.processes],
                                    medians=[p["median"] for p in self.processes])

    @cached_property
    def build_spread(self) -> stats.ProcessSpread | None:
        """Between- and within-build spread, for a case measured in several builds of its step."""
        if not self.builds:
            return None
        return stats.process_spread([b["samples_s"] for b in self.builds], unit="build")

    @property
    def between(self) -> stats.ProcessSpread | None:
        """The spread the record's interval comes from: between processes when measured in several,
        else between builds; None for one build in one process (a version 1 or 2 record)."""
        return self.spread if self.spread is not None else self.build_spread

    def units(self) -> list[float] | None:
        """The record's independent units for comparisons: process medians, else build medians."""
        if self.processes:
            return [p["median"] for p in self.processes]
        if self.builds:
            return [b["median"] for b in self.builds]
        return None

    @property
    def sample_ratios(self) -> bool:
        """Whether every reference in the record carries the per-sample ratio (`ratio`), which
        records written before 2026-11-28 lack: compare then uses the older unit on both sides."""
        refs = [(p.get("conditions") or {}).get("reference") for p in self.processes] if self.processes \
            else [self.conditions.get("reference")]
        return all(ref and "ratio" in ref for ref in refs)

    def relative_units(self, per_sample: bool = True) -> list[float] | None:
        """units() per the machine-speed reference measured beside them (conditions["reference"],
        perfsuite.measure.reference). `per_sample` (where recorded): each process's (or build's)
        samples over the reference read nearest each in time, their median (`ratio`, and
        `build_ratios` for a process of several builds: their median, as its unit in seconds is);
        otherwise, or for a record written before those: each median over its process's reference
        median. None when any reference is missing, or has fewer than REFERENCE_MIN_BLOCKS blocks."""
        def unit(median: float, ref: dict) -> float:
            if per_sample and ref.get("build_ratios"):
                return stats.median(ref["build_ratios"])
            if per_sample and ref.get("ratio"):
                return ref["ratio"]
            return median / ref["median_s"]

        if self.processes:
            refs = [(p.get("conditions") or {}).get("reference") for p in self.processes]
            refs = [ref if ref and len(ref.get("samples_s") or ()) >= REFERENCE_MIN_BLOCKS else None for ref in refs]
            if not all(refs) or len({ref["kernel"] for ref in refs}) > 1:
                return None
            return [unit(p["median"], ref) for p, ref in zip(self.processes, refs)]
        ref = self.conditions.get("reference")
        units = self.units()
        if not ref or not units:
            return None
        if per_sample and self.builds and len(ref.get("build_ratios") or []) == len(units):
            return list(ref["build_ratios"])
        return [u / ref["median_s"] for u in units]

    @property
    def machine_drift(self) -> float:
        """How far this machine's speed moved between its last alike runs, a 95% half-width
        (conditions["machine_drift"], perfsuite.storage.machine_drift); 0 when not learned."""
        return (self.conditions.get("machine_drift") or {}).get("half_width", 0.0)

    @property
    def reference_kernel(self) -> str | None:
        return (self.conditions.get("reference") or {}).get("kernel")

    @cached_property
    def stats(self) -> stats.Summary:
        """Summary of the samples. Measured in worker processes or several builds, the median and
        its interval are those of the process (else build) medians (stats.process_spread): they
        carry the between-run variance that pooled samples would hide."""
        from dataclasses import replace

        s = stats.summarize(self.samples_s)
        spread = self.between
        if spread is not None:
            s = replace(s, median=spread.median, ci_low=spread.ci_low, ci_high=spread.ci_high)
        # The drift between runs that the run could not see in itself (RunConfig.run_drift, or what
        # the machine-speed log learned when larger), in quadrature; records written before it (no
        # `run_drift` in their config) keep their interval.
        drift = max(self.config.get("run_drift") or 0.0, self.machine_drift)
        if drift and s.ci_low is not None:
            s = replace(s, **dict(zip(("ci_low", "ci_high"), stats.widened(s.median, s.ci_low, s.ci_high, drift))))
        return s

    @property
    def median_s(self) -> float:
        return self.stats.median

    @property
    def throughput(self) -> float:
        """Items per second at the median step time."""
        return self.work.items_per_step / self.stats.median

    @property
    def throughput_unit(self) -> str:
        return f"{self.work.item_unit}/s"

    @property
    def flops_per_s(self) -> float | None:
        if self.work.flops_per_step is None:
            return None
        return self.work.flops_per_step / self.stats.median

    @property
    def peak_fraction(self) -> float | None:
        """Achieved FLOP/s as a fraction of the measured matmul roof the peak block names (`roof`:
        the work's dtype, or tf32 for CUDA fp32 work allowed to run as TF32); None without one."""
        achieved = self.flops_per_s
        peak = (self.peak or {}).get("flops_per_s")
        if achieved is None or not peak:
            return None
        return achieved / peak

    @property
    def bound(self) -> Bound:
        """Where the time went: host-bound / device-bound from NVML on CUDA, n/a elsewhere."""
        return where_time_went(self.device, self.nvml)

    def case_key(self) -> tuple:
        """Identity of the measured case: records with equal keys are comparable."""
        return case_key(self.workload, self.params, self.device)

    def label(self) -> str:
        ps = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.workload}[{ps}]"

    # ---- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        s = self.stats
        return {
            "schema_version": self.schema_version,
            "id": self.id,
            "created": self.created,
            "workload": self.workload,
            "params": dict(self.params),
            "device": self.device,
            "timing_method": self.timing_method,
            "block_size": self.block_size,
            "samples_s": list(self.samples_s),
            "work": dict(self.work.__dict__),
            "warmup": self.warmup,
            "memory": self.memory,
            "nvml": self.nvml,
            "env": self.env,
            "peak": self.peak,
            "config": self.config,
            "converged": self.converged,
            "warnings": list(self.warnings),
            "extra": self.extra,
            "conditions": self.conditions,
            "processes": None if self.processes is None else [dict(p) for p in self.processes],
            "builds": None if self.builds is None else [dict(b) for b in self.builds],
            "derived": {
                "stats": s.to_dict(),
                "throughput": self.throughput,
                "throughput_unit": self.throughput_unit,
                "flops_per_s": self.flops_per_s,
                "peak_fraction": self.peak_fraction,
                "bound": self.bound.to_dict(),
            },
        }

    @classmethod
    def from_dict(cls, data: Any) -> "Record":
        if not isinstance(data, dict):
            raise RecordError(f"a record must be a JSON object, got {type(data).__name__}")
        if "schema_version" not in data:
            raise RecordError("not a perfsuite record: no 'schema_version'")
        required = ("workload", "params", "device", "timing_method", "block_size", "samples_s", "work")
        missing = [k for k in required if k not in data]
        if missing:
            raise RecordError(f"record is missing field(s): {', '.join(missing)}")
        known = set(cls.__dataclass_fields__) | {"derived"}
        unknown = sorted(map(str, set(data) - known))
        if unknown:
            raise RecordError(f"record has unknown field(s): {', '.join(unknown)[:300]}")
        # Types, ranges, finiteness and sizes of every field, before anything is built from them.
        documents.check_record(data)
        data = {k: v for k, v in data.items() if k != "derived"}
        if data["schema_version"] in READABLE_VERSIONS:
            # Older versions lack fields; they read as "not recorded" (see the history above).
            data["schema_version"] = SCHEMA_VERSION
        work = data["work"]
        if not isinstance(work, dict):
            raise RecordError("record field 'work': must be an object")
        try:
            data["work"] = Work(**work)
        except TypeError as exc:
            raise RecordError(f"record field 'work': {exc}") from None
        if not isinstance(data["samples_s"], list):
            raise RecordError("record field 'samples_s': must be a list")
        try:
            return cls(**data)
        except TypeError as exc:
            raise RecordError(f"record: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)
