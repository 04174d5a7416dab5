"""The training workloads at the `ci` size on CPU: they build, step, and count the right FLOPs."""

import contextlib
import math

import numpy as np
import pytest
import torch
from nvtx_recording import RecordingNvtx, nesting

from perfsuite.core import registry
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.data.cifar import read_cifar10, write_cifar10
from perfsuite.measuring.nvtx import Annotator
from perfsuite.workloads.base import count_flops


@pytest.mark.parametrize(
    "name, params",
    [
        ("autoencoder", {"variant": "fc"}),
        ("autoencoder", {"variant": "conv", "nvtx": "on"}),
        ("autoencoder", {"precision": "bf16"}),
        ("resnet", {}),
        ("resnet", {"model": "resnet34", "channels_last": True, "precision": "bf16"}),
    ],
)
def test_every_training_workload_builds_and_steps(name, params):
    w = registry.get(name)
    built = w.build(params, "cpu")
    losses = [float(built.fn().detach()) for _ in range(3)]
    assert all(math.isfinite(v) for v in losses)
    assert built.work.items_per_step == w.resolve(params)["batch_size"]
    assert built.work.flops_per_step > 0 and built.work.item_unit == "images"


def test_resnet18_flops_match_the_seed_figure():
    # One training step, torchvision stem, batch 128: about 27.8 GFLOP.
    w = registry.get("resnet")
    params = w.resolve({"batch_size": 128})
    from perfsuite.data.cifar import load_batch
    from perfsuite.training.step import make_train_step
    from perfsuite.workloads.resnet import build_parts

    parts = build_parts(params, "cpu")
    step = make_train_step(parts, *load_batch("", 128, "cpu"))
    assert count_flops(step) == pytest.approx(27.8e9, rel=0.02)


def test_cifar_stem_costs_about_fifteen_times_more():
    from perfsuite.data.cifar import load_batch
    from perfsuite.training.step import make_train_step
    from perfsuite.workloads.resnet import build_parts

    w = registry.get("resnet")
    flops = {}
    for stem in ("torchvision", "cifar"):
        parts = build_parts(w.resolve({"stem": stem, "batch_size": 2}), "cpu")
        flops[stem] = count_flops(make_train_step(parts, *load_batch("", 2, "cpu")))
    assert flops["cifar"] / flops["torchvision"] == pytest.approx(426 / 27.8, rel=0.05)


def test_size_preset_and_explicit_override():
    w = registry.get("resnet")
    assert w.resolve({})["batch_size"] == 8
    assert w.resolve({"size": "cpu"})["batch_size"] == 64
    assert w.resolve({"size": "cpu", "batch_size": 3})["batch_size"] == 3


@pytest.mark.parametrize("name", ["resnet", "autoencoder"])
def test_fp16_on_cpu_is_unsupported_with_a_reason(name):
    with pytest.raises(Unsupported, match="parameter 'precision': fp16 training needs CUDA"):
        registry.get(name).validate_case({"precision": "fp16"}, "cpu")


def test_bad_training_parameters_name_the_parameter(tmp_path):
    w = registry.get("resnet")
    with pytest.raises(ConfigError, match="parameter 'model'"):
        w.resolve({"model": "resnet50"})
    with pytest.raises(ConfigError, match="parameter 'batch_size': 0 is too small"):
        w.resolve({"batch_size": 0})
    with pytest.raises(ConfigError, match=f"parameter 'data': {tmp_path / 'nope'} does not exist"):
        w.validate_case({"data": str(tmp_path / "nope")}, "cpu")
    (tmp_path / "junk").mkdir()
    with pytest.raises(ConfigError, match="not in CIFAR-10's format"):
        w.validate_case({"data": str(tmp_path / "junk")}, "cpu")


def test_cifar_folder_round_trip_and_training_from_it(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(50, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=50)
    root = write_cifar10(tmp_path, images, labels)
    got_images, got_labels = read_cifar10(root)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    built = registry.get("resnet").build({"data": str(root), "batch_size": 4}, "cpu")
    assert math.isfinite(float(built.fn().detach()))


def test_a_corrupt_cifar_batch_is_named(tmp_path):
    root = write_cifar10(tmp_path, np.zeros((10, 32, 32, 3), np.uint8), np.zeros(10, np.int64))
    bad = root / "cifar-10-batches-py" / "data_batch_1"
    bad.write_bytes(b"not a pickle")
    with pytest.raises(ConfigError, match="data_batch_1 is not a CIFAR-10 batch"):
        read_cifar10(root)


def test_autoencoder_nvtx_hierarchy_and_colours():
    from perfsuite.data.cifar import load_batch
    from perfsuite.measuring.nvtx import CATEGORY_COLORS
    from perfsuite.workloads.autoencoder import build_parts, make_step, validation_pass

    rec = RecordingNvtx()
    ann = Annotator(enabled=True, backend=rec)
    parts = build_parts({"variant": "fc", "precision": "fp32"}, "cpu")
    model = parts.model
    batch = load_batch("", 8, "cpu", normalize=False)
    make_step(parts, batch[0], ann)()
    assert nesting(rec.events) == [
        (0, "Training Step"),
        (1, "Data Unpack"),
        (1, "Memory Ops"),
        (1, "Forward Pass"),
        (2, "Encoder Forward"),
        (2, "Decoder Forward"),
        (1, "Loss Computation"),
        (1, "Backward Pass"),
        (1, "Optimizer Step"),
    ]
    colours = {e[1]: e[2] for e in rec.events if e[0] == "start"}
    assert colours["Training Step"] == CATEGORY_COLORS["training"]
    assert colours["Encoder Forward"] == CATEGORY_COLORS["forward"]
    assert colours["Loss Computation"] == CATEGORY_COLORS["loss"]
    assert colours["Data Unpack"] == CATEGORY_COLORS["data"]

    rec.events.clear()
    rec.next = 0
    labels = torch.randint(0, 10, (8,))
    out = validation_pass(model, batch[0], labels, ann)
    assert nesting(rec.events) == [(0, "Validation"), (1, "MAR@5 Computation"), (1, "Visualization")]
    assert 0.0 <= out["mar"] <= 1.0 and out["grid"].ndim == 3


def test_disabled_annotator_emits_nothing():
    rec = RecordingNvtx()
    ann = Annotator(enabled=False, backend=rec)
    with ann.range("Training Step", "training"):
        pass
    assert rec.events == []


def test_compiled_resnet_steps_through_torch_compile_and_keeps_the_eager_flop_count(monkeypatch):
    # Inductor itself is run by test_cuda_graph_streams_and_compile's real compile of a small
    # model, through the same step.compiled_forward; compiling ResNet18 too cost 40-66 s here
    # (C++ code generation from a cold cache) and tested no more of perfsuite. Here torch.compile
    # is recorded and hands back the function, so what is checked is the workload's wiring: its
    # forward goes through torch.compile once, the step runs, and the FLOPs are the eager count.
    from perfsuite.training import step

    compiled_fns = []

    def fake_compile(fn, *args, **kwargs):
        compiled_fns.append(fn)
        return fn

    monkeypatch.setattr(step, "_compiled", {})
    monkeypatch.setattr(torch, "compile", fake_compile)
    w = registry.get("resnet")
    eager = w.build({"batch_size": 2}, "cpu")
    compiled = w.build({"batch_size": 2, "compile": True}, "cpu")
    assert eager.fn is not None and compiled_fns == [step._call_module]
    assert math.isfinite(float(compiled.fn().detach()))
    assert compiled.work.flops_per_step == eager.work.flops_per_step


# ---- cuda_graph=true: the whole step captured once and replayed (issue 11) -----------------------


class FakeCuda:
    """Stands in for torch.cuda in `graphed.capture`: records the calls in order; the "graph"
    context runs the body eagerly (on CPU) and `replay` only counts. Streams and memory
    counters belong to the current device (0 until `device(i)` is entered), as torch.cuda's
    do; the "capture" reserves `pool_bytes` on the current device. `cached` bytes are reserved
    but free: `empty_cache` gives them back, as torch.cuda.graph does when it starts."""

    def __init__(self, params=(), pool_bytes=0, cached=None):
        self.events = []
        self.params = list(params)
        self.devices = [0]
        self.reserved = dict(cached or {})
        self.cached = dict(cached or {})
        self.pool_bytes = pool_bytes
        self.peak_resets = []
        fake = self

        class Stream:
            def __init__(self, name="side"):
                self.name, self.device = name, fake.devices[-1]
                fake.events.append(("new_stream", name))

            def wait_stream(self, other):
                fake.events.append(("wait_stream", self.name, other.name))

        class CUDAGraph:
            def __init__(self):
                self.replays = 0
                self.was_reset = False

            def replay(self):
                self.replays += 1
                fake.events.append(("replay",))

            def reset(self):
                self.was_reset = True

        self.Stream, self.CUDAGraph = Stream, CUDAGraph
        self._current = Stream.__new__(Stream)
        self._current.name = "current"

    def current_stream(self):
        return self._current

    @contextlib.contextmanager
    def device(self, index):
        self.devices.append(self.devices[-1] if index is None else index)
        try:
            yield
        finally:
            self.devices.pop()

    def _index(self, device):
        return self.devices[-1] if device is None else device

    def memory_reserved(self, device=None):
        return self.reserved.get(self._index(device), 0)

    def empty_cache(self):
        dev = self.devices[-1]
        self.reserved[dev] = self.reserved.get(dev, 0) - self.cached.pop(dev, 0)

    def reset_peak_memory_stats(self, device=None):
        self.peak_resets.append(self._index(device))

    def max_memory_allocated(self, device=None):
        return 1000 + self.reserved.get(self._index(device), 0)

    @contextlib.contextmanager
    def stream(self, s):
        self.events.append(("enter_stream", s.name))
        yield
        self.events.append(("exit_stream", s.name))

    @contextlib.contextmanager
    def graph(self, g, stream=None):
        self.empty_cache()
        grads_none = all(p.grad is None for p in self.params)
        self.events.append(("enter_graph", grads_none))
        g.capture_device = stream.device if stream is not None else None
        yield
        dev = self.devices[-1]
        self.reserved[dev] = self.reserved.get(dev, 0) + self.pool_bytes
        self.events.append(("exit_graph",))


def _tiny_parts(seed=0, warmup=2, total=6):
    from perfsuite.training.precision import Precision
    from perfsuite.training.schedule import sgd_nesterov_with_schedule
    from perfsuite.training.step import TrainParts

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt, sched = sgd_nesterov_with_schedule(model.parameters(), 0.1, warmup, total)
    return TrainParts(model, torch.nn.CrossEntropyLoss(label_smoothing=0.1), opt, sched, Precision("fp32", "cpu"))


def test_cuda_graph_param_exists_and_defaults_to_false():
    w = registry.get("resnet")
    spec = {p.name: p for p in w.params}["cuda_graph"]
    assert spec.type is bool and spec.default is False
    assert w.resolve({})["cuda_graph"] is False
    assert spec.parse("true") is True
    with pytest.raises(ConfigError, match="parameter 'cuda_graph'"):
        w.resolve({"cuda_graph": "maybe"})


def test_cuda_graph_is_refused_on_cpu_with_its_reason():
    w = registry.get("resnet")
    with pytest.raises(Unsupported, match="cuda_graph needs CUDA; device is cpu"):
        w.validate_case({"cuda_graph": True}, "cpu")
    with pytest.raises(Unsupported, match="cuda_graph needs CUDA"):
        w.build({"cuda_graph": True}, "cpu")  # the builder checks too: never a CPU "graph"
    w.validate_case({"cuda_graph": False}, "cpu")  # the default stays runnable everywhere


@pytest.mark.parametrize(
    "params, reason",
    [
        ({"compile": True}, "not with compile=true"),
        ({"precision": "fp16"}, "GradScaler"),
    ],
)
def test_cuda_graph_refuses_what_cannot_be_captured(params, reason):
    # The checker judges the device by name: this runs without a GPU.
    w = registry.get("resnet")
    with pytest.raises(Unsupported, match=reason):
        w.validate_case({"cuda_graph": True, **params}, "cuda:0")
    w.validate_case({"cuda_graph": False, **params}, "cuda:0")
    for precision in ("fp32", "bf16"):
        w.validate_case({"cuda_graph": True, "precision": precision}, "cuda:0")


def test_device_schedule_follows_warmup_cosine_without_reading_the_device():
    from torch.utils._python_dispatch import TorchDispatchMode

    from perfsuite.training.graphed import DeviceSchedule
    from perfsuite.training.schedule import warmup_cosine

    class NoReadBack(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default:  # .item(), float(t), bool(t)
                NoReadBack.reads += 1
            return func(*args, **(kwargs or {}))

    sched = DeviceSchedule.create(0.1, 3, 10, "cpu")
    factor = warmup_cosine(3, 10)
    seen = []
    for i in range(14):  # through the warm-up, the cosine and past its end (lr 0)
        seen.append(float(sched.lr))
        assert seen[-1] == pytest.approx(0.1 * factor(i), abs=1e-7), i
        with NoReadBack():
            sched.advance()
    assert NoReadBack.reads == 0
    assert max(seen) == pytest.approx(0.1) and seen[-1] == 0.0


def test_graph_body_trains_exactly_like_the_eager_step():
    """The captured body (fused SGD, tensor lr, device schedule) against make_train_step with
    the seed's SGD + LambdaLR, from the same weights: same lr every step, same weights."""
    from perfsuite.training.graphed import prepare
    from perfsuite.training.step import make_train_step

    x, y = torch.randn(16, 6, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 3
    eager = _tiny_parts()
    graphed = _tiny_parts()
    body, zero_grad, opt, sched, info = prepare(
        graphed.model,
        graphed.loss_fn,
        graphed.optimizer,
        x,
        y,
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        schedule_in_graph=True,
    )
    assert opt.param_groups[0]["fused"] and opt.param_groups[0]["nesterov"]
    eager_step = make_train_step(eager, x, y)
    for i in range(7):
        assert float(sched.lr) == pytest.approx(eager.scheduler.get_last_lr()[0], abs=1e-7), i
        zero_grad()
        loss_g = body()
        loss_e = eager_step()
        assert float(loss_g.detach()) == pytest.approx(float(loss_e.detach()), rel=1e-5), i
    for pg, pe in zip(graphed.model.parameters(), eager.model.parameters()):
        torch.testing.assert_close(pg, pe, rtol=1e-5, atol=1e-6)
    assert "LR update" in info["graph_captured"] and "inside the graph" in info["lr_schedule"]


def test_graph_body_never_reads_the_device_back():
    """A host read (`.item()`) inside the body would break capture; the fused SGD with a tensor
    lr avoids the one torch's default SGD makes (alpha=-lr)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from perfsuite.training.graphed import prepare

    reads = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default:
                reads.append(func)
            return func(*args, **(kwargs or {}))

    parts = _tiny_parts()
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    body, zero_grad, *_ = prepare(
        parts.model,
        parts.loss_fn,
        parts.optimizer,
        x,
        y,
        precision="bf16",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        schedule_in_graph=True,
    )
    zero_grad()
    body()  # the first step allocates the momentum buffers: not what is captured
    zero_grad()
    with Watch():
        loss = body()
    assert reads == [] and math.isfinite(float(loss.detach()))


def test_without_a_tensor_lr_the_schedule_is_left_out_and_said_so():
    from perfsuite.training.graphed import prepare

    parts = _tiny_parts()
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    body, zero_grad, opt, sched, info = prepare(
        parts.model,
        parts.loss_fn,
        parts.optimizer,
        x,
        y,
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        schedule_in_graph=False,
    )
    assert sched is None and opt.param_groups[0]["lr"] == pytest.approx(0.05)
    zero_grad()
    body()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    assert "left out of the captured step" in info["lr_schedule"] and "LR update" not in info["graph_captured"]


def test_capture_follows_the_whole_network_recipe():
    from perfsuite.training.graphed import build_graphed_step

    parts = _tiny_parts()
    cuda = FakeCuda(parts.model.parameters())
    calls = []
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])

    def loss_fn(out, target):
        calls.append(len(cuda.events))
        return parts.loss_fn(out, target)

    step = build_graphed_step(
        parts.model,
        loss_fn,
        parts.optimizer,
        x,
        y,
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        warmup_iters=3,
        cuda=cuda,
        schedule_in_graph=True,
    )
    ev = cuda.events
    assert ev[:3] == [("new_stream", "side"), ("wait_stream", "side", "current"), ("enter_stream", "side")]
    assert ev[3:7] == [
        ("exit_stream", "side"),
        ("wait_stream", "current", "side"),
        ("new_stream", "side"),
        ("enter_graph", True),
    ]
    assert ev[7:] == [("exit_graph",)]
    assert calls == [3, 3, 3, 7]  # three warm-up iterations on the side stream, one call captured on its own stream
    # Three warm-up steps + the fake's eager "capture" (a real capture records kernels, runs none).
    assert float(step.schedule.step) == 4
    before = [p.detach().clone() for p in parts.model.parameters()]
    loss = step.fn()
    assert loss is step.loss and step.graph.replays == 1 and len(calls) == 4  # a replay, not a new call
    assert all(torch.equal(a, b) for a, b in zip(before, parts.model.parameters()))
    assert step.info["cuda_graph"] is True and step.info["graph_warmup_iters"] == 3
    step.teardown()
    assert step.graph.was_reset


def test_the_captured_step_keeps_what_the_graph_writes_alive():
    """A CUDA graph holds device addresses, not references: if the model, the optimiser or the
    static batch were collected after the build, replays would write memory reused by others."""
    import gc
    import weakref

    from perfsuite.training.graphed import build_graphed_step

    parts = _tiny_parts()
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    step = build_graphed_step(
        parts.model,
        parts.loss_fn,
        parts.optimizer,
        x,
        y,
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        cuda=FakeCuda(),
        schedule_in_graph=True,
    )
    refs = [weakref.ref(o) for o in (parts.model, x, y)]
    opt_ref = weakref.ref(next(o for o in step.keepalive if isinstance(o, torch.optim.Optimizer)))
    del parts, x, y
    gc.collect()
    assert all(r() is not None for r in refs) and opt_ref() is not None
    del step
    gc.collect()
    assert refs[0]() is None  # and nothing else holds them: released with the step


def test_resnet_cuda_graph_wiring_on_a_fake_device(monkeypatch):
    """The workload's path to the captured step, on CPU with a fake CUDA: the record's work is
    the eager step's, `extra` says the step is graph-captured, teardown frees the graph."""
    from perfsuite.training import graphed

    fakes = []

    def fake_capture(body, zero_grad, warmup_iters=graphed.WARMUP_ITERS, cuda=None, device=None):
        fakes.append(FakeCuda(pool_bytes=4096))
        return real_capture(body, zero_grad, warmup_iters, fakes[-1], device)

    real_capture = graphed.capture
    monkeypatch.setattr(graphed, "capture", fake_capture)
    monkeypatch.setattr(graphed, "refusal", lambda *a: None)
    w = registry.get("resnet")
    eager = w.build({"batch_size": 2}, "cpu")
    built = w.build({"batch_size": 2, "cuda_graph": True}, "cpu")
    assert built.fn() is built.fn() and len(fakes) == 1
    assert built.work.flops_per_step == eager.work.flops_per_step
    extra = built.extra()
    assert extra["cuda_graph"] is True and "inside the graph" in extra["lr_schedule"]
    assert extra["graph_pool_bytes"] == 4096 and "private pool" in extra["graph_memory_note"]
    built.teardown()


@pytest.mark.parametrize("index", [1, 0, None])
def test_the_capture_happens_on_the_steps_device(index):
    """`--device cuda:1`: the side stream, the capture stream and the memory counters are the
    current device's, so the capture must run with device 1 current (it ran on device 0).
    None (plain "cuda") keeps whichever device is current."""
    from perfsuite.training.graphed import capture, prepare

    parts = _tiny_parts()
    want = 0 if index is None else index
    # 5 MiB cached on the step's device, freed when the capture starts: not part of the pool.
    cuda = FakeCuda(parts.model.parameters(), pool_bytes=7 << 20, cached={want: 5 << 20})
    cuda.devices = [0]  # torch.cuda's current device at start
    seen = []

    def loss_fn(out, target):
        seen.append(cuda.devices[-1])
        return parts.loss_fn(out, target)

    body, zero_grad, *_ = prepare(
        parts.model,
        loss_fn,
        parts.optimizer,
        torch.randn(4, 6),
        torch.tensor([0, 1, 2, 0]),
        precision="fp32",
        device="cpu",
        base_lr=0.1,
        warmup_steps=2,
        total_steps=6,
        schedule_in_graph=True,
    )
    graph, _, memory = capture(body, zero_grad, 2, cuda, device=index)
    assert seen == [want] * 3  # two warm-up steps and the capture
    assert graph.capture_device == want and cuda.peak_resets == [want]
    assert cuda.devices == [0]  # the caller's current device is given back
    # The pool is what the capture reserved on its device: 7 MiB there, nothing elsewhere.
    assert memory == {"graph_pool_bytes": 7 << 20, "graph_capture_peak_allocated_bytes": 1000 + (7 << 20)}
    assert cuda.reserved == {want: 7 << 20}


def test_build_captures_on_the_index_of_its_device(monkeypatch):
    from perfsuite.training import graphed

    asked = []

    def fake_capture(body, zero_grad, warmup_iters=graphed.WARMUP_ITERS, cuda=None, device=None):
        asked.append(device)
        return object(), torch.zeros(()), {"graph_pool_bytes": 0, "graph_capture_peak_allocated_bytes": 0}

    monkeypatch.setattr(graphed, "capture", fake_capture)
    # prepare puts the schedule's tensors on the device: on CPU they stay on the CPU.
    real_prepare = graphed.prepare
    monkeypatch.setattr(graphed, "prepare", lambda *a, **k: real_prepare(*a, **{**k, "device": "cpu"}))
    monkeypatch.setattr(graphed, "refusal", lambda *a: None)
    for device in ("cuda:3", "cuda:0", "cuda"):
        parts = _tiny_parts()
        graphed.build_graphed_step(
            parts.model,
            parts.loss_fn,
            parts.optimizer,
            torch.randn(4, 6),
            torch.tensor([0, 1, 2, 0]),
            precision="fp32",
            device=device,
            base_lr=0.1,
            warmup_steps=2,
            total_steps=6,
            schedule_in_graph=True,
        )
    assert asked == [3, 0, None]


def _resnet_batch16(device):
    from perfsuite.data.cifar import load_batch
    from perfsuite.workloads.resnet import build_parts

    torch.manual_seed(0)
    parts = build_parts(registry.get("resnet").resolve({"batch_size": 16}), device)
    return parts, load_batch("", 16, device)


def test_cuda_graph_step_replays_trains_and_steps_its_schedule(cuda_available):
    """The replayed step against the eager step (torch's SGD + LambdaLR) from the same weights
    on the same device: replay k is eager step 3 + k.

    At base lr 0.1 (this test's first version) the H100 run failed with the last five losses
    1.80-1.85 against 1.495 at the first replay, and that is what the eager step does too: on
    one batch of 16 random images, SGD Nesterov 0.9 overshoots as the warm-up reaches 0.1
    (loss ~11 at step 7 on CPU) and is still recovering at step 33 (CPU, same code without
    the graph: 1.72 at step 3, 1.78-1.87 over steps 28-32). At 0.02 training is smooth (0.565
    at step 3 down to 0.504, eager and graph body alike on CPU), so the two can be compared."""
    import copy

    from perfsuite.training.graphed import build_graphed_step
    from perfsuite.training.schedule import sgd_nesterov_with_schedule, warmup_cosine
    from perfsuite.training.step import TrainParts, make_train_step

    lr, warmup, total = 0.02, 5, 40
    parts, (x, y) = _resnet_batch16("cuda:0")
    twin = copy.deepcopy(parts.model)
    opt, sched = sgd_nesterov_with_schedule(twin.parameters(), lr, warmup, total)
    eager_step = make_train_step(TrainParts(twin, parts.loss_fn, opt, sched, parts.precision), x, y)
    eager = [float(eager_step().detach()) for _ in range(33)]

    step = build_graphed_step(
        parts.model,
        parts.loss_fn,
        parts.optimizer,
        x,
        y,
        precision="fp32",
        device="cuda:0",
        base_lr=lr,
        warmup_steps=warmup,
        total_steps=total,
    )
    first = [p.detach().clone() for p in parts.model.parameters()]
    losses = [float(step.fn().detach()) for _ in range(30)]  # a sync per read: fine outside a timed loop
    assert all(math.isfinite(v) for v in losses)
    assert any(not torch.equal(a, b) for a, b in zip(first, parts.model.parameters()))
    if step.schedule is not None:  # 3 warm-up steps + 30 replays, advanced inside the graph
        assert float(step.schedule.lr) == pytest.approx(lr * warmup_cosine(warmup, total)(33), abs=1e-7)
        # The same trajectory as eager. Not the same bits: cuDNN's algorithms, atomics and TF32
        # differ between the captured and the eager step, and training amplifies the difference.
        # On the H100 (2026-11-25, torch 2.11) 21 of 30 replays were within 2% of eager and the
        # worst 9.6% apart (a rerun: median 0.6%, worst 16.9%, a transient); a graph that did not train
        # (the defect this guards) is far outside.
        rel = [abs(g - e) / abs(e) for g, e in zip(losses, eager[3:])]
        assert float(np.median(rel)) < 0.03, rel  # H100 rerun: median 0.6%, one transient replay 16.9%
    else:  # constant lr: it still fits the batch
        assert losses[-1] < 0.8 * losses[0]
    assert step.info["graph_pool_bytes"] > 0 and step.info["graph_capture_peak_allocated_bytes"] > 0
    step.teardown()


def test_cuda_graph_record_says_the_step_is_graph_captured(cuda_available):
    from perfsuite.core.config import RunConfig
    from perfsuite.measuring.runner import time_case

    rec = time_case(
        registry.get("resnet"), {"batch_size": 16, "cuda_graph": True}, RunConfig(device="cuda", max_time=1.0)
    )
    assert rec.params["cuda_graph"] is True and rec.extra["cuda_graph"] is True
    assert "backward" in rec.extra["graph_captured"] and rec.extra["lr_schedule"]
    # The activations' pool is reported, and held through the timed region (reserved, not allocated).
    pool = rec.extra["graph_pool_bytes"]
    assert pool > 0 and rec.memory["cuda_max_reserved_bytes"] >= pool
    assert rec.extra["graph_capture_peak_allocated_bytes"] > rec.memory["cuda_allocated_before_bytes"]
