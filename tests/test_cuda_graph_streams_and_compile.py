"""Issue 40, defects 1 and 8, on CPU: graphed builds make one warm-up and one capture stream per
device per process and drop torch's cuBLAS workspaces around each capture and at teardown
(perfsuite.training.graphed); compile=true compiles once per process per case, whatever the
number of builds (perfsuite.training.step.compiled_forward)."""

import contextlib
import gc
import weakref

import pytest
import torch

from perfsuite.core import registry
from perfsuite.training import graphed, step


class CountingCuda:
    """Stands in for torch.cuda in `graphed.capture`: counts the streams made, on which device,
    and records what a capture does in order (the graph context runs the body eagerly)."""

    def __init__(self):
        self.devices = [0]  # the current device, as torch.cuda.device(i) sets it
        self.streams = []  # (device index, stream) for every Stream() made
        self.events = []
        fake = self

        class Stream:
            def __init__(self):
                self.device = fake.devices[-1]
                fake.streams.append((self.device, self))

            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def __init__(self):
                self.capture_stream = None
                self.was_reset = False

            def replay(self):
                pass

            def reset(self):
                self.was_reset = True
                fake.events.append("reset")

        self.Stream, self.CUDAGraph = Stream, CUDAGraph
        self._current = Stream.__new__(Stream)

    def current_device(self):
        return self.devices[-1]

    def current_stream(self):
        return self._current

    @contextlib.contextmanager
    def device(self, index):
        self.devices.append(self.devices[-1] if index is None else index)
        try:
            yield
        finally:
            self.devices.pop()

    @contextlib.contextmanager
    def stream(self, s):
        self.events.append(("warmup_on", s))
        yield

    @contextlib.contextmanager
    def graph(self, g, stream=None):
        g.capture_stream = stream
        self.events.append("capture_begin")
        yield
        self.events.append("capture_end")

    def empty_cache(self):
        pass

    def memory_reserved(self, device=None):
        return 0

    def reset_peak_memory_stats(self, device=None):
        pass

    def max_memory_allocated(self, device=None):
        return 0


def _tiny_parts(seed=0):
    from perfsuite.training.precision import Precision
    from perfsuite.training.schedule import sgd_nesterov_with_schedule
    from perfsuite.training.step import TrainParts

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt, sched = sgd_nesterov_with_schedule(model.parameters(), 0.1, 2, 6)
    return TrainParts(model, torch.nn.CrossEntropyLoss(), opt, sched, Precision("fp32", "cpu"))


def _graphed_build(cuda):
    """One graphed build on the fake device, as resnet's builder makes it (device "cuda": the
    current device; its tensors stay on the CPU)."""
    parts = _tiny_parts()
    return graphed.build_graphed_step(
        parts.model,
        parts.loss_fn,
        parts.optimizer,
        torch.randn(4, 6),
        torch.tensor([0, 1, 2, 0]),
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        warmup_iters=2,
        cuda=cuda,
        schedule_in_graph=True,
    )


@pytest.fixture
def workspace_clears(monkeypatch):
    """torch._C._cuda_clearCublasWorkspaces replaced by a recorder (CPU builds of torch lack it)."""
    calls = []
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: calls.append("clear"), raising=False)
    return calls


def test_graphed_builds_share_one_warmup_and_one_capture_stream(workspace_clears):
    # Each new stream gets its own cuBLAS workspace, kept by torch for the life of the process:
    # two new streams per build left 2 x 32 MiB behind every build on an H100 (issue 40).
    cuda = CountingCuda()
    steps = [_graphed_build(cuda) for _ in range(3)]
    assert len(cuda.streams) == 2
    warmup = {s for e in cuda.events if isinstance(e, tuple) for s in e[1:]}
    capture = {st.graph.capture_stream for st in steps}
    assert len(warmup) == 1 and len(capture) == 1 and warmup != capture
    for st in steps:
        st.teardown()


def test_each_device_gets_its_own_pair_of_streams(workspace_clears):
    """A stream belongs to the device current when it is made: cuda:1's capture must not reuse
    device 0's streams, and each device's pair is made with that device current."""
    cuda = CountingCuda()
    graphs = []
    for index in (0, 1, 0, 1, None):  # None: the current device, 0 here
        graph, _, _ = graphed.capture(lambda: torch.zeros(()), lambda: None, 1, cuda, device=index)
        graphs.append((0 if index is None else index, graph))
    assert sorted(d for d, _ in cuda.streams) == [0, 0, 1, 1]
    for index, graph in graphs:
        assert graph.capture_stream.device == index
    assert graphs[0][1].capture_stream is graphs[2][1].capture_stream is graphs[4][1].capture_stream
    assert graphs[1][1].capture_stream is graphs[3][1].capture_stream
    assert graphs[0][1].capture_stream is not graphs[1][1].capture_stream


def test_the_stream_roles_are_named():
    with pytest.raises(ValueError, match="stream role must be one of warmup, capture, got 'side'"):
        graphed.process_stream(CountingCuda(), 0, "side")


def test_workspaces_are_cleared_around_the_capture_and_at_teardown(monkeypatch):
    """As inductor's CUDA graph trees do: cleared before capture, the capture's matmuls allocate
    their workspace in the graph's own pool; cleared after, torch no longer holds it, so it goes
    with the pool when the graph is reset. Teardown clears what the eager warm-up made."""
    cuda = CountingCuda()
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: cuda.events.append("clear"), raising=False)
    built = _graphed_build(cuda)
    assert [e for e in cuda.events if isinstance(e, str)] == ["clear", "capture_begin", "capture_end", "clear"]
    built.teardown()
    assert [e for e in cuda.events if isinstance(e, str)][4:] == ["reset", "clear"]
    assert built.graph.was_reset


def test_teardown_works_where_torch_cannot_clear_workspaces(monkeypatch):
    monkeypatch.delattr(torch._C, "_cuda_clearCublasWorkspaces", raising=False)
    assert graphed.clear_blas_workspaces() is False
    built = _graphed_build(CountingCuda())
    built.teardown()
    assert built.graph.was_reset


# ---- compile=true: one torch.compile per process per case ------------------------------------


@pytest.fixture
def fake_compile(monkeypatch):
    """torch.compile replaced by a recorder that runs the function eagerly; the process's cache
    of compiled forwards starts empty. Returns (functions compiled, modules each call ran)."""
    compiled, ran = [], []

    def fake(fn, *args, **kwargs):
        compiled.append(fn)

        def run(module, *a, **k):
            ran.append(module)
            return fn(module, *a, **k)

        return run

    monkeypatch.setattr(step, "_compiled", {})
    monkeypatch.setattr(torch, "compile", fake)
    return compiled, ran


def test_builds_of_a_compiled_resnet_compile_once_and_run_their_own_models(fake_compile):
    """Each build called torch.compile on its own model before: on CUDA every build compiled."""
    compiled, ran = fake_compile
    w = registry.get("resnet")
    params = w.resolve({"batch_size": 2, "compile": True})
    for _ in range(2):
        w.build(params, "cpu").fn()
    assert len(compiled) == 1
    assert len({id(m) for m in ran}) == 2  # each build's own model, through the one compiled function


def test_the_compile_is_per_model_class_case_and_device(fake_compile):
    compiled, ran = fake_compile
    x = torch.randn(2, 6)
    for model, params, device in [
        (torch.nn.Linear(6, 3), {"n": 1}, "cpu"),
        (torch.nn.Linear(6, 3), {"n": 1}, "cpu"),
        (torch.nn.Linear(6, 3), {"n": 2}, "cpu"),
        (torch.nn.Linear(6, 3), {"n": 1}, "cuda:1"),
        (torch.nn.Sequential(torch.nn.Linear(6, 3)), {"n": 1}, "cpu"),
    ]:
        assert step.compiled_forward(model, params, device)(x).shape == (2, 3)
    assert len(compiled) == 4 and len(ran) == 5


@pytest.mark.slow
def test_the_runners_builds_of_a_compiled_case_compile_once(fake_compile):
    """The runner makes three builds in one process (IN_PROCESS_BUILDS) and runs each (warmed up one
    after the other, then rotated): one compile serves all three. How many reach the timed blocks
    depends on the machine (a 0.5 s step in a 1 s budget under load has one timed sample), so the
    builds are counted where every build always runs: the warm-up."""
    from perfsuite.core.config import RunConfig
    from perfsuite.measuring.runner import time_case

    compiled, ran = fake_compile
    rec = time_case(
        registry.get("resnet"), {"batch_size": 2, "compile": True}, RunConfig(device="cpu", max_time=1.0, builds=3)
    )
    assert len(rec.warmup["builds"]) == 3 and 1 <= rec.conditions["builds"] <= 3
    assert len(compiled) == 1 and len({id(m) for m in ran}) == 3


@pytest.mark.slow
def test_builds_of_a_compiled_qwen_compile_once(fake_compile):
    compiled, ran = fake_compile
    w = registry.get("qwen")
    params = w.resolve({"shape": "tiny", "batch_size": 2, "compile": True})
    logits = [w.build(params, "cpu").fn() for _ in range(2)]
    assert len(compiled) == 1 and len({id(m) for m in ran}) == 2
    assert logits[0].shape == (2, 23)


@pytest.mark.slow
def test_one_real_compile_trains_each_builds_own_model_and_lets_it_go(monkeypatch):
    """With torch.compile itself (inductor, ~15 s here): dynamo compiles the frame once for two
    models of the same class, each trains as it would eagerly, and the process's compiled
    function holds neither model once its build is dropped."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(step, "_compiled", {})
    torch._dynamo.reset()
    counters.clear()
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    refs = []
    try:
        for _ in range(2):
            parts, eager = _tiny_parts(), _tiny_parts()
            forward = step.compiled_forward(parts.model, {"case": 1}, "cpu")
            compiled_step = step.make_train_step(parts, x, y, forward=forward)
            eager_step = step.make_train_step(eager, x, y)
            for _ in range(3):
                got, want = float(compiled_step().detach()), float(eager_step().detach())
                assert got == pytest.approx(want, rel=1e-4)
            refs.append(weakref.ref(parts.model))
            del parts, forward, compiled_step
        assert counters["frames"]["total"] == 1
        gc.collect()
        assert all(r() is None for r in refs)
    finally:
        torch._dynamo.reset()
