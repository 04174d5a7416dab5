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

import sys

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult, RenderHook
from rich.segment import Segment

from perfsuite.core.text import escaped

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


class _EscapeHook(RenderHook):
    def process_renderables(self, renderables: list[RenderableType]) -> list[RenderableType]:
        return [_Escaped(r) for r in renderables]


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that escapes what it prints; 200 columns when piped."""
    stream = sys.stderr if stderr else sys.stdout
    tty = stream is not None and stream.isatty()
    console = Console(stderr=stderr, width=None if tty else PIPED_WIDTH)
    console.push_render_hook(_EscapeHook())
    return console
