"""asv benchmarks of perfsuite's own workloads: a module per workload, written by nobody.

asv names a benchmark after the module it was found in (`bench_resnet.ResnetTrack.track_median_s`)
and matches stored results by that name, so each workload keeps a module of its own; but each is
made here, from what the workload's file in perfsuite/workloads/ declares (grids per size, worker
processes, budget, optional tracks), by perfsuite/frontends/asv.py's `fill_module`. Adding a
workload file adds its module `bench_<name>`; nothing here is edited. Written modules beside this
file (bench_amp.py: the AMP comparison) are found as usual.

How: asv lists a package's modules with pkgutil.iter_modules(package.__path__) and imports them by
name, so a path entry of ours on this package's __path__ lists and makes `bench_<name>` for every
declared workload (a hook that answers only for that entry; files on disk come first).
"""

import importlib.abc
import importlib.util
import sys

_ENTRY = "<perfsuite workloads>"


class _WorkloadModules(importlib.abc.PathEntryFinder, importlib.abc.Loader):
    """Finds and loads `benchmarks.bench_<name>` for each declared workload."""

    def __init__(self, path: str) -> None:
        if path != _ENTRY:
            raise ImportError("not perfsuite's workload modules")

    @staticmethod
    def _modules() -> dict:
        from benchmarks import _suite

        return {f"bench_{name}": name for name in _suite.workload_declarations()}

    def iter_modules(self, prefix: str = ""):  # what pkgutil.iter_modules asks a path entry's finder
        for module in sorted(self._modules()):
            yield prefix + module, False

    def find_spec(self, fullname: str, target=None):
        if fullname.rpartition(".")[2] in self._modules():
            return importlib.util.spec_from_loader(fullname, self, origin=_ENTRY)
        return None

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module) -> None:
        from benchmarks import _suite

        name = self._modules()[module.__name__.rpartition(".")[2]]
        module.__doc__ = f"asv benchmarks of perfsuite's `{name}` workload, made from its declaration."
        _suite.fill_module(module.__dict__, name, _suite.workload_declarations()[name])


if _WorkloadModules not in sys.path_hooks:
    sys.path_hooks.append(_WorkloadModules)
if _ENTRY not in __path__:
    __path__.append(_ENTRY)
