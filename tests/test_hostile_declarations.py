"""A user's declaration is validated when its file is loaded: a clear error naming the file and
the line, exit 2, nothing measured or written; a Step's fields when it is built, before timing."""

from __future__ import annotations

import textwrap

import pytest

from perfsuite.cli import app as cli

DECLARATIONS = [
    ('params={"n": float("nan")}', "n: float", "not a finite number"),
    ('params={"n": float("inf")}', "n: float", "not a finite number"),
    ('params={"n": [1.0, float("nan")]}', "n: float", "not a finite number"),
    ("grids=5", "", "grids must be a mapping"),
    ('grids={"ci": 3}', "", "grids['ci'] must be a mapping"),
    ('grids={"huge": {}}', "", "grids has no size 'huge'"),
    ("presets=[1]", "", "presets must be a mapping"),
    ('checks=["not", "a", "mapping"]', "", "checks must be a mapping"),
    ('checks={"c": 5}', "", "check 'c' is not callable"),
    ("asv=7", "", "asv must be a mapping"),
    ('asv={"nope": 1}', "", "asv has no key 'nope'"),
    ("report=5", "", "report must be a function"),
    ('name="../../outside/pwn"', "", "workload name '../../outside/pwn'"),
    ('name="ok\\x1b[31m"', "", "workload name"),
    ('params={"n": []}', "n: int", "empty list"),
]


@pytest.fixture(autouse=True)
def _forget(request):
    """Each test declares its own `hostile_<test>` workload in this process; it leaves with it."""
    from perfsuite.core import registry

    yield
    registry._REGISTRY.pop(_name(request.node.nodeid), None)


def _name(test: str) -> str:
    import hashlib

    return "hostile_" + hashlib.sha1(test.encode()).hexdigest()[:10]


def _project(
    tmp_path, name: str, decorator_args: str, extra_params: str, body: str = "perfsuite.Step(lambda: None, items=1)"
):
    bench = tmp_path / "bench"
    bench.mkdir()
    sig = f"{extra_params}, device: str" if extra_params else "device: str"
    (bench / "hostile.py").write_text(
        textwrap.dedent(f"""\
        import perfsuite


        @perfsuite.workload({decorator_args})
        def {name}({sig}):
            return {body}
        """)
    )
    return bench


@pytest.mark.parametrize("decorator_args, extra_params, message", DECLARATIONS)
def test_a_bad_declaration_is_exit_2_naming_the_file_and_line(
    tmp_path, capsys, request, decorator_args, extra_params, message
):
    name = _name(request.node.nodeid)
    bench = _project(tmp_path, name, decorator_args, extra_params)
    out = tmp_path / "r.json"
    code = cli.main(["--workloads", str(bench), "run", name, "--device", "cpu", "--max-time", "0.1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{bench / 'hostile.py'}, line 4" in err and message in err, err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    "step, message",
    [
        ("perfsuite.Step(lambda: None, items=1e308)", "beyond any step"),
        ("perfsuite.Step(lambda: None, items=1, teardown=5)", "teardown must be callable"),
        ("perfsuite.Step(lambda: None, items=float('nan'))", "items must be a positive number"),
        ("perfsuite.Step(lambda: None, items=1, unit='')", "unit must be a non-empty string"),
        ("perfsuite.Step(5, items=1)", "the step must be callable"),
    ],
)
def test_a_bad_step_is_refused_when_built_naming_the_users_line_before_anything_is_timed(
    tmp_path, capsys, request, step, message
):
    name = _name(request.node.nodeid)
    bench = _project(tmp_path, name, "", "", body=step)
    out = tmp_path / "r.json"
    code = cli.main(
        [
            "--workloads",
            str(bench),
            "run",
            name,
            "--device",
            "cpu",
            "--max-time",
            "0.1",
            "--processes",
            "1",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{bench / 'hostile.py'}:6: " in err and message in err, err
    assert not out.exists()


def test_nan_and_inf_on_the_command_line_are_refused_for_a_float_parameter(tmp_path, capsys, request):
    name = _name(request.node.nodeid)
    bench = _project(tmp_path, name, 'params={"scale": 1.0}', "scale: float")
    for bad in ("nan", "inf", "-inf"):
        code = cli.main(["--workloads", str(bench), "run", name, "-p", f"scale={bad}", "--device", "cpu"])
        assert code == 2
        assert "not a finite number" in capsys.readouterr().err


def test_a_pyproject_nested_thousands_deep_is_exit_2_naming_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.perfsuite]\nworkloads = " + "[" * 5000 + "]" * 5000 + "\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml" in err and "not a readable TOML file" in err


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["trace", "noop", "--wait", "99999999999999999999"], "--wait"),
        (["trace", "noop", "--active", "0"], "--active"),
        (["profile-step", "noop", "--warmup-iters", "-1"], "--warmup-iters"),
        (["gate", "noop", "--slowdown", "nan"], "--slowdown"),
        (["bisect", "noop", "--good", "a", "--bad", "b", "--threshold", "nan"], "--threshold"),
        (["bisect", "noop", "--good", "a", "--bad", "b", "--threshold", "inf"], "--threshold"),
    ],
)
def test_numbers_out_of_range_nan_and_inf_are_refused_by_the_parser(capsys, argv, flag):
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2 and flag in capsys.readouterr().err


def test_an_unknown_decorator_keyword_is_named_and_the_renamed_check_says_its_new_name():
    """Issue 52 made `checks=` the one word for correctness checks: a file written for an older
    perfsuite (`check=`), or a typo, is told which keyword, not shown a TypeError's traceback."""
    import perfsuite
    from perfsuite.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown keyword check= \(now checks="):
        perfsuite.workload(check=lambda device: None)
    with pytest.raises(ConfigError, match=r"unknown keyword chekcs=, parms="):
        perfsuite.workload(parms={}, chekcs={})
