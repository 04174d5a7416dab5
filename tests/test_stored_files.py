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
from pathlib import Path

import pytest

import perfsuite
from perfsuite.compare.amp import AmpComparison
from perfsuite.compare.gate import GateVerdict
from perfsuite.compare.pair import PairResult
from perfsuite.storage.peaks import load_peaks
from perfsuite.storage.files import load_document

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


@pytest.mark.parametrize("name", ["pair-doc1.json", "pair-doc1-now.json"])
def test_pair_documents_old_and_new_come_back_as_pair_results(name):
    (d,) = load_document(STORED / name, "pair")
    r = PairResult.from_dict(d)
    assert r.workload == "activation" and r.vary == "impl" and len(r.ratios) >= 6
    assert r.time_ratio == pytest.approx(d["time_ratio"])  # recomputed from the pairs, as stored


@pytest.mark.parametrize("name", ["amp-doc1-v2code.json", "amp-doc1.json"])
def test_amp_documents_old_and_new_come_back_as_comparisons(name):
    (d,) = load_document(STORED / name, "amp")
    c = AmpComparison.from_dict(d)
    assert (c.precision_a, c.precision_b) == ("fp32", "bf16") and len(c.pair_ratios) == 2
    assert c.speedup == pytest.approx(d["speedup"]) and c.accuracy_ok == d["accuracy_ok"]


def test_a_gate_document_with_its_pairs_comes_back_and_an_older_one_says_why_not():
    (d,) = load_document(STORED / "gate-doc1.json", "gate")
    v = GateVerdict.from_dict(d)
    assert v.run.median == pytest.approx(d["median_ratio"]) and len(v.run.ratios) == d["pairs"]
    (old,) = load_document(STORED / "gate-doc1-v2code.json", "gate")
    assert "ratios" not in old and old["median_ratio"] > 0  # still readable as a document
    with pytest.raises(ValueError, match="without its pairs"):
        GateVerdict.from_dict(old)


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
    (d,) = load_document(path, "pair")
    assert PairResult.from_dict(d).time_ratio == pytest.approx(d["time_ratio"]) and d["suite"] == "stored"
    (failure,) = document_failures(path)
    assert failure["params"]["numel"] == 8192 and "crashed" in failure["error"]
    w = registry.get("activation")
    writer = DocumentWriter.resume(path, "pair")
    assert [Case(w, c).key("cpu") for c in writer.done_cases()] == [Case(w, {"numel": 4096}).key("cpu")]
    assert writer.has_failure(Case(w, {"numel": 8192}).key("cpu"))
