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
