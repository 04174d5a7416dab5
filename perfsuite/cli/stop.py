"""SIGTERM and SIGHUP end a command as Ctrl-C does (issue 51).

A CI runner cancels a job with SIGTERM, a closed terminal sends SIGHUP; with Python's defaults
either killed perfsuite where it stood, leaving git worktrees, temporary checkouts and side
processes behind, a lock held, and what was measured unsaved. Inside `stopping_as_interrupt()`
each raises `Stopped`, a KeyboardInterrupt, so every road's Ctrl-C handling (keep what finished,
remove the worktrees, close the sides) runs for them too; the exit status is 128 + the signal's
number, as a shell reports a process killed by it. A second such signal while cleaning up is
ignored: the cleanup is what keeps the user's tree and results whole (SIGKILL still ends it).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

ALL_STOPS = tuple(
    s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)
HANDLED = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


class Stopped(KeyboardInterrupt):
    """The command was asked to stop by `signum` (SIGTERM or SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _stop(signum, frame) -> None:
    for s in HANDLED:  # the cleanup that follows must not be cut short by the next one
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


@contextlib.contextmanager
def stopping_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Stopped in the main thread while the block runs (elsewhere, and
    where a signal is ignored already, as `nohup` leaves SIGHUP, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for s in HANDLED:
        if signal.getsignal(s) is not signal.SIG_IGN:
            old[s] = signal.signal(s, _stop)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends, then act as they would have.

    For `import torch`: its C++ initialisation calls back into Python, and a KeyboardInterrupt
    raised inside such a callback cannot unwind through C++; the process aborts (exit -6,
    "terminate called after throwing an instance of 'pybind11::error_already_set'") and leaves
    multiprocessing's temporary folder behind. Seen 2 in 24 times with Ctrl-C 1.5 s into `run`
    (issue 51). The import takes a second or two; the signal is delivered right after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {}
    for s in ALL_STOPS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            old[s] = signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if caught:  # now, with the handlers that were there (KeyboardInterrupt, Stopped, or death)
            signal.raise_signal(caught[0])


def import_torch_whole() -> None:
    """Import torch (if installed and not yet imported) with the stop signals held (see above)."""
    import importlib.util
    import sys

    if "torch" in sys.modules or importlib.util.find_spec("torch") is None:
        return
    with signals_held():
        try:
            import torch  # noqa: F401
        except Exception:  # noqa: BLE001 - a broken torch (missing CUDA libraries) is told where it was
            return  # before: by the user's file that imports it (exit 2), or by the step that needs it
