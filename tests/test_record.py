import json

import pytest
from records import make_record

from perfsuite.errors import RecordError
from perfsuite.record import SCHEMA_VERSION, Record, Work


def test_round_trip_preserves_everything():
    r = make_record(peak={"flops_per_s": 4e12, "dtype": "fp32"}, warnings=("noisy",))
    back = Record.from_dict(json.loads(r.to_json()))
    assert back == r
    assert back.stats == r.stats


def test_derived_values_come_from_the_samples():
    r = make_record(median_s=0.01, n=101, sigma=0.0, peak={"flops_per_s": 400e9})
    assert r.median_s == pytest.approx(0.01)
    assert r.throughput == pytest.approx(800.0)  # 8 images / 10 ms
    assert r.throughput_unit == "images/s"
    assert r.flops_per_s == pytest.approx(200e9)
    assert r.peak_fraction == pytest.approx(0.5)
    d = r.to_dict()["derived"]
    assert d["throughput"] == pytest.approx(800.0)
    assert d["stats"]["n"] == 101


def test_record_is_immutable():
    r = make_record()
    with pytest.raises(AttributeError):
        r.workload = "other"
    assert isinstance(r.samples_s, tuple)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"samples_s": []}, "samples_s"),
        ({"samples_s": [0.1, -1.0]}, "positive finite"),
        ({"samples_s": [0.1, float("nan")]}, "positive finite"),
        ({"block_size": 0}, "block_size"),
        ({"workload": ""}, "workload"),
        ({"params": {"n": [1, 2]}}, "params.n"),
        ({"schema_version": 99}, "schema_version"),
        ({"converged": "yes"}, "converged"),
    ],
)
def test_validation_names_the_field(change, message):
    d = make_record().to_dict()
    d.update(change)
    with pytest.raises(RecordError, match=message):
        Record.from_dict(d)


def test_work_validation():
    with pytest.raises(RecordError, match="items_per_step"):
        Work(items_per_step=0, item_unit="images")
    with pytest.raises(RecordError, match="flops_per_step"):
        Work(items_per_step=1, item_unit="images", flops_per_step=-1)


def test_foreign_and_incomplete_documents():
    with pytest.raises(RecordError, match="JSON object"):
        Record.from_dict([1, 2])
    with pytest.raises(RecordError, match="schema_version"):
        Record.from_dict({"workload": "x"})
    d = make_record().to_dict()
    del d["samples_s"]
    with pytest.raises(RecordError, match="missing field.*samples_s"):
        Record.from_dict(d)
    d = make_record().to_dict()
    d["surprise"] = 1
    with pytest.raises(RecordError, match="unknown field.*surprise"):
        Record.from_dict(d)


def test_schema_version_is_current():
    assert make_record().to_dict()["schema_version"] == SCHEMA_VERSION
