"""perfsuite variants beside optimum-benchmark, on the same model and backends (issue 53, item 9).

    python scripts/optimum_side_by_side.py --runs 5 --batch 8 --seq 64 --out reports/variants/optimum-side-by-side.json

The Qwen2 classifier (tiny shape, random weights from seed 0, as perfsuite builds it) and its
tokenizer are saved to a local folder: nothing is downloaded. optimum-benchmark (its PyTorch and
ONNX Runtime backends, CPU, one thread, its `process` launcher: every run a separate process) then
measures it `--runs` times per configuration, eager then each variant in turn (its PyTorch
backend: autocast to bf16, torch_compile); each run's mean forward latency is read from its report,
and each variant's speed-up over the eager run just before it is kept, so their spread is the
spread a user of separate runs sees. `perfsuite variants qwen -p model=FOLDER --variants bf16,compile`
measures the same model at the same shape (padding to the same fixed length) with its paired
interval. (optimum-benchmark's ONNX Runtime backend needs optimum 1.x, whose exporter imports
TorchScript-exporter internals torch 2.14 no longer has; optimum 2.x has no ORT backend for it.) optimum-benchmark is
imported from OB_SITE (default /tmp/ob-site: `pip install --no-deps --target /tmp/ob-site
optimum-benchmark optimum optimum-onnx accelerate hydra-core omegaconf ...`), never from
perfsuite's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OB_RUN = r"""
import json, sys
from optimum_benchmark import Benchmark, BenchmarkConfig, InferenceConfig, ProcessConfig, PyTorchConfig
ORTConfig = None
if sys.argv[2] == "onnxruntime":
    from optimum_benchmark import ORTConfig
model, backend, batch, seq, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
common = dict(device="cpu", model=model, task="text-classification", no_weights=False)
if backend == "eager":
    cfg = PyTorchConfig(**common)
elif backend == "bf16":
    cfg = PyTorchConfig(**common, autocast_enabled=True, autocast_dtype="bfloat16")
elif backend == "compile":
    cfg = PyTorchConfig(**common, torch_compile=True)
else:
    cfg = ORTConfig(**common, export=True, session_options={"intra_op_num_threads": 1, "inter_op_num_threads": 1})
scenario = InferenceConfig(latency=True, memory=False, duration=seconds, iterations=10, warmup_runs=5,
                           input_shapes={"batch_size": batch, "sequence_length": seq})
report = Benchmark.launch(BenchmarkConfig(name=backend, launcher=ProcessConfig(), scenario=scenario, backend=cfg))
lat = report.to_dict()["forward"]["latency"]
print("RESULT " + json.dumps({"mean": lat["mean"], "p50": lat["p50"], "values": len(lat["values"])}))
"""


def save_model(folder: Path) -> None:
    """The classifier perfsuite builds for shape=tiny, with its tokenizer, as a local checkpoint."""
    import torch

    from perfsuite.llm.model import build_model
    from perfsuite.llm.tokenizer import tokenizer_for

    model = build_model("tiny", "sdpa", torch.float32, "cpu")
    model.config.pad_token_id = model.config.pad_token_id or 0
    model.save_pretrained(folder)
    tokenizer_for("").save_pretrained(folder)


def ob_run(model: Path, backend: str, batch: int, seq: int, seconds: int, site: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{site}:{ROOT}", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [sys.executable, "-c", OB_RUN, str(model), backend, str(batch), str(seq), str(seconds)],
        cwd=model.parent,  # optimum-benchmark writes benchmark.log (and a folder) where it runs: not in the tree
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"optimum-benchmark {backend} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def perfsuite_study(model: Path, batch: int, seq: int, max_time: float, variants: list[str]) -> list[dict]:
    out = Path(tempfile.mkdtemp(prefix="perfsuite-side-by-side-")) / "v.json"
    cmd = [sys.executable, "-m", "perfsuite", "variants", "qwen", "-p", f"model={model}", "-p", "padding=fixed",
           "-p", f"seq_len={seq}", "-p", f"batch_size={batch}", "--device", "cpu", "--max-time", str(max_time),
           "--variants", ",".join(variants), "--json", str(out)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1800)
    if not out.exists():
        raise SystemExit(
            f"perfsuite variants failed (exit {res.returncode}):\n{res.stdout[-2000:]}{res.stderr[-2000:]}"
        )
    (study,) = json.loads(out.read_text())["results"]
    return [{"variant": row["variant"], "speedup": row["speedup"], "interval": row["speedup_interval"],
             "word": row["word"], "latency_s": row["latency_s"], "eager_latency_s": row["eager_latency_s"]}
            for row in study["rows"]]  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--ob-seconds", type=int, default=10, help="optimum-benchmark's duration per run")
    p.add_argument("--max-time", type=float, default=15.0, help="perfsuite's budget for the variant")
    p.add_argument("--perfsuite-runs", type=int, default=3)
    p.add_argument(
        "--variants",
        default="bf16,compile",
        help="compared on both sides (optimum-benchmark: its PyTorch "
        "backend's autocast and torch_compile; onnxruntime needs an optimum that exports with this torch)",
    )
    p.add_argument("--site", default=os.environ.get("OB_SITE", "/tmp/ob-site"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="qwen-tiny-"))
    save_model(folder)
    variants = [v for v in args.variants.split(",") if v]
    runs = []
    for i in range(args.runs):  # eager and each variant in turn, every run a process of its own
        got = {b: ob_run(folder, b, args.batch, args.seq, args.ob_seconds, args.site) for b in ["eager", *variants]}
        got["speedup"] = {v: got["eager"]["mean"] / got[v]["mean"] for v in variants}
        print(f"optimum-benchmark run {i + 1}: " + ", ".join(f"{b} {got[b]['mean'] * 1e3:.2f} ms" for b in ["eager", *variants])
              + "; speed-ups " + ", ".join(f"{v} {x:.3f}" for v, x in got["speedup"].items()), flush=True)  # fmt: skip
        runs.append(got)
    ours = []
    for i in range(args.perfsuite_runs):
        rows = perfsuite_study(folder, args.batch, args.seq, args.max_time, variants)
        print(f"perfsuite variants run {i + 1}: " + "; ".join(
            f"{r['variant']} {r['word']} {r['speedup']:.3f} ({r['interval'][0]:.3f}-{r['interval'][1]:.3f})" for r in rows), flush=True)  # fmt: skip
        ours.append(rows)
    summary: dict = {}
    for v in variants:
        xs = [r["speedup"][v] for r in runs]
        summary[v] = {
            "optimum_benchmark": {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
                                  "cv": statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else None},
            "perfsuite": [next(r for r in rows if r["variant"] == v) for rows in ours],
        }  # fmt: skip
    print(json.dumps(summary, indent=1))
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "optimum_runs": runs,
                                    "perfsuite_runs": ours, "summary": summary}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
