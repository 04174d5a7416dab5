"""The hand-written Swish and Mish against torch as the oracle, and gradcheck in float64."""

import pytest
import torch
import torch.nn.functional as F

from perfsuite.measuring.saved import saved_tensor_bytes
from perfsuite.ops.activations import SAVES, activation

ORACLE = {"swish": F.silu, "mish": F.mish}
CASES = [(fn, save) for fn in ("swish", "mish") for save in SAVES]


@pytest.mark.parametrize("fn, save", CASES)
def test_gradcheck_float64(fn, save):
    x = torch.randn(64, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(activation(fn, "custom", save), (x,))


@pytest.mark.parametrize("fn, save", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_values_and_gradients_match_torch(fn, save, seed):
    g = torch.Generator().manual_seed(seed)
    # Fresh inputs including large |x|, where naive exp-based formulas overflow.
    x = torch.cat([5 * torch.randn(10_000, generator=g), torch.tensor([-1e4, -200.0, -90.0, 90.0, 200.0, 1e4])])
    mine = x.clone().requires_grad_(True)
    ref = x.clone().requires_grad_(True)
    y = activation(fn, "custom", save)(mine)
    y_ref = ORACLE[fn](ref)
    gy = torch.randn(y.shape, generator=g)
    (y * gy).sum().backward()
    (y_ref * gy).sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(mine.grad).all()
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mine.grad, ref.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", ["swish", "mish"])
def test_bf16_stays_close_to_the_builtin(fn):
    x = torch.randn(4096, dtype=torch.bfloat16)
    torch.testing.assert_close(activation(fn, "custom")(x).float(), ORACLE[fn](x).float(), rtol=0.02, atol=0.02)


def test_saving_the_sigmoid_costs_one_more_tensor():
    x = torch.randn(1000, requires_grad=True)
    small = saved_tensor_bytes(lambda: activation("swish", "custom", "input")(x))
    big = saved_tensor_bytes(lambda: activation("swish", "custom", "input+sigmoid")(x))
    assert (small, big) == (4000, 8000)


def test_bad_choices():
    with pytest.raises(ValueError, match="fn must be"):
        activation("gelu", "custom")
    with pytest.raises(ValueError, match="save must be"):
        activation("swish", "custom", "everything")


@pytest.mark.slow
def test_activation_workload_and_pairing(capsys, tmp_path):
    import json

    from perfsuite.cli import app as cli
    from perfsuite.core import registry

    w = registry.get("activation")
    for case in ({"fn": "mish", "pass": "forward"}, {"fn": "swish", "dtype": "bf16", "numel": 1024}):
        w.build(case, "cpu").fn()
    out = tmp_path / "pair.json"
    code = cli.main(
        [
            "pair",
            "activation",
            "--vary",
            "impl=custom,builtin",
            "-p",
            "numel=4096",
            "-p",
            "save=input,input+sigmoid",
            "--budget",
            "0.3",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "perfsuite.pair" and doc["schema_version"] == 1
    res = doc["results"]
    assert [r["params"]["save"] for r in res] == ["input", "input+sigmoid"]
    # The built-in silu saves its input only: equal bytes when we save the input, double with the sigmoid.
    assert res[0]["saved_ratio"] == 1.0 and res[1]["saved_ratio"] == 2.0
    assert all(r["time_ratio"] > 0 and len(r["ratios"]) >= 6 for r in res)
    assert cli.main(["pair", "activation", "--vary", "impl=custom"]) == 2
