"""AMP as a benchmark class: asv's AmpTrack (driven without asv) and the pytest-benchmark group."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks._suite import make_amp_suite, measure_amp

ROOT = Path(__file__).resolve().parents[1]
# Both front-ends run on the machine's own device (`auto`), as asv and `make bench-pytest` do.
CUDA = torch.cuda.is_available()


def test_asv_amp_track_reads_one_comparison_per_case():
    grid = {"workload": ["autoencoder"], "precision": ["bf16", "fp16"]}
    cache = measure_amp(grid, "ci", pairs=2, steps=5, max_time=0.3, params={"variant": "conv", "batch_size": 8})
    res = cache[repr(("autoencoder", "bf16"))]
    assert "_skip" not in res, res
    Track = make_amp_suite(grid)
    t = Track()
    t.setup(cache, "autoencoder", "bf16")
    assert t.track_time_ratio(cache, "autoencoder", "bf16") == pytest.approx(1 / res["speedup"])
    assert 0 < t.track_saved_memory_ratio(cache, "autoencoder", "bf16") < 1  # bf16 saves half-width activations
    diff = t.track_final_loss_rel_diff(cache, "autoencoder", "bf16")
    assert math.isfinite(diff) and diff == pytest.approx(res["loss_rel_diff"])
    if CUDA:  # measure_amp runs on the machine's device (asv's): fp16 is measured there
        assert "_skip" not in cache[repr(("autoencoder", "fp16"))]
        t.setup(cache, "autoencoder", "fp16")
    else:
        with pytest.raises(NotImplementedError, match="fp16"):  # CPU: skipped with the reason
            t.setup(cache, "autoencoder", "fp16")
    assert Track.param_names == ["workload", "precision"]


def test_bench_amp_module_defines_the_class():
    import benchmarks.bench_amp as bench

    assert hasattr(bench.AmpTrack, "setup_cache") and bench.GRID["workload"] == ["autoencoder", "resnet"]


@pytest.mark.slow
def test_pytest_benchmark_shows_both_precisions_and_the_ratio(tmp_path):
    out = tmp_path / "amp.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/perf/test_amp_benchmarks.py",
            "--benchmark-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "autoencoder",
            "--perfsuite-max-time",
            "0.4",
            f"--benchmark-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    benches = {b["extra_info"]["precision"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert set(benches) == ({"fp32", "bf16", "fp16"} if CUDA else {"fp32", "bf16"})  # fp16 is skipped on CPU
    assert {b["group"] for b in benches.values()} == {"amp-autoencoder"}
    bf16 = benches["bf16"]["extra_info"]
    # the ratio of the two records' medians (perfsuite's, from the builds' medians)
    assert bf16["speedup_vs_fp32"] == pytest.approx(benches["fp32"]["extra_info"]["median_s"] / bf16["median_s"])
    assert 0 < bf16["saved_memory_ratio_vs_fp32"] < 1
