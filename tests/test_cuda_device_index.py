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

from perfsuite.measuring import fingerprint
from perfsuite.measuring.percall import PerCallTimer


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

        for name, value in {
            "is_available": lambda: True,
            "device_count": lambda: 2,
            "current_device": lambda: fake.current[-1],
            "device": device,
            "current_stream": current_stream,
            "Event": Event,
            "synchronize": synchronize,
            "empty_cache": lambda: fake.asked.append(("empty_cache", fake.current[-1])),
            "get_device_name": get_device_name,
        }.items():
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
    monkeypatch.setattr(fingerprint, "_nvidia_driver", lambda: "580.159.04")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91900)  # the real one initialises CUDA
    got = fingerprint.collect_torch("cuda:1")
    assert got["gpu_name"] == "Fake GPU 1" and got["gpu_index"] == 1 and got["gpu_count"] == 2
    assert fingerprint.collect_torch("cuda")["gpu_name"] == "Fake GPU 0"  # the current device
    assert fingerprint.collect_torch("cpu")["gpu_index"] == 0 and fingerprint.collect_torch()["gpu_index"] == 0
    # The fingerprint passes the run's device through (the peak is keyed by gpu_name).
    assert fingerprint.fingerprint(device="cuda:1")["gpu_name"] == "Fake GPU 1"


SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cuda_crosscheck.py"


@pytest.fixture
def crosscheck():
    spec = importlib.util.spec_from_file_location("cuda_crosscheck_device", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_crosscheck_builds_times_and_runs_on_the_named_device(crosscheck, fake_cuda, monkeypatch):
    from perfsuite.core import registry
    from perfsuite.measuring import runner

    seen = []

    class Fake:
        def validate_case(self, params, device):
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
        seen.append(("time_case", fake_cuda.current[-1]))
        return SimpleNamespace(median_s=1e-3, converged=True)

    monkeypatch.setattr(registry, "get", lambda name: Fake())
    monkeypatch.setattr(runner, "time_case", fake_run_case)
    monkeypatch.setattr(crosscheck, "event_block", fake_block)
    args = crosscheck.parse_args(
        ["--cases", "matmul-4096-fp32", "--rounds", "2", "--block", "2", "--warmup", "1", "--device", "cuda:1"]
    )
    (row,) = crosscheck.run(args)
    assert row["ratio"] == pytest.approx(1.0)
    assert {d for what, d in seen if what != "check"} == {1}
    assert ("check", "cuda:1") in seen and ("time_case", 1) in seen
    assert fake_cuda.devices() == {1} and fake_cuda.current == [0]  # given back afterwards


# ---- issue 40: what still used device 0 for a run on cuda:N ------------------------------------------

TORCHRUN_RANK_1_OF_2 = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


def test_a_ddp_rank_takes_its_gpu_counting_from_the_cases_device(fake_cuda, monkeypatch):
    """Ranks of a case on cuda:2 run on cuda:2 and cuda:3: local rank 1 took cuda:1, whatever N was."""
    import torch.distributed as dist

    from perfsuite.distributed import ddp_model, rank

    for k, v in TORCHRUN_RANK_1_OF_2.items():
        monkeypatch.setenv(k, v)
    joined, set_to, wrapped = [], [], []
    monkeypatch.setattr(torch.cuda, "set_device", set_to.append)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: joined.append((backend, kw)))
    monkeypatch.setattr(dist, "new_group", lambda **kw: "gloo-group")
    ctx = rank.open_context(
        {"backend": "nccl", "device": "cuda:2", "timeout_s": 10, "params": {"world_size": 2, "nnodes": 1}}
    )
    assert ctx.device == "cuda:3" and set_to == ["cuda:3"]
    assert joined[0][0] == "nccl" and joined[0][1]["device_id"] == torch.device("cuda:3")
    # DistributedDataParallel is given the same GPU.
    from torch.nn import parallel

    monkeypatch.setattr(
        parallel, "DistributedDataParallel", lambda module, device_ids, process_group: wrapped.append(device_ids)
    )
    ddp_model.wrap(torch.nn.Linear(1, 1), ctx)
    assert wrapped == [[3]]
    assert rank.rank_device("cpu", 1) == "cpu" and rank.rank_device("cuda", 1) == "cuda:1"


def test_a_world_that_runs_past_the_last_gpu_is_skipped(fake_cuda):
    """Two ranks from cuda:1 on a 2-GPU node need a cuda:2 that does not exist: skipped, not a
    rank failing in NCCL (the count was checked from GPU 0)."""
    from perfsuite.core.errors import Unsupported
    from perfsuite.distributed.launch import check_world

    params = {"world_size": 2, "nnodes": 1, "backend": "auto"}
    with pytest.raises(Unsupported, match="2 ranks per node on cuda:1 need 2 GPUs, cuda:1 to cuda:2; this node has 2"):
        check_world(params, "cuda:1")
    check_world(params, "cuda:0")
    check_world({**params, "world_size": 1}, "cuda:1")


def _image_folder(root, n=6, side=8):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(n):
        d = root / f"c{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(d / f"{i}.png")
    return root


def test_the_dataloader_pins_from_the_runs_gpu(fake_cuda, monkeypatch, tmp_path):
    """A DataLoader pins in a thread set to the device current when its iterator starts: for a run
    on cuda:1 that was GPU 0 (a CUDA context there, and pinning from the wrong GPU)."""
    import torch.utils.data

    from perfsuite.core import registry
    from perfsuite.workloads import dataloader

    started_on = []

    class Loader:  # the real one's rule, without a GPU: the current device is read at iter()
        def __init__(self, ds, **kw):
            assert kw["pin_memory"] is True
            self.ds = ds

        def __iter__(self):
            started_on.append(fake_cuda.current[-1])
            return iter([(torch.zeros(2, 3, 8, 8), torch.zeros(2))])

    monkeypatch.setattr(torch.utils.data, "DataLoader", Loader)
    monkeypatch.setattr(dataloader, "to_device", lambda batch, device: batch)
    w = registry.get("dataloader")
    params = w.resolve({"dataset": str(_image_folder(tmp_path / "ds")), "pin_memory": True, "batch_size": 2})
    built = w.build(params, "cuda:1")
    built.fn()
    assert started_on == [1, 1]  # the first batch's iterator, then the step's
    assert fake_cuda.current == [0]  # given back afterwards


class _OnGpu:
    """A model (or optimiser) whose parameters live on cuda:`index`, with an empty state."""

    def __init__(self, index: int) -> None:
        self.param = SimpleNamespace(device=torch.device("cuda", index))

    def parameters(self):
        return iter([self.param])

    def buffers(self):
        return iter([])

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


@pytest.fixture
def cuda_generators(fake_cuda, monkeypatch):
    """Two fake CUDA generators, their states as the real ones give them (CPU uint8 tensors)."""
    gens = {0: torch.full((8,), 10, dtype=torch.uint8), 1: torch.full((8,), 11, dtype=torch.uint8)}

    def set_state(state, device="cuda"):
        index = torch.device(device).index if isinstance(device, (str, torch.device)) else device
        gens[fake_cuda.current[-1] if index is None else index] = state.clone()

    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [gens[i].clone() for i in sorted(gens)])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: [set_state(s, i) for i, s in enumerate(states)])
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    return gens


def test_a_checkpoint_resumes_the_steps_cuda_generator_on_the_device_it_resumes_on(cuda_generators, tmp_path):
    """Saved from a step on cuda:1 and resumed on cuda:0 (map_location), the resumed step drew from
    GPU 0's own generator, restored to what it was when saved, not from the stream it had run on."""
    from perfsuite.training.state_file import Progress, load_checkpoint, save_checkpoint

    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, model=_OnGpu(1), optimizer=_OnGpu(1), progress=Progress(step=1))
    step_stream = cuda_generators[1].clone()
    for i in cuda_generators:  # both generators move on after the save
        cuda_generators[i] = torch.full((8,), 99, dtype=torch.uint8)
    load_checkpoint(path, model=_OnGpu(0), optimizer=_OnGpu(0), map_location="cuda:0")
    assert torch.equal(cuda_generators[0], step_stream)
    # Resumed on the device it was saved on, every generator is as it was.
    load_checkpoint(path, model=_OnGpu(1), optimizer=_OnGpu(1), map_location="cuda:1")
    assert torch.equal(cuda_generators[1], step_stream)
    assert torch.equal(cuda_generators[0], torch.full((8,), 10, dtype=torch.uint8))
