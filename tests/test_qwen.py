"""The Qwen2 inference workload at the tiny shape: real tokenizer ids, steps, FLOPs, data,
checkpoints, bad input and the report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfsuite.cli import app as cli
from perfsuite.core import registry
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.llm.evaluate import f1_scores
from perfsuite.llm.model import build_model, forward_flops
from perfsuite.llm.tokenizer import qwen25_tokenizer
from perfsuite.workloads.base import count_flops

ROOT = Path(__file__).resolve().parents[1]

TINY = {"shape": "tiny"}


@pytest.fixture(scope="module")
def tok():
    return qwen25_tokenizer()


@pytest.mark.slow
def test_tokenizer_gives_the_real_qwen25_ids(tok):
    assert tok("Hello world!")["input_ids"] == [9707, 1879, 0]
    assert tok.pad_token_id == 151643
    assert tok.convert_tokens_to_ids("<|im_start|>") == 151644


@pytest.mark.parametrize("bs, padding", [(1, "longest"), (4, "longest"), (3, "fixed")])
@pytest.mark.slow
def test_analytic_flops_match_the_counter(bs, padding):
    # Eager attention: its matmuls are visible to FlopCounterMode (CPU SDPA kernels are counted by perfsuite.measuring.flops).
    built = registry.get("qwen").build(
        {**TINY, "attn": "eager", "batch_size": bs, "padding": padding, "seq_len": 32}, "cpu"
    )
    assert count_flops(built.fn) == pytest.approx(built.work.flops_per_step, rel=0.02)


@pytest.mark.slow
def test_batch_step_and_extras():
    built = registry.get("qwen").build({**TINY, "batch_size": 4}, "cpu")
    logits = built.fn()
    assert tuple(logits.shape) == (4, 23)
    e = built.extra()
    assert e["parameters"] > 1e6 and e["size_mb"] > 1 and e["load_s"] > 0
    assert 0 <= e["padding_fraction"] < 1 and e["tokens_real"] <= e["tokens_padded"]


def test_flops_grow_with_the_padded_length():
    from perfsuite.llm.model import config_for

    cfg = config_for("0.5b", "sdpa")
    assert forward_flops(cfg, 1, 256) > 2 * forward_flops(cfg, 1, 128)
    # ~0.5 B parameters, ~2 FLOPs per parameter per token (embedding lookups are not matmuls).
    assert forward_flops(cfg, 1, 1) == pytest.approx(2 * 0.36e9, rel=0.1)


@pytest.mark.parametrize("scenario", ["singlestream", "offline"])
@pytest.mark.slow
def test_mlperf_scenarios_step(scenario):
    built = registry.get("qwen").build({**TINY, "scenario": scenario, "samples": 8, "batch_size": 4}, "cpu")
    built.fn()
    assert built.work.items_per_step == (1 if scenario == "singlestream" else 8)


@pytest.mark.slow
def test_local_checkpoint_with_labelled_csv(tmp_path, tok):
    model = build_model("tiny", "sdpa", torch.float32, "cpu")
    model.save_pretrained(tmp_path / "ckpt")
    tok.save_pretrained(tmp_path / "ckpt")
    csv_path = tmp_path / "val.csv"
    csv_path.write_text("text,label\n" + "".join(f'"review number {i}, good",{i % 23}\n' for i in range(12)))
    built = registry.get("qwen").build(
        {**TINY, "model": str(tmp_path / "ckpt"), "data": str(csv_path), "batch_size": 4}, "cpu"
    )
    e = built.extra()
    assert 0 <= e["accuracy"] <= 1 and 0 <= e["macro_f1"] <= 1 and 0 <= e["weighted_f1"] <= 1


def test_f1_hand_case():
    # true 0 0 1 1, pred 0 1 1 1: class 0 P=1 R=.5 F1=2/3; class 1 P=2/3 R=1 F1=.8
    s = f1_scores([0, 0, 1, 1], [0, 1, 1, 1])
    assert s["accuracy"] == 0.75
    assert s["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)
    assert s["weighted_f1"] == pytest.approx((2 / 3 + 0.8) / 2)


def test_bad_input_is_named(tmp_path):
    w = registry.get("qwen")
    with pytest.raises(ConfigError, match="does not exist"):
        w.validate_case(w.resolve({"model": str(tmp_path / "none")}), "cpu")
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ConfigError, match="'llama' checkpoint, not a Qwen2 one"):
        w.validate_case(w.resolve({"model": str(tmp_path / "llama")}), "cpu")
    with pytest.raises(ConfigError, match="parameter 'batch_size': 0 is too small"):
        w.resolve({"batch_size": 0})
    with pytest.raises(Unsupported, match="fp16"):
        w.validate_case(w.resolve({"dtype": "fp16"}), "cpu")
    from perfsuite.llm.data import read_csv

    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\nhi,1\n")
    with pytest.raises(ConfigError, match="no text column"):
        read_csv(str(bad), 23)
    bad.write_text("text,label\nhi,1\nthere,40\n")
    with pytest.raises(ConfigError, match="line 3: label 40 is outside the model's 0..22"):
        read_csv(str(bad), 23)
    # The case is refused for its data before any side builds (a variant study blamed the variant)
    with pytest.raises(ConfigError, match="parameter 'data': .* line 3: label 40"):
        w.validate_case(w.resolve({"shape": "tiny", "data": str(bad)}), "cpu")
    with pytest.raises(ConfigError, match="parameter 'data': .* is not a file"):
        w.validate_case(w.resolve({"shape": "tiny", "data": str(tmp_path)}), "cpu")


@pytest.mark.slow
def test_sweep_report_and_trace(tmp_path, capsys):
    out = tmp_path / "q.json"
    # On the machine's device (CUDA where there is one), with torch.profiler in a process of its own:
    # it segfaulted on the H100 machine in a pytest process where other tests had used CUDA.
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            "qwen",
            "-p",
            "shape=tiny",
            "-p",
            "batch_size=1,4",  # two batch sizes by two dtypes: a sweep to choose from, and a heatmap
            "-p",
            "dtype=fp32,bf16",
            "--max-time",
            "0.3",
            "--out",
            str(out),
            "--trace",
            str(tmp_path / "traces"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}{res.stderr[-3000:]}"
    assert len(list((tmp_path / "traces").glob("*.trace.json"))) == 4
    top = next((tmp_path / "traces").glob("*.top-ops.txt")).read_text()
    assert "aten::" in top
    assert cli.main(["report", str(out), "--out-dir", str(tmp_path / "rep"), "--latency-bound", "10000"]) == 0
    rep = tmp_path / "rep"
    page = (rep / "summary.md").read_text()
    assert "optimal batch size:" in page and "main bottleneck:" in page
    for f in ("qwen-batch-sweep.png", "qwen-heatmap.png", "qwen-sweep.json", "qwen-sweep.csv"):
        assert (rep / f).stat().st_size > 100, f
    doc = json.loads((rep / "qwen-sweep.json").read_text())
    assert doc["format"] == "perfsuite.qwen-sweep" and doc["schema_version"] == 1
    rows = doc["results"]
    assert sorted({r["batch_size"] for r in rows}) == [1, 4]
    # With an impossible bound, no batch size is chosen, and the page says so.
    assert cli.main(["report", str(out), "--out-dir", str(tmp_path / "rep2"), "--latency-bound", "0.0001"]) == 0
    assert "no batch size meets" in (tmp_path / "rep2" / "summary.md").read_text()
