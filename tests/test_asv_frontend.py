"""perfsuite/frontends/asv.py as asv runs it (issue 36): the memory track is the measured step's
own region, not the process; `asv run --quick` is no timing; the documented commands store results."""

import io
import math
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from perfsuite.frontends import asv

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def test_step_peak_memory_is_the_regions_rise_not_the_process():
    host = {
        "host_method": "clear_refs+VmHWM",
        "host_rss_before_bytes": 600 * MIB,
        "host_peak_rss_bytes": 600 * MIB + 8192,
        "host_peak_delta_bytes": 8192,
    }
    assert asv.step_peak_memory(host) == 0  # two pages touched: no regression for asv to find
    assert asv.step_peak_memory({**host, "host_peak_delta_bytes": 3 * MIB + 5}) == 3 * MIB
    # ru_maxrss is the whole process's lifetime peak: no figure of the step's region at all
    assert math.isnan(asv.step_peak_memory({**host, "host_method": "ru_maxrss"}))
    cuda = {**host, "cuda_allocated_before_bytes": 4 << 30, "cuda_max_allocated_bytes": (5 << 30) + 7}
    assert asv.step_peak_memory(cuda) == (1 << 30) + 7  # the device's own peak above the weights


@pytest.mark.slow
def test_the_memory_track_reads_the_measured_steps_region():
    grid = {"n": [32], "dtype": ["fp32"]}
    cache = asv.measure_cases("matmul", grid, max_time=0.3)
    record = cache[repr((32, "fp32"))]
    if record["memory"].get("host_method") != "clear_refs+VmHWM":
        pytest.skip("/proc/self/clear_refs is not writable here: no region figure to track")
    Track = asv.make_track_suite("matmul", grid)
    assert not hasattr(Track, "track_peak_rss")  # replaced, not kept beside
    track = Track()
    track.setup(cache, 32, "fp32")
    step = track.track_step_peak_memory(cache, 32, "fp32")
    process = record["memory"]["host_peak_rss_bytes"]  # torch and the rest imported: hundreds of MB
    assert 0 <= step < process / 10, (step, process)
    assert Track.track_step_peak_memory.unit == "bytes"


# ---- asv's --quick: one call, and asv_runner's own hands driving the Time class ------------------

QUICK = {"number": 1, "repeat": 1, "warmup_time": 0, "rounds": 1}  # what `asv run --quick` passes


@pytest.fixture
def probe_bench(tmp_path):
    """A benchmark folder with a Time class over a workload whose builds count their calls."""
    from perfsuite.core import registry

    (tmp_path / "bm").mkdir()
    (tmp_path / "bm" / "__init__.py").write_text("")
    (tmp_path / "bm" / "bench_probe.py").write_text(
        "import perfsuite\n"
        "from perfsuite.frontends.asv import make_time_suite\n\n"
        "BUILDS = []  # each build's calls\n\n"
        "@perfsuite.workload(params={'n': 2})\n"
        "def asv_quick_probe(n, device):\n"
        "    calls = []\n"
        "    BUILDS.append(calls)\n"
        "    return perfsuite.Step(lambda: calls.append(1), items=n)\n\n"
        "class ProbeTime(make_time_suite('asv_quick_probe', {'n': [2]})):\n"
        "    warmup_time = 0.05\n"
    )
    yield tmp_path / "bm"
    registry._REGISTRY.pop("asv_quick_probe", None)
    for name in [m for m in sys.modules if m == "bm" or m.startswith("bm.")]:
        del sys.modules[name]  # the next test's folder is imported afresh, its workload registered


def _benchmark(folder: Path, extra: dict):
    from asv_runner.discovery import get_benchmark_from_name

    return get_benchmark_from_name(str(folder), "bench_probe.ProbeTime.time_step-0", extra_params=extra)


def _builds() -> list:
    return sys.modules["bm.bench_probe"].BUILDS


def test_quick_mode_skips_the_time_class_with_its_reason(probe_bench):
    pytest.importorskip("asv_runner")
    bench = _benchmark(probe_bench, QUICK)
    out = io.StringIO()
    with redirect_stdout(out):
        skipped = bench.do_setup()
    assert skipped and "not a timing" in out.getvalue() and "track_median_s" in out.getvalue()
    assert _builds() == []  # skipped before building: a quick run costs no build


def test_every_call_asv_times_follows_warm_calls_of_its_build(probe_bench):
    pytest.importorskip("asv_runner")
    bench = _benchmark(probe_bench, {})
    assert not bench.do_setup()  # not quick: asv times it
    result = bench.do_run()
    bench.do_teardown()
    assert result["samples"] and all(s > 0 for s in result["samples"])
    # asv_runner re-runs setup before each call it times; without warm calls each build sees one.
    assert min(len(calls) for calls in _builds()) >= asv.WARM_CALLS + 1


def test_quick_is_told_only_by_asvs_overrides():
    assert not asv.asv_quick()  # called outside asv


# ---- the documented asv commands keep their results ----------------------------------------------


def _documented_asv_runs() -> list[tuple[str, str]]:
    """Every `asv run ... --python=same ...` the pages show, a command wrapped over lines joined."""
    docs = [
        REPO / "docs" / "adding-a-workload.md",
        REPO / "docs" / "front-ends.md",
        REPO / "examples" / "my-project" / "asv.conf.json",
    ]
    out = []
    for page in docs:
        text = re.sub(r"\s*\n\s*(//)?\s*", " ", page.read_text())  # JSON comments continue with //
        out += [(page.name, run) for run in re.findall(r"asv run [^`#(\n]*", text) if "--python=same" in run]
    return out


def test_every_documented_run_in_the_current_environment_names_the_commit():
    """asv stores nothing from an existing environment (--python=same) without --set-commit-hash:
    a documented command without it measures and throws the numbers away."""
    runs = _documented_asv_runs()
    assert runs  # the pages still document one
    for page, line in runs:
        assert "--set-commit-hash" in line, (page, line)
