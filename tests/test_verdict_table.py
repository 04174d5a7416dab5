"""Every verdict in the results store as one DataFrame (issue 50, item 3): gate cases, history points
and bisection answers, with their word, interval and kind of change."""

from __future__ import annotations

import pytest

import perfsuite
from perfsuite.compare.bisection import CHANGED, FOUND, Answer, Bisection, Commit, Probe
from perfsuite.compare.paired_gate import GateVerdict, PairedRun
from perfsuite.core.errors import RecordError
from perfsuite.database.location import resolve
from perfsuite.database.machine import Machine
from perfsuite.database.store import Store, new_run


def _verdict(centre: float, confirmed: bool, work: str = "same work") -> GateVerdict:
    ratios = [centre * (1 + 0.002 * (k % 5 - 2) + 0.0001 * k) for k in range(40)]
    return GateVerdict("tiny_mlp[batch_size=32]", 0.01, PairedRun(ratios, 1, p=0.0001 if confirmed else 0.9), confirmed,
                       work=work, work_changes=["+1 aten.tanh.default (32x32) float32"] if work == "more work" else [])  # fmt: skip


def _store(tmp_path, docs: list[tuple[str, dict]]) -> str:
    url = str(tmp_path / "store.db")
    machine = Machine("m-test", "test", "f" * 16, {"host": "test"})
    with Store(resolve(url)) as db:
        run = new_run("gate", machine)
        db.begin_run(run, machine)
        for kind, doc in docs:
            db.add_documents(run["id"], machine.id, kind, [doc], workload="tiny_mlp")
    return url


def test_gate_and_bisect_verdicts_read_back_as_rows(tmp_path):
    good, bad = Commit(sha="a" * 40, subject="good"), Commit(sha="b" * 40, subject="a slower forward")
    probe = Probe(sha=bad.sha, outcome=CHANGED, verdict=_verdict(1.2, True, "more work"))
    state = Bisection(
        workload="tiny_mlp", params={"batch_size": 32}, device="cpu", good=good, commits=[bad], probes=[probe]
    )
    answer = Answer(state=FOUND, commit=bad, probe=probe)
    url = _store(
        tmp_path,
        [
            ("gate", {**_verdict(1.0, False).to_dict(), "base_commit": "c" * 40, "new_commit": "d" * 40}),
            ("bisect", {**state.to_dict(), "answer": answer.to_dict()}),
            ("pair", {"not": "a verdict"}),
        ],
    )
    df = perfsuite.verdicts(url)
    assert list(df["kind"]) == ["gate", "bisect"]  # the pair is not a verdict
    gate, found = df.iloc[0], df.iloc[1]
    assert gate["word"] in ("same", "undecided") and gate["ci_low"] <= gate["ratio"] <= gate["ci_high"]
    assert gate["work"] == "same work" and not gate["confirmed"]
    assert gate["commit"] == "d" * 40 and gate["parent"] == "c" * 40  # what was gated (NaN before)
    assert (
        found["commit"] == bad.sha
        and found["parent"] == good.sha
        and found["answer"] == FOUND
        and found["word"] == "slower"
    )
    assert found["work"] == "more work" and "aten.tanh" in found["work_changes"] and found["ratio"] > 1.1
    assert list(perfsuite.verdicts(url, kind="bisect")["kind"]) == ["bisect"]
    with pytest.raises(RecordError, match="verdicts are of kind gate, history, bisect"):
        perfsuite.verdicts(url, kind="pair")


def test_a_document_that_does_not_read_is_named_or_skipped(tmp_path):
    url = _store(tmp_path, [("gate", {"label": "x"}), ("gate", _verdict(1.0, False).to_dict())])
    with pytest.raises(RecordError, match="gate document of run"):
        perfsuite.verdicts(url)
    skipped: list[str] = []
    df = perfsuite.verdicts(url, skipped=skipped)
    assert len(df) == 1 and len(skipped) == 1 and "gate document" in skipped[0]
