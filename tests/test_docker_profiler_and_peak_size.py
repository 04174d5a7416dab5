"""Issue 40, items 6 and 7. The Nsight Systems commands (the Docker `profiler` service and the
line `profile-step` prints) profile a step measured in the process nsys starts, with a capture
that can begin; and `perfsuite peak` sizes its copy to the GPU's memory. No GPU and no nsys here:
the commands are read as perfsuite's own parser reads them, and torch.cuda's memory queries are
fakes of a 12 GiB and an 80 GiB device."""

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from perfsuite.cli import app as cli
from perfsuite.cli.app import _uses_processes
from perfsuite.cli.parser import build_parser
from perfsuite.core.config import IN_PROCESS_BUILDS, RunConfig
from perfsuite.core.errors import PerfsuiteError
from perfsuite.measuring import runner
from perfsuite.suite import peak

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30


def _split_nsys(argv: list[str]) -> tuple[list[str], list[str]]:
    """nsys's own options and the profiled program's argv (from its `python`/`.venv/bin/python`)."""
    assert argv[:2] == ["nsys", "profile"], argv
    i = next(i for i, a in enumerate(argv) if Path(a).name.startswith("python"))
    return argv[2:i], argv[i:]


def _measured_in_this_process(program: list[str]) -> bool:
    """Whether `python -m perfsuite ARGS` measures in the process nsys started (no worker forked
    from the fork server, which nsys does not follow): perfsuite's own rule for starting one."""
    assert program[1:3] == ["-m", "perfsuite"], program
    args = build_parser().parse_args(program[3:])
    return not _uses_processes(args)


def _follows_forks(nsys_options: list[str]) -> bool:
    """Whether nsys is told to trace children forked without an exec (perfsuite's workers)."""
    return "--trace-fork-before-exec=true" in nsys_options or any(
        a == "--trace-fork-before-exec" and b == "true" for a, b in zip(nsys_options, nsys_options[1:])
    )


def test_the_docker_profiler_traces_the_measured_steps():
    """`--max-time 20` alone measured in five forked workers nsys never saw: the report held the
    launcher's start-up and no kernel of the measured step."""
    command = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]["profiler"]["command"]
    options, program = _split_nsys(command)
    assert _measured_in_this_process(program) or _follows_forks(options), command
    args = build_parser().parse_args(program[3:])
    assert args.command == "run" and args.workload == ["resnet"]  # still the service the README describes


def test_the_auto_budget_alone_would_fork(monkeypatch):
    """The check above would see a forking command: the same run without --processes 1 does fork."""
    assert not _measured_in_this_process([".venv/bin/python", "-m", "perfsuite", "run", "resnet", "--max-time", "20"])
    assert RunConfig(max_time=20).workers > 1


def _printed_nsys(capsys, monkeypatch) -> list[str]:
    argv = [
        "profile-step",
        "autoencoder",
        "-p",
        "batch_size=4",
        "--warmup-iters",
        "1",
        "--profile-iter",
        "1",
        "--device",
        "cpu",
    ]
    monkeypatch.setattr(sys, "argv", ["perfsuite", *argv])  # the printed command repeats the command line
    assert cli.main(argv) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("nsys profile")]
    return shlex.split(line)


def _env_given(options: list[str]) -> dict:
    """Environment variables nsys sets for the program: --env-var=A=B[,C=D] or -e A=B."""
    pairs = []
    for i, o in enumerate(options):
        if o.startswith("--env-var="):
            pairs += o.split("=", 1)[1].split(",")
        elif o in ("--env-var", "-e") and i + 1 < len(options):
            pairs += options[i + 1].split(",")
    return dict(p.split("=", 1) for p in pairs)


def test_profile_step_prints_an_nsys_command_whose_capture_can_start(capsys, monkeypatch):
    """torch.cuda.nvtx sends plain (unregistered) strings, and nsys starts an NVTX capture range
    only on registered ones unless the program runs with NSYS_NVTX_PROFILER_REGISTER_ONLY=0: the
    printed command produced an empty report."""
    options, program = _split_nsys(_printed_nsys(capsys, monkeypatch))
    assert "--capture-range=nvtx" in options and "--nvtx-capture=train_step" in options
    assert _env_given(options).get("NSYS_NVTX_PROFILER_REGISTER_ONLY") == "0", options
    # What it profiles marks its step in the process nsys starts.
    assert _measured_in_this_process(program) or _follows_forks(options), program
    assert program[3] == "profile-step" and program[-2:] == ["--device", "cuda"]


# ---- the copy roof of `perfsuite peak` -----------------------------------------------------------

# What the tests ask of the copy's buffers, all builds together: half a device, whatever its size.
FIT_SHARE = 0.5
L2 = 50 * 2**20  # an H100's


class FakeDevice:
    """torch.cuda's memory queries for one device of `total` bytes, with a CUDA context's worth in use."""

    def __init__(self, monkeypatch, total: int, used: int = GiB // 2) -> None:
        self.total, self.free = total, total - used
        self.asked: list = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "empty_cache", lambda: self.asked.append("empty_cache"))
        monkeypatch.setattr(torch.cuda, "mem_get_info", self.mem_get_info)
        monkeypatch.setattr(
            torch.cuda,
            "get_device_properties",
            lambda i=None: SimpleNamespace(name="Fake GPU", total_memory=total, L2_cache_size=L2),
        )

    def mem_get_info(self, device=None):
        self.asked.append(("mem_get_info", device))
        return self.free, self.total


def _fake_runner(monkeypatch, built: list):
    """The runner's build rule (cfg.builds, or IN_PROCESS_BUILDS, capped by the workload's
    max_builds; all alive at once) with the copy's CUDA tensors made on the meta device: their
    bytes are counted, nothing is allocated. Matmul roofs are noted, not built."""
    real_ones = torch.ones

    def ones(*size, device=None, **kw):
        on_gpu = device is not None and torch.device(device).type == "cuda"
        return real_ones(*size, device="meta" if on_gpu else device, **kw)

    monkeypatch.setattr(torch, "ones", ones)

    def fake_run_case(workload, params, cfg, **kw):
        if workload.name != "copy":
            return SimpleNamespace(id="m", flops_per_s=1e12, median_s=1e-3, work=SimpleNamespace(bytes_per_step=0.0))
        wanted = cfg.builds if cfg.builds is not None else IN_PROCESS_BUILDS
        builds = [
            workload.build(workload.resolve(params), cfg.device)
            for _ in range(min(wanted, workload.max_builds or wanted))
        ]
        built.append([b.work.bytes_per_step for b in builds])  # each build holds what it reads and writes
        return SimpleNamespace(id="c", flops_per_s=None, median_s=1e-3, work=builds[0].work)

    monkeypatch.setattr(runner, "time_case", fake_run_case)


@pytest.mark.parametrize("total_gib", [12, 80])
def test_the_copy_roofs_buffers_fit_the_gpu(monkeypatch, total_gib):
    """Three builds of two 2 GiB buffers held 12 GiB: `perfsuite peak`, the first line of
    `make bench`, ran out of memory on a 12 GB GPU."""
    device = FakeDevice(monkeypatch, total_gib * GiB)
    built: list = []
    _fake_runner(monkeypatch, built)
    p = peak.measure_peak(RunConfig(device="cuda:0"), {"gpu_name": "Fake GPU"}, "cuda:0")
    (per_build,) = built
    assert sum(per_build) <= FIT_SHARE * device.total, f"{sum(per_build) / GiB:.1f} GiB alive on a {total_gib} GiB GPU"
    assert len(per_build) == p["copy_builds"]
    # The peak file says what was measured: each buffer's bytes, the builds alive at once.
    assert p["copy_bytes"] * 2 == per_build[0]
    assert p["copy_bytes"] >= max(peak.MIN_COPY_BYTES, 8 * L2)  # still far past the cache
    assert p["copy_bytes"] <= 2 * GiB  # never more than before: peaks stay comparable with older ones
    if total_gib == 80:
        assert p["copy_bytes"] == 2 * GiB  # a large GPU keeps the size its stored peaks were taken at
    assert "empty_cache" in device.asked  # the matmul roofs' cached blocks were given back first


def test_a_gpu_with_too_little_free_memory_is_named(monkeypatch):
    FakeDevice(monkeypatch, 4 * GiB, used=3 * GiB)  # someone else holds most of it
    with pytest.raises(PerfsuiteError, match=r"cuda:0 .* 1\.0 of 4\.0 GiB are free"):
        peak.copy_bytes("cuda:0", IN_PROCESS_BUILDS)


def test_the_copy_is_sized_on_the_runs_device(monkeypatch):
    device = FakeDevice(monkeypatch, 24 * GiB)
    peak.copy_bytes("cuda:1", 1)
    assert ("mem_get_info", 1) in device.asked


def test_cpu_copy_keeps_its_size():
    assert peak.copy_bytes("cpu", 3) == peak.COPY_BYTES["cpu"]
