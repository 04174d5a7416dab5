"""A trained Qwen2 classifier at the tiny shape, and labelled texts it is scored on: what
`perfsuite variants qwen -p model=FOLDER -p data=CSV` needs to hold every variant to a real
accuracy and macro/weighted F1 (issue 53), where random weights can only be held to eager's
predictions.

    python scripts/train_qwen_classifier.py --out /tmp/qwen-trained --steps 1200
    perfsuite variants qwen -p model=/tmp/qwen-trained -p data=/tmp/qwen-trained/held-out.csv \\
        -p batch_size=8 --variants bf16,int8-dynamic,onnxruntime,compile

Nothing is downloaded. The texts are perfsuite's generated reviews (perfsuite.llm.data); a text's
label is given by its opener and the first phrase of its body together (all 23 of the
classifier's labels), so it is learnable from the text, as a support ticket's intent is, but by
no single phrase. The model is the workload's own
tiny Qwen2 (perfsuite.llm.model: GQA, tied embeddings, Qwen2.5's vocabulary) trained from random
weights with AdamW on the CPU; it is saved with its tokenizer (the workload takes the
checkpoint's own), and `held-out.csv` holds texts it was not trained on. Prints the held-out
accuracy, and writes `training.json` beside the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def labelled(n: int, seed: int, num_labels: int = 23) -> tuple[list[str], list[int]]:
    """Generated reviews, each labelled by its opener and the first phrase of its body together
    ((10 x body + opener) mod 23): no one phrase gives the label away, so a small model learns it
    with margins a variant's rounding can cross."""
    from perfsuite.llm.data import _BODY, _OPENERS, generated_texts

    texts, _ = generated_texts(n, seed=seed)
    labels = []
    for t in texts:
        opener = max((i for i, o in enumerate(_OPENERS) if t.startswith(o)), key=lambda i: len(_OPENERS[i]))
        found = [(t.find(p), i) for i, p in enumerate(_BODY) if p in t]
        body = min(found)[1] if found else 0
        labels.append((10 * body + opener) % num_labels)
    return texts, labels


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the checkpoint (must not exist)")
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--train", type=int, default=4096, help="training texts")
    p.add_argument("--held-out", type=int, default=512, help="held-out texts written to held-out.csv")
    p.add_argument("--seq", type=int, default=64, help="tokens a training text is truncated to")
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args()
    if args.out.exists():
        p.error(f"--out {args.out} exists")

    import csv

    import torch
    from transformers import Qwen2ForSequenceClassification

    from perfsuite.llm.evaluate import f1_scores
    from perfsuite.llm.model import config_for
    from perfsuite.llm.tokenizer import tokenizer_for

    torch.manual_seed(0)
    tok = tokenizer_for("")
    model = Qwen2ForSequenceClassification(config_for("tiny", "sdpa"))
    model.config.use_cache = False
    train_x, train_y = labelled(args.train, seed=1)
    # Held out: texts the training set does not hold word for word (short generated reviews repeat).
    seen = set(train_x)
    pool = [(t, y) for t, y in zip(*labelled(4 * args.held_out, seed=2)) if t not in seen][: args.held_out]
    held_x, held_y = [t for t, _ in pool], [y for _, y in pool]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    model.train()
    for step in range(args.steps):
        idx = torch.randint(len(train_x), (args.batch,), generator=gen).tolist()
        enc = tok([train_x[i] for i in idx], padding=True, truncation=True, max_length=args.seq, return_tensors="pt")
        out = model(**enc, labels=torch.tensor([train_y[i] for i in idx]))
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {out.loss.item():.3f}", flush=True)
    train_s = time.perf_counter() - t0

    model.eval()
    preds: list[int] = []
    with torch.inference_mode():
        for i in range(0, len(held_x), 64):
            enc = tok(held_x[i : i + 64], padding=True, truncation=True, max_length=args.seq, return_tensors="pt")
            preds.extend(int(x) for x in model(**enc).logits.argmax(-1))
    scores = f1_scores(held_y, preds)

    args.out.mkdir(parents=True)
    model.save_pretrained(str(args.out))
    tok.save_pretrained(str(args.out))
    with open(args.out / "held-out.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(zip(held_x, held_y))
    doc = {
        "steps": args.steps,
        "batch": args.batch,
        "train_texts": args.train,
        "held_out_texts": len(held_x),
        "held_out_in_training": sum(t in seen for t in held_x),
        "seq": args.seq,
        "lr": args.lr,
        "train_s": round(train_s, 1),
        "held_out": scores,
        "torch": torch.__version__,
    }
    (args.out / "training.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"held-out: {json.dumps(scores)}; trained in {train_s:.0f} s; saved to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
