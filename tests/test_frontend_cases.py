import pytest

from perfsuite import registry
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


def test_asv_processes_name_registered_workloads():
    from benchmarks._grids import PROCESSES, worker_processes

    assert set(PROCESSES) <= set(registry.names())
    assert worker_processes("noop") == 1 and all(worker_processes(w) == n for w, n in PROCESSES.items())


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
