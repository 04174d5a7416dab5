"""The helpers behind issue 41's hostile-input fixes, each tested where it lives: one range check
for numbers (CLI flags and declarations), one safe rendering of any exception, parameter bounds
and sweep sizes, and a declaration's settings validated when its file loads."""

from __future__ import annotations

import math

import pytest

from perfsuite.core.config import MAX_TIME_S, RunConfig, number_in
from perfsuite.core.errors import ConfigError, exception_text
from perfsuite.core.params import MAX_CASES, Param, expand_sweep, parse_assignments


class _Weird(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def test_exception_text_never_raises():
    assert exception_text(ValueError("bad \x1b[2J")) == "ValueError: bad \x1b[2J"  # escaped by the console
    assert exception_text(_Weird()).startswith("_Weird: (its message cannot be shown")
    assert exception_text(SystemExit(0)) == "SystemExit: 0"
    assert exception_text(RuntimeError()) == "RuntimeError"


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -1, 0, 1e20, "5", True, 10**400],
    ids=["nan", "inf", "negative", "zero", "1e20", "string", "bool", "int-of-401-digits"],
)
def test_number_in_refuses_out_of_range(value):
    with pytest.raises(ConfigError, match=r"max_time must be a number above 0 to 86400"):
        number_in("max_time", value, 0, MAX_TIME_S, above=True)


def test_number_in_whole_and_bounds():
    assert number_in("n", 3, 1, 5, whole=True) == 3
    assert number_in("s", 0, 0, 1) == 0
    with pytest.raises(ConfigError, match="a whole number from 1 to 5, got 1.5"):
        number_in("n", 1.5, 1, 5, whole=True)


def test_run_config_bounds_max_time():
    with pytest.raises(ConfigError, match="max_time"):
        RunConfig(max_time=1e20)


@pytest.mark.parametrize(
    "kw", [{"min": math.nan}, {"max": math.inf}, {"max": "10"}, {"min": True}, {"min": 5, "max": 1}]
)
def test_param_bounds_are_checked_when_declared(kw):
    with pytest.raises(ConfigError, match="param 'x'"):
        Param("x", int, 1, **kw)


def test_param_choices_and_large_integers():
    with pytest.raises(ConfigError, match="not a finite number"):
        Param("x", float, 1.0, choices=(1.0, math.nan))
    with pytest.raises(ConfigError, match="too large"):
        Param("x", int, 10**40)
    with pytest.raises(ConfigError, match="too large"):
        Param("x", int, 1).parse("1" + "0" * 40)


def test_sweeps_are_bounded():
    specs = [Param("n", int, 1)]
    with pytest.raises(ConfigError, match=f"more than the limit of {MAX_CASES}"):
        parse_assignments(["n=" + ",".join(map(str, range(MAX_CASES + 1)))], specs, "w")
    with pytest.raises(ConfigError, match="expands to 300000 cases"):
        expand_sweep({"x": list(range(1000)), "y": list(range(300))})
    with pytest.raises(ConfigError, match="listed twice"):
        parse_assignments(["n=1,2,1"], specs, "w")


def test_asv_tracks_declared_in_core_are_the_front_ends():
    from perfsuite.core.workload import ASV_TRACKS
    from perfsuite.frontends import asv

    assert set(ASV_TRACKS) == set(asv.TRACKS)


@pytest.mark.parametrize(
    "kw, said",
    [
        ({"asv": {"processes": -1}}, "asv['processes']"),
        ({"asv": {"max_time": math.nan}}, "asv['max_time']"),
        ({"asv": {"tracks": ["nope"]}}, "asv['tracks']"),
        ({"asv": {"amp": "yes"}}, "asv['amp']"),
        ({"max_builds": 0}, "max_builds"),
        ({"max_builds": "one"}, "max_builds"),
        ({"fp32_kernels": "tensor-cores"}, "fp32_kernels"),
        ({"fp32_kernels": 5}, "fp32_kernels"),
        ({"plan": {"check_s": math.inf}}, "plan['check_s']"),
    ],
)
def test_workload_settings_are_checked(kw, said):
    from perfsuite.core.workload import Workload

    with pytest.raises(ConfigError, match=r"workload 'w': " + said.replace("[", r"\[")):
        Workload(name="w", description="", params=(), builder=lambda p, d: None, **kw)


def test_a_validator_that_raises_is_bad_input():
    from perfsuite.core.workload import Workload

    def validate(params, device):
        raise SystemExit("bye")

    w = Workload(name="w", description="", params=(), builder=lambda p, d: None, checker=validate)
    with pytest.raises(ConfigError, match="case validator failed: SystemExit: bye"):
        w.validate_case({}, "cpu")


def test_step_dtype_and_unit_are_checked():
    import perfsuite

    with pytest.raises(ConfigError, match="dtype must be one of"):
        perfsuite.Step(lambda: None, items=1, dtype="fp128")
    with pytest.raises(ConfigError, match="at most 1000 characters"):
        perfsuite.Step(lambda: None, items=1, unit="u" * 100_000)


def test_hooks_after_measuring_become_warnings():
    from perfsuite.core.workload import BuiltStep
    from perfsuite.measuring.runner import _teardown, _user_extra

    warnings: list[str] = []
    assert _user_extra(lambda: [1, 2], warnings) == {}
    assert _user_extra(lambda: {"y": object()}, warnings) == {}
    assert math.isnan(_user_extra(lambda: {"x": math.nan}, warnings)["x"])  # written as null
    assert len(warnings) == 2

    def teardown():
        raise _Weird()

    built = BuiltStep(fn=lambda: None, work=None, teardown=teardown)  # type: ignore[arg-type]
    assert _teardown(built)[0].startswith("the step's teardown failed: _Weird")
