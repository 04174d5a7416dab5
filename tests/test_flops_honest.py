"""perfsuite.measuring.flops: the CPU's fused kernels are counted as the matmuls they replace, and an
operator that looks compute-heavy but has no FLOP formula is named in a warning.

The oracle is the same model taking a road torch already counts (explicit matmul attention, the
slow path, oneDNN off), never a constant."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import flop_registry

from perfsuite.measuring import counted
from perfsuite.measuring.flops import count_flops, flop_count, formulas, looks_heavy, warnings_heard

aten = torch.ops.aten
NESTED_PROTOTYPE = "ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning"


class Block(nn.Module):
    """A GPT block (nanoGPT's): causal self-attention by SDPA or by explicit matmuls, then an MLP."""

    def __init__(self, dim: int = 32, heads: int = 4, sdpa: bool = True) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=2)
        )
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = explicit_attention(q, k, v, torch.full((t, t), float("-inf")).triu(1))
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def explicit_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores + mask
    return torch.softmax(scores, dim=-1) @ v


def _pair(seed=0):
    torch.manual_seed(seed)
    fused = Block(sdpa=True)
    plain = Block(sdpa=False)
    plain.load_state_dict(fused.state_dict())
    return fused, plain, torch.randn(2, 16, 32)


def test_a_gpt_block_with_sdpa_counts_what_the_same_block_with_explicit_attention_counts():
    fused, plain, x = _pair()
    with torch.no_grad():
        torch.testing.assert_close(fused(x), plain(x), atol=1e-5, rtol=1e-5)  # the same model
        assert flop_count(lambda: fused(x), mapping={}).flops < flop_count(lambda: plain(x)).flops  # torch's gap
        assert flop_count(lambda: fused(x)).flops == pytest.approx(flop_count(lambda: plain(x)).flops, rel=1e-9)


def test_a_gpt_blocks_backward_counts_the_explicit_matmuls_and_the_flash_recomputation():
    fused, plain, x = _pair()
    with_sdpa = flop_count(lambda: fused(x).sum().backward())
    explicit = flop_count(lambda: plain(x).sum().backward())
    b, h, t, e = 2, 4, 16, 8
    recomputed_scores = 2 * b * h * t * t * e  # a flash backward computes QK^T again: torch counts it on CUDA
    assert with_sdpa.flops == pytest.approx(explicit.flops + recomputed_scores, rel=1e-9)
    assert with_sdpa.uncounted == explicit.uncounted == ()


@pytest.mark.parametrize("case", ["plain", "causal", "float mask", "gqa", "bf16", "unbatched"])
def test_cpu_sdpa_forward_and_backward_count_as_torch_counts_the_cuda_kernels(case):
    torch.manual_seed(1)
    b, h, hkv, lq, lk, e = 2, 4, (2 if case == "gqa" else 4), 12, 20, 8
    dtype = torch.bfloat16 if case == "bf16" else torch.float32
    q = torch.randn(b, h, lq, e, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(b, hkv, lk, e, dtype=dtype, requires_grad=True) for _ in range(2))
    kw = {"is_causal": case == "causal", "enable_gqa": case == "gqa"}
    mask = torch.randn(lq, lk) if case == "float mask" else None
    if case == "unbatched":
        q, k, v = q[0].detach().requires_grad_(), k[0].detach().requires_grad_(), v[0].detach().requires_grad_()

    def forward():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)

    assert flop_count(forward, mapping={}).flops == 0  # it ran the CPU flash kernel, which torch leaves at 0
    nb = 1 if case == "unbatched" else b  # SDPA makes an unbatched call a batch of one
    shapes = [(nb, h, lq, e), (nb, hkv, lk, e), (nb, hkv, lk, e)]
    cuda_forward = flop_registry[aten._scaled_dot_product_flash_attention](*shapes)
    cuda_backward = flop_registry[aten._scaled_dot_product_flash_attention_backward]((nb, h, lq, e), *shapes)
    assert flop_count(forward).flops == cuda_forward
    assert flop_count(lambda: forward().float().sum().backward()).flops == cuda_forward + cuda_backward

    # And the forward is the explicit matmuls' count (k and v repeated across the query heads for GQA).
    kx, vx = (z.repeat_interleave(h // hkv, dim=-3) for z in (k, v))
    assert flop_count(forward).flops == flop_count(lambda: explicit_attention(q, kx, vx, mask)).flops


def test_the_multi_head_attention_fast_path_counts_as_its_slow_path():
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 10, 32)
    slow = flop_count(lambda: mha(x, x, x))  # parameters that want gradients: the path of matmuls
    with torch.no_grad():  # self-attention in eval without gradients: the fused fast path
        assert flop_count(lambda: mha(x, x, x), mapping={}).flops == 0
        assert flop_count(lambda: mha(x, x, x)).flops == slow.flops > 0


@pytest.mark.filterwarnings(NESTED_PROTOTYPE)
def test_the_encoder_fast_path_counts_as_its_slow_path_and_padding_counts_real_tokens_only():
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    stack = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(2, 16, 32)
    slow = flop_count(lambda: stack(x))
    with torch.no_grad():
        assert flop_count(lambda: stack(x), mapping={}).flops == 0
        assert flop_count(lambda: stack(x)).flops == slow.flops > 0
        # Padding makes the fast path take nested tensors: only the real tokens are computed.
        pad = torch.zeros(2, 16, dtype=torch.bool)
        pad[0, 10:] = True
        nested = flop_count(lambda: stack(x, src_key_padding_mask=pad)).flops
    one_by_one = flop_count(lambda: stack(x[:1, :10])).flops + flop_count(lambda: stack(x[1:])).flops
    assert nested == one_by_one < slow.flops


def test_an_lstm_on_onednn_counts_as_the_same_lstm_without_it():
    torch.manual_seed(4)
    lstm = nn.LSTM(16, 32, num_layers=2, bidirectional=True, batch_first=True)
    # Every input wants a gradient: the oneDNN backward computes them all, the decomposed one only those asked.
    x, h0, c0 = (torch.randn(*s, requires_grad=True) for s in ((3, 5, 16), (4, 3, 32), (4, 3, 32)))

    def step():
        lstm(x, (h0, c0))[0].sum().backward()

    fused = flop_count(step)
    assert flop_count(step, mapping={}).flops == 0  # oneDNN's layer ran
    with torch.backends.mkldnn.flags(enabled=False, allow_tf32=None):
        decomposed = flop_count(step)
    assert fused.flops == decomposed.flops > 0


def test_mv_dot_and_int_mm_count_as_the_mm_of_the_same_shapes():
    a, w = torch.randn(8, 16), torch.randn(16)
    assert flop_count(lambda: a @ w).flops == flop_count(lambda: a @ w[:, None]).flops > 0
    assert flop_count(lambda: torch.addmv(torch.randn(8), a, w)).flops == flop_count(lambda: a @ w[:, None]).flops
    assert flop_count(lambda: w @ w).flops == flop_count(lambda: w[None] @ w[:, None]).flops > 0
    i8 = torch.randint(-8, 8, (32, 64), dtype=torch.int8)
    assert (
        flop_count(lambda: torch._int_mm(i8, i8.T.contiguous())).flops
        == flop_count(lambda: i8.float() @ i8.T.float()).flops
        > 0
    )
    x, scales = torch.randn(5, 64), torch.ones(32)
    assert (
        flop_count(lambda: torch._weight_int8pack_mm(x, i8, scales)).flops
        == flop_count(lambda: x @ i8.T.float()).flops
        > 0
    )


@torch.library.custom_op("perfsuite_test::fused_matmul", mutates_args=())
def fused_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b  # runs below the dispatch modes: the counter sees the operator, not this matmul


@fused_matmul.register_fake
def _(a, b):
    return a.new_empty(a.shape[0], b.shape[1])


def test_an_operator_without_formula_that_looks_heavy_is_named_in_the_warning():
    a = torch.randn(8, 8)
    count = flop_count(lambda: fused_matmul(a, a) + a @ a)
    assert count.flops == 2 * 8**3  # the visible matmul only
    assert count.uncounted == ("perfsuite_test.fused_matmul",)
    assert "perfsuite_test.fused_matmul" in count.warning and "FLOP/s" in count.warning


def test_cpu_sdpa_without_perfsuites_formula_is_named_in_the_warning():
    q = torch.randn(1, 2, 8, 4)
    ours = formulas()
    del ours[aten._scaled_dot_product_flash_attention_for_cpu]
    count = flop_count(lambda: F.scaled_dot_product_attention(q, q, q), mapping=ours)
    assert count.flops == 0 and count.uncounted == ("aten._scaled_dot_product_flash_attention_for_cpu",)
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in count.warning


def test_a_model_of_counted_operators_gives_no_warning():
    fused, _, x = _pair()
    conv = nn.Conv2d(3, 4, 3)
    with warnings_heard() as heard:
        flops = count_flops(lambda: (fused(x).sum() + conv(torch.randn(1, 3, 8, 8)).relu().sum()).backward())
    assert flops > 0 and heard == []
    assert flop_count(lambda: fused(x)).warning is None


def test_a_reused_count_keeps_its_warning_and_each_warning_is_heard_once():
    a = torch.randn(4, 4)
    runs = []

    def step():
        runs.append(1)
        return fused_matmul(a, a)

    with counted.shared() as made, warnings_heard() as heard:
        count_flops(step)
        count_flops(step)  # a second call: counted again (a build counts each of its calls)
    assert len(runs) == 2 and len(heard) == 1 and "perfsuite_test.fused_matmul" in heard[0]
    with counted.shared(made), warnings_heard() as heard_again:
        assert count_flops(step) == 0  # handed out from the first build's counts, not run
    assert len(runs) == 2 and heard_again == heard


@pytest.mark.parametrize(
    "name, heavy",
    [
        ("aten.mm", True),
        ("aten._int_mm", True),
        ("aten._weight_int8pack_mm", True),
        ("aten.baddbmm", True),
        ("aten.mv", True),
        ("aten.vdot", True),
        ("aten._trilinear", True),
        ("aten.mkldnn_rnn_layer", True),
        ("aten._transformer_encoder_layer_fwd", True),
        ("aten._native_multi_head_attention", True),
        ("aten.mkldnn_convolution", True),
        ("aten._slow_conv2d_forward", True),
        ("mylib.fused_matmul", True),
        ("aten.add", False),
        ("aten.convert_element_type", False),
        ("aten.upsample_bilinear2d", False),
        ("aten._fused_sdp_choice", False),
        ("aten.addr", False),
    ],
)
def test_which_operator_names_look_compute_heavy(name, heavy):
    assert looks_heavy(name) is heavy


def _build_with_an_uncounted_op(params, device):
    from perfsuite.core.record import Work
    from perfsuite.core.workload import BuiltStep

    a = torch.randn(16, 16)

    def step():
        return fused_matmul(a, a) + a @ a

    return BuiltStep(
        fn=step,
        work=Work(
            items_per_step=1, item_unit="calls", flops_per_step=count_flops(step), flops_method="FlopCounterMode"
        ),
    )


def test_the_record_names_the_uncounted_operator_in_every_process(tmp_path, monkeypatch):
    from fakeclock import FakeClock

    from perfsuite.core.config import RunConfig
    from perfsuite.core.workload import Workload
    from perfsuite.measuring import workers
    from perfsuite.measuring.runner import time_case

    w = Workload("uncounted", "counts a step with an op that has no formula", (), _build_with_an_uncounted_op)
    rec = time_case(
        w,
        {},
        RunConfig(max_time=0.2, processes=1, builds=2, device="cpu"),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=1),
        env={},
    )
    named = [x for x in rec.warnings if "perfsuite_test.fused_matmul" in x]
    assert len(named) == 1 and rec.work.flops_per_step == 2 * 16**3
    monkeypatch.setattr(workers, "START_METHOD", "fork")
    rec = workers.run_in_workers(
        w,
        {},
        RunConfig(max_time=0.6, processes=2, device="cpu"),
        clock=FakeClock(step_s=1e-4, noise=0.01, seed=2),
        env={},
    )
    # The second worker reuses the first one's count, and its warning with it: one line for both.
    assert [x for x in rec.warnings if "perfsuite_test.fused_matmul" in x][0].startswith("processes 1,2 of 2: ")


@pytest.mark.parametrize("groups", [1, 4, 64])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_grouped_convolutions_backward_counts_each_gradient_once(groups, transposed):
    """Issue 50: torch's convolution_backward formula ignores the groups in the weight's gradient,
    so a depthwise convolution's training step counted ~66x its forward (a MobileNetV3-small step
    1.298 GFLOP where ~0.137 is real). Each gradient multiplies what the forward did: a training
    step with the input's gradient is 3x the forward, without it 2x, whatever the groups."""
    import torch

    from perfsuite.measuring.flops import flop_count

    n, c, hw = 2, 64, 12
    conv = (torch.nn.ConvTranspose2d if transposed else torch.nn.Conv2d)(c, c, 3, padding=1, groups=groups, bias=False)
    forward = flop_count(lambda: conv(torch.randn(n, c, hw, hw))).flops
    assert forward == 2 * n * c * hw * hw * (c // groups) * 9
    x = torch.randn(n, c, hw, hw, requires_grad=True)
    assert flop_count(lambda: conv(x).sum().backward()).flops == 3 * forward
    frozen_input = torch.randn(n, c, hw, hw)
    assert flop_count(lambda: conv(frozen_input).sum().backward()).flops == 2 * forward
