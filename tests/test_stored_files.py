"""Stored files of every kind and version perfsuite has written, read back by today's code.

tests/data/stored/ holds real outputs, each written by the commit that defined its version:
results schema 1 (3079a15^), schema 2 (06852b7), schema 3 (now); pair, amp, gate, gate
self-check and peaks documents (document version 1) as 06852b7 wrote them, and pair, amp and gate
documents as today's code writes them, and a suite's pair document with a failed case (one road).
A change that stops reading any of them fails here.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

import perfsuite
from perfsuite.compare.amp import AmpComparison
from perfsuite.compare.kinds import load_result
from perfsuite.compare.pair import PairResult
from perfsuite.compare.paired_gate import GateSummary, GateVerdict
from perfsuite.stats import verdict
from perfsuite.storage.files import load_document
from perfsuite.storage.peaks import load_peaks

STORED = Path(__file__).parent / "data" / "stored"


@pytest.mark.parametrize("version", [1, 2, 3])
def test_results_of_every_schema_version_load_as_records(version):
    path = STORED / f"results-schema{version}.json"
    assert json.loads(path.read_text())["records"][0]["schema_version"] == version
    (rec,) = perfsuite.load(path)
    assert rec.workload == "matmul" and rec.params["n"] == 16 and rec.device == "cpu"
    s = rec.stats
    assert math.isfinite(s.median) and s.median > 0 and len(rec.samples_s) >= 1
    # Before schema 3 a record is one build in one process: its spread is the samples' own.
    assert (rec.builds is None) == (version < 3)


def _stored(name: str) -> dict:
    """The first result of a stored document, as its JSON holds it (derived figures included)."""
    return json.loads((STORED / name).read_text())["results"][0]


@pytest.mark.parametrize("name", ["pair-doc1.json", "pair-doc1-now.json"])
def test_pair_documents_old_and_new_come_back_as_pair_results(name):
    (r,) = load_result(STORED / name, "pair")
    assert isinstance(r, PairResult)
    assert r.workload == "activation" and r.vary == "impl" and len(r.ratios) >= 6
    assert r.time_ratio == pytest.approx(_stored(name)["time_ratio"])  # recomputed from the pairs, as stored


@pytest.mark.parametrize("name", ["amp-doc1-v2code.json", "amp-doc1.json"])
def test_amp_documents_old_and_new_come_back_as_comparisons(name):
    (c,) = load_result(STORED / name, "amp")
    assert isinstance(c, AmpComparison)
    assert (c.precision_a, c.precision_b) == ("fp32", "bf16") and len(c.pair_ratios) == 2
    d = _stored(name)
    assert c.speedup == pytest.approx(d["speedup"]) and c.accuracy_ok == d["accuracy_ok"]


def test_a_gate_document_with_its_pairs_comes_back_and_an_older_one_as_what_it_holds():
    (v,) = load_result(STORED / "gate-doc1.json", "gate")  # version 1: the pairs at the top level
    d = _stored("gate-doc1.json")
    assert isinstance(v, GateVerdict)
    # Its stored median_ratio was the pairs' median; a verdict read back now states the estimate
    # of its interval's method (issue 49), from the same pairs.
    assert statistics.median(v.run.ratios) == pytest.approx(d["median_ratio"]) and len(v.run.ratios) == d["pairs"]
    assert v.run.median == pytest.approx(verdict.ratio_estimate(v.run.ratios, v.run.units))
    assert v.interval[0] <= v.run.median <= v.interval[1]
    assert v.run.block_size == d["block_size"] and v.confirmed is d["slower"]
    again = GateVerdict.from_dict(json.loads(json.dumps(v.to_dict())))  # version 2: under `run`
    assert again.run == v.run and again.word == v.word
    (old,) = load_result(STORED / "gate-doc1-v2code.json", "gate")  # written before the pairs were kept
    assert isinstance(old, GateSummary) and old.median_ratio > 0 and old.slower is False
    with pytest.raises(ValueError, match="run"):
        GateVerdict.from_dict(_stored("gate-doc1-v2code.json"))


def test_a_gate_self_check_and_a_peaks_file_of_the_previous_code_still_read():
    (res,) = load_document(STORED / "gate-selfcheck-doc1.json", "gate-selfcheck")
    assert res["trials"] == 1 and len(res["runs"]) == 1
    peaks = load_peaks(STORED / "peaks-doc1.json")
    (entry,) = peaks.values()
    assert entry["flops_per_s"]["fp32"] > 0 and entry["bytes_per_s"] > 0


def test_a_suite_pair_document_with_a_failed_case_resumes_by_case_key():
    """As a suite's pair entry writes it since the one road (61ddf3d): each result with the
    parameters its case was given and the suite's name, the failed case beside the results."""
    from perfsuite.core import registry
    from perfsuite.run.execute import Case
    from perfsuite.storage.files import DocumentWriter, document_failures

    path = STORED / "pair-suite-doc1-failures.json"
    (r,) = load_result(path, "pair")
    assert r.time_ratio == pytest.approx(_stored(path.name)["time_ratio"]) and r.suite == "stored"
    assert r.case == {"numel": 4096}
    (failure,) = document_failures(path)
    assert failure["params"]["numel"] == 8192 and "crashed" in failure["error"]
    w = registry.get("activation")
    writer = DocumentWriter.resume(path, "pair", model=PairResult)
    assert [Case(w, c).key("cpu") for c in writer.done_cases()] == [Case(w, {"numel": 4096}).key("cpu")]
    assert writer.has_failure(Case(w, {"numel": 8192}).key("cpu"))


def test_the_bisection_and_why_documents_of_the_previous_code_still_read():
    from perfsuite.compare.bisection import Bisection
    from perfsuite.compare.why import WhyResult

    (b,) = load_result(STORED / "bisect-doc1.json", "bisect")
    assert isinstance(b, Bisection) and b.bad.sha == _stored("bisect-doc1.json")["bad"]
    assert all(p.verdict is None or p.verdict.run.ratios for p in b.probes)  # version 1's flat verdicts
    (w,) = load_result(STORED / "why-doc1.json", "why")
    d = _stored("why-doc1.json")
    assert isinstance(w, WhyResult) and w.a.label == d["a"]["label"] and len(w.a.step_s) == len(d["a"]["step_s"])


def test_a_record_file_whose_samples_are_slower_than_its_stored_medians_compares_as_slower(tmp_path):
    """Issue 39: a version-3 record stores each build's median beside its samples. A file whose raw
    samples are all 25% slower than those stored medians (and its stored `derived` block) is
    compared on its samples: 1.25 times slower, not `same` at a ratio of 1.000."""
    from perfsuite.compare.records import compare_records
    from perfsuite.storage.files import load_records

    doc = json.loads((STORED / "results-schema3.json").read_text())
    (rec,) = doc["records"]
    assert rec["schema_version"] == 3 and len(rec["builds"]) >= 2
    slowed = json.loads(json.dumps(doc))
    (new,) = slowed["records"]
    new["samples_s"] = [s * 1.25 for s in rec["samples_s"]]
    for b in new["builds"]:  # the samples slower, their stored medians and `derived` left as they were
        b["samples_s"] = [s * 1.25 for s in b["samples_s"]]
    assert [b["median"] for b in new["builds"]] == [b["median"] for b in rec["builds"]]
    path = tmp_path / "slower.json"
    path.write_text(json.dumps(slowed))
    (base,), (slow,) = load_records(STORED / "results-schema3.json"), load_records(path)
    assert slow.build_medians == pytest.approx([1.25 * m for m in base.build_medians])
    (c,) = compare_records([base], [slow]).cases
    assert c.ratio == pytest.approx(1.25) and c.verdict == "slower"
