"""History, bisect and the gate as library calls (perfsuite.history, perfsuite.bisect, perfsuite.gate):
plain parameters and a settings object, no argparse, their results returned and their lines said
to a listener; and the command line as a thin translation into the same calls."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.compare.settings import GateSettings, WhyOptions
from perfsuite.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "my-project"
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]


def test_settings_name_the_value_that_is_wrong():
    """A library caller gets the flag's own checks: each bad value refused, named, before anything runs."""
    for bad, name in (
        ({"max_time": 0}, "max_time"),
        ({"max_time": float("nan")}, "max_time"),
        ({"builds": 0}, "builds"),
        ({"builds": True}, "builds"),
        ({"threshold": -0.01}, "threshold"),
        ({"threshold": float("inf")}, "threshold"),
        ({"fdr": 0.5}, "fdr"),
        ({"threads": 0}, "threads"),
        ({"heap": "off"}, "heap"),
    ):
        with pytest.raises(ConfigError, match=name):
            GateSettings(**bad)
    with pytest.raises(ConfigError, match="rounds"):
        WhyOptions(rounds=0)
    assert GateSettings(max_time=3.0, builds=2).logged() == {
        "max_time": 3.0,
        "builds": 2,
        "threshold": 0.01,
        "fdr": 0.01,
        "threads": None,
        "heap": "steady",
    }


def test_every_command_module_declares_its_arguments_and_stays_small():
    """Issue 52: each command owns its arguments (asv's commands/), and a command module is a thin
    translation into one engine call: at most 250 lines."""
    from perfsuite.cli.app import COMMANDS
    from perfsuite.cli.parser import COMMAND_MODULES, build_parser

    names = [m.NAME for m in COMMAND_MODULES]
    assert len(names) == len(set(names)) and set(COMMANDS) == set(names)
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == names  # the parser is assembled from the modules, in their order
    for m in COMMAND_MODULES:
        lines = Path(m.__file__).read_text().count("\n")
        assert lines <= 250, f"{m.__name__}: {lines} lines"
        assert callable(m.add_arguments) and callable(m.command)
        # one signature: what the command line gives a command is its arguments, the console and
        # the store's recorder, passed (the parsed arguments are never written to)
        assert list(inspect.signature(m.command).parameters) == ["args", "console", "recorder"], m.__name__


def test_the_parsed_arguments_are_not_written_to(tmp_path, monkeypatch):
    """app passed the recorder and the command line to commands by setting them on `args`."""
    import argparse

    from perfsuite.cli import app

    seen = {}

    class Frozen(argparse.Namespace):
        def __setattr__(self, name, value):
            raise AssertionError(f"args.{name} written after parsing")

    parse = argparse.ArgumentParser.parse_args

    def parsed_then_frozen(self, args=None, namespace=None):
        frozen = Frozen()
        frozen.__dict__.update(vars(parse(self, args, namespace)))
        return frozen

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parsed_then_frozen)
    monkeypatch.setattr(
        app, "COMMANDS", {**app.COMMANDS, "env": lambda args, console, recorder: seen.update(r=recorder) or 0}
    )
    assert app.main(["env"]) == 0 and "r" in seen
    # a real command that gathers files from its arguments (report added to its lists in place)
    from records import make_record

    from perfsuite.storage.files import ResultsWriter

    writer = ResultsWriter(tmp_path / "r.json")
    writer.add(make_record(), None, "results")
    assert app.main(["report", str(tmp_path), "--out-dir", str(tmp_path / "report")]) == 0


def test_a_library_call_refuses_bad_input_before_touching_the_repository(tmp_path, monkeypatch):
    import perfsuite

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="--range A..B"):
        perfsuite.history("noop", device="cpu")
    with pytest.raises(ConfigError, match="unknown workload|no workload"):
        perfsuite.bisect("no_such_workload_anywhere", good="HEAD~1", bad="HEAD")


def _git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


# The user's script: the three jobs from Python, their lines kept by a listener of its own.
SCRIPT = """
import json, sys
import perfsuite
from perfsuite.jobs.listener import Listener

class Kept(Listener):
    def __init__(self):
        self.lines = []
    def say(self, text, kind="info"):
        self.lines.append([kind, text])

good, bad = sys.argv[1], sys.argv[2]
# The tanh makes the step ~1.8x; 3 s a pair and a 0.25 threshold hold beside a full test run.
fast = perfsuite.GateSettings(max_time=3.0, threshold=0.25)
said = Kept()
h = perfsuite.history("tiny_mlp", f"{good}..{bad}", params={"batch_size": 32}, device="cpu",
                      settings=fast, listener=said)
b = perfsuite.bisect("tiny_mlp", good, bad, params={"batch_size": 32}, device="cpu", settings=fast,
                     why=perfsuite.WhyOptions(steps=2, rounds=2), listener=Kept())
g = perfsuite.gate("tiny_mlp", good, cases=[{"batch_size": 32}], device="cpu",
                   settings=perfsuite.GateSettings(max_time=4.0, threshold=0.25))
print(json.dumps({
    "regressions": [p.blamed for p in h.state.regressions()],
    "alarm": h.alarm,
    "log": str(h.log), "page_exists": h.page.exists(),
    "lines": said.lines,
    "found": b.answer.commit.sha if b.answer.commit else None,
    "why_file": str(b.why_file) if b.why_file else None,
    "gate": [v.word for v in g.outcome.records],
    "gate_said": [v.describe() for v in g.outcome.records],
}))
"""

SLOW_INIT = "        super().__init__()\n"
SLOW_FWD = "        return self.body(x)"


@pytest.mark.slow
def test_history_bisect_and_gate_run_from_a_script_without_the_command_line(tmp_path):
    root = tmp_path / "my-project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the project")
    good = _git(root, "rev-parse", "HEAD")
    (root / "NOTES.md").write_text("notes\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "notes")
    model = root / "myproj" / "model.py"
    # A tanh over a million elements in every forward: ~1.8x the step, far beyond 25%.
    model.write_text(
        model.read_text()
        .replace(SLOW_INIT, SLOW_INIT + "        self.scratch = torch.randn(1 << 20)\n")
        .replace(SLOW_FWD, "        torch.tanh(self.scratch, out=self.scratch)\n" + SLOW_FWD)
    )
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "model: scratch tanh in forward")
    slow = _git(root, "rev-parse", "HEAD")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, good, slow], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["regressions"] == [slow] and out["alarm"] is True and out["page_exists"]
    assert (root / out["log"]).exists()
    # The listener heard the plan and each point, the slower one as what it is.
    texts = [t for _, t in out["lines"]]
    assert texts[0].startswith("history of tiny_mlp") and any(slow[:12] in t and "slower" in t for t in texts)
    assert out["found"] == slow and out["why_file"] and (root / out["why_file"]).exists()
    assert out["gate"] == ["slower"], out["gate_said"]
    # No console output of its own: the engine returns values and says lines to its listener.
    assert ran.stdout.strip().count("\n") == 0
