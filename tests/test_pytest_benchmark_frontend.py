"""`pytest --benchmark-only` on the workload benchmarks: JSON output carries perfsuite's
metrics in extra_info and its fingerprint in machine_info."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_benchmark_only_json_carries_perfsuite_metrics(tmp_path):
    out = tmp_path / "bench.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/perf",
            "--benchmark-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "noop or matmul",
            f"--benchmark-json={out}",
            f"--benchmark-storage={tmp_path / 'store'}",
            "--benchmark-autosave",
            "--perfsuite-max-time=0.5",
        ],  # short cases: this checks the plumbing
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["machine_info"]["perfsuite"]["torch"]
    names = {b["name"] for b in doc["benchmarks"]}
    assert any("matmul" in n for n in names) and any("noop" in n for n in names)
    for b in doc["benchmarks"]:
        info = b["extra_info"]
        # perfsuite's record, replayed: the throughput is the record's (its median from the builds'
        # medians), the table's median is the replayed samples' and lies within them
        assert info["throughput"] == pytest.approx(info["items_per_step"] / info["median_s"])
        assert b["stats"]["min"] <= info["median_s"] <= b["stats"]["max"]
        assert info["median_ci_s"][0] <= info["median_s"] <= info["median_ci_s"][1]
        assert info["timing"].startswith("perfsuite's per-step samples")
        assert info["throughput_unit"].endswith("/s") and "params" in info
        assert b["stats"]["rounds"] >= 5
    mm = next(b for b in doc["benchmarks"] if "matmul" in b["name"])
    assert mm["extra_info"]["flops_per_s"] > 0 and mm["extra_info"]["host_method"]
    assert list((tmp_path / "store").rglob("*.json")), "--benchmark-autosave stored nothing"
