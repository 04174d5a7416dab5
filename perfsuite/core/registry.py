"""Workloads registered by name. Definitions import no torch; only building a step does."""

from __future__ import annotations

from contextlib import contextmanager

from perfsuite.core.errors import ConfigError
from perfsuite.core.workload import Workload

_REGISTRY: dict[str, Workload] = {}
_loaded = False


_capture: list | None = None


def register(workload: Workload) -> Workload:
    if _capture is not None:  # loading another revision's module: keep it out of the registry
        _capture.append(workload)
        return workload
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib

        from perfsuite.workloads import BUILTIN_MODULES

        for module in BUILTIN_MODULES:  # each module registers its workload on import
            importlib.import_module(f"perfsuite.workloads.{module}")


def names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str) -> Workload:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown workload {name!r}; known workloads: {', '.join(names())}") from None


@contextmanager
def capturing(into: list):
    """Within the block, `register` appends to `into` instead of registering."""
    global _capture
    _load_builtin()
    previous, _capture = _capture, into
    try:
        yield into
    finally:
        _capture = previous
