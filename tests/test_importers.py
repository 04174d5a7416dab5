"""compare reads pytest-benchmark and asv result files; a results folder survives a bad file."""

import json

import numpy as np
import pytest
from records import make_record

from perfsuite.core.errors import RecordError
from perfsuite.storage.files import ResultsWriter, load_many, load_records


def _pytest_benchmark_doc(scale: float, seed: int, with_data: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    data = list(scale * 1e-3 * rng.lognormal(0, 0.03, 50))
    stats = {"median": float(np.median(data)), "iterations": 1, "rounds": 50}
    if with_data:
        stats["data"] = data
    return {
        "machine_info": {"perfsuite": {"torch": "2.14.1"}},
        "benchmarks": [
            {
                "name": "test_workload[matmul]",
                "group": "matmul",
                "stats": stats,
                "extra_info": {
                    "params": {"n": 256, "dtype": "fp32"},
                    "device": "cpu",
                    "items_per_step": 1,
                    "item_unit": "matmuls",
                },
            }
        ],
    }


def _asv_doc(scale: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    samples = [list(scale * rng.lognormal(0, 0.03, 20)), list(2 * scale * rng.lognormal(0, 0.03, 20))]
    return {
        "commit_hash": "abc",
        "env_name": "virtualenv-py3.11-torch2.14.1",
        "params": {"torch": "2.14.1"},
        "result_columns": [
            "result",
            "params",
            "version",
            "started_at",
            "duration",
            "stats_ci_99_a",
            "stats_ci_99_b",
            "stats_q_25",
            "stats_q_75",
            "stats_number",
            "stats_repeat",
            "samples",
            "profile",
        ],
        "results": {
            "bench_matmul.MatmulTime.time_step": [
                [scale, 2 * scale],
                [["256"], ["'fp32'", "'bf16'"]],
                "v",
                0,
                1,
                None,
                None,
                None,
                None,
                None,
                None,
                samples,
            ],
            "bench_matmul.MatmulTrack.track_median_s": [[scale], [["256"]], "v"],
        },
    }


def test_pytest_benchmark_json_compares(tmp_path, capsys):
    from perfsuite.cli import app as cli

    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(json.dumps(_pytest_benchmark_doc(1.0, 1)))
    new.write_text(json.dumps(_pytest_benchmark_doc(1.10, 2)))
    (rec,) = load_records(base)
    assert rec.params == {"n": 256, "dtype": "fp32"} and rec.timing_method == "pytest-benchmark"
    assert cli.main(["compare", str(base), str(new)]) == 1
    assert "slower" in capsys.readouterr().out


def test_pytest_benchmark_without_raw_data_names_the_flag(tmp_path):
    f = tmp_path / "b.json"
    f.write_text(json.dumps(_pytest_benchmark_doc(1.0, 1, with_data=False)))
    with pytest.raises(RecordError, match="--benchmark-save-data"):
        load_records(f)


def test_asv_results_with_samples(tmp_path):
    f = tmp_path / "abc-virtualenv.json"
    f.write_text(json.dumps(_asv_doc(1e-3, 3)))
    recs = load_records(f)
    assert [r.params for r in recs] == [{"p0": 256, "p1": "fp32"}, {"p0": 256, "p1": "bf16"}]
    assert recs[1].median_s > 1.5 * recs[0].median_s
    # The commit asv measured goes with its records (issue 50: the store kept them without one).
    doc = {**_asv_doc(1e-3, 3), "commit_hash": "ABCDEF0123456789abcdef0123456789abcdef01"}
    f.write_text(json.dumps(doc))
    assert {r.env.get("git_commit") for r in load_records(f)} == {"abcdef0123456789abcdef0123456789abcdef01"}
    f.write_text(json.dumps({**doc, "commit_hash": "not a hash; rm -rf"}))
    assert {r.env.get("git_commit") for r in load_records(f)} == {None}
    doc = _asv_doc(1e-3, 3)
    doc["results"]["bench_matmul.MatmulTime.time_step"][11] = None
    f.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="--record-samples"):
        load_records(f)


def test_a_results_folder_with_a_corrupt_file_still_loads(tmp_path):
    ResultsWriter(tmp_path / "a.json").add(make_record(seed=1))
    ResultsWriter(tmp_path / "sub" / "b.json").add(make_record(seed=2))
    (tmp_path / "broken.json").write_text('{"format": "perfsuite.results", "records": [')
    records, problems = load_many([tmp_path])
    assert len(records) == 2
    assert len(problems) == 1 and "broken.json" in problems[0]


def _bad_pytest_benchmark(mutate):
    doc = _pytest_benchmark_doc(1.0, 0)
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["benchmarks"][0]["stats"].update(data="x"), "stats.data: expected a non-empty list"),
        (lambda d: d["benchmarks"][0]["stats"].update(data=[1e-3, "x"]), "'x' is not a non-negative finite number"),
        (lambda d: d["benchmarks"][0]["stats"].update(iterations="many"), "stats.iterations"),
        (lambda d: d["benchmarks"][0].update(extra_info=[1]), "extra_info: expected an object"),
        (lambda d: d["benchmarks"].__setitem__(0, 7), r"benchmarks\[0\]: expected an object"),
        (lambda d: d.update(machine_info=3), "machine_info: expected an object"),
    ],
)
def test_malformed_pytest_benchmark_files_are_named_not_tracebacks(tmp_path, mutate, message):
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(_bad_pytest_benchmark(mutate)))
    with pytest.raises(RecordError, match=message):
        load_records(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda row: row.__setitem__(1, 5), "params must be a list of value lists"),
        (lambda row: row[-1].append(row[-1][0]), "2 parameter combination.s. but 3 sample list"),
        (lambda row: row.__setitem__(-1, row[-1][:1]), "2 parameter combination.s. but 1 sample list"),
    ],
)
def test_asv_params_and_sample_lists_must_agree(tmp_path, change, message):
    doc = _asv_doc(1.0, 0)
    ((name, row),) = [(k, v) for k, v in doc["results"].items() if k.split(".")[-1].startswith("time_")][:1]
    change(row)
    path = tmp_path / "asv.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match=message):
        load_records(path)
