"""Every document kind perfsuite writes or reads: its format name, its version, its schema.

One place for the versions (a reader of any kind asks here which versions it reads) and for how a
document read from disk is validated, once, where it is read: types, ranges, finiteness and sizes,
by pydantic rather than by checks spread over the code. A bad document is a RecordError or
ConfigError naming the file, the key path and the value.

A result shape is one definition: a pydantic dataclass (`shape`) whose fields are its schema. It
is validated when it is built, and a document read from disk is validated into it once, by one
TypeAdapter (`load`); it is written by the same adapter (`dump`), the figures derived from its
fields (`Result.DERIVED`) beside them for readers without perfsuite, never read back. The record is defined in
perfsuite.core.record; the results of the other kinds (pair, amp, gate, bisect, history, why) in
perfsuite.compare, whose class a reader passes (`validate(..., model=)`; perfsuite.compare.kinds
holds them by kind), so nothing below imports upward and nothing is registered by an import. The kinds without a class
of their own (noise floors, peaks, checks, failures...) are checked against the schemas below and
read back as the plain data they are.

Version history of the kinds other than results (results: perfsuite.core.record's docstring):
  pair, amp, gate, gate-selfcheck, checks, noise-floors, peaks
      1 - 2026-11: {"format": "perfsuite.KIND", "schema_version": 1, "results": ...}. Files
          written before (a bare list for pair/amp/gate, a bare mapping for floors and peaks) read
          as version 0.
  run-config, split, qwen-sweep
      1 - 2026-11-25: the same envelope keys at the top of the object. Files written before carry
          neither key and read as version 0, unchanged.
  gate, gate-selfcheck, bisect
      2 - 2026-11-28: a gate verdict keeps its pairs under `run` (perfsuite.compare.paired_gate.PairedRun:
          ratios, block_size, looks, decision, p, settle, faults_per_pair, units) beside label,
          threshold, confirmed, notes, alpha and direction; version 1 kept them at the top of the
          verdict, and reads as 2 (GateVerdict's migration). A bisection's probes and a self-check's
          runs hold gate verdicts, so they moved with it. Gate verdicts written before the pairs were
          kept at all (no `ratios`) read as what they are: a label, a median ratio and `slower`.
  pair, amp
      Additive, 2026-11-28: a suite's entry carries `case` and the suite's `suite`, `suite_sha256`
      and `config_digest` as fields of the result (null elsewhere).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import field, fields
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    TypeAdapter,
    ValidationError,
    model_serializer,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import Self, dataclass_transform  # typing's is 3.11+; pydantic depends on typing_extensions

from perfsuite.core.errors import RecordError
from perfsuite.core.text import printable


def finite(obj: Any) -> Any:
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
RESULTS_VERSION: Final = 5
RESULTS_READABLE = (1, 2, 3, 4, 5)

# Every other kind: its current version. Readers accept it, every earlier one and the unversioned 0.
VERSIONS = {
    "pair": 1,
    "amp": 1,
    "gate": 4,  # 3: each verdict's work and work_changes; 4: its paired energy
    "gate-selfcheck": 2,
    "checks": 1,
    "noise-floors": 1,
    "peaks": 1,
    "run-config": 1,
    "split": 1,
    "qwen-sweep": 1,
    "bisect": 2,
    "why": 2,  # 2: the kind of change (work, work_changes)
    "history": 1,
    "variants": 1,
    "count-history": 2,  # 2: each flagged commit's gate by time (by_time, by_time_note), the counter
}

# Limits on what a file may hold, so a hostile or corrupt file is refused instead of exhausting
# memory or time (each far above anything a real run writes; docs/input.md lists them).
MAX_SAMPLES = 1_000_000  # samples in one record (a 10-minute case of 1 µs blocks is 600k)
MAX_INT = 2**53  # the largest integer a JSON reader in any language keeps exactly
MAX_NAME = 1000  # characters of a workload, device or label
MAX_PARAMS = 100  # parameters of one case
MAX_GROUPS = 10_000  # worker processes or builds of one record


Int = Annotated[int, Field(strict=True, ge=-MAX_INT, le=MAX_INT)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_INT)]
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Positive = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
# A measured figure that may be NaN or infinite in memory (a loss that diverged): written as null
# (strict JSON), read back as NaN.
Measured = Annotated[float, BeforeValidator(lambda v: math.nan if v is None else v), Field(strict=True)]
Name = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_NAME)]
Text = Annotated[str, Field(strict=True, max_length=100_000)]
# A parameter value: what a sweep can hold (numbers finite: a NaN parameter names no case).
Scalar = Union[StrictBool, Int, Finite, Annotated[str, Field(strict=True, max_length=MAX_NAME)], None]  # noqa: UP007 - a runtime alias pydantic reads
Params = Annotated[dict[Annotated[str, Field(max_length=MAX_NAME)], Scalar], Field(max_length=MAX_PARAMS)]


def _seconds(values: Sequence[float]) -> Sequence[float]:
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError("every value must be a positive finite number")
    return values


# Sample lists: one message for any bad sample, not a line per sample of a million.
SampleList = Annotated[
    list[Annotated[float, Field(strict=True)]], Field(max_length=MAX_SAMPLES), AfterValidator(_seconds)
]
Samples = Annotated[SampleList, Field(min_length=1)]
# The same, immutable (a record's raw samples).
SampleTuple = Annotated[
    tuple[Annotated[float, Field(strict=True)], ...],
    Field(min_length=1, max_length=MAX_SAMPLES),
    AfterValidator(_seconds),
]


# --- result shapes: one definition each ------------------------------------------------------------

T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(tp: Any) -> TypeAdapter[Any]:
    """The one TypeAdapter of a type (a result class, or a list of them)."""
    if tp not in _ADAPTERS:
        _ADAPTERS[tp] = TypeAdapter(tp)
    return _ADAPTERS[tp]


def dump(obj: Any) -> dict[str, Any]:
    """A result as JSON-ready data, by its schema: its fields, then its derived figures."""
    out: dict[str, Any] = adapter(type(obj)).dump_python(obj, mode="json")
    return out


def load(tp: Any, data: Any, what: str = "", error: type[Exception] = RecordError) -> Any:
    """`data` (parsed JSON) validated into `tp`, once; the error names `what` and the key path."""
    try:
        return adapter(tp).validate_python(data)
    except ValidationError as exc:
        raise error(f"{what}{' ' if what else ''}{explain(exc)}") from None


class Result:
    """What every result shape can do with its schema (see `shape`). `DERIVED`: the figures computed
    from its fields that its JSON carries beside them for readers without perfsuite (key: the
    attribute), never read back."""

    DERIVED: ClassVar[dict[str, str]] = {}

    @model_serializer(mode="wrap")
    def _with_derived(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key, attr in self.DERIVED.items():
            out[key] = getattr(self, attr)
        return out

    def to_dict(self) -> dict[str, Any]:
        return dump(self)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        out: Self = load(cls, data, getattr(cls, "WHAT", cls.__name__))
        return out


@dataclass_transform(field_specifiers=(field, Field))
def shape(
    what: str,
    *,
    frozen: bool = False,
    extra: Literal["ignore", "forbid", "allow"] = "ignore",
    error: type[Exception] = RecordError,
) -> Callable[[type[T]], type[T]]:
    """Make a class one result shape: a pydantic dataclass whose fields are its schema, validated
    when it is built (a bad value is `error`, naming `what` and the field), read and written by one
    TypeAdapter. `extra`: what a document's other keys do on read ("ignore": derived figures and
    keys of older versions are dropped; "forbid": refused)."""

    def make(cls: type[T]) -> type[T]:
        if not issubclass(cls, Result):
            raise TypeError(f"{cls.__name__}: a result shape derives from documents.Result")
        cls.WHAT = what  # type: ignore[attr-defined]  # a Result subclass: mypy sees only T
        made: Any = pydantic_dataclass(frozen=frozen, config=ConfigDict(extra=extra))(cls)
        init = made.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                init(self, *args, **kwargs)
            except ValidationError as exc:  # a positional argument's error is named by its field
                names = [f.name for f in fields(made) if f.init and not f.kw_only]
                raise error(f"{what}: {explain(exc, names=names)}") from None

        made.__init__ = __init__
        return cast("type[T]", made)

    return make


@shape("suite entry", frozen=True)
class SuiteEntry(Result):
    """What a suite's entry keeps beside a pair or amp result, so a resumed suite finds what is done
    by case key (perfsuite.storage.files.DocumentWriter): the parameters its case was given, and
    the suite's name, file digest and configuration digest. Null outside a suite."""

    case: Params | None = field(default=None, kw_only=True)
    suite: Name | None = field(default=None, kw_only=True)
    suite_sha256: Annotated[str, Field(strict=True, max_length=200)] | None = field(default=None, kw_only=True)
    config_digest: Annotated[str, Field(strict=True, max_length=200)] | None = field(default=None, kw_only=True)


# --- the kinds without a class of their own --------------------------------------------------------


class _Doc(BaseModel):
    # Strict: "1.5" is not a number and 1 is not true. Extra keys kept: documents grow additively.
    model_config = ConfigDict(strict=True, extra="allow")


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


class RunConfigDoc(_Doc):
    digest: Annotated[str, Field(strict=True, max_length=200)]


_MANY = ("pair", "amp", "gate", "gate-selfcheck", "checks", "bisect", "why", "history")
SCHEMAS: dict[str, TypeAdapter[Any]] = {
    "gate-selfcheck": TypeAdapter(list[SelfcheckDoc]),
    "checks": TypeAdapter(list[CheckDoc]),
    "noise-floors": TypeAdapter(dict[Name, Floor]),
    "peaks": TypeAdapter(dict[Name, PeakDoc]),
    "run-config": TypeAdapter(RunConfigDoc),
    "failures": TypeAdapter(Annotated[list[FailureDoc], Field(max_length=MAX_GROUPS * 10)]),
}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f" {part}" if out == "result" else f"[{part}]"
        elif part in (
            "function-after",
            "function-before",
            "list",
            "dict",
            "str",
            "int",
            "float",
            "bool",
            "none",
            "nullable",
            "union",
            "tagged-union",
        ) or str(part).startswith(("function-", "constrained-")):
            continue  # pydantic's names for the branch of a union it tried, not a key of the file
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return printable(text if len(text) <= 60 else text[:57] + "...")


class At(ValueError):
    """A validator's error about a key inside the value it checks (a record's `peak.flops_per_s`):
    explain() names the whole key path."""

    def __init__(self, key: str, what: str) -> None:
        super().__init__(f"{key}: {what}")
        self.key, self.what = key, what


def explain(exc: ValidationError, prefix: str = "", limit: int = 3, names: list[str] | None = None) -> str:
    """A ValidationError in a line or three: key path, what is wrong, the value found. `names`: the
    fields of a class built from positional arguments (pydantic locates those by their index)."""
    seen, lines = set(), []
    for e in exc.errors(include_url=False):
        loc = tuple(e["loc"])
        if names and loc and isinstance(loc[0], int) and loc[0] < len(names):
            loc = (names[loc[0]], *loc[1:])
        loc = ((prefix,) if prefix else ()) + loc
        if e["type"] in ("missing", "missing_argument"):
            where, what = _where(loc[:-1]), f"missing {loc[-1]}"
        elif e["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            where, what = _where(loc[:-1]), f"unknown field {printable(str(loc[-1]))[:60]!r}"
        elif isinstance((e.get("ctx") or {}).get("error"), At):
            at = e["ctx"]["error"]
            where = _where(loc)
            where = at.key if where == "(top level)" else where + ("" if at.key.startswith("[") else ".") + at.key
            what = at.what
        else:
            msg = e["msg"].removeprefix("Value error, ")
            where, what = _where(loc), f"{msg[:1].lower()}{msg[1:]} (got {_shown(e.get('input'))})"
        if (where, what[:8]) in seen:  # a union's branches each say why: the first is enough
            continue
        seen.add((where, what[:8]))
        lines.append(f"{where}: {what}")
    more = len(lines) - limit
    return "; ".join(lines[:limit]) + (f"; and {more} more" if more > 0 else "")


def validate(kind: str, data: Any, where: str, error: type[Exception] = RecordError, model: Any = None) -> Any:
    """`data` (a document's results) read as `kind`: objects of `model` for a kind whose results
    are classes defined above core (perfsuite.compare.kinds.RESULTS: the caller passes it), else the
    data itself, checked against the kind's schema. The error names `where` (the file) and the key path."""
    many = kind in _MANY
    if model is not None:
        schema = adapter(list.__class_getitem__(model))
    elif kind in SCHEMAS:
        schema = SCHEMAS[kind]
    else:
        raise ValueError(
            f"no schema for document kind {kind!r}: its results are a class of perfsuite.compare, which "
            "the caller passes (perfsuite.compare.kinds.load_result)"
        )
    try:
        out = schema.validate_python(data)
    except ValidationError as exc:
        # A list kind's first location is the result's index: "pair result 0: missing ratios".
        raise error(f"{where}: {kind} {explain(exc, 'result' if many else '')}") from None
    return out if model is not None else data


def envelope(kind: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
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
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSIONS[kind]:
        readable = ", ".join(map(str, range(1, VERSIONS[kind] + 1)))
        raise RecordError(f"{where}: {kind} schema_version {_shown(version)}; this perfsuite reads {readable}")
    return version
