"""Texts to classify: a user's CSV (`text`, and `label` or `labels`), or generated review-like texts."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from perfsuite.core.errors import ConfigError

_OPENERS = [
    "I bought this",
    "This",
    "My order",
    "The product",
    "Ordered this",
    "Received it and",
    "After two weeks,",
    "Honestly,",
    "For the price,",
    "Gift for my sister:",
]
_BODY = [
    "works exactly as described",
    "stopped working after a week",
    "arrived late and the box was damaged",
    "is great value for money",
    "feels cheap but does the job",
    "the battery lasts all day",
    "customer service never answered my emails",
    "I would like a refund please",
    "the size runs small",
    "colour is different from the pictures",
    "setup took five minutes",
    "instructions were confusing",
    "how do I change the shipping address",
    "can I cancel my subscription",
    "it was charged twice",
    "the app keeps crashing on my phone",
    "five stars, would buy again",
    "not compatible with my model",
]


def generated_texts(n: int, seed: int = 0, num_labels: int = 23) -> tuple[list[str], list[int]]:
    """Review-like texts whose lengths follow a log-normal (median ~25 words) with a long tail,
    capped near 512 tokens like the seed's Amazon reviews; labels uniform over the intents."""
    rng = np.random.default_rng(seed)
    words = np.clip(rng.lognormal(mean=3.2, sigma=0.8, size=n), 3, 380).astype(int)
    texts = []
    for w in words:
        parts = [rng.choice(_OPENERS)]
        while sum(len(p.split()) for p in parts) < w:
            parts.append(rng.choice(_BODY))
        texts.append(" ".join(parts)[: 8 * w + 40] + ".")
    return texts, [int(x) for x in rng.integers(0, num_labels, size=n)]


def read_csv(path: str, num_labels: int) -> tuple[list[str], list[int]]:
    """`text` and `label` columns (`labels`, as Hugging Face datasets name it, is accepted too);
    labels must be integers in [0, num_labels)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"parameter 'data': {p} does not exist")
    texts, labels = [], []
    try:
        with open(p, newline="") as f:
            reader = csv.DictReader(f)
            columns = set(reader.fieldnames or [])
            found = [c for c in ("label", "labels") if c in columns]
            missing = sorted(({"text"} - columns) | (set() if found else {"label"}))
            if missing:
                raise ConfigError(
                    f"parameter 'data': {p} has no {' or '.join(missing)} column "
                    f"(columns: {', '.join(reader.fieldnames or [])})"
                    + ("; the label column may be named label or labels" if not found else "")
                )
            if len(found) == 2:
                raise ConfigError(f"parameter 'data': {p} has both a label and a labels column; keep one")
            col = found[0]
            for row in reader:
                line = reader.line_num
                try:
                    label = int(row[col])
                except (TypeError, ValueError):
                    raise ConfigError(
                        f"parameter 'data': {p} line {line}: {col} {row[col]!r} is not an integer"
                    ) from None
                if not 0 <= label < num_labels:
                    raise ConfigError(
                        f"parameter 'data': {p} line {line}: label {label} is outside the model's 0..{num_labels - 1}"
                    )
                texts.append(row["text"] or "")
                labels.append(label)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"parameter 'data': {p} is not UTF-8 text ({exc})") from None
    if not texts:
        raise ConfigError(f"parameter 'data': {p} has no rows")
    return texts, labels
