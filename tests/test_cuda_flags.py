"""TF32, cuDNN and determinism flags: read into every record, and the caller's reach its workers.

A worker is forked from perfsuite's fork server, not from the process that set the flags (the
Python API, a conftest, an asv `setup`): without the job carrying them, a user's
`allow_tf32 = True` would be measured as true fp32. The flags are plain settings on a CPU build
too, so the whole road runs here; what they do to CUDA kernels needs a GPU.
"""

import os

import pytest
import torch

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.measuring import runner, tf32, workers


@pytest.fixture
def restore_flags():
    """Whatever a test sets, the session gets torch's flags back as they were."""
    b = torch.backends
    saved = (
        torch.get_float32_matmul_precision(),
        b.cudnn.allow_tf32,
        b.cudnn.benchmark,
        b.cudnn.deterministic,
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )
    yield
    precision, cudnn_tf32, benchmark, deterministic, algorithms, warn_only, workspace = saved
    torch.set_float32_matmul_precision(precision)
    b.cudnn.allow_tf32, b.cudnn.benchmark, b.cudnn.deterministic = cudnn_tf32, benchmark, deterministic
    torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
    if workspace is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace


def _set_unusual_flags(monkeypatch):
    """Every flag away from torch's default, as a user's conftest might leave them."""
    torch.set_float32_matmul_precision("medium")  # TF32 (and bf16) allowed for fp32 matmuls
    torch.backends.cudnn.allow_tf32 = False  # on by default
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def test_torch_flags_reads_every_flag(restore_flags, monkeypatch):
    assert set(tf32.torch_flags()) == set(tf32.FLAGS)
    _set_unusual_flags(monkeypatch)
    assert tf32.torch_flags() == {
        "float32_matmul_precision": "medium",
        "matmul_tf32": True,
        "cudnn_tf32": False,
        "cudnn_benchmark": True,
        "cudnn_deterministic": True,
        "deterministic_algorithms": True,
        "deterministic_warn_only": True,
        "cublas_workspace_config": ":4096:8",
    }


def test_apply_torch_flags_sets_another_process_s_flags_here(restore_flags, monkeypatch):
    _set_unusual_flags(monkeypatch)
    wanted = tf32.torch_flags()
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    torch.use_deterministic_algorithms(False)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    assert tf32.torch_flags() != wanted
    assert tf32.apply_torch_flags(wanted) == []
    assert tf32.torch_flags() == wanted


def test_a_record_measured_in_this_process_carries_the_flags(restore_flags, monkeypatch, no_gc_pauses):
    _set_unusual_flags(monkeypatch)
    rec = runner.time_case(registry.get("noop"), {}, RunConfig(max_time=0.2, processes=1, device="cpu"))
    assert rec.conditions["torch_flags"] == tf32.torch_flags()


@pytest.mark.slow
def test_the_callers_flags_reach_workers_forked_from_the_fork_server(restore_flags, monkeypatch):
    workers.context()  # the fork server starts first, with torch's default flags, as in a user's run
    _set_unusual_flags(monkeypatch)
    caller = tf32.torch_flags()
    rec = workers.run_in_workers(registry.get("noop"), {}, RunConfig(max_time=0.4, processes=2, device="cpu"))
    assert len(rec.processes) == 2 and os.getpid() not in {p["pid"] for p in rec.processes}
    # Each worker measured with the caller's flags, read in the worker (recorded per process).
    assert [p["conditions"]["torch_flags"] for p in rec.processes] == [caller, caller]
    assert rec.conditions["torch_flags"] == caller
    assert not [w for w in rec.warnings if "torch flag" in w], rec.warnings
