"""Every document kind perfsuite writes or reads: its format name, its version, its schema.

One place for the versions (a reader of any kind asks here which versions it reads) and for the
schemas every document read from disk is validated against, once, where it is read: types,
ranges, finiteness and sizes, by pydantic rather than by checks spread over the code. A bad
document is a RecordError or ConfigError naming the file, the key path and the value.

Version history of the kinds other than results (results: perfsuite.core.record's docstring):
  pair, amp, gate, gate-selfcheck, checks, noise-floors, peaks
      1 - 2026-11: {"format": "perfsuite.KIND", "schema_version": 1, "results": ...}. Files
          written before (a bare list for pair/amp/gate, a bare mapping for floors and peaks) read
          as version 0.
  run-config, split, qwen-sweep
      1 - 2026-11-25: the same envelope keys at the top of the object. Files written before carry
          neither key and read as version 0, unchanged.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError

from perfsuite.core.errors import RecordError
from perfsuite.core.text import printable


def finite(obj):
    """`obj` with every NaN or infinity replaced by None: strict JSON, which any parser reads
    (Python's json writes `NaN`/`Infinity`, which strict parsers refuse)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj

# The results schema (perfsuite.core.record) and which older versions still read.
RESULTS_FORMAT = "perfsuite.results"
RESULTS_VERSION = 3
RESULTS_READABLE = (1, 2, 3)

# Every other kind: its current version. Readers accept it and the unversioned version 0.
VERSIONS = {
    "pair": 1, "amp": 1, "gate": 1, "gate-selfcheck": 1, "checks": 1, "noise-floors": 1, "peaks": 1,
    "run-config": 1, "split": 1, "qwen-sweep": 1, "bisect": 1, "why": 1,
}

# Limits on what a file may hold, so a hostile or corrupt file is refused instead of exhausting
# memory or time (each far above anything a real run writes; docs/input.md lists them).
MAX_SAMPLES = 1_000_000          # samples in one record (a 10-minute case of 1 µs blocks is 600k)
MAX_INT = 2**53                  # the largest integer a JSON reader in any language keeps exactly
MAX_NAME = 1000                  # characters of a workload, device or label
MAX_PARAMS = 100                 # parameters of one case
MAX_GROUPS = 10_000              # worker processes or builds of one record


def _finite(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError("must be a finite number")
    return x


Int = Annotated[int, Field(strict=True, ge=-MAX_INT, le=MAX_INT)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_INT)]
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Positive = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
Name = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_NAME)]
Text = Annotated[str, Field(strict=True, max_length=100_000)]
# A parameter value: what a sweep can hold (numbers finite: a NaN parameter names no case).
Scalar = Union[StrictBool, Int, Finite, Annotated[str, Field(strict=True, max_length=MAX_NAME)], None]
Params = Annotated[dict[Annotated[str, Field(max_length=MAX_NAME)], Scalar], Field(max_length=MAX_PARAMS)]


def _seconds(values: list[float]) -> list[float]:
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError("every value must be a positive finite number")
    return values


# Sample lists: one message for any bad sample, not a line per sample of a million.
SampleList = Annotated[list[Annotated[float, Field(strict=True)]], Field(max_length=MAX_SAMPLES),
                       AfterValidator(_seconds)]
Samples = Annotated[SampleList, Field(min_length=1)]


class _Doc(BaseModel):
    # Strict: "1.5" is not a number and 1 is not true. Extra keys kept: documents grow additively.
    model_config = ConfigDict(strict=True, extra="allow")


# --- results: one record -------------------------------------------------------------------------

class WorkDoc(_Doc):
    model_config = ConfigDict(strict=True, extra="forbid")
    items_per_step: Positive
    item_unit: Name
    flops_per_step: NonNegative | None = None
    flops_method: Name | None = "unknown"  # None: no FLOPs declared or counted
    bytes_per_step: NonNegative | None = None
    dtype: Name = "fp32"


class PeakBlock(_Doc):
    flops_per_s: Positive | None = None
    bytes_per_s: Positive | None = None


class GroupDoc(_Doc):
    samples_s: Samples
    median: Positive


class RecordConfigDoc(_Doc):
    """A record's config: the run's settings, kept as they were (extra keys allowed); the ones a
    reader computes with are typed."""
    # A 95% half-width on logs that widens the interval: a finite fraction, not a string or 1e300.
    run_drift: Annotated[float, Field(strict=False, allow_inf_nan=False, ge=0, lt=1)] | None = None


class RecordDoc(_Doc):
    model_config = ConfigDict(strict=True, extra="forbid")
    schema_version: Literal[1, 2, 3]
    id: Annotated[str, Field(strict=True, max_length=200)] = ""
    created: Annotated[str, Field(strict=True, max_length=200)] = ""
    workload: Name
    params: Params
    device: Name
    timing_method: Name
    block_size: Annotated[int, Field(strict=True, ge=1, le=MAX_INT)]
    samples_s: Samples
    work: WorkDoc
    warmup: dict = {}
    memory: dict = {}
    nvml: dict = {}
    env: dict = {}
    peak: PeakBlock | None = None
    config: RecordConfigDoc = RecordConfigDoc()
    converged: StrictBool = False
    warnings: list[Text] = []
    extra: dict = {}
    conditions: dict = {}
    processes: Annotated[list[GroupDoc], Field(max_length=MAX_GROUPS)] | None = None
    builds: Annotated[list[GroupDoc], Field(max_length=MAX_GROUPS)] | None = None
    derived: Any = None  # recomputed on load, never read


# --- the other kinds -------------------------------------------------------------------------------

Interval = Annotated[list[Finite], Field(min_length=2, max_length=2)]


class PairDoc(_Doc):
    workload: Name
    params: Params
    a: Scalar
    b: Scalar
    ratios: SampleList
    case: Params | None = None  # a suite's entry: the parameters its case was given (resume keys it)
    # What the report reads, when present (derived numbers may be recomputed rather than stored).
    vary: Name | None = None
    time_ratio: Finite | None = None
    time_ratio_ci: Interval | None = None
    saved_ratio: Finite | None = None


class AmpDoc(_Doc):
    workload: Name
    params: Params
    device: Name
    precision_a: Name
    precision_b: Name
    time_a_s: SampleList
    time_b_s: SampleList
    case: Params | None = None  # a suite's entry: the parameters its case was given (resume keys it)
    # What the report reads, when present.
    speedup: Finite | None = None
    speedup_ci: Interval | None = None
    memory_ratio: Finite | None = None
    final_loss_a: Finite | None = None
    final_loss_b: Finite | None = None
    accuracy_ok: StrictBool | None = None


class GateDoc(_Doc):
    label: Name
    median_ratio: Finite | None
    slower: StrictBool


class SelfcheckDoc(_Doc):
    case: Name
    caught: Count
    false_alarms: Count
    trials: Count


class CheckDoc(_Doc):
    workload: Name
    name: Name
    ok: StrictBool
    detail: Text


class PeakDoc(_Doc):
    flops_per_s: dict[Name, Positive | None]
    bytes_per_s: Positive | None = None


# A noise floor is a fraction of the median: 0.02 is 2%; above 10 (1000%) it is no floor.
Floor = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=10)]


class FailureDoc(_Doc):
    """A case that failed, stored beside the records so a resumed run knows it."""
    workload: Name
    params: Params = {}
    device: Name | None = None


class BisectDoc(_Doc):
    """One bisection's log (perfsuite.compare.bisect): what it was asked and every probe."""
    workload: Name
    params: Params
    device: Name
    good: dict  # the commit: sha and subject
    commits: Annotated[list, Field(max_length=MAX_GROUPS)]
    probes: Annotated[list[dict], Field(max_length=MAX_GROUPS)]


class WhyDoc(_Doc):
    """A differential profile of two sides (perfsuite.compare.why)."""
    workload: Name
    device: Name
    how: Any
    a: Any
    b: Any
    steps: Count
    rounds: Count


class RunConfigDoc(_Doc):
    digest: Annotated[str, Field(strict=True, max_length=200)]


_MANY = {"pair": PairDoc, "amp": AmpDoc, "gate": GateDoc, "gate-selfcheck": SelfcheckDoc, "checks": CheckDoc,
         "bisect": BisectDoc, "why": WhyDoc}
SCHEMAS: dict[str, TypeAdapter] = {
    **{kind: TypeAdapter(list[model]) for kind, model in _MANY.items()},
    "noise-floors": TypeAdapter(dict[Name, Floor]),
    "peaks": TypeAdapter(dict[Name, PeakDoc]),
    "run-config": TypeAdapter(RunConfigDoc),
    "failures": TypeAdapter(Annotated[list[FailureDoc], Field(max_length=MAX_GROUPS * 10)]),
}
RECORD = TypeAdapter(RecordDoc)


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f" {part}" if out == "result" else f"[{part}]"
        elif part in ("function-after", "function-before", "list", "dict", "str", "int", "float", "bool",
                      "none", "nullable", "union", "tagged-union") or str(part).startswith(("function-", "constrained-")):
            continue  # pydantic's names for the branch of a union it tried, not a key of the file
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return printable(text if len(text) <= 60 else text[:57] + "...")


def explain(exc: ValidationError, prefix: str = "", limit: int = 3) -> str:
    """A ValidationError in a line or three: key path, what is wrong, the value found."""
    seen, lines = set(), []
    for e in exc.errors(include_url=False):
        loc = ((prefix,) if prefix else ()) + tuple(e["loc"])
        if e["type"] == "missing":
            where, what = _where(loc[:-1]), f"missing {loc[-1]}"
        else:
            msg = e["msg"].removeprefix("Value error, ")
            where, what = _where(loc), f"{msg[:1].lower()}{msg[1:]} (got {_shown(e.get('input'))})"
        if (where, what[:8]) in seen:  # a union's branches each say why: the first is enough
            continue
        seen.add((where, what[:8]))
        lines.append(f"{where}: {what}")
    more = len(lines) - limit
    return "; ".join(lines[:limit]) + (f"; and {more} more" if more > 0 else "")


def validate(kind: str, data: Any, where: str, error: type[Exception] = RecordError) -> Any:
    """`data` checked against `kind`'s schema; the error names `where` (the file) and the key path."""
    try:
        SCHEMAS[kind].validate_python(data)
    except ValidationError as exc:
        # A list kind's first location is the result's index: "pair result 0: missing ratios".
        text = explain(exc, "result" if kind in _MANY else "")
        raise error(f"{where}: {kind} {text}") from None
    return data


def check_record(data: dict) -> None:
    """One record's raw fields, as read from a file, before perfsuite.core.record builds it."""
    try:
        RECORD.validate_python(data)
    except ValidationError as exc:
        raise RecordError(explain(exc)) from None


def envelope(kind: str, body: dict | None = None) -> dict:
    """The format and version keys of `kind` (put first, for a reader's eye)."""
    return {"format": f"perfsuite.{kind}", "schema_version": VERSIONS[kind], **(body or {})}


def version_of(doc: Any, kind: str, where: str) -> int:
    """Which version of `kind` `doc` is (0: written before the kind carried one); a file of
    another kind, or of a version this perfsuite does not read, is a RecordError."""
    if not isinstance(doc, dict) or "format" not in doc:
        return 0
    if doc.get("format") != f"perfsuite.{kind}":
        raise RecordError(f"{where}: a {_shown(doc.get('format'))} document, expected 'perfsuite.{kind}'")
    version = doc.get("schema_version")
    if version != VERSIONS[kind] or isinstance(version, bool):
        raise RecordError(f"{where}: {kind} schema_version {_shown(version)}; this perfsuite reads "
                          f"{VERSIONS[kind]}")
    return version
