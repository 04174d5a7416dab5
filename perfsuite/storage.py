"""Atomic save and load of records.

A results file holds the records of one run:
    {"format": "perfsuite.results", "schema_version": 1, "records": [...]}
It is rewritten after every finished case (temporary file, fsync, rename), so an interrupted
sweep keeps each case measured so far and a crash never leaves a half-written file. A run
refuses to start on a path that already exists: earlier results are never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from perfsuite.errors import ConfigError, RecordError
from perfsuite.record import RESULTS_FORMAT, SCHEMA_VERSION, Record, case_key


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old or the new file, never half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Includes KeyboardInterrupt: the temporary file must not litter the results folder.
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def results_document(records: Iterable[Record], failures: Iterable[dict] = ()) -> str:
    doc = {
        "format": RESULTS_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "records": [r.to_dict() for r in records],
        "failures": list(failures),
    }
    return json.dumps(doc, indent=1, allow_nan=False)


def new_results_path(results_dir: Path, label: str) -> Path:
    """A fresh file name in `results_dir`: UTC time, a slug of `label`, and a random suffix."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")[:60] or "run"
    return Path(results_dir) / f"{stamp}-{slug}-{uuid.uuid4().hex[:6]}.json"


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` if needed; a clear error when it cannot be created or written to."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {what} {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK):
        raise ConfigError(f"{what} {path} is not writable")
    return path


class ResultsWriter:
    """Accumulates a run's records in one file, saved atomically after each record."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise ConfigError(f"--out {self.path}: file exists; refusing to overwrite earlier results")
        writable_dir(self.path.parent, "results directory")
        self.records: list[Record] = []
        self.failures: list[dict] = []

    @classmethod
    def resume(cls, path: Path) -> "ResultsWriter":
        """Continue a run's own file (a resumed sweep): its records and failures are kept."""
        path = Path(path)
        if not path.exists():
            return cls(path)
        records = load_records(path)
        try:
            failures = json.loads(path.read_text()).get("failures", [])
        except (OSError, json.JSONDecodeError, AttributeError):
            failures = []
        w = cls.__new__(cls)
        w.path, w.records, w.failures = path, records, list(failures)
        return w

    def has_failure(self, key: tuple) -> bool:
        return any(_failure_key(f) == key for f in self.failures)

    def drop_failure(self, key: tuple) -> None:
        self.failures = [f for f in self.failures if _failure_key(f) != key]
        self._save()

    def add(self, record: Record) -> None:
        self.records.append(record)
        self._save()

    def add_failure(self, failure: dict) -> None:
        self.failures.append(failure)
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.path, results_document(self.records, self.failures))


def _failure_key(f: dict) -> tuple:
    return case_key(f.get("workload"), f.get("params") or {}, f.get("device"))


def failure_entry(workload: str, params: dict, device: str, exc: BaseException) -> dict:
    """What is kept of a case that failed: which case, what kind of failure, and the message."""
    text = f"{type(exc).__name__}: {exc}".strip()
    oom = type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower()
    return {
        "workload": workload,
        "params": dict(params),
        "device": device,
        "kind": "oom" if oom else "error",
        "error": text.splitlines()[0][:500] if text else type(exc).__name__,
        "created": datetime.now(timezone.utc).isoformat(),
    }


def load_records(path: str | os.PathLike) -> list[Record]:
    """Records from a results file (or a single bare record); errors name the file and the fault."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise RecordError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{p}: cannot read: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    from perfsuite import importers

    if importers.is_pytest_benchmark(doc):
        return importers.from_pytest_benchmark(doc, p)
    if importers.is_asv_result(doc):
        return importers.from_asv(doc, p)
    if isinstance(doc, dict) and doc.get("format") == RESULTS_FORMAT:
        raw = doc.get("records")
        if not isinstance(raw, list):
            raise RecordError(f"{p}: 'records' must be a list")
    elif isinstance(doc, dict) and "schema_version" in doc and "workload" in doc:
        raw = [doc]
    else:
        raise RecordError(f"{p}: not a perfsuite, pytest-benchmark or asv results file")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(Record.from_dict(item))
        except RecordError as exc:
            raise RecordError(f"{p}: record {i}: {exc}") from None
    return out


def load_many(paths: Iterable[str | os.PathLike]) -> tuple[list[Record], list[str]]:
    """Records from files and directories (every *.json inside, recursively). A corrupt or
    foreign file does not stop the others: it is named in the returned problems."""
    records: list[Record] = []
    problems: list[str] = []
    for given in paths:
        p = Path(given)
        files = sorted(p.rglob("*.json")) if p.is_dir() else [p]
        for f in files:
            try:
                records.extend(load_records(f))
            except RecordError as exc:
                problems.append(str(exc))
    return records, problems
