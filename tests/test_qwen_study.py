"""The Qwen report against the week-1 study: per-batch percentiles, the fixed protocol, the
study's metrics, and the `labels` column."""

import json
from dataclasses import replace

import pytest
from records import make_record

from perfsuite.cli import app as cli
from perfsuite.core.errors import ConfigError
from perfsuite.core.record import Work
from perfsuite.llm.data import read_csv
from perfsuite.measuring.percall import PerCallTimer, fixed_protocol, timed_tail
from perfsuite.stats import summary as stats
from perfsuite.workloads import qwen_report as qwen


def test_labels_column_is_accepted_as_well_as_label(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("text,labels\nhello,3\nworld,22\n")
    assert read_csv(str(f), 23) == (["hello", "world"], [3, 22])
    f.write_text("text,label,labels\nhello,3,3\n")
    with pytest.raises(ConfigError, match="both a label and a labels column"):
        read_csv(str(f), 23)
    f.write_text("text,target\nhello,3\n")
    with pytest.raises(ConfigError, match="no label column .* may be named label or labels"):
        read_csv(str(f), 23)
    f.write_text("text,labels\nhello,x\n")
    with pytest.raises(ConfigError, match="line 2: labels 'x' is not an integer"):
        read_csv(str(f), 23)


def test_per_call_timer_and_the_timed_tail():
    calls = []
    timer = PerCallTimer(lambda: calls.append(1), "cpu", keep=5)
    for _ in range(7):
        timer()
    assert len(calls) == 7 and len(timer.times()) == 5 and all(t >= 0 for t in timer.times())
    assert timed_tail([1, 2, 3, 4, 5, 6], n_samples=2, block_size=2) == [3, 4, 5, 6]
    assert timed_tail([1, 2], n_samples=3, block_size=4) == [1, 2]  # fewer kept than timed: all of them
    runs = []
    assert len(fixed_protocol(lambda: runs.append(1), "cpu", warmup=3, runs=10)) == 10 and len(runs) == 13


def _qwen_record(**extra):
    # Blocks of 4 batches: every block mean is ~10 ms, but one batch in twenty takes 50 ms.
    per_batch = [0.05 if i % 20 == 0 else 0.008 for i in range(200)]
    blocks = [sum(per_batch[i : i + 4]) / 4 for i in range(0, 200, 4)]
    r = make_record(workload="qwen", params={"batch_size": 8, "dtype": "fp32", "shape": "tiny", "scenario": "batch"})
    return replace(
        r,
        samples_s=tuple(blocks),
        block_size=4,
        work=Work(items_per_step=8, item_unit="samples", flops_per_step=1e9),
        extra={
            "tokens_real": 400,
            "parameters_trainable": 100,
            "parameters_frozen": 0,
            "batch_latencies_s": [0.5] * 30 + per_batch,
            **extra,
        },
    )


def test_percentiles_come_from_per_batch_times_not_block_means():
    r = _qwen_record()
    row = qwen.row(r)
    assert row["latency_source"] == "per-batch" and row["protocol"] == "adaptive"
    # The timed region's 200 batches, not the 30 slow warm-up calls kept before them.
    assert row["latency_p99_ms"] == pytest.approx(50.0)
    assert row["latency_p99_ms"] > 2 * r.stats.p99 * 1e3  # block means hide the tail
    assert row["batches_per_s"] == pytest.approx(1 / 0.008)
    assert row["samples_per_s"] == pytest.approx(8 / 0.008) and row["params_trainable"] == 100
    # Without per-batch times, block means are used and the row says so.
    bare = replace(r, extra={"tokens_real": 400})
    assert qwen.row(bare)["latency_source"] == "means of 4"


def test_the_fixed_protocol_replaces_the_adaptive_numbers_and_memory_above_the_model():
    r = _qwen_record(
        protocol={"name": "fixed", "warmup_runs": 3, "runs": 10, "latencies_s": [0.02] * 9 + [0.03]},
        model_resident_bytes=1_000_000_000,
    )
    r = replace(r, device="cuda:0", memory={"cuda_max_allocated_bytes": 1_500_000_000})
    row = qwen.row(r)
    assert row["protocol"] == "fixed 3+10" and row["latency_batch_ms"] == pytest.approx(20.0)
    assert row["latency_p90_ms"] == pytest.approx(stats.percentile([0.02] * 9 + [0.03], 90) * 1e3)
    assert row["batch_mem_mb"] == pytest.approx(500.0) and set(row) == set(qwen.COLUMNS)


@pytest.mark.slow
def test_fixed_protocol_end_to_end(tmp_path, capsys):
    out = tmp_path / "q.json"
    code = cli.main(
        [
            "run",
            "qwen",
            "-p",
            "shape=tiny",
            "-p",
            "batch_size=2",
            "-p",
            "runs=10",
            "-p",
            "warmup_runs=3",
            "--max-time",
            "0.5",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr()
    rec = json.loads(out.read_text())["records"][0]
    proto = rec["extra"]["protocol"]
    assert proto["name"] == "fixed" and len(proto["latencies_s"]) == 10 and proto["warmup_runs"] == 3
    assert rec["extra"]["parameters_trainable"] + rec["extra"]["parameters_frozen"] == rec["extra"]["parameters"]
    assert len(rec["extra"]["batch_latencies_s"]) >= len(rec["samples_s"]) * rec["block_size"]
    assert cli.main(["report", str(out), "--out-dir", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "summary.md").read_text()
    assert "Protocol: fixed 3+10 (the week-1 study's: 3 warm-up + 10 measured batches" in page
    assert "batches/s" in page and "trainable" in page
    row = json.loads((tmp_path / "rep" / "qwen-sweep.json").read_text())["results"][0]
    assert row["protocol"] == "fixed 3+10" and row["latency_source"] == "per-batch"
    # warmup_runs alone is refused: it means nothing without runs.
    assert (
        cli.main(
            [
                "run",
                "qwen",
                "-p",
                "shape=tiny",
                "-p",
                "warmup_runs=3",
                "--max-time",
                "0.5",
                "--device",
                "cpu",
                "--out",
                str(tmp_path / "bad.json"),
            ]
        )
        == 2
    )


def test_the_tidy_table_takes_the_tails_from_per_batch_times_too():
    from perfsuite.storage import table as results

    r = _qwen_record()
    row = results.row(r)
    assert row["p99_s"] == pytest.approx(0.05) and row["p99_s"] > 2 * r.stats.p99
