"""FLOPs of one step, counted by torch's FlopCounterMode (for workloads without an analytic count).

The counter adds up a formula per operator and counts an operator without one as zero, silently.
On the CPU that lost the fused kernels: SDPA's flash kernel (all of a GPT's attention), LSTM's
oneDNN layer, the eval fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer, mv, dot
and the int8 matmuls. `formulas()` gives those theirs, on torch's conventions (2 FLOPs a
multiply-add, matmuls only, masks and causality not discounted, a flash backward's recomputation
counted) so that a CPU count equals torch's count of the CUDA kernels of the same step. An operator
that still runs without a formula and whose name says matmul, convolution, attention or RNN is
named in the count's warning; `warnings_heard()` collects those of a case's builds for its record.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from perfsuite.measuring.counted import once_per_case

# A name token that says the operator multiplies matrices (an operator name split at "_"):
# "convert" or "upsample_bilinear2d" do not match, "_weight_int8pack_mm" and "mkldnn_rnn_layer" do.
HEAVY = re.compile(
    r"\w*mm|matmul|mv|addmv|v?dot|einsum|(bi|tri)?linear|conv(\dd|olution)?|attention|"
    r"transformer|rnn"
)


def _attention(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query_shape, key_shape, value_shape)  # the formula of the CUDA kernels


def _attention_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    # 2.5x the forward for equal head dims: the four gradient matmuls and QK^T again (a flash
    # kernel keeps the log-sum-exp, not the scores), as torch counts the CUDA kernels.
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _mv(mat_shape, vec_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * mat_shape[0] * mat_shape[1]


def _addmv(self_shape, mat_shape, vec_shape, *args, out_shape=None, **kwargs) -> int:
    return _mv(mat_shape, vec_shape)  # the add is not counted, as in torch's addmm


def _dot(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0]


def _int_mm(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import mm_flop

    return mm_flop(a_shape, b_shape)


def _int8_weight_mm(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    # x [..., K] times the int8 weight [N, K] transposed.
    return 2 * (_numel(x_shape) // x_shape[-1]) * w_shape[0] * w_shape[1]


def _rnn_layer(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None, **kwargs) -> int:
    # One layer, one direction, all steps: every (step, sequence) multiplies its input by W_ih
    # [gates*hidden, input] and its hidden state by W_hh [gates*hidden, hidden].
    return 2 * (_numel(input_shape) // input_shape[-1]) * (_numel(w_ih_shape) + _numel(w_hh_shape))


def _rnn_layer_backward(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None, **kwargs) -> int:
    # Twice the forward, as torch counts a matmul's backward: oneDNN computes the gradients of the
    # input and hidden state and of both weights, whether or not autograd asked for them all.
    return 2 * _rnn_layer(input_shape, w_ih_shape, w_hh_shape)


def _conv_backward(
    grad_out_shape,
    x_shape,
    w_shape,
    bias,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    out_shape=None,
    **kwargs,
) -> int:
    """A convolution's backward with its groups counted (issue 50). torch's formula computes the
    weight's gradient as a convolution of the input with grad_out whose channel product ignores
    the groups: a depthwise convolution's (groups = channels) weight gradient read `channels`
    times its forward, and a MobileNetV3-small training step 1.298 GFLOP where ~0.137 is real.
    Each gradient multiplies what the forward multiplied, once: the input's is torch's own (its
    weight shape carries the groups), the weight's equals the forward's."""
    from torch.utils.flop_counter import conv_flop_count

    flops = 0
    if output_mask[0]:
        grad_input = out_shape[0] if out_shape is not None else x_shape
        flops += conv_flop_count(
            grad_out_shape, w_shape, list(getattr(grad_input, "shape", grad_input)), not transposed
        )
    if output_mask[1]:
        flops += conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return flops


def _mha(query, key, value, embed_dim, num_head, *args, out_val=None, **kwargs) -> int:
    """nn.MultiheadAttention's eval fast path: the in-projections, attention, the out-projection."""
    d = embed_dim  # the heads' dims add up to it
    total = 0
    for q, kv in zip(_sequences(query), _sequences(key)):
        projections = 2 * q * d * d + 2 * 2 * kv * d * d + 2 * q * d * d  # Q, K and V, out
        total += projections + 2 * 2 * q * kv * d  # QK^T and PV
    return total


def _encoder_layer(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    *args,
    out_val=None,
    **kwargs,
) -> int:
    """nn.TransformerEncoderLayer's eval fast path: self-attention as in _mha, then the two
    feed-forward matmuls (ffn_weight_1 is [ff, embed_dim])."""
    ff = ffn_weight_1.shape[0]
    return _mha(src, src, src, embed_dim, num_heads) + sum(2 * 2 * n * embed_dim * ff for n in _sequences(src))


# A padding mask makes these layers take nested tensors (one [length, dim] tensor per sequence),
# which have no shape to hand a formula: FlopCounterMode hands a custom formula marked `_get_raw`
# the tensors themselves (tests/test_flops_honest.py fails if a torch stops doing so).
_mha._get_raw = _encoder_layer._get_raw = True  # type: ignore[attr-defined]


def _sequences(x) -> list[int]:
    """The length of each sequence in x ([batch, length, dim] or [length, dim]), nested or not."""
    if getattr(x, "is_nested", False):
        return [t.shape[0] for t in x.unbind()]
    shape = x.shape
    return [shape[-2]] * (_numel(shape) // (shape[-2] * shape[-1]))


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def formulas() -> dict:
    """perfsuite's formulas, by operator, for FlopCounterMode's `custom_mapping`."""
    import torch

    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _attention,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _attention_backward,
        aten.mv: _mv,
        aten.addmv: _addmv,
        aten.dot: _dot,
        aten.vdot: _dot,
        aten._int_mm: _int_mm,
        aten._weight_int8pack_mm: _int8_weight_mm,
        aten.mkldnn_rnn_layer: _rnn_layer,
        aten.mkldnn_rnn_layer_backward: _rnn_layer_backward,
        aten._native_multi_head_attention: _mha,
        aten._transformer_encoder_layer_fwd: _encoder_layer,
        aten.convolution_backward: _conv_backward,
    }


def looks_heavy(op_name: str) -> bool:
    """Whether an operator's name (`aten._int_mm`, `mylib.fused_matmul`) says it multiplies matrices."""
    return any(HEAVY.fullmatch(token) for token in op_name.rsplit(".", 1)[-1].split("_"))


@dataclass(frozen=True)
class FlopCount:
    """The FLOPs of one call, and the operators that ran and look compute-heavy but have no formula."""

    flops: float
    uncounted: tuple[str, ...] = ()

    @property
    def warning(self) -> str | None:
        if not self.uncounted:
            return None
        return (
            f"FLOPs not counted for {', '.join(self.uncounted)}: no FLOP formula (torch's or perfsuite's), "
            "so flops_per_step leaves out their work and FLOP/s and the fraction of peak are too low"
        )


def _ran_ops():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ran(TorchDispatchMode):
        """The operators that ran. Entered outside FlopCounterMode, it sees what the counter ran
        once it had decomposed what it could: those a formula counted and those counted as zero."""

        def __init__(self) -> None:
            super().__init__()
            self.ops: set = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(getattr(func, "_overloadpacket", func))
            return func(*args, **(kwargs or {}))

    return Ran()


def flop_count(fn: Callable[[], object], mapping: dict | None = None) -> FlopCount:
    """Runs `fn` once under FlopCounterMode, with `mapping` (default: perfsuite's `formulas()`)."""
    from torch.utils.flop_counter import FlopCounterMode

    ran = _ran_ops()
    with ran, FlopCounterMode(display=False, custom_mapping=formulas() if mapping is None else mapping) as counter:
        fn()
    uncounted = sorted({str(op) for op in ran.ops if op not in counter.flop_registry and looks_heavy(str(op))})
    return FlopCount(float(counter.get_total_flops()), tuple(uncounted))


_heard: list[list[str]] = []


@contextlib.contextmanager
def warnings_heard() -> Iterator[list[str]]:
    """Yields a list that gets the warning of each FLOP count made or handed out inside, once each:
    the builds of a case collect them for its record."""
    heard: list[str] = []
    _heard.append(heard)
    try:
        yield heard
    finally:
        _heard.remove(heard)


# Every build of a case has the same FLOPs: the first build counts. The stand-in is positive
# because a Step refuses FLOPs of 0 (its build's record is never kept where it stands in).
@once_per_case(stand_in=FlopCount(1.0))
def _count(fn: Callable[[], object]) -> FlopCount:
    return flop_count(fn)


def count_flops(fn: Callable[[], object]) -> float:
    """FLOPs of one call of `fn`, counted by torch's FlopCounterMode (runs `fn` once, untimed).

    The counter sees matmuls, convolutions and attention (forward and backward); elementwise
    work counts as zero, so the figure is the tensor-core/BLAS work the roofline compares. A
    reused count keeps its warning (`warnings_heard`), so every build's record names what it lacks.
    """
    count = _count(fn)
    for heard in _heard:
        if count.warning and count.warning not in heard:
            heard.append(count.warning)
    return count.flops
