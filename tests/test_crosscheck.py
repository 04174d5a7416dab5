"""scripts/cuda_crosscheck.py on CPU: its arguments, the alternation of blocks, the table, and its
CUDA-less exit. The timing itself needs a GPU (scripts/gpu-check.sh runs it there)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cuda_crosscheck.py"


@pytest.fixture(scope="module")
def cc():
    spec = importlib.util.spec_from_file_location("cuda_crosscheck", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_arguments_default_to_every_case_and_refuse_unknown_ones(cc, capsys):
    args = cc.parse_args([])
    assert args.cases == list(cc.CASES) and args.block == 20 and args.tolerance == 0.02
    assert "resnet18-b128-fp32" in cc.CASES and "matmul-8192-bf16" in cc.CASES
    assert cc.parse_args(["--cases", "matmul-4096-fp32", "--rounds", "3"]).rounds == 3
    for bad in (["--cases", "matmul-1-fp64"], ["--block", "0"], ["--max-time", "0"]):
        with pytest.raises(SystemExit):
            cc.parse_args(bad)
    assert "unknown case 'matmul-1-fp64'" in capsys.readouterr().err


def test_cases_are_valid_perfsuite_parameters(cc):
    from perfsuite.core import registry

    for workload, params in cc.CASES.values():
        registry.get(workload).resolve(params)


def test_blocks_alternate_between_cases_and_give_per_step_times(cc):
    order = []

    def fake_block(fn, n):
        order.append(fn.__name__)
        return {"a": 0.2, "b": 0.4}[fn.__name__] * n

    def a():
        pass

    def b():
        pass

    out = cc.interleaved_medians({"A": a, "B": b}, rounds=3, block=20, time_block=fake_block)
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert out == {"A": [0.2] * 3, "B": [0.4] * 3}


def test_rows_and_table(cc):
    rows = [
        cc.compare_row("m", 0.010, 0.0101),
        cc.compare_row("r", 0.010, 0.0110, loop_iqr=0.132),
        cc.compare_row("x", None, 0.01, note="not built: Unsupported: needs CUDA"),
    ]
    assert rows[0]["within"] is True and rows[1]["within"] is False and rows[2]["ratio"] is None
    assert rows[1]["ratio"] == pytest.approx(1.1)
    lines = cc.format_table(rows).splitlines()
    assert lines[0].split()[:3] == ["case", "loop", "median"] and "within 2%" in lines[0]
    assert lines[2].split()[:7] == ["m", "10.000", "ms", "10.100", "ms", "1.010", "yes"]
    assert "1.100  no" in lines[3] and "13.2%" in lines[3]
    assert "not built" in lines[4] and lines[4].split()[1] == "-"


def test_without_cuda_it_says_so_and_exits_zero(cc, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cc.main(["--cases", "matmul-4096-fp32"]) == 0
    assert "needs CUDA" in capsys.readouterr().out


def test_run_builds_times_and_compares_each_case(cc, monkeypatch):
    """The orchestration on CPU: a tiny matmul through both timings, and a case the device
    refuses, which becomes a row with its reason instead of stopping the report."""
    import time

    import torch

    def wall_block(fn, n):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return time.perf_counter() - t

    monkeypatch.setattr(
        cc, "CASES", {"mm": ("matmul", {"n": 32, "dtype": "fp32"}), "graph": ("resnet", {"cuda_graph": True})}
    )
    monkeypatch.setattr(cc, "event_block", wall_block)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    args = cc.parse_args(
        [
            "--cases",
            "mm",
            "graph",
            "--rounds",
            "4",
            "--block",
            "3",
            "--warmup",
            "1",
            "--max-time",
            "0.3",
            "--device",
            "cpu",
        ]
    )
    mm, graph = cc.run(args)
    assert mm["case"] == "mm" and mm["loop_s"] > 0 and mm["perfsuite_s"] > 0 and mm["ratio"] is not None
    assert graph["loop_s"] is None and graph["perfsuite_s"] is None
    assert "not built: Unsupported" in graph["note"] and "cuda_graph needs CUDA" in graph["note"]
