"""`perfsuite store import`: existing results files into the store, idempotently.

perfsuite results files, asv results and pytest-benchmark JSON become records; perfsuite's other
documents (pair, amp, gate, bisect, why...) become documents. Each file is one run of kind
"import" whose id is the file's content hash, and each record is kept once by its content digest
(perfsuite.database.store.record_digest), so importing twice, or two copies of one file, adds nothing.
A record keeps the machine its file says it came from; one from this machine (same host and
fingerprint) joins this machine's history.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core import documents
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Record
from perfsuite.database.machine import Machine, fingerprint_of, imported_machine, this_machine
from perfsuite.database.store import Store, new_run
from perfsuite.storage import read
from perfsuite.storage.files import DOCUMENT_KINDS, SUITE_CONFIG, _read_records, load_document


@dataclass
class ImportReport:
    files: int = 0
    records: int = 0
    documents: int = 0
    already: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: ImportReport) -> None:
        """`other`'s counts and problems added to these (one report over several imports)."""
        self.files += other.files
        self.records += other.records
        self.documents += other.documents
        self.already += other.already
        self.problems += other.problems


def _files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    out = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            out += [f for f in sorted(p.rglob("*.json")) if f.name != SUITE_CONFIG and f.is_file()]
        else:
            out.append(p)
    return out


def _document_kind(doc: Any) -> str | None:
    if isinstance(doc, dict) and isinstance(doc.get("format"), str) and doc["format"].startswith("perfsuite."):
        kind = doc["format"].split(".", 1)[1]
        return kind if kind in DOCUMENT_KINDS else None
    return None


def _machine_for(env: dict[str, Any], here: Machine) -> Machine:
    digest, _ = fingerprint_of(env)
    if env.get("host") == here.info.get("host") and digest == here.fingerprint:
        return here
    return imported_machine(env)


def import_paths(store: Store, paths: Iterable[str | os.PathLike[str]], results: Mapping[str, Any]) -> ImportReport:
    """Every results file and document under `paths` into `store`; `results`: the result class of
    each document kind that has one (perfsuite.compare.kinds.RESULTS), its documents read through it."""
    report = ImportReport()
    here = this_machine()
    for f in _files(paths):
        try:
            data = read.read_bytes(f)
            doc = read.parse_json(data.decode("utf-8", "replace"), str(f))
        except RecordError as exc:
            report.problems.append(str(exc))
            continue
        run_id = "import-" + hashlib.sha256(data).hexdigest()[:32]
        kind = _document_kind(doc)
        try:
            if kind is not None:
                entries = load_document(f, kind, results.get(kind))
                _store_documents(
                    store, run_id, here, f, kind, entries if isinstance(entries, list) else [entries], report
                )
            else:
                records, bad = _read_records(f)
                report.problems += bad
                _store_records(store, run_id, here, f, records, report)
        except RecordError as exc:
            report.problems.append(str(exc))
            continue
        report.files += 1
    return report


def _store_records(
    store: Store, run_id: str, here: Machine, f: Path, records: list[Record], report: ImportReport
) -> None:
    by_machine: dict[str, tuple[Machine, list[Record]]] = {}
    for r in records:
        m = _machine_for(r.env, here)
        by_machine.setdefault(m.id, (m, []))[1].append(r)
    first = next(iter(by_machine.values()), (here, []))[0]
    store.begin_run(_run_row(run_id, first, f), first)
    for machine, group in by_machine.values():
        store.add_machine(machine)
        new = store.add_records(run_id, machine.id, group)
        report.records += new
        report.already += len(group) - new


def _store_documents(
    store: Store, run_id: str, here: Machine, f: Path, kind: str, entries: list[Any], report: ImportReport
) -> None:
    store.begin_run(_run_row(run_id, here, f), here)
    # A kind with a result class was read into it (validated once): stored as its schema writes it.
    entries = [documents.dump(e) if isinstance(e, documents.Result) else e for e in entries]
    new = store.add_documents(run_id, here.id, kind, [e if isinstance(e, dict) else {"value": e} for e in entries])
    report.documents += new
    report.already += len(entries) - new


def _run_row(run_id: str, machine: Machine, f: Path) -> dict[str, Any]:
    row = new_run("import", machine, config={"source": os.fspath(f.resolve())}, run_id=run_id)
    return {**row, "state": "finished", "finished": row["started"]}
