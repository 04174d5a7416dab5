"""What a workload's correctness check raises when its step is wrong, and the one-line helper
checks are written with (`need(cond, "what went wrong")`).

A number from a wrong step is worse than none, so each workload declares (`checks=` beside its
parameters, in its own file) the checks its step must pass; each takes a device and returns a
one-line detail, or raises CheckFailed with what went wrong. `perfsuite check` runs them
(perfsuite.suite.correctness); the training checks are perfsuite.training.checks.
"""

from __future__ import annotations


class CheckFailed(AssertionError):
    """A check ran and its step is wrong; the message says how."""


def need(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)
