"""The cases the front-ends run: each workload's declared grids, and asv's view of the modules
benchmarks/ makes from them (names, params and versions as stored asv results know them)."""

import json
from pathlib import Path

import pytest

from perfsuite.core import registry
from perfsuite.core.workload import SIZES

STORED = Path(__file__).parent / "data" / "stored" / "asv-benchmarks-4d23e8c.json"


@pytest.mark.parametrize("size", SIZES)
def test_every_workload_has_valid_cases(size):
    for name in registry.names():
        w = registry.get(name)
        got = w.cases(size)
        assert got, name
        for case in got:
            w.resolve(case)  # raises on an unknown parameter or value


def test_unknown_size():
    with pytest.raises(ValueError, match="size must be"):
        registry.get("matmul").cases("huge")


def _discovered(size: str, monkeypatch) -> dict:
    """asv's own discovery (asv_runner) of benchmarks/, as `asv run` lists them."""
    discovery = pytest.importorskip("asv_runner.discovery")
    import io
    import sys

    from benchmarks import _suite

    monkeypatch.setenv("PERFSUITE_ASV_SIZE", size)
    _suite.workload_declarations.cache_clear()
    for name in [m for m in sys.modules if m.startswith("benchmarks.bench_")]:
        monkeypatch.delitem(sys.modules, name)  # made again at this size
    out = io.StringIO()
    discovery.list_benchmarks(str(Path(__file__).resolve().parents[1] / "benchmarks"), out)
    _suite.workload_declarations.cache_clear()
    return {b["name"]: b for b in json.loads(out.getvalue())}


# Changed on purpose since 4d23e8c (issue 36): the whole process's peak RSS became the step's own
# peak memory (another measure, so another name: its history must not continue the old one's), and
# time_step's setup warms the step and skips under --quick (its stored figures were a fresh build's
# first call, so a new version is right). Every other benchmark keeps its stored results.
RENAMED = {".track_peak_rss": ".track_step_peak_memory"}
NEW_VERSION = (".track_step_peak_memory", ".time_step")


@pytest.mark.parametrize("size", SIZES)
def test_asv_sees_the_benchmarks_stored_results_know(size, monkeypatch):
    """Generated from the declarations, perfsuite's asv benchmarks keep the names, parameters and
    versions (a hash of their source) of the hand-written bench_<name>.py modules they replace, so
    results stored before still match, except where a benchmark changed on purpose."""
    before = {}
    for name, b in json.loads(STORED.read_text())["sizes"][size].items():
        for old, new in RENAMED.items():
            name = name.replace(old, new)
        before[name] = b
    now = _discovered(size, monkeypatch)
    assert set(now) == set(before)
    for name, b in before.items():
        assert (now[name]["param_names"], now[name]["params"]) == (b["param_names"], b["params"]), name
        assert (now[name]["version"] == b["version"]) is not name.endswith(NEW_VERSION), name


def test_asv_worker_processes_fit_the_workloads_and_no_module_sets_asv_processes():
    import importlib

    from benchmarks._suite import workload_declarations

    declared = workload_declarations("ci")
    assert declared["matmul"]["processes"] == declared["resnet"]["processes"] == 3
    assert declared["noop"]["processes"] == 1
    # asv reads a module- or class-level `processes` as its own setting (an int); a function of
    # that name in a bench module broke asv's discovery once.
    for name in ("matmul", "resnet", "noop"):
        module = importlib.import_module(f"benchmarks.bench_{name}")
        assert not hasattr(module, "processes"), name
        for obj in vars(module).values():
            assert not callable(getattr(obj, "processes", None)), (name, obj)


def test_asv_config_falls_back_on_a_runconfig_without_processes():
    from dataclasses import dataclass

    from benchmarks._suite import _config
    from perfsuite.core.config import RunConfig

    @dataclass
    class OldRunConfig:  # a commit before worker processes
        device: str = "cpu"
        max_time: float = 1.0

    assert _config(OldRunConfig, "cpu", 2.0, 3) == OldRunConfig("cpu", 2.0)
    assert _config(RunConfig, "cpu", 2.0, 3).processes == 3
    # asv's 1 (its default) leaves RunConfig's own default: workers as the budget allows (issue 26).
    assert _config(RunConfig, "cpu", 2.0, 1).processes is None


@pytest.mark.slow
def test_asv_measure_cases_spreads_a_case_over_worker_processes():
    # The asv Track's setup_cache path: one matmul case in two fresh workers, merged into one record.
    from benchmarks._suite import measure_cases

    out = measure_cases("matmul", {"n": [32], "dtype": ["fp32"]}, max_time=0.4, processes=2)
    rec = out[repr((32, "fp32"))]
    assert "_skip" not in rec, rec
    assert len(rec["processes"]) == 2 and rec["conditions"]["processes"] == 2
    assert len({p["pid"] for p in rec["processes"]}) == 2
    one = measure_cases("matmul", {"n": [32], "dtype": ["fp32"]}, max_time=0.2)[repr((32, "fp32"))]
    assert not one.get("processes")
