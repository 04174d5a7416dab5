"""The `perfsuite` command's entry point: the command line's modules (rich, numpy, SQLAlchemy,
torch for some) take a second or more to import, and a Ctrl-C in that second printed Python's
KeyboardInterrupt traceback (issue 51). Here, with nothing imported yet (`import perfsuite` is
lazy), it is the quiet "interrupted" and exit 130 every command ends with on Ctrl-C."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    try:
        from perfsuite.cli.app import main as command_line
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return command_line(argv)


def module_main() -> int:
    """`python -m perfsuite`: under torchrun, every rank joins the run (README, Distributed)."""
    try:
        from perfsuite.distributed.attach import join, started_by_torchrun
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if started_by_torchrun():
        return join(main)
    return main()
