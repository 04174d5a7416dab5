"""perfsuite.storage.table: stored records as one tidy pandas table, and `perfsuite export csv|parquet`."""

from dataclasses import replace

import pandas as pd
import pytest
from records import make_record

from perfsuite.cli import app as cli
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Work
from perfsuite.storage import table as results
from perfsuite.storage.files import results_document


def _save(path, records, failures=()):
    path.write_text(results_document(records, failures))
    return path


def _mixed():
    mm = make_record(
        median_s=2e-3,
        seed=1,
        params={"n": 256, "dtype": "fp32"},
        env={"git_commit": "abc123", "git_dirty": False},
        memory={"host_peak_rss_bytes": 10_000_000, "host_peak_delta_bytes": 4096},
        peak={"flops_per_s": 4e12, "roof": "fp32"},
    )
    ae = replace(
        make_record(
            median_s=5e-3, seed=2, params={"size": "ci", "precision": "bf16", "device": "x"}, workload="autoencoder"
        ),
        work=Work(items_per_step=64, item_unit="images", flops_per_step=None),
    )
    return mm, ae


def test_one_tidy_row_per_case_with_every_parameter_and_the_derived_numbers(tmp_path):
    mm, ae = _mixed()
    _save(tmp_path / "a.json", [mm])
    (tmp_path / "sub").mkdir()
    _save(tmp_path / "sub" / "b.json", [ae])
    (tmp_path / "x.amp.json").write_text("{}")  # not a results file: passed over in a folder
    df = results.load([tmp_path])
    assert len(df) == 2
    assert list(df.columns[:6]) == ["workload", "n", "dtype", "size", "precision", "param.device"]
    assert list(df.columns[6:]) == list(results.FIXED)
    m = df[df.workload == "matmul"].iloc[0]
    assert m["n"] == 256 and m["dtype"] == "fp32" and pd.isna(m["precision"])
    assert m["median_s"] == pytest.approx(mm.stats.median) and m["p90_s"] == pytest.approx(mm.stats.p90)
    assert m["ci_low_s"] == pytest.approx(mm.stats.ci_low) and m["iqr_s"] == pytest.approx(mm.stats.iqr)
    assert m["throughput"] == pytest.approx(8 / mm.stats.median) and m["throughput_unit"] == "images/s"
    assert m["flops_per_s"] == pytest.approx(2e9 / mm.stats.median)
    assert m["peak_fraction"] == pytest.approx(2e9 / mm.stats.median / 4e12) and m["peak_roof"] == "fp32"
    assert m["host_peak_rss_bytes"] == 10_000_000 and m["commit"] == "abc123" and not m["dirty"]
    assert m["created"].tzinfo is not None and m["source"].endswith("a.json")
    a = df[df.workload == "autoencoder"].iloc[0]
    assert a["param.device"] == "x" and a["device"] == "cpu" and pd.isna(a["n"])
    assert (
        pd.isna(a["flops_per_s"])
        and pd.isna(a["peak_fraction"])
        and a["throughput"] == pytest.approx(64 / ae.stats.median)
    )


def test_a_record_named_by_two_sources_is_one_row(tmp_path):
    """Issue 50: `perfsuite.table("results/", "store:...")` returned every record twice (the run's
    file and the store hold the same records); one row per record id, from the first source."""
    mm, ae = _mixed()
    _save(tmp_path / "a.json", [mm, ae])
    _save(tmp_path / "copy.json", [mm])
    df = results.load([tmp_path / "a.json", tmp_path / "copy.json"])
    assert len(df) == 2 and set(df["source"]) == {str(tmp_path / "a.json")}


def test_a_bad_file_is_named_or_collected(tmp_path):
    good = _save(tmp_path / "good.json", [make_record()])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RecordError, match="bad.json: not valid JSON"):
        results.load([good, bad])
    skipped = []
    df = results.load([good, bad], skipped=skipped)
    assert len(df) == 1 and len(skipped) == 1 and "bad.json" in skipped[0]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_writes_the_table_and_reads_back(tmp_path, fmt):
    mm, ae = _mixed()
    src = _save(tmp_path / "run.json", [mm, ae])
    out = tmp_path / f"table.{fmt}"
    assert cli.main(["export", fmt, str(src), "--out", str(out)]) == 0
    back = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert len(back) == 2 and list(back.columns) == list(results.load([src]).columns)
    assert back["median_s"].tolist() == pytest.approx([mm.stats.median, ae.stats.median])
    assert back["workload"].tolist() == ["matmul", "autoencoder"]
    # An existing file is never overwritten; a missing --out, or --logdir for a table, is bad input.
    assert cli.main(["export", fmt, str(src), "--out", str(out)]) == 2
    assert cli.main(["export", fmt, str(src)]) == 2
    assert cli.main(["export", "csv", str(tmp_path / "missing.json"), "--out", str(tmp_path / "m.csv")]) == 2


def test_parquet_survives_a_parameter_of_mixed_types(tmp_path):
    a = make_record(params={"k": 5})
    b = replace(make_record(params={"k": "all"}), workload="other")
    df = results.frame([a, b])
    out = results.write(df, tmp_path / "t.parquet")
    assert pd.read_parquet(out)["k"].tolist() == ["5", "all"]


def test_report_writes_the_tidy_table_beside_the_page(tmp_path):
    from perfsuite.report.markdown import write_report

    recs = [make_record(seed=i, params={"n": n, "dtype": "fp32"}) for i, n in enumerate((256, 512))]
    page = write_report(recs, tmp_path / "rep")
    table = pd.read_csv(tmp_path / "rep" / "results.csv")
    assert table["n"].tolist() == [256, 512] and "results.csv" in page.read_text()
    assert list(table.columns) == list(results.frame(recs).columns)
