"""Nsight Compute CSV → per-launch roofline figures; expected values worked out by hand in the
comments from the fixture files in tests/data (written to ncu's layouts)."""

import csv
from pathlib import Path

import pytest

from perfsuite import cli
from perfsuite.roofline import model
from perfsuite.roofline.ncu import read_ncu_csv
from perfsuite.roofline.units import parse_number, to_base

DATA = Path(__file__).parent / "data"


def points(name):
    path = DATA / name
    launches = read_ncu_csv(path)
    return launches, [model.point(l, path) for l in launches]


@pytest.mark.parametrize("name", ["ncu_details.csv", "ncu_details_rules.csv", "ncu_details_nvtx.csv"])
def test_details_layouts(name):
    _, (gemm, relu) = points(name)
    # gemm: fadd 1e6 + fmul 1e6 + 2 x ffma 4e6 = 1e7 FLOP; 2.00 Mbyte = 2e6 B; 10 usecond.
    assert gemm.flops == 1e7 and gemm.dram_bytes == 2e6 and gemm.time_s == pytest.approx(1e-5)
    assert gemm.intensity == pytest.approx(5.0) and gemm.flop_per_s == pytest.approx(1e12)
    # relu (smsp__ prefix): 1e5 FLOP; 800 Kbyte = 8e5 B (decimal); "4,000" nsecond = 4e-6 s.
    assert relu.flops == 1e5 and relu.dram_bytes == 8e5 and relu.time_s == pytest.approx(4e-6)
    assert relu.intensity == pytest.approx(0.125)
    ridge = 19.5e12 / 1555e9  # 12.54 FLOP/B
    assert gemm.bound(ridge) == "memory" and relu.bound(ridge) == "memory"
    assert gemm.bound(1.0) == "compute"


def test_totals_are_sums_not_averages_of_ratios():
    launches, pts = points("ncu_details.csv")
    total = model.aggregate(pts, launches, "total")
    assert total.flops == 1.01e7 and total.dram_bytes == 2.8e6 and total.time_s == pytest.approx(1.4e-5)
    assert total.intensity == pytest.approx(1.01e7 / 2.8e6)  # 3.607, not mean(5, 0.125) = 2.56
    assert total.flop_per_s == pytest.approx(1.01e7 / 1.4e-5)


def test_nvtx_ranges_count_a_launch_in_every_range_of_its_stack():
    launches, pts = points("ncu_details_nvtx.csv")
    assert launches[0].nvtx == ("train_step", "forward")
    ranges = {r.nvtx_range: r for r in model.by_range(pts, launches)}
    assert set(ranges) == {"train_step", "forward", "backward"}
    assert ranges["train_step"].flops == 1.01e7 and ranges["forward"].flops == 1e7 and ranges["backward"].flops == 1e5


def test_raw_layout_with_units_row_cycles_and_tensor_cores():
    _, (p,) = points("ncu_raw.csv")
    # hfma 5e6 -> 1e7 FLOP, plus 1,000 tensor instructions x 512 = 512,000.
    assert p.flops == pytest.approx(1.0512e7)
    # 1,500 + 500 Kbyte = 2e6 B; 14,100 cycles / 1.41 cycle/nsecond = 1e-5 s; L2 6 Mbyte.
    assert p.dram_bytes == 2e6 and p.time_s == pytest.approx(1e-5) and p.l2_bytes == 6e6 and p.l1_bytes is None


def test_zero_bytes_give_an_empty_intensity():
    p = model.Point("x", "k", "", 10.0, 0.0, None, None, 1.0)
    assert p.intensity is None and p.bound(1.0) == ""


def test_units():
    assert parse_number("1,234,567") == 1234567
    assert to_base(1, "Gbyte") == 1e9 and to_base(1, "Kbyte") == 1e3
    assert to_base(5, "msecond") == pytest.approx(5e-3) and to_base(5, "us") == pytest.approx(5e-6)
    assert to_base(2, "cycle/usecond") == 2e6 and to_base(3, "hz") == 3


@pytest.mark.parametrize(
    "name, message",
    [
        ("ncu_truncated.csv", "line 14: truncated row, column 15 ('Metric Value') is missing"),
        ("ncu_not_a_number.csv", "line 4, column 15 (dram__bytes.sum): 'n/a' is not a number"),
        ("ncu_missing_metric.csv", "launch 1 (relu_kernel) lacks the metric gpu__time_duration.sum"),
    ],
)
def test_broken_files_name_line_column_or_metric_and_write_nothing(tmp_path, capsys, name, message):
    out = tmp_path / "r.png"
    code = cli.main(["roofline", str(DATA / name), "--peak-compute", "19.5", "--peak-bw", "1555",
                     "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert not out.exists() and not out.with_suffix(".csv").exists()


def test_cli_writes_chart_and_summary(tmp_path, capsys):
    out = tmp_path / "roof.png"
    assert cli.main(["roofline", str(DATA / "ncu_details_nvtx.csv"), "--device", "A100-SXM4-40GB",
                     "--out", str(out), "--by-range"]) == 0
    assert out.stat().st_size > 5000
    rows = list(csv.DictReader(out.with_suffix(".csv").read_text().splitlines()))
    assert [r["id"] for r in rows] == ["0", "1", "total", "range", "range", "range"]
    assert rows[0]["arithmetic_intensity"] == "5" and rows[0]["bound"] == "memory"
    assert rows[0]["nvtx_range"] == "train_step > forward"
    assert cli.main(["roofline", str(DATA / "ncu_raw.csv"), "--device", "Z80"]) == 2
    assert "unknown; known:" in capsys.readouterr().err
    assert cli.main(["roofline", str(DATA / "ncu_raw.csv")]) == 2


def test_cpu_roofline_from_records(tmp_path, capsys, monkeypatch):
    from perfsuite import peak

    monkeypatch.setitem(peak.MATMUL_N, "cpu", 128)
    monkeypatch.setitem(peak.COPY_BYTES, "cpu", 4 * 2**20)
    pf = tmp_path / "peak.json"
    assert cli.main(["--peak-file", str(pf), "peak", "--max-time", "0.5"]) == 0
    res = tmp_path / "res.json"
    assert cli.main(["--peak-file", str(pf), "run", "autoencoder", "-p", "batch_size=8", "--max-time", "0.6",
                     "--out", str(res)]) == 0
    out = tmp_path / "cpu.png"
    assert cli.main(["roofline", "--records", str(res), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.with_suffix(".csv").read_text().splitlines()))
    assert len(rows) == 1 and float(rows[0]["dram_bytes"]) > 0 and float(rows[0]["flops"]) > 0


def test_summary_uses_each_points_own_ridge():
    from perfsuite.roofline.chart import summary_csv

    pts = [model.Point("a", "k", "", 100.0, 4.0, None, None, 1.0, "fp32"),
           model.Point("b", "k", "", 100.0, 4.0, None, None, 1.0, "bf16")]
    text = summary_csv(pts, lambda p: 10.0 if p.dtype == "fp32" else 50.0)
    rows = list(csv.DictReader(text.splitlines()))
    assert [r["bound"] for r in rows] == ["compute", "memory"]  # AI 25 against ridges 10 and 50
