"""A whole training step captured once as a CUDA graph and replayed (issue 11).

ResNet18 at batch 128 on an H100 is bound by the host launching hundreds of small kernels per
step (NVML ~23% utilisation, IQR 18-34% of the median). Captured once and replayed, the step
is one graph launch: by hand, 2.51 ms with IQR 0.2% against 10.05 ms with IQR 13.2% eager.

The capture follows PyTorch's whole-network recipe (docs: "CUDA Graphs", whole-network capture):
- static input and target tensors (the workload already trains on one fixed batch);
- a few eager iterations on a side stream first (cuDNN/cuBLAS handles and workspaces, the
  optimiser's momentum buffers), then `torch.cuda.graph`;
- gradients set to None just before capture, so backward inside the graph allocates them from
  the graph's private pool and each replay writes them afresh: one replay is zero_grad +
  forward + loss + backward + optimiser step + LR update;
- SGD (the seed's Nesterov recipe) with its fused kernel reading the learning rate from a
  0-dim float32 CUDA tensor, and the warm-up/cosine schedule computed on the device from a step
  counter tensor (`DeviceSchedule`), so the schedule advances inside the graph. LambdaLR writes
  a Python float into `param_groups`, which a captured kernel would never see again. Where
  torch has no fused SGD with a tensor lr, the lr stays constant and the schedule is left out
  of the graph; `info` says which happened (it goes into the record's `extra`);
- bf16 autocast with its weight-cast cache off (cached casts would outlive the capture);
- everything under `torch.cuda.device(<the step's device>)`: streams, the capture stream and
  the memory counters belong to the *current* device, which is device 0 whatever `cuda:N` the
  tensors are on (and torch.cuda.graph's default capture stream is created once per process,
  on whichever device was current then, so the capture passes this process's capture stream
  for the step's device).

Streams and cuBLAS workspaces (issue 40): PyTorch keeps one cuBLAS/cuBLASLt workspace (32 MiB
on Hopper) per (handle, stream) for the life of the process, and `empty_cache()` does not free
it. A new warm-up and capture stream per build left their workspaces behind every build (those
made during capture inside the graph's private pool, which then could not be freed with the
graph). So the warm-up and capture streams are made once per device per process
(`process_stream`), and the workspaces are cleared before and after each capture, as inductor's
CUDA graph trees do: the capture then allocates its own workspace in its own pool, released
with the graph, and no graph uses a workspace that another graph's pool or the eager allocator
owns. Teardown clears them again (what the eager warm-up made), where torch has the function.

Memory: the graph's private pool holds the step's activations, allocated once at capture; a
replay makes no allocator calls, so the timed region's `cuda_max_allocated_bytes` leaves them
out. The pool's size (what the capture added to the reserved memory) and the captured step's
own allocated peak go into `info` (the record's `extra`).

Refused (`refusal`): a CPU device, compile=true (torch.compile has its own CUDA graphs, mode
"reduce-overhead"), fp16 (the GradScaler's inf/NaN check and scale update read the device).

Only `capture` touches CUDA, through a `cuda` namespace that tests replace with a fake; the
rest (schedule, optimiser, step body) runs on any device, so it is tested on CPU.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfsuite.training.schedule import warmup_cosine

# Eager iterations on the side stream before capture (PyTorch's example uses 3; the first one
# also allocates the momentum buffers that the captured optimiser step then updates in place).
WARMUP_ITERS = 3
AUTOCAST_DTYPES = {"fp32": None, "bf16": "bfloat16"}
STREAM_ROLES = ("warmup", "capture")
# This process's warm-up and capture streams: {cuda namespace: {(device index, role): stream}}.
# Weakly keyed so that a test's fake namespace and its streams go with it.
_streams: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def refusal(device: str, precision: str, compiled: bool) -> str | None:
    """Why a step with these settings cannot be captured here, or None when it can."""
    if not str(device).startswith("cuda"):
        return f"parameter 'cuda_graph': cuda_graph needs CUDA; device is {device}"
    if compiled:
        return (
            "parameter 'cuda_graph': not with compile=true (torch.compile captures its own CUDA graphs "
            "with mode='reduce-overhead'); use one or the other"
        )
    if precision not in AUTOCAST_DTYPES:
        return (
            f"parameter 'cuda_graph': not with precision={precision}: the GradScaler's inf/NaN check and scale "
            "update synchronise with the host, which a captured graph cannot do; use precision=bf16 or fp32"
        )
    return None


def tensor_lr_supported(torch) -> bool:
    """Whether this torch's fused SGD reads its lr from a tensor (torch >= 2.4, the `tensor_lr`
    overload): what lets the schedule run inside the graph."""
    try:
        return "tensor_lr" in torch.ops.aten._fused_sgd_.overloads()
    except (AttributeError, RuntimeError):
        return False


@dataclass
class DeviceSchedule:
    """perfsuite.training.schedule.warmup_cosine as device tensors, stepped without the host.

    `lr` holds base_lr * factor(step) for the next optimiser step; `advance()` is one
    LambdaLR.step(): the step counter and the lr change in place, with no Python float and no
    read back, so it can be captured. The counter is float32: exact up to 2**24 steps.
    """

    lr: Any
    step: Any
    base_lr: float
    warmup_steps: int
    total_steps: int

    @classmethod
    def create(cls, base_lr: float, warmup_steps: int, total_steps: int, device) -> DeviceSchedule:
        import torch

        factor = warmup_cosine(warmup_steps, total_steps)  # validates the arguments
        lr = torch.tensor(base_lr * factor(0), dtype=torch.float32, device=device)
        step = torch.zeros((), dtype=torch.float32, device=device)
        return cls(lr, step, float(base_lr), int(warmup_steps), int(total_steps))

    def advance(self) -> None:
        import torch

        s = self.step.add_(1.0)
        warm = (s + 1.0) / max(self.warmup_steps, 1)
        span = max(1, self.total_steps - self.warmup_steps)
        progress = ((s - self.warmup_steps) / span).clamp(0.0, 1.0)
        cosine = 0.5 * (1.0 + torch.cos(progress * math.pi))
        self.lr.copy_(torch.where(s < self.warmup_steps, warm, cosine) * self.base_lr)


def graph_optimizer(params, like, lr):
    """SGD with `like`'s hyper-parameters (momentum, Nesterov, weight decay: the seed's recipe).
    A tensor `lr` takes the fused kernel, which reads it on the device; a float keeps torch's
    default implementation."""
    import torch

    group = like.param_groups[0]
    kw = dict(
        momentum=group["momentum"],
        dampening=group["dampening"],
        nesterov=group["nesterov"],
        weight_decay=group["weight_decay"],
    )
    if isinstance(lr, torch.Tensor):
        kw["fused"] = True
    return torch.optim.SGD(params, lr=lr, **kw)


def step_body(
    model, loss_fn, optimizer, schedule: DeviceSchedule | None, x, y, precision: str, device_type: str
) -> Callable[[], object]:
    """Forward, loss, backward, optimiser step and (with a schedule) the LR update: what is
    captured. zero_grad is the caller's (before each warm-up iteration and before capture)."""
    import torch

    dtype = AUTOCAST_DTYPES[precision]

    def autocast():
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=getattr(torch, dtype), cache_enabled=False)

    def body():
        with autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.advance()
        return loss

    return body


def process_stream(cuda, index: int | None, role: str):
    """This process's `role` stream ("warmup" or "capture") on device `index`, made on first use
    (call it with that device current: a stream belongs to the device current when it is made)."""
    if role not in STREAM_ROLES:
        raise ValueError(f"stream role must be one of {', '.join(STREAM_ROLES)}, got {role!r}")
    per_device = _streams.setdefault(cuda, {})
    if (index, role) not in per_device:
        per_device[(index, role)] = cuda.Stream()
    return per_device[(index, role)]


def current_index(cuda, device: int | None) -> int | None:
    """The device index `device` names; None: the current device's (None where the namespace
    cannot say, as a test's fake may not)."""
    if device is not None:
        return device
    current = getattr(cuda, "current_device", None)
    return current() if current is not None else None


def clear_blas_workspaces() -> bool:
    """Drop the cuBLAS/cuBLASLt workspaces torch keeps per (handle, stream); the next matmul on a
    stream allocates a new one. What PyTorch's own leak check and inductor's CUDA graph trees
    call; a private function (torch 2.11-2.14 have it), so False where this torch has not."""
    import torch

    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None:
        return False
    clear()
    return True


def capture(
    body: Callable[[], object], zero_grad: Callable[[], None], warmup_iters: int = WARMUP_ITERS, cuda=None, device=None
) -> tuple[Any, object, dict]:
    """Warm up on a side stream, then capture one call of `body` on `device` (an index; None:
    the current device); returns (graph, its output, the capture's memory figures).

    `cuda` is `torch.cuda` (tests pass a fake that records what is called, in what order)."""
    if cuda is None:
        import torch

        cuda = torch.cuda
    if warmup_iters < 1:
        raise ValueError(f"need at least one warm-up iteration before capture, got {warmup_iters}")
    # Streams, the current stream and the memory counters are per device: the current one
    # unless named, so all of it happens with the step's device current.
    with cuda.device(device):
        index = current_index(cuda, device)
        side = process_stream(cuda, index, "warmup")
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            for _ in range(warmup_iters):
                zero_grad()
                body()
        cuda.current_stream().wait_stream(side)
        zero_grad()  # .grad is None: backward in the graph allocates it from the graph's pool
        # No workspace from before: the capture's matmuls allocate theirs inside the graph's pool.
        clear_blas_workspaces()
        # Everything allocated during capture comes from the graph's new private pool, so the
        # reserved memory grows by exactly the pool's segments. `torch.cuda.graph` empties the
        # allocator's cache as it starts: emptied first, what it frees is not taken off the pool.
        cuda.empty_cache()
        reserved_before = cuda.memory_reserved(device)
        cuda.reset_peak_memory_stats(device)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph, stream=process_stream(cuda, index, "capture")):
            out = body()
        # The graph keeps its workspace's address; freed into its own pool, the block stays
        # reserved for it while it lives (only a capture into that pool could reuse it) and goes
        # with the pool when the graph is reset, instead of being held by torch for good.
        clear_blas_workspaces()
        memory = {
            "graph_pool_bytes": cuda.memory_reserved(device) - reserved_before,
            "graph_capture_peak_allocated_bytes": cuda.max_memory_allocated(device),
        }
    return graph, out, memory


@dataclass
class GraphedStep:
    """The captured step: `fn` replays it (returning the static loss tensor, not read back)."""

    graph: Any
    loss: Any
    info: dict = field(default_factory=dict)
    schedule: DeviceSchedule | None = None  # None: constant lr (no tensor-lr fused SGD in this torch)
    # The graph holds raw device addresses, not references: the model, optimiser (its momentum
    # buffers), static inputs and the body must outlive it, or a replay writes freed memory.
    keepalive: tuple = ()

    def fn(self) -> object:
        self.graph.replay()
        return self.loss

    def teardown(self) -> None:
        """Frees the graph's private memory pool and the cuBLAS workspaces torch holds (the next
        case of a suite needs the memory; `empty_cache` does not free workspaces)."""
        reset = getattr(self.graph, "reset", None)
        if reset is not None:
            reset()
        # Safe with other graphs alive: each capture's workspace lives in its own graph's pool
        # (see `capture`), so what is freed here is only what eager matmuls made.
        clear_blas_workspaces()


def prepare(
    model,
    loss_fn,
    like_optimizer,
    x,
    y,
    *,
    precision: str,
    device: str,
    base_lr: float,
    warmup_steps: int,
    total_steps: int,
    schedule_in_graph: bool,
):
    """Everything but the capture: (body, zero_grad, optimizer, schedule or None, info)."""
    import torch

    if precision not in AUTOCAST_DTYPES:
        raise ValueError(f"cannot capture precision {precision!r}; one of {', '.join(AUTOCAST_DTYPES)}")
    device_type = torch.device(device).type
    if schedule_in_graph:
        schedule = DeviceSchedule.create(base_lr, warmup_steps, total_steps, device)
        opt = graph_optimizer(model.parameters(), like_optimizer, schedule.lr)
        lr_note = (
            f"warm-up {warmup_steps} / cosine to step {total_steps}, computed on the device inside the "
            "graph (0-dim tensor lr, fused SGD)"
        )
    else:
        schedule = None
        lr0 = base_lr * warmup_cosine(warmup_steps, total_steps)(0)
        opt = graph_optimizer(model.parameters(), like_optimizer, lr0)
        lr_note = (
            f"constant lr {lr0:g}: this torch has no fused SGD with a tensor lr, so the LR schedule is left "
            "out of the captured step"
        )
    body = step_body(model, loss_fn, opt, schedule, x, y, precision, device_type)

    def zero_grad() -> None:
        opt.zero_grad(set_to_none=True)

    info = {
        "cuda_graph": True,
        "graph_captured": "zero_grad, forward, loss, backward, optimizer step"
        + (", LR update" if schedule is not None else ""),
        "lr_schedule": lr_note,
        "graph_warmup_iters": WARMUP_ITERS,
    }
    return body, zero_grad, opt, schedule, info


def build_graphed_step(
    model,
    loss_fn,
    like_optimizer,
    x,
    y,
    *,
    precision: str,
    device: str,
    base_lr: float,
    warmup_steps: int,
    total_steps: int,
    warmup_iters: int = WARMUP_ITERS,
    cuda=None,
    schedule_in_graph: bool | None = None,
) -> GraphedStep:
    """Capture `model`'s training step on `x, y` (static tensors on `device`) and return it.

    `like_optimizer` supplies the SGD hyper-parameters; a new optimiser over the same
    parameters does the captured steps."""
    import torch

    reason = refusal(device, precision, False) if cuda is None else None
    if reason:
        raise ValueError(reason)
    if schedule_in_graph is None:
        schedule_in_graph = tensor_lr_supported(torch)
    body, zero_grad, opt, schedule, info = prepare(
        model,
        loss_fn,
        like_optimizer,
        x,
        y,
        precision=precision,
        device=device,
        base_lr=base_lr,
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        schedule_in_graph=schedule_in_graph,
    )
    # "cuda:N" -> N; plain "cuda" (and a test's CPU device with a fake `cuda`) -> the current device.
    dev = torch.device(device)
    index = dev.index if dev.type == "cuda" else None
    graph, loss, memory = capture(body, zero_grad, warmup_iters, cuda, device=index)
    info["graph_warmup_iters"] = warmup_iters
    info.update(memory)
    info["graph_memory_note"] = (
        "cuda_max_allocated_bytes of the timed region leaves out the step's activations: they live in the "
        "CUDA graph's private pool, allocated once at capture (graph_pool_bytes, counted in "
        "cuda_max_reserved_bytes); graph_capture_peak_allocated_bytes is the captured step's own peak"
    )
    return GraphedStep(
        graph=graph, loss=loss, info=info, schedule=schedule, keepalive=(model, loss_fn, opt, x, y, body, zero_grad)
    )
