"""The one console writer (perfsuite/cli/console.py): text from a user's code reaches the
terminal escaped, never obeyed."""

from __future__ import annotations

import textwrap

import pytest
from rich.table import Table
from rich.text import Text

from perfsuite.cli import app as cli
from perfsuite.cli.console import make_console
from perfsuite.core.text import escaped

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\u202e"


def test_escaped_shows_controls_and_format_characters_and_keeps_lines():
    assert escaped("a\x1b[31mb\u202ec\td\ne\r") == "a\\x1b[31mb\\u202ec\td\ne\\r"
    assert escaped("plain ünïcode – ok") == "plain ünïcode – ok"


@pytest.mark.parametrize("renderable", [Text(f"name {HOSTILE} end"), f"name {HOSTILE} end", "table"])
def test_no_escape_sequence_from_data_leaves_the_console(capsys, renderable):
    if renderable == "table":
        renderable = Table("case")
        renderable.add_row(f"x{HOSTILE}y")
    console = make_console()
    console.print(renderable, style="red")  # perfsuite's own colour still works ...
    out = capsys.readouterr().out
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x1b[31m" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned" in out and "\\u202e" in out  # ... and the data's escapes are shown


@pytest.fixture
def forget_hostile_step():
    """The workload this test declares in-process leaves the registry with it."""
    from perfsuite.core import registry

    yield
    registry._REGISTRY.pop("hostile_step", None)


def test_a_users_workload_name_unit_docstring_and_exception_reach_the_console_escaped(
    tmp_path, capsys, forget_hostile_step
):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "hostile.py").write_text(
        textwrap.dedent(f'''
        import perfsuite

        @perfsuite.workload
        def hostile_step(device: str):
            """colours {HOSTILE!r} in the description"""
            def step():
                raise ValueError("the step failed {HOSTILE!r}")
            return perfsuite.Step(step, items=1, unit="it{HOSTILE!r}")
    ''')
    )
    assert cli.main(["--workloads", str(bench), "list"]) == 0
    assert (
        cli.main(
            [
                "--workloads",
                str(bench),
                "run",
                "hostile_step",
                "--device",
                "cpu",
                "--max-time",
                "0.2",
                "--processes",
                "1",
                "--out",
                str(tmp_path / "r.json"),
            ]
        )
        == 3
    )
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert "\x1b]0;" not in stream and "\x1b[2J" not in stream and "\u202e" not in stream
    assert "hostile_step" in captured.out and "the step failed" in captured.out + captured.err


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_standard_output_loses_nothing_measured_and_says_where_it_went(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "r.json"
    with open("/dev/full", "w") as full:
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "perfsuite",
                "run",
                "noop",
                "--device",
                "cpu",
                "--max-time",
                "0.2",
                "--processes",
                "1",
                "--out",
                str(out),
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    assert ran.returncode == 2, ran.stderr
    assert "standard output failed" in ran.stderr and f"saved 1 record(s) to {out}" in ran.stderr
    assert "Traceback" not in ran.stderr and "perfsuite bug" not in ran.stderr
    import json

    assert len(json.loads(out.read_text())["records"]) == 1


def test_an_error_naming_a_long_path_stays_one_line_when_piped(tmp_path, capsys):
    # rich hard-wraps at the piped width (200 columns); an error is grepped and logged, so it is not
    deep = tmp_path / ("d" * 120) / ("e" * 120) / "missing.py"
    code = cli.main(["--workloads", str(deep), "list"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err) > 250, err
    assert err.count("\n") == 1 and str(deep) in err, err


def test_a_crash_log_names_the_command_line_without_a_store_password(tmp_path, monkeypatch, capsys):
    # A bug (here: `list` made to raise) is exit 4 with the traceback in a log file, whose first
    # line is the command as given to main(), a URL's password hidden.
    from perfsuite.cli import app

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setitem(app.COMMANDS, "list", lambda args, console: 1 / 0)
    code = cli.main(["--machine-log", "postgresql://ci:s3cret@db/p", "list"])
    assert code == app.EXIT_INTERNAL
    (log,) = (tmp_path / ".cache" / "perfsuite" / "logs").glob("perfsuite-crash-*.log")
    assert log.read_text().splitlines()[0] == "perfsuite --machine-log postgresql://ci:***@db/p list"
