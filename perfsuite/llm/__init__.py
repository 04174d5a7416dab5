"""Qwen2 sequence-classifier inference: model, tokenizer and data, all offline."""
