"""Atomic save and load of records.

A results file holds the records of one run:
    {"format": "perfsuite.results", "schema_version": 1, "records": [...]}
It is rewritten after every finished case (temporary file, fsync, rename), so an interrupted
sweep keeps each case measured so far and a crash never leaves a half-written file. A run
creates its file exclusively when it starts, so it refuses a path that already exists: earlier
results are never overwritten, and two runs given one path cannot both write it.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfsuite.core import documents
from perfsuite.core.case import Case
from perfsuite.core.documents import finite
from perfsuite.core.errors import ConfigError, RecordError, StorageError
from perfsuite.core.git import GIT_FAILED, run_git
from perfsuite.core.record import READABLE_VERSIONS, RESULTS_FORMAT, SCHEMA_VERSION, Record, case_key
from perfsuite.core.text import slug
from perfsuite.database import select
from perfsuite.storage import importers, read, write


def _temp_pattern(path: Path) -> re.Pattern[str]:
    # Exactly the names _create_temp (and mkstemp before it) gives: `.NAME.` + 8 random
    # characters + `.tmp`, so that `.run.json.x.12345678.tmp` (run.json.x's) never matches run.json.
    return re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp")


def remove_stale_temps(path: Path) -> None:
    """Remove what a killed writer of `path` left: its own `.NAME.*.tmp` siblings, nothing else."""
    path = Path(path)
    pattern = _temp_pattern(path)
    try:
        with os.scandir(path.parent) as it:
            entries = list(it)
    except OSError:
        return
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                pass  # gone already, or not ours to remove: leaving it is harmless


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old or the new file, never half
    (perfsuite.storage.write: a symlink there is refused, an OSError is a StorageError)."""
    write.write_text(path, text)


def dumps(obj: Any, indent: int | None = 1) -> str:
    """Strict JSON text of `obj` (non-finite numbers become null)."""
    return json.dumps(finite(obj), indent=indent, allow_nan=False)


# Every other result perfsuite writes is a versioned document of one kind:
#   {"format": "perfsuite.KIND", "schema_version": N, "results": [...]}
# Kinds, versions and schemas: perfsuite.core.documents.
DOCUMENT_VERSION = 1
DOCUMENT_KINDS = (
    "pair",
    "amp",
    "gate",
    "gate-selfcheck",
    "checks",
    "noise-floors",
    "peaks",
    "bisect",
    "why",
    "history",
    "variants",
    "count-history",
)


def document(kind: str, results: Any, failures: list[dict[str, Any]] | None = None) -> str:
    """The text of a versioned document of `kind` (strict JSON); `failures`: the cases that failed
    (as perfsuite.run.execute.failure_entry writes them), kept beside the results."""
    if kind not in DOCUMENT_KINDS:
        raise ValueError(f"unknown document kind {kind!r}")
    return dumps(documents.envelope(kind, {"results": results, **({"failures": failures} if failures else {})}))


def document_failures(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The failed cases a versioned document keeps beside its results, validated ([] for none,
    or for a document written before failures were kept)."""
    p = Path(path)
    doc = read.read_json(p)
    failures = doc.get("failures", []) if isinstance(doc, dict) else []
    checked: list[dict[str, Any]] = documents.validate("failures", failures, str(p))
    return checked


def load_document(path: str | os.PathLike[str], kind: str, model: Any = None) -> Any:
    """The results of a document of `kind`, read once into `model`, the kind's result class where it
    has one (perfsuite.compare's: pair, amp, gate, bisect, history, why; the caller passes it:
    perfsuite.compare.kinds), else checked against its schema and returned as the data; errors name
    the file, the key path and the value."""
    p = Path(path)
    doc = read.read_json(p)
    if documents.version_of(doc, kind, str(p)):
        if "results" not in doc:
            raise RecordError(f"{p}: a {kind} document without its results")
        results = doc["results"]
    else:
        results = doc  # version 0: the bare results
    if kind == "amp" and isinstance(results, dict):
        results = [results]  # version 0 of amp: one comparison, bare
    return documents.validate(kind, results, str(p), model=model)


def versioned(kind: str, body: dict[str, Any]) -> str:
    """A one-object document of `kind` (run-config, split, qwen-sweep): its keys beside the format
    and version."""
    return dumps(documents.envelope(kind, body))


def results_document(records: Iterable[Record], failures: Iterable[dict[str, Any]] = ()) -> str:
    doc = {
        "format": RESULTS_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "records": [r.to_dict() for r in records],
        "failures": list(failures),
    }
    return json.dumps(doc, indent=1, allow_nan=False)


# Where results go by default, and where when the repository keeps its own results in results/ (issue 50).
DEFAULT_RESULTS_DIR = Path("results")
PRIVATE_RESULTS_DIR = Path(".perfsuite") / "results"
_PLACEHOLDERS = (".gitkeep", ".gitignore", "README.md")


def default_results_dir() -> tuple[Path, str | None]:
    """results/, unless git tracks files there other than a placeholder: that is the repository's
    own results folder (issue 50: `run` wrote its JSON among a user's tracked results), so
    perfsuite's go to .perfsuite/results, with a line saying so."""

    try:
        res = run_git(None, "ls-files", "-z", "--", str(DEFAULT_RESULTS_DIR), timeout=10)
    except GIT_FAILED:
        return DEFAULT_RESULTS_DIR, None
    tracked = [f for f in res.stdout.split("\0") if f and Path(f).name not in _PLACEHOLDERS]
    if res.returncode != 0 or not tracked:
        return DEFAULT_RESULTS_DIR, None
    return PRIVATE_RESULTS_DIR, (
        f"{DEFAULT_RESULTS_DIR}/ holds {len(tracked)} file(s) tracked by git, this repository's own: "
        f"perfsuite's results go to {PRIVATE_RESULTS_DIR} (--results-dir to choose)"
    )


def new_results_path(results_dir: Path, label: str) -> Path:
    """A fresh file name in `results_dir`: UTC time, a slug of `label`, and a random suffix."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return write.inside(results_dir, f"{stamp}-{slug(label, 60)}-{uuid.uuid4().hex[:6]}.json")


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` if needed (storage.write.check_output_dir: before anything is measured); a
    clear error when it cannot be created, written to, or has no room."""
    try:
        return write.check_output_dir(path, what)
    except StorageError as exc:
        raise ConfigError(str(exc)) from None


class ResultsWriter:
    """Accumulates a run's records in one file, saved atomically after each record."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        writable_dir(self.path.parent, "results directory")
        self.records: list[Record] = []
        self.failures: list[dict[str, Any]] = []
        # Claimed now, exclusively: of two runs started on one path the second fails here,
        # instead of both running and the later rename discarding the other's records.
        try:
            write.claim(self.path, results_document([], []))
        except FileExistsError:
            raise ConfigError(
                f"--out {self.path}: file exists (earlier results, or another run's now); "
                "refusing to overwrite earlier results"
            ) from None
        except OSError as exc:
            raise ConfigError(f"--out {self.path}: cannot create ({exc.strerror})") from None
        remove_stale_temps(self.path)  # only after the claim: a live writer's are not ours

    @classmethod
    def resume(cls, path: Path) -> ResultsWriter:
        """Continue a run's own file (a resumed sweep): its records and failures are kept."""
        path = Path(path)
        if not path.exists():
            return cls(path)
        records = load_records(path)
        doc = read.read_json(path)
        failures = doc.get("failures") or [] if isinstance(doc, dict) else []
        documents.validate("failures", failures, str(path))  # resume keys them: typed, hashable
        w = cls.__new__(cls)
        w.path, w.records, w.failures = path, records, list(failures)
        remove_stale_temps(path)
        return w

    def has_failure(self, key: tuple[Any, ...]) -> bool:
        return any(_failure_key(f) == key for f in self.failures)

    def drop_failure(self, key: tuple[Any, ...]) -> None:
        self.failures = [f for f in self.failures if _failure_key(f) != key]
        self._save()

    def results_held(self) -> bool:
        """Whether it holds anything (a record or a failure): an empty claim is discarded."""
        return bool(self.records or self.failures)

    def add(self, record: Record, case: Case | None = None, kind: str | None = None) -> None:
        self.records.append(record)
        self._save()

    def add_failure(self, failure: dict[str, Any], case: Case | None = None) -> None:
        self.failures.append(failure)
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.path, results_document(self.records, self.failures))


class DocumentWriter:
    """ResultsWriter's twin for the other measured kinds (pair, amp, gate): a versioned document
    of `kind`, its results and its failed cases, saved atomically after each case. Each result is
    stored with the parameters its case was given (`case`) and `extra` (a suite's name and
    digest), so a resumed suite finds what is done by the same case key as a run entry."""

    def __init__(self, path: Path, kind: str, extra: dict[str, Any] | None = None, *, claim: bool = True) -> None:
        self.path, self.kind, self.extra = Path(path), kind, dict(extra or {})
        self.results: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        if claim:
            writable_dir(self.path.parent, "output folder")
            try:  # claimed now, exclusively, as ResultsWriter does: no earlier file is overwritten
                write.claim(self.path, document(kind, []))
            except FileExistsError:
                raise ConfigError(f"--out {self.path}: file exists; refusing to overwrite") from None
            except OSError as exc:
                raise ConfigError(f"--out {self.path}: cannot create ({exc.strerror})") from None

    @classmethod
    def resume(cls, path: Path, kind: str, extra: dict[str, Any] | None = None, *, model: Any) -> DocumentWriter:
        """Continue an interrupted entry's document: its results and failures are kept."""
        path = Path(path)
        if not path.exists():
            return cls(path, kind, extra)
        w = cls(path, kind, extra, claim=False)
        w.results = [
            documents.dump(r) if isinstance(r, documents.Result) else r for r in load_document(path, kind, model)
        ]
        w.failures = document_failures(path)
        return w

    def done_cases(self) -> list[dict[str, Any]]:
        """The parameters of every finished case (documents written before `case` was kept
        give their own `params`)."""
        return [dict(r["case"] if r.get("case") is not None else r.get("params") or {}) for r in self.results]

    def has_failure(self, key: tuple[Any, ...]) -> bool:
        return any(_failure_key(f) == key for f in self.failures)

    def drop_failure(self, key: tuple[Any, ...]) -> None:
        self.failures = [f for f in self.failures if _failure_key(f) != key]
        self._save()

    def add(self, result: Any, case: Case | None = None, kind: str | None = None) -> None:
        entry = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        if case is not None:
            entry["case"] = dict(case.params)
        self.results.append({**entry, **self.extra})
        self._save()

    def add_failure(self, failure: dict[str, Any], case: Case | None = None) -> None:
        self.failures.append(failure)
        self._save()

    def results_held(self) -> bool:
        """Whether it holds anything (a result or a failure): an empty claim is discarded."""
        return bool(self.results or self.failures)

    def _save(self) -> None:
        atomic_write_text(self.path, document(self.kind, self.results, self.failures))


def _failure_key(f: dict[str, Any]) -> tuple[Any, ...]:
    return case_key(f["workload"], f.get("params") or {}, f.get("device"))  # a failure always names its workload


def load_records(path: str | os.PathLike[str]) -> list[Record]:
    """Records from a results file (or a single bare record), or from the results store for a
    `store:` source (perfsuite.database.select); errors name the file and the fault."""
    if select.is_source(path):
        return select.load(path)
    records, problems = _read_records(Path(path))
    if problems:
        raise RecordError(problems[0])
    return records


def _read_records(p: Path) -> tuple[list[Record], list[str]]:
    """The file's valid records and, one line each, what was wrong with the others. A file that
    cannot be read as a whole raises RecordError."""
    doc = read.read_json(p)

    if importers.is_pytest_benchmark(doc):
        return importers.from_pytest_benchmark(doc, p), []
    if importers.is_asv_result(doc):
        return importers.from_asv(doc, p), []
    if isinstance(doc, dict) and doc.get("format") == RESULTS_FORMAT:
        version = doc.get("schema_version")
        if version not in READABLE_VERSIONS:  # a file from a newer perfsuite, or not one at all
            raise RecordError(
                f"{p}: results schema_version {version!r}; this perfsuite reads "
                f"{', '.join(map(str, READABLE_VERSIONS))}"
            )
        raw = doc.get("records")
        if not isinstance(raw, list):
            raise RecordError(f"{p}: 'records' must be a list")
    elif isinstance(doc, dict) and "schema_version" in doc and "workload" in doc:
        raw = [doc]
    else:
        raise RecordError(f"{p}: not a perfsuite, pytest-benchmark or asv results file")
    out, problems = [], []
    for i, item in enumerate(raw):
        try:
            out.append(Record.from_dict(item))
        except RecordError as exc:  # one bad record does not take its file's good ones with it
            problems.append(f"{p}: record {i}: {exc}")
        except RecursionError:
            problems.append(f"{p}: record {i}: nested too deeply")
    return out, problems


# Files a folder of results also holds that are not results: paired and precision comparisons and
# differential profiles (read by `report` as documents of their kind), bisection logs, and a suite
# run's configuration and checks.
NOT_RESULTS_SUFFIXES = (".amp.json", ".pair.json", ".why.json", ".bisect.json")
SUITE_CONFIG = "run-config.json"
SUITE_CHECKS = "checks.json"  # only beside a run-config.json: elsewhere the name is the user's


def _is_results(f: Path) -> bool:
    if f.name.endswith(NOT_RESULTS_SUFFIXES) or f.name == SUITE_CONFIG:
        return False
    return not (f.name == SUITE_CHECKS and (f.parent / SUITE_CONFIG).exists())


def results_in(folder: Path) -> list[Path]:
    """The results files in `folder`, recursively: every *.json but the suite's other files."""
    return [f for f in sorted(Path(folder).rglob("*.json")) if _is_results(f)]


def load_many(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Record], list[str]]:
    """Records from files and directories (every results *.json inside, recursively). A corrupt or
    foreign file does not stop the others, nor a bad record its file's good ones: each is named
    in the returned problems."""
    records: list[Record] = []
    problems: list[str] = []

    for given in paths:
        if select.is_source(given):
            records.extend(select.load(given))
            continue
        p = Path(given)
        files = results_in(p) if p.is_dir() else [p]
        for f in files:
            try:
                good, bad = _read_records(f)
            except RecordError as exc:
                problems.append(str(exc))
                continue
            records.extend(good)
            problems.extend(bad)
    return records, problems
