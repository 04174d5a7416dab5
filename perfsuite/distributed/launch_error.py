"""The one error a distributed case fails with (raised by .launch and .attach)."""


class DistributedFailure(RuntimeError):
    """A rank failed, crashed or hung; the message says which, where and why."""
