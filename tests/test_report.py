"""Where the time went, and which roof, as the console table, the markdown page and the Qwen
report show them: hand-built records, no measuring."""

import re
from dataclasses import replace

from records import make_record
from rich.console import Console

from perfsuite.core.errors import StorageError
from perfsuite.core.record import Work
from perfsuite.report.markdown import write_report
from perfsuite.report.tables import print_bounds, records_table
from perfsuite.workloads import qwen_report as qwen


def _nvml(mean: float) -> dict:
    return {"status": "ok", "n": 40, "interval_s": 0.05, "gpu_util_pct": {"mean": mean, "max": 100.0}}


def _cuda(mean: float | None, seed: int = 0, **params):
    nvml = _nvml(mean) if mean is not None else {"status": "unavailable", "reason": "nvidia-ml-py is not installed"}
    return replace(make_record(seed=seed, params={"n": 256, "dtype": "fp32", **params}), device="cuda:0", nvml=nvml)


def _text(renderable) -> str:
    console = Console(record=True, width=300)
    console.print(renderable)
    return console.export_text()


def test_console_table_shows_each_verdict_for_cuda_records():
    out = _text(records_table([_cuda(23.0), _cuda(87.0, seed=1), _cuda(None, seed=2)]))
    assert "GPU" in out
    assert "host-bound (23% busy)" in out and "device-bound (87% busy)" in out and "unknown" in out


def test_console_table_for_cpu_records_has_no_gpu_column():
    out = _text(records_table([make_record()]))
    assert "GPU" not in out and "host-bound" not in out and "n/a" not in out


def test_print_bounds_gives_cuda_records_a_plain_line_with_the_evidence():
    console = Console(record=True, width=300)
    print_bounds(console, [_cuda(23.0), make_record(), _cuda(None, seed=2)])
    lines = console.export_text().splitlines()
    assert len(lines) == 2  # the CPU record has no verdict to print
    assert lines[0].startswith("host-bound matmul[") and "busy 23%" in lines[0]
    assert lines[1].startswith("unknown ") and "nvidia-ml-py is not installed" in lines[1]


def test_console_names_the_roof_when_it_is_not_the_work_dtype():
    block = {"flops_per_s": 4e12, "dtype": "fp32", "roof": "tf32"}
    r = replace(_cuda(90.0), peak=block)
    out = _text(records_table([r]))
    assert f"{r.peak_fraction:.0%} of tf32" in out


def _flat(page: str) -> str:
    """The page with runs of spaces as one: pandas pads table cells to their column's width."""
    return re.sub(r" {2,}", " ", page)


def test_markdown_states_where_the_time_went(tmp_path):
    recs = [_cuda(23.0), _cuda(87.0, seed=1, n=512), _cuda(None, seed=2, n=1024)]
    page = _flat(write_report(recs, tmp_path).read_text())
    assert "| GPU | converged |" in page
    assert "| host-bound (23% busy) |" in page and "| device-bound (87% busy) |" in page
    assert "**host-bound**: the GPU was busy 23%" in page
    assert "**unknown**: NVML unavailable: nvidia-ml-py is not installed" in page
    header = next(line for line in page.splitlines() if line.startswith("| params"))
    row = next(line for line in page.splitlines() if "host-bound (23% busy)" in line)
    assert header.count("|") == row.count("|")  # the extra column is in the rows too


def test_markdown_for_cpu_records_is_unchanged_and_names_a_missing_roof(tmp_path):
    no_roof = {
        "flops_per_s": None,
        "dtype": "fp32",
        "roof": "fp32",
        "why": "no fp32 roof in this device's stored peak (fp32 work: the fp32 matmul roof)",
    }
    page = write_report(
        [make_record(), make_record(seed=1, params={"n": 512, "dtype": "fp32"}, peak=no_roof)], tmp_path
    ).read_text()
    assert "GPU" not in page and "host-bound" not in page
    assert "no fraction of peak: no fp32 roof in this device's stored peak" in page


def test_markdown_amp_rows_carry_each_sides_verdict(tmp_path):
    from perfsuite.compare.amp import AmpComparison

    amp = {
        "workload": "resnet",
        "params": {},
        "device": "cuda:0",
        "precision_a": "fp32",
        "precision_b": "bf16",
        "pair_ratios": [1.05, 1.1, 1.15],
        "time_a_s": [0.02, 0.021],
        "time_b_s": [0.018, 0.019],
        "saved_bytes_a": 10,
        "saved_bytes_b": 6,
        "cuda_peak_a": None,
        "cuda_peak_b": None,
        "final_loss_a": 1.0,
        "final_loss_b": 1.01,
        "loss_tolerance": 0.05,
        "steps": 5,
        "nvml_a": _nvml(40.0),
        "nvml_b": _nvml(22.0),
    }
    old = {k: v for k, v in amp.items() if not k.startswith("nvml_")}  # written before the verdict existed
    amps = [AmpComparison.from_dict(a) for a in (amp, old)]
    page = _flat(write_report([make_record()], tmp_path, amp=amps).read_text())
    assert "| 1.10x | 0.60 |" in page  # the speed-up and memory ratio, from the pairs and the bytes
    assert "| host-bound (40% busy) / host-bound (22% busy) | ok |" in page
    assert "| unknown / unknown | ok |" in page


def test_qwen_rows_export_the_verdict_and_a_host_bound_best_batch_says_so_first():
    recs = [_cuda(23.0, batch_size=bs, dtype="fp16", seed=bs) for bs in (1, 2)]
    recs = [replace(r, work=Work(items_per_step=r.params["batch_size"], item_unit="samples")) for r in recs]
    rows = [qwen.row(r) for r in recs]
    assert set(rows[0]) == set(qwen.COLUMNS)  # the CSV writer needs exactly these
    assert rows[0]["bound"] == "host-bound" and rows[0]["gpu_util_pct"] == 23.0
    best = max(rows, key=lambda r: r["samples_per_s"])
    assert qwen.bottleneck(rows, best).startswith("host: the GPU was busy only 23%")
    cpu = qwen.row(replace(make_record(params={"batch_size": 1, "dtype": "fp32"})))
    assert cpu["bound"] == "n/a (cpu)"
    assert not qwen.bottleneck([cpu], cpu).startswith("host")


def test_figures_are_not_left_open_in_pyplot(tmp_path):
    """Figures drawn for a report are matplotlib Figures of their own, not pyplot's: a report of
    hostile records that raised while drawing left them open, and after 20 every figure warned
    (an error under filterwarnings=error: the fuzz test's report became an internal error)."""
    import matplotlib.pyplot as plt
    import pytest
    from records import make_record

    from perfsuite.report.plots import throughput_figure

    before = plt.get_fignums()
    recs = [make_record(params={"n": 1}, seed=1), make_record(params={"n": 2}, seed=2)]
    (tmp_path / "taken.png").mkdir()  # writing the figure fails: the figure must not stay open
    for _ in range(3):
        with pytest.raises(StorageError):
            throughput_figure(recs, tmp_path / "taken.png")
    throughput_figure(recs, tmp_path / "f.png")
    assert plt.get_fignums() == before and (tmp_path / "f.png").stat().st_size > 1000


def test_a_name_with_a_character_the_font_lacks_is_drawn_without_a_warning(tmp_path):
    """A workload name from a user's data (the fuzz test found \\U000a2e5e): matplotlib warns of a
    missing glyph, which under warnings-as-errors made `report` an internal error."""
    from records import make_record

    from perfsuite.report.plots import throughput_figure

    recs = [
        replace(make_record(params={"n": 1}, seed=1), workload="w\U000a2e5e"),
        replace(make_record(params={"n": 2}, seed=2), workload="w\U000a2e5e"),
    ]
    assert throughput_figure(recs, tmp_path / "g.png").stat().st_size > 1000


def test_the_report_says_first_what_was_not_timed_and_why(tmp_path):
    """Issue 55: a suite whose check failed exited 3 and its report never said which workloads
    went untimed; now checks.json's failures and each results file's failed cases head it."""
    from perfsuite.cli import app as cli
    from perfsuite.storage.files import ResultsWriter, atomic_write_text, document

    results = tmp_path / "results"
    results.mkdir()
    assert cli.main(["run", "noop", "--max-time", "0.3", "--out", str(results / "noop.json")]) == 0
    atomic_write_text(
        results / "checks.json",
        document("checks", [{"workload": "resnet", "name": "AMP keeps the loss", "ok": False, "detail": "bf16 9%"}]),
    )
    writer = ResultsWriter(results / "broken.json")
    writer.add_failure({"workload": "matmul", "params": {"n": 64}, "device": "cpu", "kind": "error", "error": "boom"})
    assert cli.main(["report", str(results), "--out-dir", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "summary.md").read_text()
    top = page[: page.index("## noop")]
    assert "## Not timed" in top
    assert "resnet: not timed, its check failed: AMP keeps the loss: bf16 9%" in top
    assert "matmul {'n': 64}: failed: boom" in top


def test_sizes_times_and_rates_never_print_in_exponent_notation():
    # 1010 MiB sits below a GiB: three significant digits once printed it "1.01e+03 MiB" (a
    # roofline range's DRAM bytes); past the largest unit the whole digits stay too.
    from perfsuite.core.units import fmt_bytes, fmt_rate, fmt_seconds

    assert fmt_bytes(1010 * 2**20) == "1010 MiB"
    assert fmt_bytes(1.5 * 2**30) == "1.5 GiB"
    assert fmt_bytes(2048 * 2**30) == "2048 GiB"
    assert fmt_seconds(12345.0) == "12345 s"
    assert fmt_seconds(0.0012) == "1.2 ms"
    assert fmt_rate(2.5e16, "FLOP/s") == "25000 TFLOP/s"
    assert fmt_seconds(1e-14) == "0.00001 ns" and fmt_rate(1.5e-5, "B/s") == "0.000015 B/s"
    for text in (fmt_bytes(1023.4 * 2**20), fmt_seconds(9999.9), fmt_rate(9999.9e12, "B/s"), fmt_seconds(3e-15)):
        assert "e+" not in text and "e-" not in text, text
