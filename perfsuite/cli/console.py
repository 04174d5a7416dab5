"""The one console writer: every console perfsuite prints to is made here, and everything it
prints passes one escape on its way out.

    console = make_console()           # stdout; make_console(stderr=True) for stderr
    console.print(Text(f"{case.label}: {error}"))
    # each text segment -> core.text.escaped: ESC, BEL, CR, bidi overrides... shown as \\x1b, \\u202e
    # rich's own colours and cursor codes are control segments and pass untouched

A workload name, a Step's unit, the message of an exception a user's step raised, a kernel name
from an ncu export or another process's name cannot colour, move the cursor, retitle the terminal
or hide text: what did not come from perfsuite is shown, not obeyed. Files and reports use the
same escape (core.text).
"""

from __future__ import annotations

import os
import sys
from typing import IO, cast

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.segment import Segment
from rich.text import Text

from perfsuite.core.errors import exception_text
from perfsuite.core.text import escaped, printable
from perfsuite.jobs.listener import ALARM, GOOD, INFO, WARNING, Listener

# Wide enough for the results table when output is piped (rich assumes 80 columns then).
PIPED_WIDTH = 200


class _Escaped:
    """A renderable whose text segments are escaped after rich has laid it out."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control:  # rich's own cursor and screen codes
                yield segment
            else:
                yield Segment(escaped(segment.text), segment.style)


class _Guarded:
    """The console's stream, which a failed write (a full disk behind `>file`, /dev/full, a pipe
    whose reader left) cannot make the command fail: the output is dropped from then on, the
    command goes on saving what it measures, and `failure` says what happened."""

    KEEP = 2000  # characters of dropped output kept, for the message that names where results went

    def __init__(self, stream) -> None:
        self.stream = stream
        self.failure: OSError | None = None
        self.dropped = ""

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                self.stream.write(text)
                return len(text)
            except OSError as exc:
                self.failure = exc
        self.dropped = (self.dropped + text)[-self.KEEP :]
        return len(text)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self.failure = exc

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", "utf-8")


class _EscapeHook(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(r) for r in renderables]


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that escapes what it prints and survives a failed write
    (`output_failure(console)` says whether one happened); 200 columns when piped."""
    stream = sys.stderr if stderr else sys.stdout
    if stream is None:  # started with it closed (`2>&-`): Python gives None; the command still runs
        stream = open(os.devnull, "w")  # noqa: SIM115 - the console's for the process's life
    tty = stream.isatty()
    # (a file in all but name: rich types `file` as IO[str], which _Guarded does not derive from)
    # markup=False: a string is printed as it is, never read as rich markup: a workload's docstring
    # or a parameter's value holding "[/]" crashed `perfsuite list` (issue 51). Styles go on Text.
    console = Console(file=cast("IO[str]", _Guarded(stream)), width=None if tty else PIPED_WIDTH, markup=False)
    console.push_render_hook(_EscapeHook())
    return console


def output_failure(console: Console) -> tuple[OSError, str] | None:
    """The error that stopped `console`'s output, if one did, and the end of what it dropped."""
    failure = getattr(console.file, "failure", None)
    return None if failure is None else (failure, getattr(console.file, "dropped", ""))


# As `run`'s exit when a case failed (perfsuite.cli.app): the workload's step, not the input.
EXIT_FAILED = 3


def step_failed(console, label: str, exc: BaseException) -> int:
    """The workload's build or step raised (sys.exit included): its message, escaped by the
    console, and exit 3, as a failed case of `run`."""
    console.print(Text(f"failed: {label}: {exception_text(exc)}", style="red"))
    return EXIT_FAILED


class ConsoleListener(Listener):
    """A job's lines on the console, styled by their kind, and its progress in a status line."""

    STYLE = {WARNING: "yellow", ALARM: "bold red", GOOD: "bold green"}

    def __init__(self, console: Console, status=None) -> None:
        self.console, self.status = console, status

    def say(self, text: str, kind: str = INFO) -> None:
        # Shown as written: a commit's subject or a workload's name came from the user's repository.
        self.console.print(Text(printable(text), style=self.STYLE.get(kind, "")))

    def progress(self, text: str) -> None:
        if self.status is not None:
            self.status.update(Text(printable(text)))
