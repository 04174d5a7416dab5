"""Qwen2ForSequenceClassification: built from the Qwen2.5-0.5B configuration with random weights
(random weights take the same time as trained ones), a tiny shape for CI, or a local checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfsuite.core.errors import ConfigError
from perfsuite.storage.read import read_json

NUM_LABELS = 23
PAD_TOKEN_ID = 151643

SHAPES: dict[str, dict[str, Any]] = {
    # Qwen2.5-0.5B's published configuration.
    "0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
    ),
    # Same architecture (GQA, tied embeddings, full vocabulary), a few small layers.
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        vocab_size=151936,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
    ),
}


def config_for(shape: str, attn: str):
    from transformers import Qwen2Config

    # (transformers' typed signature leaves out the keywords PretrainedConfig takes: num_labels, rope_theta)
    cfg = Qwen2Config(**SHAPES[shape], num_labels=NUM_LABELS, pad_token_id=PAD_TOKEN_ID)  # type: ignore[call-arg]
    cfg._attn_implementation = attn
    return cfg


def check_checkpoint(path: str) -> None:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"parameter 'model': {p} does not exist")
    cfg = p / "config.json"
    if not cfg.exists():
        raise ConfigError(f"parameter 'model': {p} is not a Hugging Face checkpoint (no config.json)")

    try:
        doc = read_json(cfg, ConfigError)  # a regular file, bounded, no duplicate keys
    except ConfigError as exc:
        raise ConfigError(f"parameter 'model': {exc}") from None
    model_type = doc.get("model_type") if isinstance(doc, dict) else None
    if model_type != "qwen2":
        raise ConfigError(f"parameter 'model': {p} is a {model_type!r} checkpoint, not a Qwen2 one")


def build_model(shape: str, attn: str, dtype, device: str, path: str = ""):
    """The classifier in eval mode on `device`; loaded from `path` when given."""
    import torch
    from transformers import Qwen2ForSequenceClassification

    if path:
        check_checkpoint(path)
        model = Qwen2ForSequenceClassification.from_pretrained(
            path, dtype=dtype, attn_implementation=attn, local_files_only=True
        )
    else:
        torch.manual_seed(0)
        model = Qwen2ForSequenceClassification(config_for(shape, attn)).to(dtype)
    # A classifier reads one forward's logits and never decodes: no key-value cache is built (an
    # exporter, ONNX's or OpenVINO's, cannot follow the cache a forward would otherwise return).
    model.config.use_cache = False
    # (transformers wraps Module.to with functools.wraps, whose typeshed type is not a bound method)
    return model.to(device).eval()  # type: ignore[arg-type]


def forward_flops(config, batch: int, seq: int) -> float:
    """Matmul FLOPs of one forward pass over batch x seq (padded) tokens.

    Per token and layer: q and o projections 2*h*h each, k and v 2*h*kv each (GQA), the MLP's
    three h x I matrices 2*3*h*I; attention scores and the weighted sum 2*seq*h each (full
    seq x seq, as the kernels compute it, causal mask or not). Plus the classification head
    (2*h*labels) on every position: HF scores all positions, then picks the last real one.
    Norms, rotary embedding and activations are left out (well under 1%).
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = h // config.num_attention_heads * config.num_key_value_heads
    per_token_layer = 2 * (2 * h * h + 2 * h * kv) + 2 * 3 * h * config.intermediate_size + 2 * 2 * seq * h
    tokens = batch * seq
    return float(tokens * (layers * per_token_layer + 2 * h * config.num_labels))
