"""Every verdict the results store holds, as one pandas DataFrame (issue 50: gate, bisect and history
verdicts queryable like records). One row per verdict: a gate's case, a history's measured point
(judged by its recheck where it has one), a bisection's answer, a variant against eager (issue 53:
its status, whether it holds accuracy, its speed-up, and whether it is the one recommended); with its word, ratio, interval and
what kind of change it is (perfsuite.compare.work). `perfsuite.verdicts()` is this call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from perfsuite.compare.bisection import Answer, Bisection
from perfsuite.compare.paired_gate import GateVerdict
from perfsuite.compare.paired_history import History
from perfsuite.compare.variant_study import VariantStudy
from perfsuite.core.errors import RecordError

KINDS = ("gate", "history", "bisect", "variants")
COLUMNS = [
    "kind", "workload", "created", "run", "machine", "label", "commit", "parent",
    "word", "ratio", "ci_low", "ci_high", "confirmed", "work", "work_changes", "answer",
    "variant", "status", "holds", "speedup", "kept", "best",
]  # fmt: skip


def _verdict_row(v: GateVerdict) -> dict[str, Any]:
    has_pairs = bool(v.run.ratios)
    low, high = v.interval if has_pairs else (None, None)
    return {
        "label": v.label,
        "word": v.word if has_pairs else None,
        "ratio": v.median_ratio if has_pairs else None,
        "ci_low": low,
        "ci_high": high,
        "confirmed": v.confirmed,
        "work": v.work,
        "work_changes": "; ".join(v.work_changes),
    }


def rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The verdict rows of one stored document (Store.documents' row: kind, doc, run_id, ...)."""
    kind, doc = document["kind"], document["doc"]
    where = {
        "kind": kind,
        "workload": document.get("workload"),
        "created": document.get("created"),
        "run": document.get("run_id"),
        "machine": document.get("machine_id"),
    }
    if kind == "gate":
        v = GateVerdict.from_dict(doc)
        return [{**where, **_verdict_row(v), "commit": v.new_commit, "parent": v.base_commit}]
    if kind == "history":
        out = []
        for p in History.from_dict(doc).points:
            if p.evidence is not None:
                out.append({**where, **_verdict_row(p.evidence), "commit": p.blamed, "parent": p.parent})
        return out
    if kind == "bisect":
        answer = Answer.from_dict(doc["answer"])
        state = Bisection.from_dict({k: v for k, v in doc.items() if k != "answer"})
        # answer: found, undecided or not changed; word: the named commit's own probe against good
        row = {**where, "label": state.workload, "answer": answer.state, "parent": state.good.sha}
        if answer.commit is not None:
            row["commit"] = answer.commit.sha
        if answer.probe is not None and answer.probe.verdict is not None:
            row.update({k: v for k, v in _verdict_row(answer.probe.verdict).items() if k != "label"})
        return [row]
    if kind == "variants":  # a row per variant of the case: its verdict against eager, and the floor's answer
        study = VariantStudy.from_dict(doc)
        case = ", ".join(f"{k}={v}" for k, v in study.params.items())
        out = []
        for r in study.rows:
            row = {**where, "label": f"{study.workload} [{case}]", "variant": r.variant, "status": r.status,
                   "holds": r.holds, "speedup": r.speedup, "best": r.variant == study.best,
                   "kept": "; ".join(f"{k} {v:.4f}" for k, v in r.kept.items()) or None}  # fmt: skip
            if r.verdict is not None:
                row.update({k: v for k, v in _verdict_row(r.verdict).items() if k != "label"})
            out.append(row)
        return out
    return []


def frame(documents: Iterable[Mapping[str, Any]], skipped: list[str] | None = None):
    """The rows of every verdict document, oldest first, as a DataFrame with COLUMNS. A document
    that does not read raises RecordError naming it, unless `skipped` collects the problem."""
    import pandas as pd

    out: list[dict[str, Any]] = []
    for d in documents:
        try:
            out.extend(rows(d))
        except (RecordError, KeyError, TypeError, ValueError) as exc:
            problem = f"{d.get('kind')} document of run {d.get('run_id')}: {exc}"
            if skipped is None:
                raise RecordError(problem) from None
            skipped.append(problem)
    return pd.DataFrame(out, columns=COLUMNS)


def verdicts(
    store: str | None = None,
    *,
    kind: str | None = None,
    workload: str | None = None,
    since: str | None = None,
    skipped: list[str] | None = None,
):
    """Every gate, history, bisect and variant verdict in the results store (`store`: a location as
    --store takes it; None: the project's), optionally of one `kind`, one `workload`, since a date."""
    from perfsuite.database.location import resolve
    from perfsuite.database.select import utc_time
    from perfsuite.database.store import Store

    if kind is not None and kind not in KINDS:
        raise RecordError(f"kind {kind!r}: verdicts are of kind {', '.join(KINDS)}")
    when = utc_time(since, "since") if since is not None else None
    with Store(resolve(store)) as db:
        docs = [d for k in ([kind] if kind else KINDS) for d in db.documents(kind=k, workload=workload, since=when)]
    docs.sort(key=lambda d: str(d.get("created")))
    return frame(docs, skipped)
