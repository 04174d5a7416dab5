import pytest

from perfsuite.core.errors import ConfigError
from perfsuite.core.params import Param, expand_sweep, parse_assignments, resolve

SPECS = (
    Param("n", int, 8, min=1, max=64),
    Param("dtype", str, "fp32", choices=("fp32", "bf16")),
    Param("flag", bool, False),
    Param("lr", float, 0.1, min=0.0),
)


def test_parse_types_and_sweeps():
    got = parse_assignments(["n=1,2,4", "dtype=bf16", "flag=on", "lr=1e-3"], SPECS, "w")
    assert got == {"n": [1, 2, 4], "dtype": ["bf16"], "flag": [True], "lr": [0.001]}


def test_expand_sweep_is_the_cartesian_product():
    cases = expand_sweep({"n": [1, 2], "dtype": ["fp32", "bf16"]})
    assert cases == [
        {"n": 1, "dtype": "fp32"},
        {"n": 1, "dtype": "bf16"},
        {"n": 2, "dtype": "fp32"},
        {"n": 2, "dtype": "bf16"},
    ]


@pytest.mark.parametrize(
    "item, message",
    [
        ("n=abc", "parameter 'n' expects int, got 'abc'"),
        ("n=0", "parameter 'n': 0 is too small"),
        ("n=100", "parameter 'n': 100 is too large"),
        ("dtype=fp8", "parameter 'dtype': 'fp8' is not allowed (one of fp32, bf16)"),
        ("flag=maybe", "parameter 'flag' expects bool"),
        ("k=1", "workload 'w' has no parameter 'k'; its parameters are: n, dtype, flag, lr"),
        ("n", "-p expects key=value"),
        ("n=1,,2", "empty value"),
    ],
)
def test_bad_values_name_the_parameter(item, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_assignments([item], SPECS, "w")


def test_resolve_fills_defaults_and_validates():
    assert resolve(SPECS, {"n": 4}, "w") == {"n": 4, "dtype": "fp32", "flag": False, "lr": 0.1}
    with pytest.raises(ConfigError, match="expects int"):
        resolve(SPECS, {"n": True}, "w")  # a bool is not an int here
    with pytest.raises(ConfigError, match="no parameter 'x'"):
        resolve(SPECS, {"x": 1}, "w")


def test_invalid_default_is_a_programming_error():
    with pytest.raises(ConfigError):
        Param("n", int, 0, min=1)


def test_a_parameter_given_twice_or_a_repeated_value_is_refused():
    from perfsuite.core import registry

    w = registry.get("matmul")
    with pytest.raises(ConfigError, match="'n' is given twice"):
        parse_assignments(["n=32", "n=48"], w.params, w.name)
    with pytest.raises(ConfigError, match="value 32 is listed twice"):
        parse_assignments(["n=32,32"], w.params, w.name)
