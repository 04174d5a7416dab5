"""perfsuite.distributed on CPU with gloo and 2 ranks: DDP's gradients, the one record of a case,
collective bandwidth, failed and hung ranks, and a two-"node" run of a suite on this machine.

Every launch is real torchrun (about 10 s on 2 loaded cores: torch starts in each rank), so the
launches are few and their budgets short; the arithmetic is tested without any.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from records import make_record

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.core.record import Record
from perfsuite.distributed import comm, launch
from perfsuite.run.execute import Case, check_cases, run_cases
from perfsuite.workloads.allreduce import bus_factor

TESTS = Path(__file__).parent


@pytest.fixture
def ranks_find_tests(monkeypatch):
    """The ranks import this folder's modules (distjobs)."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(TESTS) + (os.pathsep + path if path else ""))


# ---- without launching ---------------------------------------------------------------------------


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == 0.75 and bus_factor("reduce_scatter", 2) == 0.5
    assert bus_factor("all_reduce", 1) == 0.0


def test_comm_shares_split_a_step_into_comm_compute_and_their_overlap():
    # step 0-10; compute 0-6 and 7-9; comm 5-8 (two overlapping collectives) and 9.5-11 (clipped at 10)
    s = comm.shares((0.0, 10.0), [(5, 7), (6, 8), (9.5, 11)], [(0, 6), (7, 9), (1, 2)])
    assert s["comm_s"] == pytest.approx(3.5) and s["compute_s"] == pytest.approx(8.0)
    assert s["overlap_s"] == pytest.approx(2.0)  # 5-6 and 7-8
    assert s["exposed_comm_s"] == pytest.approx(1.5) and s["comm_share"] == pytest.approx(0.35)
    assert s["overlapped_fraction"] == pytest.approx(2.0 / 3.5)
    assert comm.shares((0, 1), [], [(0, 1)])["overlapped_fraction"] is None


def test_worlds_are_checked_before_anything_starts():
    ddp = registry.get("ddp")
    with pytest.raises(ConfigError, match="do not divide"):
        ddp.validate_case({"world_size": 3, "nnodes": 2}, "cpu")
    with pytest.raises(Unsupported, match="nccl needs CUDA"):
        ddp.validate_case({"backend": "nccl"}, "cpu")
    with pytest.raises(Unsupported, match=r"nnodes=2 needs a launch on every node .*--rdzv-backend c10d"):
        ddp.validate_case({"world_size": 2, "nnodes": 2}, "cpu")
    with pytest.raises(ConfigError, match="not a variant of resnet"):
        ddp.validate_case({"model": "resnet", "variant": "fc"}, "cpu")
    with pytest.raises(Unsupported, match="perfsuite's launcher"):
        ddp.build({}, "cpu")  # in this process: no rank to build on
    with pytest.raises(ConfigError, match="its ranks are its processes"):
        launch.run_distributed(ddp, {}, RunConfig(processes=2))


def test_failure_reasons_name_the_rank_and_where_it_was():
    now = time.time()
    st = [
        {
            "rank": 0,
            "pid": 10,
            "stage": "failed",
            "failed_in": "measure",
            "error": "RuntimeError: Connection closed",
            "since": now,
        },
        {
            "rank": 1,
            "pid": 11,
            "stage": "failed",
            "failed_in": "build",
            "error": "RuntimeError: boom",
            "where": "x.py:3 in f",
            "since": now - 1,
        },
    ]
    assert launch.failure_reason(st, 2, exit_code=1) == (
        "rank 1 failed in build: RuntimeError: boom (at x.py:3 in f); then rank(s) 0 failed too"
    )
    # The echo written first (its peer's sockets closed before the peer's status was on disk): the cause
    # is still the rank whose error is not a lost connection.
    echo_first = [
        dict(
            st[0],
            since=now - 2,
            error="RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [::1]:5",
        ),
        st[1],
    ]
    assert launch.failure_reason(echo_first, 2).startswith("rank 1 failed in build: RuntimeError: boom")
    hung = [
        {"rank": 0, "pid": 10, "stage": "done", "since": now},
        {"rank": 1, "pid": 11, "stage": "build", "since": now - 30},
    ]
    text = launch.failure_reason(hung, 3, timed_out=60)
    assert text.startswith("timed out after 60s: rank 1 in build for 30s, rank 2 never started")


def test_sibling_ranks_are_not_counted_as_other_load():
    from perfsuite.distributed.rank import _outside_load

    # 4 CPUs, 3 busy: each rank used one and saw two others; one of those was not a rank.
    ranks = [
        {"node": 0, "others_cpus": 2.0, "busy_fraction": 0.75},
        {"node": 0, "others_cpus": 2.0, "busy_fraction": 0.75},
        {"node": 1, "others_cpus": 0.0, "busy_fraction": 0.25},
    ]
    assert _outside_load(ranks, 0, cpus=4) == {"others_cpus": pytest.approx(1.0), "ranks_cpus": pytest.approx(2.0)}
    assert _outside_load([{"node": 0, "others_cpus": None, "busy_fraction": None}], 0) == {}


def _ddp_record(world_size: int, median_s: float, **extra) -> Record:
    return make_record(
        median_s=median_s,
        workload="ddp",
        params={"model": "resnet", "world_size": world_size, "nnodes": 1},
        extra={
            "world_size": world_size,
            "nnodes": 1,
            "backend": "gloo",
            "rank_spread": 0.02,
            "per_rank_batch": 8,
            **extra,
        },
    )


def test_scaling_pairs_a_case_with_the_one_rank_case_of_its_run_and_the_report_shows_it():
    from perfsuite.distributed.report_sections import section

    one = _ddp_record(1, 0.10)
    two = _ddp_record(2, 0.125, comm={"comm_share": 0.3, "exposed_comm_share": 0.05, "overlapped_fraction": 0.8})
    scale = launch.scaling(two, [one, make_record()])
    assert scale["baseline_id"] == one.id and scale["efficiency"] == pytest.approx(0.10 / 0.125 / 2, rel=0.05)
    assert launch.scaling(two, [make_record()]) is None and launch.scaling(one, [one]) is None
    lines = re.sub(r" {2,}", " ", "\n".join(section([one, two])))  # pandas pads the table's cells
    assert "### Scaling over ranks" in lines and "| 2 | 1 | gloo |" in lines
    assert "30% | 5% | 80% |" in lines and "(from the report's records)" in lines


# ---- launched: 2 gloo ranks ---------------------------------------------------------------------


@pytest.mark.slow
def test_ddp_gradients_equal_one_process_on_the_concatenated_batch():
    found = launch.gradient_check(("autoencoder", "resnet"), 2, batch_size=4)
    assert [f["model"] for f in found] == ["autoencoder", "resnet"]
    for f in found:
        assert f["world_size"] == 2 and f["tensors"] > 4
        assert f["max_rel_diff"] < 1e-4, f  # float32 sums in another order, nothing more
        assert f["unreduced_max_rel_diff"] > 1e-2, f  # and the check can tell a missing reduction


@pytest.mark.slow
def test_a_ddp_sweep_gives_one_record_per_case_with_ranks_scaling_and_comm_share(tmp_path):
    from perfsuite.report.markdown import write_report
    from perfsuite.storage.files import ResultsWriter, load_records

    ddp = registry.get("ddp")
    cases = [Case(ddp, {"model": "autoencoder", "batch_size": 8, "world_size": w}) for w in (1, 2)]
    writer = ResultsWriter(tmp_path / "ddp.json")
    out = run_cases(check_cases(cases, "cpu"), RunConfig(max_time=0.4), outputs=(writer,))
    assert out.failures == [] and len(out.records) == 2
    one, two = load_records(tmp_path / "ddp.json")  # as stored, read back
    e = two.extra
    assert e["world_size"] == 2 and e["nnodes"] == 1 and e["backend"] == "gloo" and e["launch"] == "torchrun"
    assert len(e["rank_medians_s"]) == 2 and len({r["pid"] for r in e["ranks"]}) == 2
    assert [r["rank"] for r in e["ranks"]] == [0, 1] and all(r["host"] == socket.gethostname() for r in e["ranks"])
    assert two.median_s == pytest.approx(max(e["rank_medians_s"]))  # the slowest rank's median is the step
    assert e["ranks"][e["slowest_rank"]]["samples_s"] == list(two.samples_s)
    assert e["global_batch"] == 16 and two.work.items_per_step == 16
    assert e["global_throughput"] == pytest.approx(16 / two.median_s) == pytest.approx(two.throughput)
    assert e["scaling"]["baseline_id"] == one.id
    assert e["scaling_efficiency"] == pytest.approx(two.throughput / (2 * one.throughput))
    assert "scaling" not in one.extra and one.extra["global_batch"] == 8
    c = e["comm"]
    assert c["comm_ops"].get("gloo:all_reduce", 0) >= 1 and 0 < c["comm_share"] <= 1
    assert 0 <= c["exposed_comm_s"] <= c["comm_s"] <= c["step_s"] and len(c["rank_comm_shares"]) == 2
    assert e["buckets"] >= 1 and two.conditions["world_size"] == 2 and two.conditions["torch_threads"] == 1
    page = write_report([one, two], tmp_path / "rep").read_text()
    assert "### Scaling over ranks" in page and f"{e['scaling_efficiency']:.0%}" in page


@pytest.mark.slow
def test_allreduce_reports_algbw_and_busbw_with_nccl_tests_definitions():
    w = registry.get("allreduce")
    out = run_cases(
        check_cases([Case(w, {"op": "reduce_scatter", "bytes": 4098, "world_size": 2})], "cpu"), RunConfig(max_time=0.3)
    )
    assert out.failures == []
    (rec,) = out.records
    e = rec.extra
    assert e["bytes"] == 4096 and e["requested_bytes"] == 4098  # whole fp32 elements, split over 2 ranks
    assert e["algbw_Bps"] == pytest.approx(4096 / rec.median_s) == pytest.approx(rec.throughput)
    assert e["busbw_Bps"] == pytest.approx(e["algbw_Bps"] * 0.5) and rec.throughput_unit == "B/s"
    assert "comm" not in e and e["world_size"] == 2


@pytest.mark.slow
def test_a_rank_that_raises_or_hangs_is_the_cases_recorded_failure(tmp_path, ranks_find_tests, monkeypatch):
    from distjobs import FLAKY, HANG_TIMEOUT_S, HANGING

    monkeypatch.setenv("DISTJOBS_PIDS", str(tmp_path))
    t0 = time.monotonic()
    out = run_cases(check_cases([Case(FLAKY, {}), Case(HANGING, {})], "cpu"), RunConfig(max_time=0.3))
    assert out.records == [] and [f["workload"] for f in out.failures] == ["flaky", "hanging"]
    raised, hung = (f["error"] for f in out.failures)
    assert raised.startswith("DistributedFailure: rank 1 failed in build: RuntimeError: boom on rank 1 (at ")
    assert hung.startswith(f"DistributedFailure: timed out after {HANG_TIMEOUT_S:.0f}s: rank 0 in measure for ")
    assert "rank 1 in build for" in hung
    assert time.monotonic() - t0 < 2 * HANG_TIMEOUT_S + 40  # the run went on; nothing waited forever
    for pidfile in tmp_path.glob("rank-*.pid"):  # and the hung ranks are gone
        pid = int(pidfile.read_text())
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z", pid


@pytest.mark.slow
def test_two_nodes_on_one_machine_run_the_same_suite_file(tmp_path):
    """Two torchrun invocations, one rank each, meeting at a c10d rendezvous: what `srun torchrun`
    does on a cluster. The rank that becomes 0 runs the suite and writes every result."""
    suite = tmp_path / "two.yaml"
    suite.write_text(
        "name: two\ndevice: cpu\nmax_time: 0.4\nsuites:\n"
        "  - {name: ddp, workload: ddp, params: {model: autoencoder, batch_size: 8, world_size: 2, "
        "nnodes: 2}}\n"
    )
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    env = launch.clean_env()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"localhost:{port}",
        "--max-restarts",
        "0",
        "-m",
        "perfsuite",
        "run",
        "--config",
        str(suite),
        "--out",
        str(out),
    ]
    nodes = [
        subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, start_new_session=True
        )
        for _ in range(2)
    ]
    try:
        logs = [p.communicate(timeout=150)[0] for p in nodes]
    finally:
        for p in nodes:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    assert [p.returncode for p in nodes] == [0, 0], logs
    doc = json.loads((out / "ddp.json").read_text())
    assert doc["failures"] == []
    (rec,) = [Record.from_dict(r) for r in doc["records"]]
    e = rec.extra
    assert e["nnodes"] == 2 and e["world_size"] == 2 and e["launch"] == "attached"
    assert sorted(r["node"] for r in e["ranks"]) == [0, 1] and rec.params["nnodes"] == 2
    assert sum("measured 1" in log for log in logs) == 1  # one process ran the suite; the other followed
