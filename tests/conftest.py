import gc
import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# `make test` runs the tests in pytest-xdist's workers, which mark themselves in the environment.
# A pytest that a test starts (the front-ends' tests run `pytest --benchmark-only` on a project)
# is not one of them: pytest-benchmark would read the mark and refuse --benchmark-only.
for _mark in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_mark, None)

# A test suite started in the background (`make test &`, nohup, a CI step some runners start so)
# inherits an ignored SIGINT, and Python then leaves it ignored: a test that sends itself Ctrl-C
# saw nothing (failed 2026-11-30 under `setsid ... &`), and every process a test starts inherited
# the ignore too. The tests are of Ctrl-C as a user's terminal delivers it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def cuda_available():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device; this machine has none")
    return True


@pytest.fixture
def no_gc_pauses(monkeypatch):
    """The runner collects garbage before its budget and its timed blocks, so that real set-up
    garbage is not collected inside a timed block. A fake clock cannot see a collection, and in a
    test session's heap each full one costs a real ~0.3 s: the tests that simulate hundreds of
    runs spent most of their minutes in them."""
    import types

    from perfsuite.measuring import runner

    monkeypatch.setattr(runner, "gc", types.SimpleNamespace(collect=lambda generation=2: 0))


@pytest.fixture(autouse=True)
def machine_log_in_tmp(request, tmp_path, monkeypatch):
    """Every fresh run notes itself in a machine-speed log (default ~/.cache/perfsuite): the tests'
    runs, the pytest front-end's and their subprocesses' included, go to a log of their own test,
    so they neither write to the user's home nor widen each other's intervals. Not the
    benchmarks of tests/perf when they measure (`make bench-pytest`: --benchmark-only): their
    intervals are to learn from this machine's earlier runs, as a user's benchmarks' do."""
    from perfsuite.storage import machine_drift

    if request.config.getoption("benchmark_only", False) and request.node.path.parent.name == "perf":
        return
    monkeypatch.setenv(machine_drift.ENV_VAR, str(tmp_path / "machine-speed.jsonl"))


@pytest.fixture(autouse=True)
def store_in_tmp(tmp_path, monkeypatch):
    """Every command a test runs keeps its results in a store of its own test (perfsuite.database),
    never in the repository's .perfsuite/results.db; the machine is named so no test writes a
    machine id into the user's configuration folder. Subprocesses inherit both."""
    monkeypatch.setenv("PERFSUITE_STORE", str(tmp_path / "store" / "results.db"))
    monkeypatch.setenv("PERFSUITE_MACHINE", "test-machine")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A fresh, empty results store on each engine: a SQLite file, and a database of its own on a
    real PostgreSQL server the tests start (tests/storebackends.py)."""
    from storebackends import fresh_url

    return fresh_url(request.param, tmp_path)


def pytest_collection_finish(session):
    """See pytest_runtest_teardown: what collection imported is frozen before the first test."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The runner collects garbage before it measures (perfsuite.measuring.runner), and a full
    collection walks every object the session holds: torch, every test module, what earlier tests
    imported (0.2-0.4 s a call once the session has run a while, and the fast tier makes over 200).
    After each test module, its fixtures torn down, what is still alive is collected and frozen
    (gc.freeze): later collections walk only what later tests make, all of which they still
    collect. A frozen object is still freed when nothing refers to it."""
    yield
    if nextitem is not None and getattr(nextitem, "module", None) is not getattr(item, "module", None):
        gc.collect()
        gc.freeze()


def pytest_sessionfinish(session, exitstatus):
    import storebackends

    storebackends.stop_server()


@pytest.fixture
def forget_workloads():
    """A case's workloads leave with it: the registry, the loaded files, sys.path and the modules."""
    from perfsuite.core import discover, registry
    from perfsuite.variants import catalog

    registry.names()  # the built-ins are loaded once, kept
    before = (dict(registry._REGISTRY), dict(discover._loaded), list(sys.path), set(sys.modules))
    declared = dict(catalog._DECLARED)  # the variants the files declare (@perfsuite.variant) leave too
    yield
    catalog._DECLARED.clear()
    catalog._DECLARED.update(declared)
    registry._REGISTRY.clear()
    registry._REGISTRY.update(before[0])
    discover._loaded.clear()
    discover._loaded.update(before[1])
    sys.path[:] = before[2]
    for name in set(sys.modules) - before[3]:
        if name.startswith("_perfsuite_workloads"):
            del sys.modules[name]
