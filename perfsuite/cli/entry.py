"""The `perfsuite` command's entry point: the command line's modules (rich, numpy, SQLAlchemy,
torch for some) take a second or more to import, and a Ctrl-C in that second printed Python's
KeyboardInterrupt traceback (issue 51). Here, with nothing imported yet (`import perfsuite` is
lazy), it is the quiet "interrupted" and exit 130 every command ends with on Ctrl-C."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """The command; a Ctrl-C before it has its own handling in place (importing, building the
    parser: a traceback there was seen in the signal matrix) ends it the same quiet way."""
    try:
        from perfsuite.cli.app import main as command_line

        return command_line(argv)
    except KeyboardInterrupt as exc:  # Stopped (SIGTERM, SIGHUP) carries its own exit status
        return _interrupted(getattr(exc, "exit_code", 130), getattr(exc, "name", None))


def module_main() -> int:
    """`python -m perfsuite`: under torchrun, every rank joins the run (README, Distributed)."""
    try:
        from perfsuite.distributed.attach import join, started_by_torchrun
    except KeyboardInterrupt:
        return _interrupted()
    if started_by_torchrun():
        return join(main)
    return main()


def _interrupted(code: int = 130, name: str | None = None) -> int:
    print(f"stopped by {name}" if name else "interrupted", file=sys.stderr)
    return code
