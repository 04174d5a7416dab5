import pytest

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError
from perfsuite.workloads.base import count_flops


def test_registry_lists_and_rejects_unknown():
    assert {"matmul", "noop"} <= set(registry.names())
    with pytest.raises(ConfigError, match="known workloads: .*matmul"):
        registry.get("nope")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_matmul_step_computes_the_product_and_counts_flops(dtype):
    import torch

    w = registry.get("matmul")
    built = w.build({"n": 48, "dtype": dtype}, "cpu")
    built.fn()
    # The analytic count agrees with torch's own FLOP counter.
    assert built.work.flops_per_step == count_flops(built.fn) == 2 * 48**3
    assert built.work.dtype == dtype
    assert built.work.bytes_per_step == 3 * 48 * 48 * (4 if dtype == "fp32" else 2)
    # The step really multiplies: read its inputs and output from the closure and check.
    closure = dict(zip(built.fn.__code__.co_freevars, (c.cell_contents for c in built.fn.__closure__)))
    expected = closure["a"].float() @ closure["b"].float()
    torch.testing.assert_close(
        closure["out"].float(), expected, rtol=0.02 if dtype == "bf16" else 1e-5, atol=0.5 if dtype == "bf16" else 1e-4
    )


def test_workload_validates_before_building():
    with pytest.raises(ConfigError, match="parameter 'n'"):
        registry.get("matmul").build({"n": 0}, "cpu")
