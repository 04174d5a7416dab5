"""Accuracy and macro / weighted F1 of a classifier over a labelled dataset, with progress."""

from __future__ import annotations


def f1_scores(y_true: list[int], y_pred: list[int]) -> dict:
    classes = sorted(set(y_true) | set(y_pred))
    f1s, support = {}, {}
    for c in classes:
        tp = sum(1 for t, p in zip(y_true, y_pred) if t == c and p == c)
        fp = sum(1 for t, p in zip(y_true, y_pred) if t != c and p == c)
        fn = sum(1 for t, p in zip(y_true, y_pred) if t == c and p != c)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1s[c] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        support[c] = sum(1 for t in y_true if t == c)
    n = len(y_true)
    return {
        "accuracy": sum(1 for t, p in zip(y_true, y_pred) if t == p) / n,
        "macro_f1": sum(f1s.values()) / len(f1s),
        "weighted_f1": sum(f1s[c] * support[c] for c in classes) / n,
    }


def evaluate(model, tok, texts: list[str], labels: list[int], batch_size: int, device: str) -> dict:
    """Accuracy and F1 of `model` on the texts, batch by batch (a value: progress, if any, is the
    caller's to show)."""
    import torch

    preds: list[int] = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tok(
                texts[i : i + batch_size], padding="longest", truncation=True, max_length=512, return_tensors="pt"
            ).to(device)
            preds.extend(model(**enc).logits.argmax(-1).tolist())
    return f1_scores(labels, preds)
