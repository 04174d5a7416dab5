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
      held, perfsuite.measuring.heap) and `minor_faults_per_step` in the timed region, and
      `warmup` a `heap_settle` account; records without them read as heap "default".
  3 - 2026-11: `builds`, the builds of the step rotated inside the measuring process (issue 26):
      each build's samples, median and the worker process it ran in (0 in a one-process run);
      `samples_s` is then all of them pooled in build order, and without `processes` the median
      and its interval come from the build medians. Versions 1 and 2 read as version 3 with no
      `builds` (one build: the interval is that of the pooled samples, as they were measured).
      Additive, 2026-11-27: `conditions` (and each process's) may carry `reference`, the
      machine-speed reference kernel timed between the blocks (perfsuite.measuring.reference):
      kernel, median_s and, per process, samples_s, calls_per_block (a mini-block's) and mini_blocks; `compare` judges
      two records that both carry one on step time per reference time. Additive, 2026-11-28: a
      process's reference may carry at_sample (the step samples before each block), ratio (the
      median of each sample over the reference read nearest it) and, with several builds,
      build_ratios (the same per build): compare's units per reference when present. `conditions` may carry
      `machine_drift` (half_width, runs, hours: perfsuite.storage.machine_drift), which widens
      the reported interval like config.run_drift when larger.
      Additive, 2026-11-28: `conditions` (and each process's) carry `torch_flags` (perfsuite.measuring.tf32).
      Additive, 2026-11-29: a reference keeps its raw `sample_ratios` (each step sample over the
      reference read nearest it) and, with several builds, `sample_builds` (the build of each);
      `ratio` and `build_ratios` are then their medians, written for readers without perfsuite
      and never read back (reference_ratios derives them; a record without the raw lists is
      read by its stored medians).
  4 - 2026-11-28: a process's and a build's `median` is no longer stored: it is computed from their
      samples (a process of several builds: the median of its builds' medians), as every other
      summary is. A record of version 1 to 3 reads as version 4, a stored group `median` ignored:
      a record whose samples said one thing and its stored medians another was compared on the
      medians (issue 39: raw samples all 25% slower compared as `same`, ratio 1.000).
  5 - 2026-11-29: `signature`, the step's work signature (perfsuite.measuring.signature): the
      operators one call dispatched (operator, input shapes, dtype, count), their digest, calls
      and the bytes their outputs newly allocated, taken after the timed blocks; `compare` says
      from it whether a change is more work, less work, other work or the same work.
      `instructions`, with --instructions: the instructions per step counted in a child (the CPU's
        hardware counter where a PMU counts, else Callgrind)
      after measuring (perfsuite.measuring.instructions), or why not (status unavailable/failed).
      Versions 1 to 4 read as version 5 without either (not recorded).

A record validates itself when built and never changes afterwards. Its fields are its schema
(a pydantic dataclass, read and written by one TypeAdapter: perfsuite.core.documents). Derived
numbers (median, interval, percentiles, process and build medians, throughput, FLOP/s) are
computed from the raw samples, never stored as truth: the `derived` block in the JSON is a
convenience for readers without perfsuite and is dropped on load.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import field, replace
from datetime import datetime, timezone
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from typing_extensions import Required, TypedDict

from perfsuite.core import documents
from perfsuite.core.bound import Bound, where_time_went
from perfsuite.core.documents import MAX_GROUPS, MAX_INT, Name, NonNegative, Params, Positive, SampleTuple, Text
from perfsuite.core.text import escaped
from perfsuite.core.units import fmt_bytes, fmt_rate, fmt_seconds
from perfsuite.stats import summary as stats

# The versions live with every other document kind's (perfsuite.core.documents).
SCHEMA_VERSION = documents.RESULTS_VERSION
# Versions a record is read from; older ones lack fields that read as "not recorded".
READABLE_VERSIONS = documents.RESULTS_READABLE
RESULTS_FORMAT = documents.RESULTS_FORMAT

# A process's machine-speed reference of fewer blocks is not used (perfsuite.measuring.reference
# records none below it; records written before that are read the same way): a median of two blocks
# is their mean, and one process's 453 us and 50 us (the kernel's steady speed 43 us) made a run's
# reference 3.4x another's and compare's ratio 0.376 for two runs of one commit (issue 36).
REFERENCE_MIN_BLOCKS = 3


def case_key(workload: str, params: dict[str, Any], device: str | None) -> tuple[Any, ...]:
    """Which case a record, a stored failure or a planned run is: workload, parameters, device."""
    return (workload, tuple(sorted(params.items())), device)


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise documents.At(where, what)


def reference_ratios(ref: dict[str, Any]) -> tuple[float | None, list[float] | None]:
    """The step per reference time of a machine-speed reference: (the median of every sample's
    ratio, the same per build when there were several), derived from the raw `sample_ratios` (and
    `sample_builds`); a reference written before those were kept (2026-11-29) gives its stored
    `ratio` and `build_ratios`; (None, None) before even those (2026-11-28)."""
    per = ref.get("sample_ratios")
    if not per:
        return ref.get("ratio"), ref.get("build_ratios")
    of = ref.get("sample_builds")
    if not of:
        return stats.median(per), None
    return stats.median(per), [stats.median([r for r, b in zip(per, of) if b == i]) for i in sorted(set(of))]


# documents.Positive is strict: a number written as a string ("0.5") is refused here, not kept to
# fail in arithmetic later.
PositiveFinite = documents.Positive
Count = Annotated[int, Field(ge=0, strict=True)]


class ReferenceShape(TypedDict, total=False):
    """A machine-speed reference (perfsuite.measuring.reference), as a record keeps it: compare
    divides by it. Keys a newer perfsuite adds are read past."""

    kernel: Required[StrictStr]
    median_s: Required[PositiveFinite]
    samples_s: list[PositiveFinite]
    calls_per_block: Any  # as written; nothing reads it back
    mini_blocks: Any
    at_sample: list[Count]  # the step samples before each block: non-decreasing, one per block
    sample_ratios: Annotated[list[PositiveFinite], Field(min_length=1)]
    sample_builds: list[Count]  # the build of each sample ratio
    ratio: PositiveFinite  # derived: the median of sample_ratios
    build_ratios: list[PositiveFinite]  # derived: the same per build


_REFERENCE = TypeAdapter(ReferenceShape)


def _shaped(adapter: TypeAdapter[Any], value: Any, where: str, depth: int = 1) -> None:
    """`value` against a typed shape; an error is documents.At naming the key path under `where`
    (`depth` keys of it: an index inside a list is the field's)."""
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        loc = [str(x) for x in e["loc"] if not isinstance(x, int)][:depth]
        key = ".".join([w for w in (where, *loc) if w])
        raise documents.At(key, f"{e['msg']}, got {str(e.get('input'))[:60]}") from None


def _check_reference(ref: Any, where: str) -> None:
    """`ref` against ReferenceShape, and what a type cannot say: one position per block, one build
    per ratio. An error names its key path under `where`."""
    if ref is None:
        return
    if not isinstance(ref, dict):
        raise documents.At(where, "must be an object naming its kernel")
    _shaped(_REFERENCE, ref, where)
    at = ref.get("at_sample")
    _need(
        at is None or (at == sorted(at) and len(at) == len(ref.get("samples_s") or [])),
        f"{where}.at_sample",
        "must list one non-decreasing sample count per reference block",
    )
    builds = ref.get("sample_builds")
    _need(
        builds is None or len(builds) == len(ref.get("sample_ratios") or []),
        f"{where}.sample_builds",
        "must be one build index per sample ratio",
    )


# A reading of the machine while measuring: a number, NaN where it could not be taken, or null; a
# string or an object is refused (its range is the reading's, not the schema's).
Reading = Annotated[float, Field(strict=True)] | None


class DriftShape(TypedDict, total=False):
    """The drift between this machine's runs (perfsuite.storage.machine_drift): a 95% half-width on
    logs that widens the record's interval."""

    half_width: Required[NonNegative]


class SignatureShape(TypedDict, total=False):
    """What one call of the step dispatched (perfsuite.measuring.signature)."""

    digest: Required[Annotated[str, Field(strict=True, min_length=1, max_length=64)]]
    calls: Required[Count]
    distinct: Count
    bytes_allocated: Count
    # (operator, input shapes, dtype, calls), sorted
    entries: Annotated[list[tuple[Text, Text, Text, Count]], Field(max_length=100_000)]
    method: Text
    # On a GPU: the kernels and the copies/fills the device ran in the call (outside the digest)
    kernels: Count
    copies: Count


_SIGNATURE = TypeAdapter(SignatureShape)


def _signature(sig: dict[str, Any] | None) -> dict[str, Any] | None:
    if sig is not None:
        _shaped(_SIGNATURE, sig, "")
    return sig


class InstructionsShape(TypedDict, total=False):
    """Instructions per step (perfsuite.measuring.instructions), or why there is no count."""

    status: Required[Literal["ok", "unavailable", "failed"]]
    reason: Text | None
    per_step: Positive
    total: Count
    steps: Count
    method: Text
    # perfsuite.measuring.instructions.METHOD_VERSION: how the count was taken (warm-up, calls
    # counted); absent in records written before version 3, whose counts are of other calls
    method_version: Count
    seconds: Reading
    hardware: Text


_INSTRUCTIONS = TypeAdapter(InstructionsShape)


def _instructions(count: dict[str, Any] | None) -> dict[str, Any] | None:
    if count is not None:
        _shaped(_INSTRUCTIONS, count, "")
        _need(count["status"] != "ok" or "per_step" in count, "per_step", "a count that is ok has its per_step")
    return count


class ConditionsShape(TypedDict, total=False):
    """How a record was measured (perfsuite.measuring.runner.measured_conditions, merged over worker
    processes and ranks): what compare, the report and the warnings read. Keys a newer perfsuite
    adds are read past."""

    processes: Count
    builds: Count
    cpus: list[Count] | None
    pinned: StrictBool
    torch_threads: Count | None
    interop_threads: Count | None
    threads_set: StrictBool
    steal_fraction: Reading
    others_cpus: Reading
    busy_fraction: Reading
    timed_wall_s: Reading
    load_avg: list[Reading] | None
    heap: Annotated[str, Field(strict=True, max_length=200)] | None
    heap_reason: Text | None
    minor_faults_per_step: Reading
    torch_flags: dict[str, Any] | None
    between_share: Reading  # the spread over worker processes (perfsuite.measuring.workers)
    between_cv: Reading
    within_cv: Reading
    ci_method: Annotated[str, Field(strict=True, max_length=200)] | None
    # Joules over the timed region and per step (perfsuite.measuring.energy): NVML on a GPU, RAPL on
    # the CPU; {"status": "unavailable", "reason": ...} where neither could say.
    energy: dict[str, Any] | None
    world_size: Count  # distributed: ranks and nodes (perfsuite.distributed.rank)
    nnodes: Count
    ranks_per_node: Count
    reference: Any  # ReferenceShape, checked with what a type cannot say (_check_reference)
    machine_drift: DriftShape | None


class PeakShape(TypedDict, total=False):
    """The device's peak a record's fraction of peak divides by (perfsuite.storage.peaks)."""

    flops_per_s: Positive | None
    bytes_per_s: Positive | None


class ConfigShape(TypedDict, total=False):
    """The run's configuration as a record keeps it: what the interval reads back."""

    run_drift: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, lt=1)] | None


_CONDITIONS, _PEAK, _CONFIG = TypeAdapter(ConditionsShape), TypeAdapter(PeakShape), TypeAdapter(ConfigShape)


def _conditions(cond: dict[str, Any]) -> dict[str, Any]:
    _shaped(_CONDITIONS, cond, "")
    _check_reference(cond.get("reference"), "reference")
    return cond


def _config(cfg: dict[str, Any]) -> dict[str, Any]:
    _shaped(_CONFIG, cfg, "")
    return cfg


def _peak(peak: dict[str, Any] | None) -> dict[str, Any] | None:
    if peak is not None:
        _shaped(_PEAK, peak, "")
    return peak


class GroupShape(TypedDict, total=False):
    """One worker process's or one build's part of a record: its raw samples, in time order, and
    (a process's) its own conditions, with its own machine-speed reference."""

    samples_s: Required[Annotated[list[PositiveFinite], Field(min_length=1)]]
    process: Any  # as written
    conditions: dict[str, Any] | None


_GROUP = TypeAdapter(GroupShape)


def _groups(groups: tuple[dict[str, Any], ...] | None) -> tuple[dict[str, Any], ...] | None:
    """Worker processes or builds: two or more, each as GroupShape."""
    if groups is None:
        return None
    if len(groups) < 2:
        raise ValueError("must be a list of at least 2 objects (one per process or build) or null")
    for i, g in enumerate(groups):
        try:
            _GROUP.validate_python(g)
        except ValidationError as exc:
            e = exc.errors(include_url=False)[0]
            field_name = str(e["loc"][0]) if e["loc"] else ""
            what = "must be a non-empty list of positive finite seconds" if field_name == "samples_s" else e["msg"]
            raise documents.At(f"[{i}].{field_name}" if field_name else f"[{i}]", what) from None
        _check_reference((g.get("conditions") or {}).get("reference"), f"[{i}].conditions.reference")
    return groups


# Mapping fields are dict[Any, Any]: any keys, as read (pydantic would check dict[str, Any]'s keys).
Groups = Annotated[tuple[dict[Any, Any], ...] | None, Field(max_length=MAX_GROUPS), AfterValidator(_groups)]


def _current(version: int) -> int:
    if version != SCHEMA_VERSION:
        raise ValueError(f"this perfsuite reads records of version {SCHEMA_VERSION} (and older ones as it)")
    return version


def _derived_medians(groups: Any) -> Any:
    """A group's `median` is computed from its samples, never read (schema 4; see the history)."""
    if not isinstance(groups, (list, tuple)):
        return groups
    return [{k: v for k, v in g.items() if k != "median"} if isinstance(g, dict) else g for g in groups]


@documents.shape("work", frozen=True, extra="forbid")
class Work(documents.Result):
    """What one step does: the denominators of throughput and FLOP/s."""

    items_per_step: Positive
    item_unit: Name
    flops_per_step: NonNegative | None = None
    flops_method: Name | None = "unknown"  # "analytic", "FlopCounterMode" or "unknown"; None: no FLOPs
    bytes_per_step: NonNegative | None = None
    dtype: Name = "fp32"  # which machine peak applies


@documents.shape("record", frozen=True, extra="forbid")
class Record(documents.Result):
    DERIVED = {"derived": "derived"}

    workload: Name
    params: Params
    device: Name
    timing_method: Name
    block_size: Annotated[int, Field(strict=True, ge=1, le=MAX_INT)]
    samples_s: SampleTuple
    work: Work
    warmup: dict[Any, Any] = field(default_factory=dict)
    memory: dict[Any, Any] = field(default_factory=dict)
    nvml: dict[Any, Any] = field(default_factory=lambda: {"status": "unavailable", "reason": "not sampled"})
    env: dict[Any, Any] = field(default_factory=dict)
    peak: Annotated[dict[Any, Any] | None, AfterValidator(_peak)] = None
    config: Annotated[dict[Any, Any], AfterValidator(_config)] = field(default_factory=dict)
    converged: StrictBool = False
    warnings: tuple[Text, ...] = ()
    extra: dict[Any, Any] = field(default_factory=dict)  # workload-specific measurements
    # How it was measured (schema 2; empty: not recorded).
    conditions: Annotated[dict[Any, Any], AfterValidator(_conditions)] = field(default_factory=dict)
    processes: Groups = None  # per worker process, with --processes N >= 2
    builds: Groups = None  # per build of the step, with 2 or more (schema 3)
    # What one call of the step dispatched (schema 5; None: not recorded)
    signature: Annotated[dict[Any, Any] | None, AfterValidator(_signature)] = None
    # Instructions per step (hardware counter or Callgrind), with --instructions (schema 5; None: not asked for)
    instructions: Annotated[dict[Any, Any] | None, AfterValidator(_instructions)] = None
    schema_version: Annotated[int, Field(strict=True), AfterValidator(_current)] = SCHEMA_VERSION
    id: Annotated[str, Field(strict=True, max_length=200)] = field(default_factory=lambda: uuid.uuid4().hex)
    created: Annotated[str, Field(strict=True, max_length=200)] = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat()
    )

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        """A record as stored (a mapping: a file, the store, a worker's pipe) of any readable
        version, read as the current one: fields it lacks read as "not recorded" (see the history
        above); the `derived` block is dropped, recomputed from the samples."""
        if isinstance(data, (list, str, int, float, bool, type(None))):
            raise ValueError(f"a record must be a JSON object, got {type(data).__name__}")
        if not isinstance(data, dict):
            return data  # built in code, from keywords
        if "schema_version" not in data:
            raise ValueError("not a perfsuite record: no 'schema_version'")
        data = {k: v for k, v in data.items() if k != "derived"}
        if data["schema_version"] in READABLE_VERSIONS and not isinstance(data["schema_version"], bool):
            data["schema_version"] = SCHEMA_VERSION
        return data

    @field_validator("processes", "builds", mode="before")
    @classmethod
    def _no_stored_medians(cls, groups: Any) -> Any:
        return _derived_medians(groups)

    @model_validator(mode="after")
    def _pooled(self) -> Record:
        for name in ("processes", "builds"):
            groups = getattr(self, name)
            if groups is not None:
                pooled = tuple(s for g in groups for s in g["samples_s"])
                _need(pooled == self.samples_s, "samples_s", f"must be the {name}' samples pooled, in order")
        return self

    # ---- derived ---------------------------------------------------------------------------
    @cached_property
    def build_medians(self) -> list[float] | None:
        """Each build's median, from its samples; None for one build."""
        return [stats.median(b["samples_s"]) for b in self.builds] if self.builds else None

    @cached_property
    def process_medians(self) -> list[float] | None:
        """Each worker process's median, from its samples: the median of its builds' medians when
        it rotated several builds (as the process reported it), else of its samples."""
        if not self.processes:
            return None
        of: dict[Any, list[float]] = {}
        for b, m in zip(self.builds or (), self.build_medians or ()):
            of.setdefault(b.get("process"), []).append(m)
        return [
            stats.median(of[i]) if len(of.get(i, ())) >= 2 else stats.median(p["samples_s"])
            for i, p in enumerate(self.processes)
        ]

    @cached_property
    def spread(self) -> stats.ProcessSpread | None:
        """Between- and within-process spread, for a case measured in worker processes."""
        if not self.processes:
            return None
        return stats.process_spread([p["samples_s"] for p in self.processes], medians=self.process_medians)

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
        return self.process_medians or self.build_medians

    @staticmethod
    def _reference_median(ref: dict[str, Any]) -> float:
        """A reference's median: of its blocks when it keeps them, else as recorded (a run's of
        several processes: the median of theirs)."""
        return stats.median(ref["samples_s"]) if ref.get("samples_s") else ref["median_s"]

    @property
    def reference_median_s(self) -> float | None:
        """The machine-speed reference's median (conditions["reference"]): of the processes'
        references' medians when measured in several, else of its own blocks."""
        ref = self.conditions.get("reference")
        if not ref:
            return None
        refs = [(p.get("conditions") or {}).get("reference") for p in self.processes or ()]
        if refs and all(refs):
            return stats.median([self._reference_median(r) for r in refs if r])
        return self._reference_median(ref)

    @property
    def sample_ratios(self) -> bool:
        """Whether every reference in the record carries the per-sample ratio (`ratio`), which
        records written before 2026-11-28 lack: compare then uses the older unit on both sides."""
        refs = (
            [(p.get("conditions") or {}).get("reference") for p in self.processes]
            if self.processes
            else [self.conditions.get("reference")]
        )
        return all(ref and reference_ratios(ref)[0] for ref in refs)

    def relative_units(self, per_sample: bool = True) -> list[float] | None:
        """units() per the machine-speed reference measured beside them (conditions["reference"],
        perfsuite.measuring.reference). `per_sample` (where recorded): each process's (or build's)
        samples over the reference read nearest each in time, their median (`ratio`, and
        `build_ratios` for a process of several builds: their median, as its unit in seconds is);
        otherwise, or for a record written before those: each median over its process's reference
        median. None when any reference is missing, or has fewer than REFERENCE_MIN_BLOCKS blocks."""

        def unit(median: float, ref: dict[str, Any]) -> float:
            ratio, per_build = reference_ratios(ref)
            if per_sample and per_build:
                return stats.median(per_build)
            if per_sample and ratio:
                return float(ratio)
            return median / self._reference_median(ref)

        if self.processes:
            found = [(p.get("conditions") or {}).get("reference") for p in self.processes]
            refs = [ref for ref in found if ref and len(ref.get("samples_s") or ()) >= REFERENCE_MIN_BLOCKS]
            if len(refs) < len(found) or len({ref["kernel"] for ref in refs}) > 1:
                return None
            return [unit(m, ref) for m, ref in zip(self.process_medians or (), refs)]
        ref = self.conditions.get("reference")
        units = self.units()
        if not ref or not units:
            return None
        per_build = reference_ratios(ref)[1]
        if per_sample and self.builds and per_build and len(per_build) == len(units):
            return list(per_build)
        return [u / self._reference_median(ref) for u in units]

    @property
    def machine_drift(self) -> float:
        """How far this machine's speed moved between its last alike runs, a 95% half-width
        (conditions["machine_drift"], perfsuite.storage.machine_drift); 0 when not learned."""
        drift: float = (self.conditions.get("machine_drift") or {}).get("half_width", 0.0)
        return drift

    @property
    def reference_kernel(self) -> str | None:
        return (self.conditions.get("reference") or {}).get("kernel")

    @cached_property
    def stats(self) -> stats.Summary:
        """Summary of the samples. Measured in worker processes or several builds, the median and
        its interval are those of the process (else build) medians (stats.process_spread): they
        carry the between-run variance that pooled samples would hide."""
        s = stats.summarize(self.samples_s)
        spread = self.between
        if spread is not None:
            s = replace(s, median=spread.median, ci_low=spread.ci_low, ci_high=spread.ci_high)
        # The drift between runs that the run could not see in itself (RunConfig.run_drift, or what
        # the machine-speed log learned when larger), in quadrature; records written before it (no
        # `run_drift` in their config) keep their interval.
        drift = max(self.config.get("run_drift") or 0.0, self.machine_drift)
        if drift and s.ci_low is not None and s.ci_high is not None:  # (set together)
            ci_low, ci_high = stats.widened(s.median, s.ci_low, s.ci_high, drift)
            s = replace(s, ci_low=ci_low, ci_high=ci_high)
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
        peak: float | None = (self.peak or {}).get("flops_per_s")
        if achieved is None or not peak:
            return None
        return achieved / peak

    @property
    def bound(self) -> Bound:
        """Where the time went: host-bound / device-bound from NVML on CUDA, n/a elsewhere."""
        return where_time_went(self.device, self.nvml)

    @property
    def derived(self) -> dict[str, Any]:
        """The derived figures, written for readers without perfsuite; never read back."""
        return {
            "stats": self.stats.to_dict(),
            "throughput": self.throughput,
            "throughput_unit": self.throughput_unit,
            "flops_per_s": self.flops_per_s,
            "peak_fraction": self.peak_fraction,
            "bound": self.bound.to_dict(),
            "process_medians": self.process_medians,
            "build_medians": self.build_medians,
        }

    def case_key(self) -> tuple[Any, ...]:
        """Identity of the measured case: records with equal keys are comparable."""
        return case_key(self.workload, self.params, self.device)

    def label(self) -> str:
        ps = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.workload}[{ps}]"

    def __str__(self) -> str:
        """A few lines for a script or a notebook (`print(perfsuite.measure(step))`), from the
        samples: the case, median with its 95% CI and spread, throughput, FLOP/s and memory."""
        s = self.stats
        ci = (
            ""
            if s.ci_low is None or s.ci_high is None
            else f" (95% CI {fmt_seconds(s.ci_low)} .. {fmt_seconds(s.ci_high)})"
        )
        lines = [
            f"{self.label()} on {self.device}",
            f"  median {fmt_seconds(s.median)}{ci}, IQR {s.iqr / s.median:.1%}, {s.n} blocks x {self.block_size}",
            f"  {fmt_rate(self.throughput, self.throughput_unit)}"
            + ("" if self.flops_per_s is None else f", {fmt_rate(self.flops_per_s, 'FLOP/s')}")
            + ("" if self.peak_fraction is None else f" ({self.peak_fraction:.0%} of peak)"),
        ]
        mem = self.memory.get("host_peak_delta_bytes")
        cuda = self.memory.get("cuda_max_allocated_bytes")
        if mem is not None or cuda is not None:
            lines.append(
                "  memory"
                + ("" if mem is None else f" +{fmt_bytes(mem)} host")
                + ("" if cuda is None else f", CUDA {fmt_bytes(cuda)} allocated")
            )
        lines += [f"  warning: {w}" for w in self.warnings]
        return escaped("\n".join(lines))

    def to_json(self) -> str:
        return json.dumps(documents.finite(self.to_dict()), indent=1, allow_nan=False)
