"""The fork server and CUDA: its preload touches no CUDA, and a worker in a bad fork says why.

CUDA cannot be used in a process forked after its parent touched CUDA; one module-level
`torch.cuda.is_available()` in what the server preloads would make every worker such a process
on a GPU host. This machine's torch is a CUDA build without a GPU, where is_available() marks
forks just as it does on a GPU host (tested below); a CPU-only build does not, and skips that test.
"""

import subprocess
import sys
import textwrap

import pytest
import torch

from perfsuite.core.config import RunConfig
from perfsuite.measuring import fork_cuda, workers


@pytest.fixture
def cuda_toucher(tmp_path, monkeypatch):
    """A module that asks torch.cuda.is_available() when imported, importable by fresh interpreters."""
    (tmp_path / "cudatoucher.py").write_text("import torch\n\nHAVE_CUDA = torch.cuda.is_available()\n")
    (tmp_path / "cudainit.py").write_text("import torch\n\ntorch.cuda.init()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_the_fork_servers_preload_makes_no_cuda_call():
    seen = fork_cuda.preload_cuda_calls(workers.PRELOAD)
    assert seen["calls"] == [], seen["calls"]
    assert seen["initialized"] is False
    assert not [m for m in seen["failed"] if m.startswith("perfsuite")], seen["failed"]


@pytest.mark.slow
def test_the_probe_names_the_module_and_line_that_touched_cuda(cuda_toucher):
    seen = fork_cuda.preload_cuda_calls(("torch", "cudatoucher", "cudainit"))
    by_module = {c["importing"]: c for c in seen["calls"]}
    assert set(by_module) == {"cudatoucher", "cudainit"}, seen["calls"]
    assert by_module["cudatoucher"]["call"] == "torch.cuda.is_available"
    assert by_module["cudatoucher"]["at"].endswith("cudatoucher.py:3")
    assert by_module["cudainit"]["call"] == "torch.cuda._lazy_init"  # torch.cuda.init() goes through it
    assert by_module["cudainit"]["at"].endswith("cudainit.py:3")


class _Conn:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)

    def close(self):
        pass


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "auto"])
def test_a_worker_in_a_bad_fork_refuses_a_cuda_case_and_names_the_cause(monkeypatch, device):
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)  # as if the server had touched CUDA
    conn = _Conn()
    workers.worker_main(conn, workers.Job("noop", {}, RunConfig(max_time=0.1, processes=1, device=device), {}, None))
    ((kind, message),) = conn.sent
    assert kind == "error" and message.startswith("ForkedAfterCuda: ")
    assert (
        f"--device {device}: this worker process was forked from perfsuite's fork server after the server had "
        "initialised CUDA" in message
    )
    assert "which one cannot be known from inside the worker" in message
    assert "preload_cuda_calls" in message and "--processes 1" in message


def test_a_cpu_case_in_a_bad_fork_needs_no_cuda_and_is_measured(monkeypatch):
    from perfsuite.core.record import Record

    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    conn = _Conn()
    workers.worker_main(conn, workers.Job("noop", {}, RunConfig(max_time=0.1, processes=1, device="cpu"), {}, None))
    kind, payload, _ = conn.sent[0]
    assert kind == "ok" and Record.from_dict(payload).device == "cpu"


def test_a_gate_side_in_a_bad_fork_refuses_before_building_and_says_why(monkeypatch):
    """The gate's, bisect's and why's side processes fork from the same server: the same guard."""
    from perfsuite.compare import side_worker

    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    built = []
    monkeypatch.setattr(side_worker, "build_side", lambda *a, **kw: built.append(a))
    conn = _Conn()
    job = {"files": [], "workload": "noop", "params": {}, "device": "cuda", "builds": 1}
    assert side_worker.serve(conn, job) == 1
    ((reply,),) = [(m,) for m in conn.sent]
    assert reply["kind"] == "environment" and "forked from perfsuite's fork server" in reply["error"]
    assert built == []  # refused before the side built anything


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda._is_compiled(), reason="a CPU-only torch never marks a fork bad")
def test_a_fork_server_that_touched_cuda_gives_workers_that_say_so(cuda_toucher):
    """The real road: a fork server whose preload asks torch.cuda.is_available(), a CUDA case
    measured in two of its workers. (In a process of its own: a process has one fork server.)"""
    script = textwrap.dedent("""
        from perfsuite.core import registry
        from perfsuite.core.config import RunConfig
        from perfsuite.measuring import workers

        workers._preload = ("torch", "cudatoucher")
        try:
            workers.run_in_workers(registry.get("noop"), {}, RunConfig(max_time=0.4, processes=2, device="cuda"))
        except workers.WorkerFailed as exc:
            print("FAILED:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "FAILED: worker 1/2" in done.stdout, done.stdout + done.stderr
    assert "ForkedAfterCuda: --device cuda: this worker process was forked from perfsuite's fork server" in done.stdout
