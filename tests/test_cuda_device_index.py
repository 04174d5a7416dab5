"""`--device cuda:N` with N > 0 (issue 23, item 7), on CPU: torch.cuda's queries are replaced by
fakes that keep a current device (0 at start, as in a fresh process) and record which device
each stream, event, name and synchronisation is asked for. The CUDA-graph capture has its own
tests in test_training_workloads.py (test_the_capture_happens_on_the_steps_device)."""

import contextlib
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from perfsuite.measure import env
from perfsuite.measure.percall import PerCallTimer


class FakeCudaQueries:
    """torch.cuda's current device, streams and events, recording who asked for which device."""

    def __init__(self, monkeypatch):
        self.current = [0]
        self.asked: list[tuple[str, int]] = []
        fake = self

        class Stream:
            def __init__(self, index):
                self.index = index

        class Event:
            def __init__(self, enable_timing=False):
                self.index = None

            def record(self, stream=None):
                self.index = fake.current[-1] if stream is None else stream.index
                fake.asked.append(("event", self.index))

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return 1.0

        @contextlib.contextmanager
        def device(dev):
            index = torch.device(dev).index if isinstance(dev, (str, torch.device)) else dev
            fake.current.append(fake.current[-1] if index is None else index)
            try:
                yield
            finally:
                fake.current.pop()

        def index_of(dev):
            if dev is None:
                return fake.current[-1]
            if isinstance(dev, int):
                return dev
            d = torch.device(dev)
            return fake.current[-1] if d.index is None else d.index

        def current_stream(dev=None):
            fake.asked.append(("stream", index_of(dev)))
            return Stream(index_of(dev))

        def synchronize(dev=None):
            fake.asked.append(("synchronize", index_of(dev)))

        def get_device_name(dev=None):
            fake.asked.append(("name", index_of(dev)))
            return f"Fake GPU {index_of(dev)}"

        for name, value in {"is_available": lambda: True, "device_count": lambda: 2,
                            "current_device": lambda: fake.current[-1], "device": device,
                            "current_stream": current_stream, "Event": Event, "synchronize": synchronize,
                            "empty_cache": lambda: fake.asked.append(("empty_cache", fake.current[-1])),
                            "get_device_name": get_device_name}.items():
            monkeypatch.setattr(torch.cuda, name, value)

    def devices(self, what=None):
        return {i for w, i in self.asked if what is None or w == what}


@pytest.fixture
def fake_cuda(monkeypatch):
    return FakeCudaQueries(monkeypatch)


def test_per_call_events_are_recorded_on_the_steps_device(fake_cuda):
    calls = []
    timer = PerCallTimer(lambda: calls.append(fake_cuda.current[-1]), "cuda:1")
    for _ in range(3):
        timer()
    assert len(calls) == 3 and timer.times() == [1e-3] * 3
    # Six events (a start and an end per call), every one on device 1's stream.
    assert [w for w, _ in fake_cuda.asked].count("event") == 6 and fake_cuda.devices("event") == {1}


def test_plain_cuda_records_on_the_current_device(fake_cuda):
    fake_cuda.current.append(1)  # e.g. a caller that set the device itself
    PerCallTimer(lambda: None, "cuda")()
    assert fake_cuda.devices("event") == {1}


def test_the_environment_names_the_gpu_the_run_uses(fake_cuda, monkeypatch):
    monkeypatch.setattr(env, "_nvidia_driver", lambda: "580.159.04")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91900)  # the real one initialises CUDA
    got = env.collect_torch("cuda:1")
    assert got["gpu_name"] == "Fake GPU 1" and got["gpu_index"] == 1 and got["gpu_count"] == 2
    assert env.collect_torch("cuda")["gpu_name"] == "Fake GPU 0"  # the current device
    assert env.collect_torch("cpu")["gpu_index"] == 0 and env.collect_torch()["gpu_index"] == 0
    # The fingerprint passes the run's device through (the peak is keyed by gpu_name).
    assert env.fingerprint(device="cuda:1")["gpu_name"] == "Fake GPU 1"


SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cuda_crosscheck.py"


@pytest.fixture
def crosscheck():
    spec = importlib.util.spec_from_file_location("cuda_crosscheck_device", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_crosscheck_builds_times_and_runs_on_the_named_device(crosscheck, fake_cuda, monkeypatch):
    from perfsuite.core import registry
    from perfsuite.measure import runner

    seen = []

    class Fake:
        def check(self, params, device):
            seen.append(("check", device))

        def build(self, params, device):
            seen.append(("build", fake_cuda.current[-1]))
            return SimpleNamespace(fn=lambda: seen.append(("step", fake_cuda.current[-1])), teardown=None)

    def fake_block(fn, n):
        torch.cuda.synchronize()
        for _ in range(n):
            fn()
        return 1e-3 * n

    def fake_run_case(workload, params, cfg):
        seen.append(("run_case", fake_cuda.current[-1]))
        return SimpleNamespace(median_s=1e-3, converged=True)

    monkeypatch.setattr(registry, "get", lambda name: Fake())
    monkeypatch.setattr(runner, "run_case", fake_run_case)
    monkeypatch.setattr(crosscheck, "event_block", fake_block)
    args = crosscheck.parse_args(["--cases", "matmul-4096-fp32", "--rounds", "2", "--block", "2", "--warmup", "1",
                                  "--device", "cuda:1"])
    (row,) = crosscheck.run(args)
    assert row["ratio"] == pytest.approx(1.0)
    assert {d for what, d in seen if what != "check"} == {1}
    assert ("check", "cuda:1") in seen and ("run_case", 1) in seen
    assert fake_cuda.devices() == {1} and fake_cuda.current == [0]  # given back afterwards
