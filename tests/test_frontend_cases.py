import pytest

from perfsuite.core import registry
from benchmarks._grids import SIZES, cases


@pytest.mark.parametrize("size", SIZES)
def test_every_workload_has_valid_cases(size):
    for name in registry.names():
        w = registry.get(name)
        got = cases(name, size)
        assert got, name
        for case in got:
            w.resolve(case)  # raises on an unknown parameter or value


def test_unknown_size():
    with pytest.raises(ValueError, match="size must be"):
        cases("matmul", "huge")


def test_asv_worker_processes_fit_the_workloads_and_no_module_sets_asv_processes():
    import importlib

    from benchmarks._grids import PROCESSES, worker_processes

    assert set(PROCESSES) <= set(registry.names())
    assert worker_processes("noop") == 1
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
