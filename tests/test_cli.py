"""The CLI end to end, in-process: bad input gives a message and exit 2, never a traceback."""

import json

import pytest

from perfsuite.cli import app as cli
from perfsuite.core import registry
from perfsuite.measuring import runner
from perfsuite.storage.files import load_records

FAST = ["--max-time", "0.6"]


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_list_shows_parameters_defaults_and_allowed(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for text in ("matmul", "noop", "dtype", "fp32, bf16, fp16", "1024"):
        assert text in out


def test_env_prints_the_fingerprint(capsys):
    code, out, _ = run(capsys, "env")
    env = json.loads(out)
    assert code == 0 and env["torch"] and env["cpu_model"] and "git_commit" in env


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "resnet99"], "unknown workload 'resnet99'; known workloads: " + ", ".join(registry.names())),
        (["run", "matmul", "-p", "n=big"], "parameter 'n' expects int"),
        (["run", "matmul", "-p", "dtype=fp64"], "'fp64' is not allowed (one of fp32, bf16, fp16)"),
        (["run", "matmul", "-p", "size=3"], "has no parameter 'size'"),
        (["run", "matmul", "--device", "tpu"], "--device must be auto, cpu, cuda or cuda:N"),
    ],
)
def test_bad_run_input_is_a_clear_error(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, *argv, "--results-dir", str(tmp_path))
    assert code == 2
    assert message in err
    assert not list(tmp_path.iterdir())  # nothing measured, nothing written


def test_cuda_without_gpu_is_refused_not_run_on_cpu(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-GPU error cannot be provoked")
    code, _, err = run(capsys, "run", "matmul", "--device", "cuda", "--results-dir", str(tmp_path))
    assert code == 2 and "no CUDA device is available" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("budget", ["0", "-1", "abc"])
def test_non_positive_budget_is_rejected(capsys, budget):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "matmul", "--max-time", budget])
    assert info.value.code == 2
    assert "--max-time" in capsys.readouterr().err


@pytest.mark.slow
def test_run_writes_records_and_compare_with_itself_is_refused(capsys, tmp_path):
    out = tmp_path / "a.json"
    code, stdout, _ = run(capsys, "run", "matmul", "-p", "n=32,64", *FAST, "--device", "cpu", "--out", str(out))
    assert code == 0
    recs = load_records(out)
    assert [r.params["n"] for r in recs] == [32, 64]
    assert all(r.device == "cpu" and r.timing_method == "perf_counter_ns" for r in recs)
    assert all(r.work.flops_per_step == 2 * r.params["n"] ** 3 for r in recs)
    assert "matmul[n=32,dtype=fp32]" in stdout
    # The same records on both sides (the helper's `compare store:HEAD store:HEAD` read undecided,
    # "a difference beyond 5%", from one record's spread): refused, naming the record.
    code, stdout, err = run(capsys, "compare", str(out), str(out))
    assert code == 2 and "base and new are the same record" in err and recs[0].id in err


def test_run_measures_several_workloads_into_one_file_and_refuses_a_parameter_one_lacks(capsys, tmp_path):
    """Issue 50: `run` took one workload per command."""
    out = tmp_path / "two.json"
    code, stdout, _ = run(capsys, "run", "noop", "matmul", "-p", "n=32", *FAST, "--device", "cpu", "--out", str(out))
    assert code == 2 and "noop" in stdout + _ and "'n'" in stdout + _  # noop has no n: said, not ignored
    assert not out.exists()
    code, stdout, _ = run(capsys, "run", "noop", "matmul", *FAST, "--device", "cpu", "--out", str(out))
    assert code == 0, stdout + _
    assert [r.workload for r in load_records(out)] == ["noop", "matmul"]
    assert "2 case(s) of noop, matmul on cpu" in " ".join(stdout.split())


def test_compare_exit_status_gates_on_a_slowdown(capsys, tmp_path):
    from records import make_record

    from perfsuite.storage.files import ResultsWriter

    base, new = tmp_path / "base.json", tmp_path / "new.json"
    ResultsWriter(base).add(make_record(seed=1))
    ResultsWriter(new).add(make_record(seed=2, median_s=1.1e-3))
    code, stdout, _ = run(capsys, "compare", str(base), str(new))
    assert code == 1 and "slower" in stdout
    code, stdout, _ = run(capsys, "compare", str(base), str(new), "--threshold", "0.2")
    assert code == 0
    code, stdout, _ = run(capsys, "compare", str(base), str(new), "--json")
    assert json.loads(stdout)["regressed"] is True


@pytest.mark.parametrize(
    "content, message",
    [("{oops", "not valid JSON"), ('{"results": []}', "not a perfsuite, pytest-benchmark or asv results file")],
)
def test_compare_rejects_corrupt_or_foreign_files(capsys, tmp_path, content, message):
    from records import make_record

    from perfsuite.storage.files import ResultsWriter

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    ResultsWriter(good).add(make_record())
    bad.write_text(content)
    code, _, err = run(capsys, "compare", str(good), str(bad))
    assert code == 2 and str(bad) in err and message in err


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_keeps_finished_cases(capsys, tmp_path, monkeypatch):
    real = runner.time_case
    calls = []

    def interrupt_on_third(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "time_case", interrupt_on_third)
    out = tmp_path / "sweep.json"
    code, stdout, _ = run(capsys, "run", "matmul", "-p", "n=16,24,32,48", *FAST, "--device", "cpu", "--out", str(out))
    assert code == 130
    assert "2 of 4 case(s) saved" in stdout
    assert [r.params["n"] for r in load_records(out)] == [16, 24]


@pytest.mark.slow
def test_peak_then_records_report_peak_fraction(capsys, tmp_path, monkeypatch):
    from perfsuite.suite import peak

    monkeypatch.setitem(peak.MATMUL_N, "cpu", 128)
    monkeypatch.setitem(peak.COPY_BYTES, "cpu", 4 * 2**20)
    peak_file = tmp_path / "peak.json"
    code, stdout, _ = run(capsys, "--peak-file", str(peak_file), "peak", "--max-time", "0.5")
    assert code == 0 and "matmul fp32" in stdout
    stored = json.loads(peak_file.read_text())
    assert stored["format"] == "perfsuite.peaks"
    (entry,) = stored["results"].values()
    assert entry["flops_per_s"]["fp32"] > 0 and entry["bytes_per_s"] > 0
    out = tmp_path / "r.json"
    code, _, _ = run(capsys, "--peak-file", str(peak_file), "run", "matmul", "-p", "n=64", *FAST, "--out", str(out))
    (rec,) = load_records(out)
    assert rec.peak["flops_per_s"] == entry["flops_per_s"]["fp32"]
    assert rec.peak_fraction == pytest.approx(rec.flops_per_s / entry["flops_per_s"]["fp32"])


def test_report_writes_markdown_and_figures(capsys, tmp_path):
    from records import make_record

    from perfsuite.storage.files import ResultsWriter

    res = tmp_path / "r.json"
    w = ResultsWriter(res)
    w.add(make_record(params={"n": 1}, seed=1))
    w.add(make_record(params={"n": 2}, seed=2, warnings=("noisy: IQR is 12% of the median",)))
    code, _, _ = run(capsys, "report", str(res), "--out-dir", str(tmp_path / "rep"))
    assert code == 0
    page = (tmp_path / "rep" / "summary.md").read_text()
    assert "![matmul throughput](matmul.png)" in page
    assert page.count("| n=") == 2 and "noisy: IQR is 12%" in page
    assert (tmp_path / "rep" / "matmul.png").stat().st_size > 1000


@pytest.mark.slow
def test_a_failing_case_is_recorded_and_the_sweep_goes_on(capsys, tmp_path, monkeypatch):
    import torch

    real = runner.time_case

    def oom_at_n24(workload, params, *args, **kwargs):
        if params["n"] == 24:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(workload, params, *args, **kwargs)

    monkeypatch.setattr(runner, "time_case", oom_at_n24)
    out = tmp_path / "sweep.json"
    code, stdout, _ = run(capsys, "run", "matmul", "-p", "n=16,24,32", *FAST, "--device", "cpu", "--out", str(out))
    assert code == 3 and "1 case(s) failed" in stdout
    assert [r.params["n"] for r in load_records(out)] == [16, 32]
    (failure,) = json.loads(out.read_text())["failures"]
    assert failure["kind"] == "oom" and failure["params"]["n"] == 24 and "out of memory" in failure["error"]


def test_fp16_training_on_cpu_is_refused_before_anything_runs(capsys, tmp_path):
    # --device cpu: on a GPU machine `auto` is CUDA, where fp16 is allowed
    code, _, err = run(
        capsys, "run", "resnet", "-p", "precision=fp32,fp16", "--device", "cpu", "--results-dir", str(tmp_path)
    )
    assert code == 2 and "fp16 training needs CUDA" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_amp_command_reports_a_verdict(capsys, tmp_path):
    out = tmp_path / "amp.json"
    code, stdout, _ = run(
        capsys,
        "amp",
        "autoencoder",
        "-p",
        "batch_size=16",
        "--pairs",
        "4",
        "--steps",
        "6",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    (data,) = json.loads(out.read_text())["results"]
    assert code == (0 if data["accuracy_ok"] else 3)  # 3: a failed check; 1 is only ever "slower"
    assert "speed-up" in stdout or "diverges" in stdout
    assert data["precision_a"] == "fp32" and data["precision_b"] == "bf16" and len(data["pair_ratios"]) == 4
    code, _, err = run(capsys, "amp", "autoencoder", "--precisions", "fp32", "--device", "cpu")
    assert code == 2 and "--precisions expects two" in err


def test_an_internal_error_exits_4_with_the_traceback_in_a_log_not_on_the_console(capsys, tmp_path, monkeypatch):
    from perfsuite.cli import app as cli

    def broken(args, console, recorder):
        raise ZeroDivisionError("a bug")

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "env", broken)
    code, out, err = run(capsys, "env")
    assert code == cli.EXIT_INTERNAL == 4
    assert "Traceback" not in out + err and "ZeroDivisionError: a bug" in err
    (log,) = (tmp_path / ".cache" / "perfsuite" / "logs").glob("perfsuite-crash-*.log")
    assert str(log) in err.replace("\n", "") and "Traceback" in log.read_text()


@pytest.mark.parametrize(
    "flag", [["--max-time", "1"], ["--min-time", "1"], ["--target-ci", "0.05"], ["--no-nvtx"], ["matmul"]]
)
def test_options_a_suite_would_ignore_are_refused(capsys, tmp_path, flag):
    code, _, err = run(capsys, "run", "--suite", "ci", "--out", str(tmp_path / "o"), *flag)
    assert code == 2 and "cannot be combined with --suite/--config" in err
    assert not (tmp_path / "o").exists()


def test_suite_overrides_are_parsed_by_each_entrys_own_workload(tmp_path):
    from perfsuite.core.errors import ConfigError
    from perfsuite.suite.file import load_suite

    path = tmp_path / "mm.yaml"
    path.write_text("name: mm\nsuites:\n  - name: mm\n    workload: matmul\n    params: {n: [64]}\n")
    # Other workloads have `dtype` without fp16 or `n` with another minimum: their rules do not apply.
    suite = load_suite(path, {"dtype": "fp16", "n": "1,2"})
    assert suite.entries[0].sweep == {"n": [1, 2], "dtype": ["fp16"]}
    with pytest.raises(ConfigError, match="-p batch_size: no entry"):
        load_suite(path, {"batch_size": "8"})
    with pytest.raises(ConfigError, match="-p n=x"):
        load_suite(path, {"n": "x"})


@pytest.mark.parametrize(
    "argv",
    [
        ["peak", "--max-time", "0.3", "--device", "cpu"],
        ["pair", "matmul", "--vary", "n=8,16", "--budget", "0.3", "--device", "cpu", "--out", "{blocker}/p.json"],
        ["trace", "matmul", "--device", "cpu", "--out-dir", "{blocker}/traces"],
        ["report", "{results}", "--out-dir", "{blocker}/report"],
    ],
)
def test_outputs_under_a_regular_file_are_refused_before_measuring(capsys, tmp_path, monkeypatch, argv):
    """An output path under a regular file used to fail after measuring, losing the measurement."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    results = tmp_path / "r.json"
    assert run(capsys, "run", "noop", "--max-time", "0.2", "--device", "cpu", "--out", str(results))[0] == 0
    measured = []
    monkeypatch.setattr(runner, "time_blocks", lambda *a, **k: measured.append(1) or pytest.fail("measured"))
    argv = [a.format(blocker=blocker, results=results) for a in argv]
    if argv[0] == "peak":
        argv = ["--peak-file", str(blocker / "peak.json")] + argv
    code, _, err = run(capsys, *argv)
    assert code == 2 and "blocker" in err and not measured


def test_run_pins_cpus_and_threads_and_records_them(capsys, tmp_path):
    import os

    import torch

    one = min(os.sched_getaffinity(0))
    out = tmp_path / "r.json"
    code, _, _ = run(
        capsys,
        "run",
        "noop",
        "--max-time",
        "0.2",
        "--device",
        "cpu",
        "--cpus",
        str(one),
        "--threads",
        "1",
        "--out",
        str(out),
    )
    assert code == 0
    (rec,) = load_records(out)
    c = rec.conditions
    assert (c["cpus"], c["pinned"], c["torch_threads"], c["threads_set"]) == ([one], True, 1, True)
    assert rec.config["cpus"] == [one] and rec.config["threads"] == 1
    assert os.sched_getaffinity(0) != {one} or len(os.sched_getaffinity(0)) == 1  # put back afterwards
    assert torch.get_num_threads() >= 1


@pytest.mark.parametrize(
    "flag, message",
    [(["--cpus", "1-0"], "runs backwards"), (["--threads", "0"], ">= 1"), (["--processes", "two"], ">= 1")],
)
def test_bad_pinning_and_worker_options_are_refused(capsys, flag, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "noop", *flag])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_fork_server_imports_torchvision_only_for_workloads_that_use_it(tmp_path, monkeypatch):
    """torchvision costs as much as torch to import; a user's workload that does not use it should
    not wait for it before its first sample (issue 36)."""
    from perfsuite.cli.app import _needs_vision
    from perfsuite.cli.parser import build_parser

    (tmp_path / "pyproject.toml").write_text('[tool.perfsuite]\nworkloads = ["bench"]\n')
    (tmp_path / "bench").mkdir()
    step = tmp_path / "bench" / "mine.py"
    step.write_text(
        "import perfsuite\n\n@perfsuite.workload(params={'n': 1})\ndef mine(n: int, device: str):\n"
        "    return perfsuite.Step(lambda: None, items=n)\n"
    )
    monkeypatch.chdir(tmp_path)
    parse = build_parser().parse_args
    assert _needs_vision(parse(["run", "mine"])) is False
    assert _needs_vision(parse(["gate", "mine"])) is False
    assert _needs_vision(parse(["run", "resnet"])) is True  # perfsuite's own: full preload
    assert _needs_vision(parse(["run", "--suite", "ci"])) is True
    step.write_text("import torchvision\n" + step.read_text())
    assert _needs_vision(parse(["run", "mine"])) is True
