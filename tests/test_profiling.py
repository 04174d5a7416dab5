"""profile-step marks exactly one step with process-wide ranges; trace writes a bounded window."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.cli import app as cli
from perfsuite.profiling import step_marking

ROOT = Path(__file__).resolve().parents[1]


def test_profile_step_marks_exactly_one_step_with_the_phase_hierarchy(capsys, monkeypatch):
    events = []

    class FakeRange:
        def __init__(self, name, cuda):
            self.name = name

        def __enter__(self):
            events.append(("start", self.name))

        def __exit__(self, *exc):
            events.append(("end", self.name))

    monkeypatch.setattr(step_marking, "process_range", FakeRange)
    code = cli.main(
        [
            "profile-step",
            "autoencoder",
            "-p",
            "batch_size=4",
            "--device",
            "cpu",
            "--warmup-iters",
            "3",
            "--profile-iter",
            "4",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert [e for e in events if e[0] == "start"] == [
        ("start", n) for n in ("train_step", "forward", "loss", "backward", "optimizer_step")
    ]
    assert events[-1] == ("end", "train_step")
    assert "need a CUDA GPU" in out and "ncu --import" in out and "dram__bytes.sum" in out
    # The commands to copy repeat the options main() was given (not this process's sys.argv), on cuda.
    assert (
        "python -m perfsuite profile-step autoencoder -p batch_size=4 --warmup-iters 3 --profile-iter 4 --device cuda"
        in out
    )


def test_profile_step_bad_iterations(capsys):
    assert cli.main(["profile-step", "resnet", "--warmup-iters", "3", "--profile-iter", "1"]) == 2


def profiled(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`perfsuite ARGV` in a fresh interpreter. torch.profiler (kineto, and CUPTI once CUDA is up)
    segfaulted on the H100 machine when it ran in a pytest process where earlier tests had used
    CUDA: in a process of its own, a crash is this test's failure, with its signal, not the end
    of the whole run."""
    res = subprocess.run(
        [sys.executable, "-m", "perfsuite", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    if res.returncode < 0:
        pytest.fail(f"perfsuite {' '.join(argv)} was killed by signal {-res.returncode}:\n{res.stderr[-3000:]}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


@pytest.mark.slow
def test_trace_writes_chrome_json_top_ops_and_split(tmp_path):
    profiled(
        "trace", "autoencoder", "-p", "batch_size=4", "--device", "cpu", "--out-dir", str(tmp_path), "--active", "1"
    )
    trace = next(tmp_path.glob("*.trace.json"))
    assert json.loads(trace.read_text())["traceEvents"]
    assert "aten::" in next(tmp_path.glob("*.top-ops.txt")).read_text()
    split = json.loads(next(tmp_path.glob("*.split.json")).read_text())
    assert split["forward"] > 0 and split["backward"] > 0 and split["optimizer_step"] > 0
    assert split["forward"] + split["loss"] + split["backward"] + split["optimizer_step"] <= split["wall"] * 1.05


def test_a_cuda_trace_holds_the_steps_kernels(tmp_path, cuda_available):
    profiled(
        "trace", "autoencoder", "-p", "batch_size=4", "--device", "cuda", "--out-dir", str(tmp_path), "--active", "1"
    )
    events = json.loads(next(tmp_path.glob("*.trace.json")).read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in events), "no CUDA kernel in the trace (CUPTI not active?)"


def test_profile_step_profiles_the_compiled_step_that_is_measured(capsys, monkeypatch):
    """Issue 54, item 7: with compile=true the marked step ran the eager model. Now its forward is
    the compiled one the measured step calls (a stand-in here: compiling ResNet takes ~50 s), with
    the phases still marked around it."""
    from perfsuite.cli import profile_step

    compiled_calls = []

    def fake_compiled_forward(model, params, device):
        assert params["compile"] is True
        return lambda x: compiled_calls.append(1) or model(x)

    events = []
    monkeypatch.setattr(profile_step, "compiled_forward", fake_compiled_forward)
    monkeypatch.setattr(step_marking, "process_range", lambda name, cuda: _Recorded(events, name))
    argv = [
        "profile-step",
        "resnet",
        "-p",
        "batch_size=2",
        "-p",
        "compile=true",
        "--device",
        "cpu",
        "--warmup-iters",
        "1",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert len(compiled_calls) == 2  # the warm-up step and the marked one
    assert [n for n in events] == ["train_step", "forward", "loss", "backward", "optimizer_step"]
    assert "compiled, step 1" in out


class _Recorded:
    def __init__(self, events, name):
        events.append(name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_profile_step_marks_a_graph_replayed_step_whole_as_it_is_built(capsys, monkeypatch):
    """Issue 54, item 7: with cuda_graph=true the marked step was the eager one. Now it is the
    workload's own build (the replayed graph), one range, torn down after; the console says why
    its phases are not marked. A stand-in workload: a CPU cannot capture a CUDA graph."""
    from types import SimpleNamespace

    from perfsuite.cli import profile_step

    calls, torn, events = [], [], []
    built = SimpleNamespace(fn=lambda: calls.append(1), teardown=lambda: torn.append(1))
    fake = SimpleNamespace(
        name="graphed",
        trainer=object(),  # a training workload: the eager road would have marked its phases
        params={},
        resolve=lambda given: {"cuda_graph": True},
        build=lambda params, device: built,
    )
    monkeypatch.setattr(profile_step.registry, "get", lambda name: fake)
    monkeypatch.setattr(profile_step, "single_values", lambda given, w: {})
    monkeypatch.setattr(profile_step, "check_cases", lambda cases, device: SimpleNamespace(runnable=lambda: None))
    monkeypatch.setattr(profile_step, "training_setup", lambda *a, **k: pytest.fail("the eager step was built"))
    monkeypatch.setattr(step_marking, "process_range", lambda name, cuda: _Recorded(events, name))
    assert cli.main(["profile-step", "noop", "--device", "cpu", "--warmup-iters", "2"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 3 and torn == [1] and events == ["train_step"]
    assert "graph-replayed, step 2" in out and "not marked apart" in out
