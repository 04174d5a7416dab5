"""What a job says while it runs, for whoever called it: the console's renderer on the command
line (perfsuite.cli.console.ConsoleListener), the `perfsuite` logger from a script or a notebook."""

from __future__ import annotations

import logging

# The kinds of line a job says: plain news, something the user should look at, a confirmed
# slowdown, a confirmed speed-up.
INFO, WARNING, ALARM, GOOD = "info", "warning", "alarm", "good"

_LEVEL = {INFO: logging.INFO, WARNING: logging.WARNING, ALARM: logging.WARNING, GOOD: logging.INFO}


class Listener:
    """Hears a job's lines (`say`) and its progress (`progress`: replaced by the next one).
    This default writes both to the `perfsuite` logger (a subclass overrides either or both)."""

    logger = logging.getLogger("perfsuite")

    def __init__(self, logger: logging.Logger | None = None) -> None:
        if logger is not None:
            self.logger = logger

    def say(self, text: str, kind: str = INFO) -> None:
        self.logger.log(_LEVEL.get(kind, logging.INFO), text)

    def progress(self, text: str) -> None:
        self.logger.debug(text)
