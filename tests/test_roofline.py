"""Nsight Compute CSV → roofline figures.

Real exports (tests/data/ncu/, an H100, one ResNet18 step, both pages) are checked against the
facts in their README and against sums worked out here with `csv` and arithmetic alone; the
hand-written files in tests/data (and tests/data/ncu/handmade_raw_peaks.csv) carry the quirks
the real ones lack, with the expected values worked out in the comments. No measured time is
asserted: times are only compared between the two pages of one export."""

import csv
import gzip
import io
import re
from argparse import Namespace
from pathlib import Path

import pytest
from rich.console import Console

from perfsuite.cli import app as cli
from perfsuite.cli.roofline import command as roofline_command
from perfsuite.profiling.step_marking import ROOFLINE_METRICS
from perfsuite.roofline import ceilings, points
from perfsuite.roofline.names import short_name
from perfsuite.roofline.ncu import NcuCsvError, read_ncu_csv
from perfsuite.roofline.ncu_units import UnitError, parse_number, read, to_base
from perfsuite.roofline.summary_csv import SUMMARY_COLUMNS, summary_csv

DATA = Path(__file__).parent / "data"
NCU = DATA / "ncu"
REAL = [NCU / f"resnet18_{p}_{page}.csv.gz" for p in ("fp32", "fp16") for page in ("details", "raw")]
H100 = {"fp32": 66.9e12, "fp16": 133.8e12, "tensor_tf32": 494.7e12, "tensor_fp16": 989.4e12}  # datasheet


def read_points(path):
    launches = read_ncu_csv(path)
    return launches, [points.point(l, path) for l in launches]


def _rows(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return list(csv.reader(f))


def independent_flops(path) -> float:
    """The README's recipe: Σ sm__ops_path_tensor_src_*.sum + Σ d/f/h (add + mul + 2·fma)."""
    sass = re.compile(r"sm__sass_thread_inst_executed_op_[dfh](add|mul|fma)_pred_on\.sum$")

    def weight(name):
        if name.startswith("sm__ops_path_tensor_src_") and name.endswith(".sum"):
            return 1
        m = sass.match(name)
        return (2 if m.group(1) == "fma" else 1) if m else 0

    rows = _rows(path)
    header = rows[0]
    if "Metric Name" in header:
        name, unit, value = (header.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
        picked = [(weight(r[name]), r[unit], r[value]) for r in rows[1:] if weight(r[name])]
    else:
        units = rows[1]
        picked = [(weight(h), units[i], r[i]) for r in rows[2:] for i, h in enumerate(header) if weight(h)]
    assert {u for _, u, _ in picked} <= {"", "inst"}  # counts: no unit to scale
    return sum(w * float(v.replace(",", "")) for w, _, v in picked)


# ---- hand-written layouts -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ncu_details.csv", "ncu_details_rules.csv", "ncu_details_nvtx.csv"])
def test_details_layouts(name):
    _, (gemm, relu) = read_points(DATA / name)
    # gemm: fadd 1e6 + fmul 1e6 + 2 x ffma 4e6 = 1e7 FLOP; 2.00 Mbyte = 2e6 B; 10 usecond.
    assert gemm.flops == 1e7 and gemm.dram_bytes == 2e6 and gemm.time_s == 1e-5
    assert gemm.intensity == pytest.approx(5.0) and gemm.flop_per_s == pytest.approx(1e12)
    # relu (smsp__ prefix): 1e5 FLOP; 800 Kbyte = 8e5 B (decimal); "4,000" nsecond = 4e-6 s.
    assert relu.flops == 1e5 and relu.dram_bytes == 8e5 and relu.time_s == 4e-6
    assert relu.intensity == pytest.approx(0.125)
    # No tensor metric at all: the FLOPs may miss tensor work, and say so.
    assert not gemm.exact and "tensor FLOPs unknown" in gemm.note


def test_totals_are_sums_not_averages_of_ratios():
    _, pts = read_points(DATA / "ncu_details.csv")
    total = points.aggregate(pts, "total")
    assert total.flops == 1.01e7 and total.dram_bytes == 2.8e6 and total.time_s == pytest.approx(1.4e-5)
    assert total.intensity == pytest.approx(1.01e7 / 2.8e6)  # 3.607, not mean(5, 0.125) = 2.56
    assert total.launches == 2


def test_hand_written_push_pop_stack_without_quotes():
    launches, pts = read_points(DATA / "ncu_details_nvtx.csv")
    assert launches[0].nvtx == "train_step > forward"
    ranges = {r.nvtx_range: r for r in points.by_range(pts, launches)}
    assert set(ranges) == {"train_step", "train_step > forward", "train_step > backward"}
    assert ranges["train_step"].flops == 1.01e7 and ranges["train_step > forward"].flops == 1e7


def test_tensor_instructions_without_ops_metrics_give_a_lower_bound_not_512_per_instruction():
    _, (p,) = read_points(DATA / "ncu_raw.csv")
    # hfma 5e6 -> 1e7 FLOP; the 1,000 tensor instructions are not turned into 512,000 FLOPs.
    assert p.flops == 1e7 and p.tensor_flops is None
    assert not p.exact and "1000 tensor instructions" in p.note and "sm__ops_path_tensor_src_" in p.note
    # 1,500 + 500 Kbyte = 2e6 B; 14,100 gpc cycles / 1.41 cycle/nsecond = 1e-5 s; L2 6 Mbyte.
    assert p.dram_bytes == 2e6 and p.time_s == pytest.approx(1e-5) and p.l2_bytes == 6e6 and p.l1_bytes is None


def test_push_pop_nesting_domains_time_from_sm_cycles_and_ceilings_from_the_file():
    launches, (gemm, relu) = read_points(NCU / "handmade_raw_peaks.csv")
    assert launches[1].nvtx == "step > train_step > backward > mylib@relu:inner"
    assert launches[1].ranges == (
        "step",
        "train_step",
        "train_step > backward",
        "train_step > backward > mylib@relu:inner",
    )
    ranges = {r.nvtx_range: r for r in points.by_range([gemm, relu], launches)}
    assert ranges["step"].launches == 2 and ranges["train_step > forward"].launches == 1
    # No gpu__time_duration: 20,000 sm cycles / 2.0 GHz = 10 us; 6,000 / 1.5 GHz = 4 us.
    assert gemm.time_s == 1e-5 and relu.time_s == 4e-6
    # Tensor path 2e9 FLOP (already FLOPs) + 2 x ffma 1e6; not 512 x 1,000 instructions.
    assert gemm.flops == 2.002e9 and gemm.exact and gemm.pipe == "tensor_fp16"
    roofs = ceilings.from_file(launches)
    # Peak per cycle x the highest clock seen (2.0 GHz, not the second launch's 1.5).
    assert roofs.compute["fp32"] == 16896 * 2 * 2.0e9 and roofs.compute["tensor_fp16"] == 540672 * 2.0e9
    assert roofs.compute["tensor_tf32"] == 270336 * 2.0e9
    assert roofs.memory == {"dram": 1600 * 2.0e9, "l2": 5120 * 1.8e9, "l1": 16896 * 2.0e9}
    # Each kernel against its own pipe: relu (fp32 only) gets the fp32 roof, memory-bound; its
    # least time is DRAM 8e5 B / 3.2e12 B/s = 0.25 us of 4 us: 6.25 % of its roof.
    v = roofs.judge(relu)
    assert v.roof == 16896 * 2 * 2.0e9 and v.bound == "memory" and v.limiter == "dram" and v.pct == pytest.approx(6.25)
    # gemm mixes pipes: least time 2e9/1.081344e15 + 2e6/6.7584e13 s; AI 500.5 > ridge ~333: compute.
    least = 2e9 / 1.081344e15 + 2e6 / 6.7584e13
    g = roofs.judge(gemm)
    assert g.roof == pytest.approx(2.002e9 / least) and g.bound == "compute" and g.limiter == "compute"
    assert g.pct == pytest.approx(100 * least / 1e-5)


def test_na_ceilings_are_absent_not_errors(tmp_path):
    text = (NCU / "handmade_raw_peaks.csv").read_text()
    p = tmp_path / "na.csv"
    p.write_text(text.replace('"540,672"', '"n/a"').replace('"2,000,000,000","0","1,000"', '"n/a","n/a","1,000"'))
    launches, (gemm, _) = read_points(p)
    roofs = ceilings.from_file(launches)
    assert "tensor_fp16" not in roofs.compute and roofs.compute["fp32"] == 16896 * 2 * 2.0e9
    # Tensor counters "n/a" and 1,000 tensor instructions: unknown tensor FLOPs, a lower bound.
    assert gemm.flops == 2e6 and gemm.tensor_flops is None and not gemm.exact


def test_roof_sources_in_order_and_a_pipe_without_roof_is_not_judged():
    given = ceilings.given(100.0, None)
    merged = ceilings.merge(given, ceilings.from_device("H100-SXM5-80GB"))
    assert merged.pipe_roof("tensor_tf32") == 100e12 and merged.memory["dram"] == 3350e9
    assert merged.source["*"] == "--peak-compute" and merged.source["dram"] == "datasheet H100-SXM5-80GB"
    t4 = ceilings.from_device("T4")  # no TF32 figure in the table
    p = points.Point("0", "k", "", 1e9, 1e6, None, None, 1e-3, pipe_flops={"tensor_tf32": 1e9})
    assert t4.judge(p).pct is None and t4.missing([p]) == ["tensor_tf32"]


def test_roofs_from_this_gpus_peak_file(tmp_path, capsys):
    from perfsuite.storage.peaks import save_peak

    entry = {"flops_per_s": {"fp32": 5e13, "tf32": 3e14, "bf16": 6e14, "fp16": 7e14}, "bytes_per_s": 3e12}
    peaks = {"cuda|NVIDIA H100 80GB HBM3": entry, "cpu|Some CPU|threads=2": {"flops_per_s": {"fp32": 1e11}}}
    got, name = ceilings.from_peak_file(peaks, "NVIDIA H100 80GB HBM3")
    assert name == "NVIDIA H100 80GB HBM3" and got.memory == {"dram": 3e12}
    assert got.compute == {"fp32": 5e13, "tensor_tf32": 3e14, "tensor_fp16": 7e14}  # bf16 and fp16: one pipe, best
    assert ceilings.from_peak_file(peaks, "NVIDIA A100-SXM4-40GB")[1] == ""  # another GPU's peaks are not ours
    assert ceilings.from_peak_file(peaks, "")[1] == "NVIDIA H100 80GB HBM3"  # unnamed export, one CUDA entry
    two = {**peaks, "cuda|NVIDIA L4": entry}
    assert ceilings.from_peak_file(two, "")[1] == ""  # which one? none
    pf = tmp_path / "peak.json"
    save_peak(pf, {"device_key": "cuda|NVIDIA A100-SXM4-40GB", **entry})  # the GPU ncu_details.csv names
    assert (
        cli.main(["--peak-file", str(pf), "roofline", str(DATA / "ncu_details.csv"), "--out", str(tmp_path / "p.png")])
        == 0
    )
    assert "FP32 50 TFLOP/s (perfsuite peak (NVIDIA A100-SXM4-40GB))" in capsys.readouterr().out.replace("\n", "")


# ---- the real exports -------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_export_flops_match_the_readme_and_an_independent_sum(path):
    _, pts = read_points(path)
    total = points.aggregate(pts, "total")
    assert total.flops == independent_flops(path)  # exact: integer counts
    readme = 38.5e9 if "fp32" in path.name else 32.8e9
    assert total.flops == pytest.approx(readme, rel=2e-3)
    assert total.exact and total.flops / 27.81e9 == pytest.approx(1.38 if "fp32" in path.name else 1.18, abs=0.01)
    # The tensor path did nearly all of it: TF32 for the fp32 step, FP16 for autocast.
    assert total.pipe == ("tensor_tf32" if "fp32" in path.name else "tensor_fp16")
    assert len(pts) == (286 if "fp32" in path.name else 328)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_details_and_raw_pages_give_the_same_numbers(precision):
    la, pa = read_points(NCU / f"resnet18_{precision}_details.csv.gz")
    lb, pb = read_points(NCU / f"resnet18_{precision}_raw.csv.gz")
    assert [l.id for l in la] == [l.id for l in lb] and [l.ranges for l in la] == [l.ranges for l in lb]
    for a, b in zip(pa, pb):
        assert a.kernel == b.kernel and a.pipe_flops == b.pipe_flops and a.flops == b.flops
        # The details page rounds to 3 significant digits ("1.05 Mbyte" for 1,054,464 B): 0.5 %.
        for x, y in (
            (a.dram_bytes, b.dram_bytes),
            (a.l2_bytes, b.l2_bytes),
            (a.l1_bytes, b.l1_bytes),
            (a.time_s, b.time_s),
        ):
            assert x == pytest.approx(y, rel=5e-3)
    assert sum(p.flops for p in pa) == independent_flops(NCU / f"resnet18_{precision}_raw.csv.gz")
    ra = {r.nvtx_range: r for r in points.by_range(pa, la)}
    rb = {r.nvtx_range: r for r in points.by_range(pb, lb)}
    assert ra.keys() == rb.keys() and all(ra[k].flops == rb[k].flops for k in ra)


def test_real_nvtx_start_end_ranges():
    path = NCU / "resnet18_fp32_raw.csv.gz"
    launches, pts = read_points(path)
    ranges = points.by_range(pts, launches)
    assert [r.nvtx_range for r in ranges] == ["train_step", "forward", "loss", "backward", "optimizer_step"]
    rows = _rows(path)
    col = rows[0].index("Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")
    for r in ranges:  # launches per range, counted here by substring
        assert r.launches == sum(f":{r.nvtx_range}:" in row[col] for row in rows[2:])
    assert ranges[0].launches == 286 and sum(r.launches for r in ranges[1:]) == 286
    assert launches[0].nvtx == "train_step > forward"


def test_cli_on_a_real_export_writes_full_precision_groups_ranges_and_judges_each_pipe(tmp_path, capsys):
    path = NCU / "resnet18_fp32_raw.csv.gz"
    out = tmp_path / "r.png"
    assert (
        cli.main(
            [
                "--peak-file",
                str(tmp_path / "none.json"),
                "roofline",
                str(path),
                "--device",
                "H100-SXM5-80GB",
                "--out",
                str(out),
                "--by-range",
            ]
        )
        == 0
    )
    console = capsys.readouterr().out
    assert "top 10 of" in console and "TF32 tensor" in console and out.stat().st_size > 20000
    text = out.with_suffix(".csv").read_text()
    assert tuple(text.splitlines()[0].split(",")[:11]) == SUMMARY_COLUMNS
    rows = list(csv.DictReader(io.StringIO(text)))
    ids = [r["id"] for r in rows]
    assert ids[:286] == [str(i) for i in range(286)] and ids[286] == "total" and ids.count("range") == 5
    groups = [r for r in rows if r["id"] == "group"]
    assert 10 < len(groups) < 100 and all(len(g["kernel"]) <= 48 for g in groups)
    assert sum(int(g["launches"]) for g in groups) == 286
    total = rows[286]
    assert float(total["flops"]) == independent_flops(path)  # repr: every digit
    assert float(total["flops_tensor_tf32"]) == float(total["tensor_flops"]) and total["flops_exact"] == "true"
    single = 0
    for r in rows[:286]:  # one-pipe launches sit under exactly that pipe's datasheet roof
        used = [
            k[6:]
            for k in r
            if k.startswith("flops_") and k not in ("flops_exact", "flops_note") and r[k] and float(r[k]) > 0
        ]
        if len(used) == 1:
            single += 1
            assert float(r["roof_flop_per_s"]) == H100[used[0]]
    assert single > 50


def test_summary_floats_read_back_exactly():
    path = NCU / "resnet18_fp16_raw.csv.gz"
    _, pts = read_points(path)
    rows = list(csv.DictReader(io.StringIO(summary_csv(pts, ceilings.from_device("H100-SXM5-80GB")))))
    raw = _rows(path)
    at = raw[0].index("gpu__time_duration.sum")
    assert raw[1][at] == "us"
    for p, r, cell in zip(pts, rows, raw[2:]):
        assert float(r["flops"]) == p.flops and float(r["dram_bytes"]) == p.dram_bytes
        assert float(r["arithmetic_intensity"]) == p.intensity
        # One rounding from the file's decimal text: "3.584000" us is 3.584e-06, not 3.5839999999999997e-06.
        assert float(r["time_s"]) == p.time_s == float(cell[at] + "e-6")


def _namespace(tmp_path, path, **kw):
    base = {
        "csv": path,
        "records": None,
        "peak_compute": None,
        "peak_bw": None,
        "device": "H100-SXM5-80GB",
        "label": None,
        "by_range": False,
        "out": tmp_path / "r.png",
        "summary": None,
        "peak_file": tmp_path / "none.json",
        "record": None,
    }
    return Namespace(**{**base, **kw})


@pytest.mark.parametrize("precision, ratio", [("fp32", "1.385"), ("fp16", "1.179")])
@pytest.mark.slow
def test_executed_against_model_flops_from_a_record(tmp_path, precision, ratio):
    from perfsuite.core.record import Record, Work

    rec = Record(
        workload="resnet",
        params={"size": "gpu", "precision": precision},
        device="cuda",
        block_size=1,
        timing_method="cuda_event",
        samples_s=[0.01] * 5,
        work=Work(items_per_step=128, item_unit="images", flops_per_step=27.81e9, flops_method="FlopCounterMode"),
    )
    (tmp_path / "rec.json").write_text(rec.to_json())
    buf = io.StringIO()
    args = _namespace(tmp_path, NCU / f"resnet18_{precision}_details.csv.gz", record=tmp_path / "rec.json")
    assert roofline_command(args, Console(file=buf, width=300), None) == 0
    said = buf.getvalue()
    assert f"executed/model = {ratio}" in said and "MFU" in said
    # The recorded step: 27.81e9 FLOP in 10 ms = 2.781 TFLOP/s, against the tensor roof of the precision.
    roof = H100["tensor_tf32" if precision == "fp32" else "tensor_fp16"]
    assert f"MFU {100 * 2.781e12 / roof:.2f}%" in said
    total = next(r for r in csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())) if r["id"] == "total")
    assert float(total["model_flops"]) == 27.81e9 and total["executed_over_model"].startswith(ratio[:4])


def test_profile_step_asks_for_everything_the_roofline_reads():
    asked = set(ROOFLINE_METRICS.split(","))
    tensor = {
        f"sm__ops_path_tensor_src_{t}.sum" for t in ("fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8", "int8")
    }
    assert tensor <= asked
    flops = {f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum" for p in "dfh" for op in ("add", "mul", "fma")}
    assert flops | {"gpu__time_duration.sum", "dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum"} <= asked
    # ... and the ceilings, so a file made with this list carries its own roofs.
    assert {
        "dram__bytes.sum.peak_sustained",
        "sm__cycles_elapsed.avg.per_second",
        "sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained",
    } <= asked
    # Every metric of a real export, that profile-step's list plus the six tensor ones made, is asked for.
    rows = _rows(NCU / "resnet18_fp16_details.csv.gz")
    assert {r[rows[0].index("Metric Name")] for r in rows[1:]} <= asked


def test_short_kernel_names():
    long = (
        "void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::direct_copy_kernel_cuda("
        "at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda(float) (instance 1)]>"
        "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
    )
    assert short_name(long) == "elementwise[direct_copy]"
    assert (
        short_name("void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, 512, 16>(cudnn::P<T1, T2>)")
        == "batchnorm_fwtr_nhwc_semiPersist"
    )
    assert (
        short_name(
            "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32_"
            "warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn"
        )
        == "sm90_xmma_dgrad_implicit_gemm"
    )
    assert (
        short_name(
            "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)"
        )
        == "vectorized_elementwise[CUDAFunctor_add]"
    )
    assert short_name("relu_kernel") == "relu_kernel"


def test_units():
    assert parse_number("1,234,567") == 1234567
    assert to_base(1, "Gbyte") == 1e9 and to_base(1, "Kbyte") == 1e3
    assert to_base(5, "msecond") == pytest.approx(5e-3) and to_base(5, "us") == pytest.approx(5e-6)
    assert to_base(2, "cycle/usecond") == 2e6 and to_base(3, "hz") == 3 and to_base(1.98, "Ghz", "freq") == 1.98e9
    assert to_base(1.6, "Kbyte/cycle", "per_cycle") == 1600 and read("3.584", "us", "time") == 3.584e-6
    with pytest.raises(UnitError, match="unknown time unit 'fortnight'"):
        to_base(1, "fortnight", "time")
    with pytest.raises(UnitError, match="unknown bytes unit 'inst'"):
        to_base(1, "inst", "bytes")


# ---- refused input ----------------------------------------------------------------------------


def _variant(tmp_path, src, old, new, name="bad.csv", bom=False, crlf=False):
    text = (DATA / src).read_text()
    assert old in text
    text = text.replace(old, new, 1)
    if crlf:
        text = text.replace("\n", "\r\n")
    p = tmp_path / name
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return p


TIME_ROW = '"gpu__time_duration.sum","usecond","10.00"'


@pytest.mark.parametrize(
    "src, old, new, message",
    [
        ("ncu_truncated.csv", "", "", "line 14: truncated row, column 15 ('Metric Value') is missing"),
        ("ncu_not_a_number.csv", "", "", "line 4, column 15 (dram__bytes.sum): 'n/a' is not a number"),
        ("ncu_missing_metric.csv", "", "", "launch 1 (relu_kernel) lacks the metric gpu__time_duration.sum"),
        (
            "ncu_details.csv",
            TIME_ROW,
            TIME_ROW.replace('"10.00"', '"-10.00"'),
            "line 5, column 15 (gpu__time_duration.sum): '-10.00' is negative",
        ),
        (
            "ncu_details.csv",
            TIME_ROW,
            TIME_ROW.replace('"10.00"', '"inf"'),
            "line 5, column 15 (gpu__time_duration.sum): 'inf' is not a finite number",
        ),
        (
            "ncu_details.csv",
            '"Mbyte","2.00"',
            '"Mbyte","nan"',
            "line 4, column 15 (dram__bytes.sum): 'nan' is not a finite",
        ),
        (
            "ncu_details.csv",
            '"Kbyte","800"',
            '"Kbyte","-800"',
            "line 10, column 15 (dram__bytes.sum): '-800' is negative",
        ),
        (
            "ncu_details.csv",
            TIME_ROW,
            TIME_ROW.replace("usecond", "fortnight"),
            "line 5, column 15 (gpu__time_duration.sum): unknown time unit 'fortnight'",
        ),
        ("ncu_raw.csv", '"1.41"', '"0"', "line 5, column 13 (gpc__cycles_elapsed.avg.per_second): '0' is zero"),
    ],
)
def test_bad_files_name_line_column_or_metric_exit_2_and_write_nothing(tmp_path, capsys, src, old, new, message):
    path = _variant(tmp_path, src, old, new) if old else DATA / src
    out = tmp_path / "r.png"
    code = cli.main(["roofline", str(path), "--peak-compute", "19.5", "--peak-bw", "1555", "--out", str(out)])
    err = capsys.readouterr().err.replace("\n", "")
    assert code == 2 and message in err
    assert not out.exists() and not out.with_suffix(".csv").exists()


@pytest.mark.parametrize("src, keep, line", [("ncu_details.csv", 3, 3), ("ncu_raw.csv", 4, 3)])
def test_a_header_without_launches_is_refused(tmp_path, src, keep, line):
    p = tmp_path / "empty.csv"
    p.write_text("\n".join((DATA / src).read_text().splitlines()[:keep]) + "\n")
    with pytest.raises(NcuCsvError, match=f"line {line}: no kernel launch after the header"):
        read_ncu_csv(p)


def test_bom_and_crlf_read_normally(tmp_path):
    p = _variant(tmp_path, "ncu_details.csv", "==PROF== Connected", "==PROF== Connected", bom=True, crlf=True)
    _, mine = read_points(p)
    _, plain = read_points(DATA / "ncu_details.csv")
    assert mine == plain
    q = tmp_path / "bom_first.csv"  # the BOM right before the header, as Excel writes it
    q.write_bytes(b"\xef\xbb\xbf" + "\r\n".join((DATA / "ncu_details.csv").read_text().splitlines()[2:]).encode())
    assert [x.flops for x in read_points(q)[1]] == [1e7, 1e5]


def test_cli_refusals_without_roofs_or_with_an_unknown_device(tmp_path, capsys):
    pf = ["--peak-file", str(tmp_path / "none.json")]
    assert cli.main(pf + ["roofline", str(DATA / "ncu_raw.csv"), "--device", "Z80"]) == 2
    assert "unknown; known:" in capsys.readouterr().err
    assert cli.main(pf + ["roofline", str(DATA / "ncu_raw.csv"), "--out", str(tmp_path / "x.png")]) == 2
    assert "no roofs" in capsys.readouterr().err and not (tmp_path / "x.png").exists()


def test_tensor_flops_unknown_is_said_in_the_output_and_the_summary(tmp_path, capsys):
    out = tmp_path / "raw.png"
    assert (
        cli.main(
            [
                "--peak-file",
                str(tmp_path / "none.json"),
                "roofline",
                str(DATA / "ncu_raw.csv"),
                "--device",
                "A100-SXM4-40GB",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    said = capsys.readouterr().out.replace("\n", "")
    assert "lower bound" in said and "tensor FLOPs unknown" in said
    rows = list(csv.DictReader(io.StringIO(out.with_suffix(".csv").read_text())))
    assert rows[0]["flops_exact"] == "false" and rows[0]["tensor_flops"] == "" and "unknown" in rows[0]["flops_note"]


# ---- this CPU ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_cpu_roofline_from_records(tmp_path, monkeypatch):
    from perfsuite.suite import peak

    monkeypatch.setitem(peak.MATMUL_N, "cpu", 128)
    monkeypatch.setitem(peak.COPY_BYTES, "cpu", 4 * 2**20)
    pf = tmp_path / "peak.json"
    assert cli.main(["--peak-file", str(pf), "peak", "--max-time", "0.5"]) == 0
    res = tmp_path / "res.json"
    assert (
        cli.main(
            ["--peak-file", str(pf), "run", "autoencoder", "-p", "batch_size=8", "--max-time", "0.6", "--out", str(res)]
        )
        == 0
    )
    out = tmp_path / "cpu.png"
    assert cli.main(["roofline", "--records", str(res), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.with_suffix(".csv").read_text().splitlines()))
    assert len(rows) == 1 and float(rows[0]["dram_bytes"]) > 0 and float(rows[0]["flops"]) > 0


def test_summary_uses_each_points_own_roof():
    pts = [
        points.Point("a", "k", "", 100.0, 4.0, None, None, 1.0, "fp32"),
        points.Point("b", "k", "", 100.0, 4.0, None, None, 1.0, "bf16"),
    ]
    roofs = ceilings.Ceilings({"fp32": 40.0, "bf16": 200.0}, {"dram": 4.0})
    rows = list(csv.DictReader(io.StringIO(summary_csv(pts, roofs))))
    assert [r["bound"] for r in rows] == ["compute", "memory"]  # AI 25 against ridges 10 and 50
    assert [r["roof_flop_per_s"] for r in rows] == ["40.0", "200.0"]


# ---- the file's tensor roofs against the dense rate (issue 23, item 4) -------------------------
# A raw export taken on an H100 80GB HBM3 (2026-11-25, torch 2.11, Nsight Compute 2025.3.1,
# --clock-control none) with profile-step's metric list, peaks included: see tests/data/ncu/README.md.
H100_PEAKS = NCU / "h100_resnet18_fp32_step_raw_peaks.csv.gz"
H100_SMS, H100_TENSOR_CLOCK = 132, 1.83e9  # the datasheet's tensor figures are at 1830 MHz


def _h100_file_roofs():
    launches = read_ncu_csv(H100_PEAKS)
    hz = max(l.metrics["sm__cycles_elapsed.avg.per_second"] for l in launches)
    return launches, hz


def test_h100_file_tensor_roofs_are_halved_to_the_dense_rate():
    launches, hz = _h100_file_roofs()
    raw = launches[0].metrics
    # What the file says, per SM per cycle: TF32 4096, FP16/BF16 8192, FP8/INT8 16384, FP64 256.
    assert raw["sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained"] == 4096 * H100_SMS
    assert raw["sm__ops_path_tensor_src_fp16.sum.peak_sustained"] == 8192 * H100_SMS
    assert raw["device__attribute_multiprocessor_count"] == H100_SMS and launches[0].cc == "9.0"
    roofs = ceilings.from_file(launches)
    per_sm_cycle = {p: roofs.compute[p] / (H100_SMS * hz) for p in roofs.compute if p.startswith("tensor_")}
    # The dense rates of the H100 whitepaper: halved where the file gave twice them, FP64 as given.
    assert per_sm_cycle == {
        "tensor_fp64": 256,
        "tensor_tf32": 2048,
        "tensor_fp16": 4096,
        "tensor_fp8": 8192,
        "tensor_int8": 8192,
    }
    # At the datasheet's 1830 MHz the dense roofs are its 494.7 and 989.4 TFLOP/s (not 1077 / 2153 at 1.996 GHz).
    for pipe in ("tensor_tf32", "tensor_fp16"):
        assert roofs.compute[pipe] / hz * H100_TENSOR_CLOCK == pytest.approx(H100[pipe], rel=1e-3)
        assert "÷2" in roofs.source[pipe] and "sparse" in roofs.source[pipe]
    assert roofs.source["tensor_fp64"] == "file" and not roofs.notes
    assert roofs.compute["fp32"] == 16896 * 2 * hz  # CUDA-core roofs are untouched
    # A TF32 kernel at the full dense rate is at 100% of its roof, not 50%.
    p = points.Point(
        "0", "k", "", 1e12, 1.0, None, None, 1e12 / (2048 * H100_SMS * hz), pipe_flops={"tensor_tf32": 1e12}
    )
    assert roofs.judge(p).pct == pytest.approx(100.0)


def test_without_the_sm_count_the_ffma_peak_counts_the_sms():
    """The details page carries only the metrics asked for: no device attributes."""
    launches, _ = _h100_file_roofs()
    full = ceilings.from_file(launches)
    for l in launches:
        del l.metrics["device__attribute_multiprocessor_count"]
    assert ceilings.from_file(launches).compute == full.compute


def test_a_dense_rate_is_kept_and_an_odd_or_unknown_one_is_noted():
    launches, hz = _h100_file_roofs()
    tf32 = "sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained"
    for l in launches:  # a file that already gives the dense rate
        l.metrics[tf32] = 2048 * H100_SMS
    roofs = ceilings.from_file(launches)
    assert roofs.compute["tensor_tf32"] == 2048 * H100_SMS * hz and roofs.source["tensor_tf32"] == "file"
    for l in launches:  # neither 1x nor 2x: kept as given, and said
        l.metrics[tf32] = 3000 * H100_SMS
    roofs = ceilings.from_file(launches)
    assert roofs.compute["tensor_tf32"] == 3000 * H100_SMS * hz and roofs.source["tensor_tf32"] == "file, unchecked"
    assert "3000 FLOP per SM per cycle" in roofs.notes["tensor_tf32"] and "2048 dense" in roofs.notes["tensor_tf32"]
    for l in launches:  # a GPU whose dense rates are not in the table
        l.cc = "8.9"
    roofs = ceilings.from_file(launches)
    assert roofs.source["tensor_fp16"] == "file, unchecked" and "compute capability 8.9" in roofs.notes["tensor_fp16"]


def test_cli_prints_the_dense_tensor_roof_and_notes_an_unchecked_one(tmp_path, capsys):
    pf = ["--peak-file", str(tmp_path / "none.json")]
    assert cli.main(pf + ["roofline", str(H100_PEAKS), "--out", str(tmp_path / "h.png")]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert re.search(r"TF32 tensor 539\.\d TFLOP/s \(file ÷2", out) and "unchecked" not in out
    # The hand-made file has no CC column: its tensor roof is used as given, with a note.
    assert cli.main(pf + ["roofline", str(NCU / "handmade_raw_peaks.csv"), "--out", str(tmp_path / "m.png")]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert "FP16/BF16 tensor roof from the file unchecked (no CC column in the file)" in out


def test_ranges_with_unknown_tensor_flops_say_their_share_of_the_roof_is_unknown(tmp_path, capsys):
    """Issue 23, item 13: a lower-bound FLOP count gives a lower-bound compute floor, so the
    limiter and the share of the roof are unknown; printing '% of roof (dram)' claimed both."""
    rows = _rows(NCU / "resnet18_fp16_raw.csv.gz")
    # The same real step profiled without the sm__ops_path_tensor_src_* metrics (the columns renamed away).
    rows[0] = [f"not_asked_{c}" if c.startswith("sm__ops_path_tensor_src_") else c for c in rows[0]]
    path = tmp_path / "no_ops_path.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert (
        cli.main(
            [
                "--peak-file",
                str(tmp_path / "none.json"),
                "roofline",
                str(path),
                "--device",
                "H100-SXM5-80GB",
                "--out",
                str(tmp_path / "r.png"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    ranges = [line for line in out.splitlines() if line.strip().startswith("range ")]
    assert len(ranges) == 5
    for line in ranges:
        if "≥" in line:  # tensor FLOPs unknown in this range
            assert "% of roof unknown (tensor FLOPs unknown)" in line and "% of roof (" not in line
    assert any("≥" in line for line in ranges) and any("≥" not in line for line in ranges)  # loss has no tensor work
    summary = {
        r["nvtx_range"]: r for r in csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())) if r["id"] == "range"
    }
    assert summary["train_step"]["pct_of_roof"] == "" and summary["train_step"]["limiter"] == ""


def test_each_ranges_device_work_is_said_from_the_same_export(tmp_path, capsys):
    """Issue 56, items 1 and 5: the step's work on the device comes from the roofline's own ncu
    session: a range's launches, DRAM bytes and (where the export has them: profile-step asks for
    them now) warp instructions executed. The real H100 step, with an instructions column added
    (1,000 a launch; the fixture was exported before it was asked for)."""
    from perfsuite.roofline.metrics import INST, profile_metrics

    assert INST in profile_metrics()
    rows = _rows(NCU / "resnet18_fp32_raw.csv.gz")
    rows = [row + [INST if i == 0 else "inst" if i == 1 else "1,000"] for i, row in enumerate(rows)]
    path = tmp_path / "with_inst.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    for export, instructions in ((NCU / "resnet18_fp32_raw.csv.gz", None), (path, "2.86e+05")):
        argv = ["--peak-file", str(tmp_path / "none.json"), "roofline", str(export), "--device", "H100-SXM5-80GB",
                "--out", str(tmp_path / "r.png")]  # fmt: skip
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        (step,) = [line for line in out.splitlines() if line.strip().startswith("range train_step:")]
        forward = next(line for line in out.splitlines() if line.strip().startswith("range forward:"))
        assert "286 launches" in step and "MiB DRAM" in step, step
        if instructions is None:
            assert "warp instructions" not in step  # not in the export: not claimed
        else:
            assert f"{instructions} warp instructions" in step and "1.1e+05 warp instructions" in forward, (
                step,
                forward,
            )
