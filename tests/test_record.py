import json

import pytest
from records import make_record

from perfsuite.core.errors import RecordError
from perfsuite.core.record import SCHEMA_VERSION, Record, Work
from perfsuite.stats import summary as stats


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
        # the record's inner blocks are typed shapes too (issue 52): a wrong type names its key
        ({"conditions": {"load_avg": "high"}}, "conditions.load_avg"),
        ({"conditions": {"processes": "3"}}, "conditions.processes"),
        ({"conditions": {"cpus": [0, "1"]}}, "conditions.cpus"),
        ({"conditions": {"pinned": 1}}, "conditions.pinned"),
        ({"conditions": {"machine_drift": {"half_width": -0.1}}}, "conditions.machine_drift"),
        ({"conditions": {"reference": {"kernel": "k", "median_s": "1e-3"}}}, "conditions.reference.median_s"),
        ({"peak": {"flops_per_s": "4e12"}}, "peak.flops_per_s"),
        ({"config": {"run_drift": 1.5}}, "config.run_drift"),
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
    with pytest.raises(RecordError, match="missing samples_s"):
        Record.from_dict(d)
    d = make_record().to_dict()
    d["surprise"] = 1
    with pytest.raises(RecordError, match="unknown field 'surprise'"):
        Record.from_dict(d)


def test_schema_version_is_current():
    assert make_record().to_dict()["schema_version"] == SCHEMA_VERSION


# ---- where the time went (perfsuite.core.bound) ----------------------------------------------------


def _cuda(nvml: dict) -> Record:
    from dataclasses import replace

    return replace(make_record(), device="cuda:0", nvml=nvml)


def _nvml_ok(mean: float) -> dict:
    return {"status": "ok", "n": 40, "interval_s": 0.05, "gpu_util_pct": {"mean": mean, "max": 100.0}}


@pytest.mark.parametrize(
    "mean, verdict", [(23.0, "host-bound"), (49.9, "host-bound"), (50.0, "device-bound"), (97.0, "device-bound")]
)
def test_cuda_verdict_follows_mean_gpu_utilisation(mean, verdict):
    b = _cuda(_nvml_ok(mean)).bound
    assert b.verdict == verdict and b.gpu_util_pct == mean
    assert f"{mean:.0f}%" in b.reason and b.cell() == f"{verdict} ({mean:.0f}% busy)"


def test_cuda_without_nvml_is_unknown_with_the_reason():
    b = _cuda({"status": "unavailable", "reason": "NVML could not start: driver not loaded"}).bound
    assert b.verdict == "unknown" and b.gpu_util_pct is None
    assert "driver not loaded" in b.reason and b.cell() == "unknown"


def test_an_nvml_summary_without_utilisation_names_the_field():
    b = _cuda({"status": "ok", "n": 3, "power_w": {"mean": 100.0, "max": 120.0}}).bound
    assert b.verdict == "unknown" and "gpu_util_pct" in b.reason


def test_cpu_records_have_no_verdict_and_it_reaches_the_json():
    r = make_record()
    assert r.bound.verdict == "n/a (cpu)" and r.bound.gpu_util_pct is None
    d = json.loads(_cuda(_nvml_ok(23.0)).to_json())
    assert d["derived"]["bound"]["verdict"] == "host-bound"
    assert Record.from_dict(d).bound.verdict == "host-bound"  # recomputed on load, not stored as truth


# ---- schema 2: conditions and worker processes ------------------------------------------------


def _two_process_record(**kw):
    a, b = [1.0e-3, 1.1e-3, 1.05e-3], [2.0e-3, 2.1e-3]
    procs = [{"pid": 1, "samples_s": a, "median": 1.05e-3}, {"pid": 2, "samples_s": b, "median": 2.05e-3}]
    from dataclasses import replace

    return replace(make_record(), **{"samples_s": a + b, "processes": procs, "conditions": {"processes": 2}, **kw})


def test_version_1_records_read_with_conditions_not_recorded():
    d = make_record().to_dict()
    d["schema_version"] = 1
    del d["conditions"], d["processes"], d["builds"]
    rec = Record.from_dict(d)
    assert rec.schema_version == SCHEMA_VERSION == 5
    assert rec.conditions == {} and rec.processes is None and rec.builds is None


def test_version_2_records_read_as_one_build_with_the_pooled_interval():
    d = make_record().to_dict()
    d["schema_version"] = 2
    del d["builds"]
    rec = Record.from_dict(d)
    assert rec.builds is None and rec.between is None and rec.units() is None
    assert (rec.stats.ci_low, rec.stats.ci_high) == stats.median_ci(rec.samples_s)


def test_a_record_of_several_builds_takes_its_median_and_interval_from_the_build_medians():
    from dataclasses import replace

    a, b, c = ([m * (1 + 0.001 * i) for i in range(20)] for m in (1.0e-3, 1.1e-3, 1.2e-3))
    builds = [{"samples_s": g, "median": stats.median(g), "process": 0} for g in (a, b, c)]
    rec = replace(make_record(), samples_s=a + b + c, builds=builds)
    assert rec.median_s == pytest.approx(stats.median(b))
    # The three builds disagree by 10%: the interval spans them, the pooled samples' would not.
    assert rec.stats.ci_low < stats.median(a) and rec.stats.ci_high > stats.median(c)
    assert rec.units() == [stats.median(g) for g in (a, b, c)] == rec.build_medians
    assert Record.from_dict(rec.to_dict()).builds == rec.builds
    with pytest.raises(RecordError, match="builds"):
        replace(rec, samples_s=a + c + b)


def test_a_worker_record_round_trips_and_takes_its_median_from_the_process_medians():
    rec = _two_process_record()
    back = Record.from_dict(json.loads(rec.to_json()))
    assert back.processes == rec.processes and back.conditions == {"processes": 2}
    # Pooled, the median would be the third sample (1.1 ms); the process medians say 1.55 ms.
    assert back.median_s == pytest.approx((1.05e-3 + 2.05e-3) / 2)
    # Two processes: the t interval on their logs (12.7 at 95%, 1 degree of freedom) holds both, widely.
    assert back.stats.ci_low < 1.05e-3 / 2 and back.stats.ci_high > 2.05e-3 * 2
    assert back.stats.ci_low * back.stats.ci_high == pytest.approx(back.median_s**2)


def test_worker_samples_must_be_the_pooled_samples():
    with pytest.raises(RecordError, match="samples_s.*pooled"):
        _two_process_record(samples_s=[1e-3, 2e-3, 3e-3, 4e-3, 5e-3])
    with pytest.raises(RecordError, match="processes"):
        _two_process_record(processes=[{"pid": 1, "samples_s": [1e-3], "median": 1e-3}], samples_s=[1e-3])


# ---- schema 4: derived figures come from the raw samples ---------------------------------------


def test_a_groups_stored_median_is_ignored_and_never_written():
    """Versions 1 to 3 stored each process's and build's median beside its samples; version 4
    computes them, so a stored median that disagrees with the samples cannot be believed."""
    a, b = [1.0e-3, 1.1e-3, 1.05e-3], [2.0e-3, 2.1e-3]
    d = _two_process_record().to_dict()
    assert "median" not in d["processes"][0] and d["derived"]["process_medians"] == pytest.approx([1.05e-3, 2.05e-3])
    d["schema_version"] = 3
    for p, wrong in zip(d["processes"], (9.0, 9.0)):
        p["median"] = wrong
    d["derived"]["stats"]["median"] = 9.0
    back = Record.from_dict(d)
    assert back.process_medians == [stats.median(a), stats.median(b)]
    assert back.median_s == pytest.approx((1.05e-3 + 2.05e-3) / 2)


def test_a_process_of_several_builds_is_the_median_of_its_builds_medians():
    from dataclasses import replace

    g = [[1.0e-3] * 3, [1.2e-3] * 3, [1.1e-3] * 3, [3.0e-3] * 3, [3.2e-3] * 3]
    builds = [{"samples_s": x, "process": p} for x, p in zip(g, (0, 0, 0, 1, 1))]
    procs = [{"pid": 1, "samples_s": g[0] + g[1] + g[2]}, {"pid": 2, "samples_s": g[3] + g[4]}]
    rec = replace(make_record(), samples_s=[x for s in g for x in s], builds=builds, processes=procs)
    assert rec.process_medians == pytest.approx([1.1e-3, 3.1e-3])
    assert rec.units() == rec.process_medians
