"""The Nsight commands profile-step prints (issue 23, item 14): ncu leaves the clocks alone, and
each command is printed whole, on one line, so that it can be copied and run."""

import shlex

from perfsuite.cli import app as cli
from perfsuite.profiling.step_marking import ROOFLINE_METRICS, nsight_commands


def _ncu(lines):
    (line,) = [line for line in lines if line.strip().startswith("ncu --") and "--metrics" in line]
    return shlex.split(line)


def test_the_ncu_command_leaves_the_clocks_alone():
    args = _ncu(nsight_commands("python -m perfsuite profile-step resnet -p size=gpu"))
    # Without it ncu locks the GPU to base clocks and its times disagree with perfsuite's.
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("--metrics") + 1] == ROOFLINE_METRICS
    assert args[args.index("--export") + 2 :] == [
        "python",
        "-m",
        "perfsuite",
        "profile-step",
        "resnet",
        "-p",
        "size=gpu",
    ]


def test_profile_step_prints_the_ncu_command_unwrapped(capsys, monkeypatch):
    import sys

    argv = [
        "profile-step",
        "autoencoder",
        "-p",
        "batch_size=4",
        "--warmup-iters",
        "1",
        "--profile-iter",
        "1",
        "--device",
        "cpu",
    ]
    monkeypatch.setattr(sys, "argv", ["perfsuite", *argv])  # the printed command repeats the command line
    assert cli.main(argv) == 0
    args = _ncu(capsys.readouterr().out.splitlines())
    assert args[args.index("--clock-control") + 1] == "none"
    # The whole metric list on the one line: a console-width wrap once split it mid-name.
    assert args[args.index("--metrics") + 1] == ROOFLINE_METRICS
    assert args[-2:] == ["--device", "cuda"]
