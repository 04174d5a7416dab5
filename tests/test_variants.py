"""Variants (issue 53): the registry and its refusals, agreement with eager, a variant applied to a
built step, `perfsuite variants` on the user's example project (measured, refused, failed and
below-the-floor variants in one study, its document read back), and `gate --variant` reaching the
sides."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from perfsuite.core.errors import ConfigError, Unsupported
from perfsuite.core.record import Work
from perfsuite.core.workload import BuiltStep
from perfsuite.user.declare import Step
from perfsuite.variants import catalog, fidelity
from perfsuite.variants.apply import apply, model_bytes

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "my-project"
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]


def _built(model=None, inputs=None, evaluate=None) -> list[BuiltStep]:
    model = model or torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    inputs = inputs if inputs is not None else (torch.randn(4, 32),)
    return [
        BuiltStep(
            fn=lambda: model(*inputs),
            work=Work(items_per_step=4, item_unit="samples"),
            model=model,
            inputs=inputs,
            evaluate=evaluate,
        )
    ]


# --- the registry --------------------------------------------------------------------------------


def test_an_unknown_variant_is_refused_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown variant 'int4'.*eager, bf16.*onnxruntime"):
        catalog.named("int4")
    with pytest.raises(ConfigError, match="not a variant's name"):
        catalog.named("a b")


def test_compile_takes_its_mode_and_a_variant_without_options_refuses_one():
    v = catalog.named("compile:max-autotune")
    assert v.name == "compile:max-autotune" and v.option == "max-autotune"
    assert catalog.named("compile").option == ""
    with pytest.raises(ConfigError, match="takes no option"):
        catalog.named("int8-dynamic:fast")
    # A typo in an option is bad input, refused before a side builds (not torch's "Unrecognized
    # mode" or OpenVINO's precision error as a failed row, exit 3, after the build)
    for typo in ("compile:bogus-mode", "compile:", "openvino:foo"):
        with pytest.raises(ConfigError, match="takes one of"):
            catalog.named(typo)
    assert catalog.named("openvino:bf16").option == "bf16"


def test_gate_settings_refuse_a_variant_the_device_cannot_run_before_anything_starts():
    from perfsuite.compare.settings import GateSettings

    with pytest.raises(ConfigError, match="--variant: variant 'fp16' runs on cuda only, not cpu"):
        GateSettings(variant="fp16").on("cpu")
    assert GateSettings(variant="int8-dynamic").on("cpu").variant == "int8-dynamic"


def test_a_gate_that_compared_no_case_fails_instead_of_passing(monkeypatch, capsys):
    """Every case skipped (a model-level variant on a step without a model): exit 0 passed a CI job
    on a gate that measured nothing."""
    from types import SimpleNamespace

    from perfsuite.cli import gate as cli_gate
    from perfsuite.cli.app import main

    nothing = SimpleNamespace(records=[], failures=[], interrupted=None, unsupported=[("matmul", "why")])
    monkeypatch.setattr(cli_gate.jobs, "gate", lambda *a, **k: SimpleNamespace(outcome=nothing, how="how"))
    assert main(["gate", "matmul", "--base", "HEAD", "--device", "cpu"]) == 2
    assert "no case was compared" in capsys.readouterr().err


def test_a_device_the_variant_does_not_run_on_and_a_missing_library_are_refused_with_the_extra(monkeypatch):
    assert "cuda only" in catalog.refusal(catalog.named("fp16"), "cpu")
    assert "cuda only" in catalog.refusal(catalog.named("tensorrt"), "cpu")
    assert catalog.refusal(catalog.named("int8-dynamic"), "cuda:0") is not None
    assert catalog.refusal(catalog.named("eager"), "cpu") is None
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    why = catalog.refusal(catalog.named("onnxruntime"), "cpu")
    assert "needs onnxruntime" in why and catalog.EXTRA in why


def test_a_users_variant_is_declared_once_and_never_shadows_a_builtin():
    @catalog.variant("test-double", description="twice the output")
    def double(model):
        return lambda *a: 2 * model(*a)

    try:
        v = catalog.named("test-double")
        assert v.level == "model" and v.source.endswith(f"{double.__code__.co_firstlineno}")
        assert "test-double" in catalog.names()
        with pytest.raises(ConfigError, match="declared twice"):
            catalog.variant("test-double")(lambda m: m)
        with pytest.raises(ConfigError, match="built-in"):
            catalog.variant("onnxruntime")(lambda m: m)
        with pytest.raises(ConfigError, match="built-in"):
            catalog.variant("compile:mine")(lambda m: m)
        with pytest.raises(ConfigError, match="level"):
            catalog.variant("test-other", level="graph")
    finally:
        catalog._DECLARED.pop("test-double", None)


# --- agreement -----------------------------------------------------------------------------------


def test_agreement_measures_error_and_top1_and_refuses_wrong_outputs():
    base = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0]], dtype=np.float32)
    near = base + np.array([[0.0, 0.0, 2.5], [0.0, 0.1, 0.0]], dtype=np.float32)  # row 0's arg-max moves
    d = fidelity.digest
    got = fidelity.compare(d(base), d(near))
    assert got["top1"] == 0.5 and got["max_abs"] == pytest.approx(2.5) and got["max_rel"] == pytest.approx(2.5 / 3)
    with pytest.raises(fidelity.WrongOutput, match="shape"):
        fidelity.compare(d(base), d(base[:, :2]))
    bad = base.copy()
    bad[1, 1] = np.nan
    with pytest.raises(fidelity.WrongOutput, match="1 of 6 output values are not finite"):
        fidelity.compare(d(base), d(bad))


def test_a_large_output_crosses_as_a_stride_of_its_values_and_every_rows_arg_max(monkeypatch):
    monkeypatch.setattr(fidelity, "MAX_VALUES", 100)
    logits = np.random.default_rng(0).standard_normal((4, 50, 30)).astype(np.float32)  # 6000 values
    sent = fidelity.digest(logits)
    assert sent["values"].size <= 100 and sent["stride"] == 60 and sent["top1"].shape == (4, 50)
    other = logits.copy()
    other[3, 49, 0] += 100.0  # off the stride: not in the values, but it moves that row's arg-max
    got = fidelity.compare(sent, fidelity.digest(other))
    assert got["max_abs"] == 0.0 and got["top1"] == pytest.approx(199 / 200)


def test_primary_reads_logits_tuples_and_dicts():
    class Out:
        logits = torch.ones(2, 3)

    for out in (Out(), (torch.ones(2, 3), torch.zeros(1)), {"a": torch.ones(2, 3)}, torch.ones(2, 3)):
        assert fidelity.primary(out).shape == (2, 3)
    with pytest.raises(fidelity.WrongOutput, match="no tensor"):
        fidelity.primary("text")


def test_held_compares_each_fraction_with_the_floor():
    kept, below = fidelity.held({"top1": 0.995, "eval_top1": 0.98}, {"accuracy": 0.7}, {"accuracy": 0.8}, 0.99)
    assert kept == {"top1_agreement": 0.98, "accuracy": pytest.approx(0.875)}  # the evaluation's agreement wins
    assert len(below) == 2 and below[0].startswith("top1_agreement 0.980")
    assert fidelity.held({"top1": 1.0}, {}, {}, 0.99) == ({"top1_agreement": 1.0}, [])


# --- a variant applied to a built step -----------------------------------------------------------


def test_int8_dynamic_rebuilds_the_step_from_the_model_smaller_and_close_to_eager():
    built = _built()
    eager, int8 = apply(built, "eager", "cpu"), apply(built, "int8-dynamic", "cpu")
    assert int8.facts["build_s"] > 0 and int8.facts["cold_s"] > 0 and int8.facts["items"] == 4
    assert int8.facts["size_bytes"] < 0.6 * eager.facts["size_bytes"]  # int8 weights: a byte each, not four
    a, b = fidelity.primary(eager.output()), fidelity.primary(int8.output())
    assert a.shape == b.shape == (4, 8)
    assert 0 < fidelity.compare(fidelity.digest(a), fidelity.digest(b))["max_rel"] < 0.1  # quantized: close
    int8.steps[0].fn()  # the rebuilt step runs


def test_a_model_level_variant_needs_the_steps_model_and_a_step_level_one_gets_the_step():
    bare = [BuiltStep(fn=lambda: None, work=Work(items_per_step=1, item_unit="x"))]
    with pytest.raises(Unsupported, match="model=model, inputs=inputs"):
        apply(bare, "int8-dynamic", "cpu")
    calls = []

    @catalog.variant("test-counted", level="step")
    def counted(step):
        def wrapped():
            calls.append(1)
            return step()

        return wrapped

    try:
        applied = apply(bare, "test-counted", "cpu")
        applied.steps[0].fn()
        assert len(calls) == 2  # the cold call, then this one
        assert applied.facts["size_bytes"] is None
    finally:
        catalog._DECLARED.pop("test-counted", None)


def test_a_step_refuses_a_model_without_inputs_and_an_evaluation_without_a_model():
    with pytest.raises(ConfigError, match="model and inputs go together"):
        Step(lambda: None, items=1, model=torch.nn.Linear(2, 2))
    with pytest.raises(ConfigError, match="evaluate scores a model"):
        Step(lambda: None, items=1, evaluate=lambda f: {})
    with pytest.raises(ConfigError, match="model must be callable"):
        Step(lambda: None, items=1, model=3, inputs=())


def test_model_bytes_of_a_module_and_of_a_runtime():
    assert model_bytes(torch.nn.Linear(100, 100)) > 100 * 100 * 4
    from perfsuite.variants.builtin import Runtime

    assert model_bytes(Runtime(lambda a, k: None, 1234)) == 1234
    assert model_bytes(lambda x: x) is None


# --- the command, on the user's example project --------------------------------------------------

BROKEN = '''

@perfsuite.variant("test-nan")
def nan_out(model):
    """Answers NaN: a variant whose output cannot be the model's."""
    return lambda x: model(x) * float("nan")


@perfsuite.variant("test-raises")
def raises(model):
    raise RuntimeError("this variant does not build")
'''


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _perfsuite(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my-project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
    bench = root / "bench" / "classify.py"
    bench.write_text(bench.read_text() + BROKEN)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "the project"], cwd=root, check=True)
    return root


@pytest.mark.slow
def test_variants_measures_refuses_and_fails_each_variant_apart_and_keeps_the_study(project):
    out = project / "variants.json"
    res = _perfsuite(
        project, "variants", "classify", "-p", "batch_size=64", "--device", "cpu", "--max-time", "1.5",
        "--variants", "onnxruntime,pruned-50,fp16,test-nan,test-raises", "--json", str(out),
        "--charts", str(project / "charts"),
    )  # fmt: skip
    assert res.returncode == 3, res.stdout + res.stderr  # two variants failed; the others were measured
    from perfsuite.compare.kinds import load_result

    (study,) = load_result(out, "variants")
    rows = {r.variant: r for r in study.rows}
    assert list(rows) == ["onnxruntime", "pruned-50", "fp16", "test-nan", "test-raises"]
    assert rows["fp16"].status == "refused" and "cuda only" in rows["fp16"].reason
    assert rows["test-raises"].status == "failed" and "this variant does not build" in rows["test-raises"].reason
    assert rows["test-nan"].status == "failed" and "not finite" in rows["test-nan"].reason
    ort = rows["onnxruntime"]
    assert ort.status == "measured" and ort.verdict is not None and ort.verdict.pairs > 0
    assert ort.outputs["eval_top1"] == 1.0 and ort.holds is True  # the same function, another runtime
    assert ort.build_s > 0 and ort.size_bytes > 0 and ort.latency_s["p50"] <= ort.latency_s["p99"]
    assert ort.verdict.run.clock != "thread_time_ns"  # ONNX Runtime's threads: timed by the wall clock
    pruned = rows["pruned-50"]
    assert pruned.holds is False and pruned.kept["accuracy"] < 0.99 and pruned.below  # the floor held
    assert pruned.size_bytes == pytest.approx(study.eager.size_bytes, rel=0.01)  # zeros still take their bytes
    assert study.eager.kept == {"top1_agreement": 1.0, "accuracy": 1.0}
    assert study.best in (None, "onnxruntime")  # never a variant below the floor
    assert study.closing in res.stdout.replace("\n", " ") or study.closing.split(":")[0] in res.stdout
    (png,) = (project / "charts").iterdir()  # the case's chart, named after it
    assert png.name == "variants-classify-batch_size=64-width=256.png" and png.read_bytes()[:4] == b"\x89PNG"
    doc = json.loads(out.read_text())
    assert doc["format"] == "perfsuite.variants" and doc["results"][0]["closing"] == study.closing
    rep = _perfsuite(project, "report", str(out), "--out-dir", str(project / "rep"))  # a section of the report
    assert rep.returncode == 0, rep.stdout + rep.stderr
    page = (project / "rep" / "summary.md").read_text()
    assert study.closing in page and "| pruned-50 " in page and "**no**" in page and ".png)" in page
    import perfsuite  # the study is in the project's store too, and one DataFrame row per variant

    table = perfsuite.verdicts(os.environ["PERFSUITE_STORE"], kind="variants")  # conftest's store for the test
    assert list(table["variant"]) == list(rows) and list(table["status"])[2] == "refused"
    assert table.loc[table["variant"] == "pruned-50", "holds"].item() is False  # noqa: E712 - pandas' object
    assert table.loc[table["variant"] == "onnxruntime", "ratio"].item() == pytest.approx(ort.verdict.median_ratio)


@pytest.mark.slow
def test_gate_variant_runs_the_variant_in_every_side(project):
    # A variant that cannot build fails the gate's case with its own error: it reached the sides.
    # (bisect and history hand GateSettings.variant to the same GateArms.)
    res = _perfsuite(project, "gate", "classify", "-p", "batch_size=1", "--variant", "test-raises",
                     "--device", "cpu", "--max-time", "1")  # fmt: skip
    assert res.returncode == 3 and "this variant does not build" in res.stdout + res.stderr, res.stdout + res.stderr
    res = _perfsuite(project, "gate", "classify", "-p", "batch_size=1", "--variant", "nope", "--device", "cpu")
    assert res.returncode == 2 and "unknown variant 'nope'" in res.stderr


def test_the_pareto_front_keeps_the_points_no_other_beats_on_both():
    from perfsuite.report.variants_chart import pareto

    points = [("eager", 1.0, 1.0), ("int8", 2.0, 0.97), ("worse", 1.5, 0.9), ("slow", 0.8, 1.0), ("tie", 1.0, 1.0)]
    assert pareto(points) == ["eager", "int8", "tie"]  # worse: int8 beats it on both; slow: eager does


def test_variants_that_are_all_refused_are_said_and_kept_without_starting_a_side(project):
    out = project / "v.json"
    res = _perfsuite(
        project, "variants", "classify", "--device", "cpu", "--variants", "fp16,tensorrt", "--json", str(out)
    )
    # nothing was compared: exit 2, never a "keep eager" a script would take for an answer
    assert res.returncode == 2, res.stdout + res.stderr
    assert "no variant could be measured" in res.stderr
    assert "fp16: refused: variant 'fp16' runs on cuda only, not cpu" in res.stdout
    studies = json.loads(out.read_text())["results"]
    assert [s["params"]["batch_size"] for s in studies] == [1, 64]  # the workload's default sweep
    assert all(s["eager"] is None and [r["status"] for r in s["rows"]] == ["refused"] * 2 for s in studies)
    closing = studies[0]["closing"]
    assert "no variant was measured (refused: fp16, tensorrt), so there is nothing to choose" in closing
    assert "keep eager" not in closing


def test_gate_settings_name_a_known_variant_and_logs_keep_it_only_when_set():
    from perfsuite.compare.settings import GateSettings

    with pytest.raises(ConfigError, match="unknown variant 'int3'"):
        GateSettings(variant="int3")
    assert "variant" not in GateSettings().logged()  # a log written before variants resumes alike
    assert GateSettings(variant="onnxruntime").logged()["variant"] == "onnxruntime"


def test_fp16_is_refused_on_the_cpu_but_its_transformation_is_the_cuda_one_emulated_here():
    # fp16 runs on CUDA only (no GPU here): its refusal is what a CPU user meets, and the wrapper it
    # builds on CUDA is the same code, checked under the CPU's fp16 autocast.
    from perfsuite.variants import builtin

    torch.manual_seed(0)  # one model and input: fp16's rounding then moves no arg-max (checked)
    built = _built()
    with pytest.raises(Unsupported, match="cuda only"):
        apply(built, "fp16", "cpu")
    half = builtin.autocast("float16")(built[0].model, built[0].inputs, "cpu", None)
    out = half(*built[0].inputs)
    assert out.dtype == torch.float16
    eager = built[0].model(*built[0].inputs)
    assert (
        fidelity.compare(fidelity.digest(fidelity.primary(eager)), fidelity.digest(fidelity.primary(out)))["top1"]
        == 1.0
    )


def test_a_side_whose_step_moves_its_thread_off_the_timing_core_is_not_timed():
    """OpenVINO with its own pinning on reset the calling thread's affinity to every core at each
    inference: its side ran on a core the other side did not have, and its speed-up was overstated
    (1.8-2.1x paired, 1.5x alone on one core). A thread allowed off the timing cores after a block
    is named (the built-in openvino variant compiles with its pinning off: the test below)."""
    import os
    import threading

    from perfsuite.compare.side_worker import off_cores, thread_cpu_ns

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: no core to move off to")
    one = {min(os.sched_getaffinity(0))}

    def block():
        t = time.thread_time() + 0.01
        while time.thread_time() < t:  # 10 ms of this thread's CPU time: a block that ran
            pass

    def pinned_check() -> None:
        # Checked from a thread on the timing core, as a side's timing thread checks: the checking
        # thread's own scan of /proc is not "a thread off the core" (from the test's unpinned main
        # thread it took over 0.1 ms in a loaded CI run and named itself).
        os.sched_setaffinity(0, one)  # this thread only
        checked.append(off_cores(one, thread_cpu_ns()))

    checked: list = []
    helper = threading.Thread(target=pinned_check)
    helper.start()
    helper.join()
    assert checked == [None]  # nothing else ran since: an idle thread allowed elsewhere takes nothing
    before = thread_cpu_ns()
    block()
    said = off_cores(one, before)  # this thread may run on every core: as a runtime that re-pinned it
    assert said is not None and f"off the timing core(s) {sorted(one)}" in said and "ENABLE_CPU_PINNING" in said
    assert off_cores(set(os.sched_getaffinity(0)), before) is None  # on the cores it was given: fine


def test_openvino_compiles_with_its_own_cpu_pinning_off(monkeypatch):
    """The built-in openvino variant asks OpenVINO not to pin threads (its pinning moved a gate
    side's calling thread onto every core), and the compiled model says it is off."""
    ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (the variants extra)")
    import warnings

    import torch

    from perfsuite.variants import builtin

    compiled = []
    real = ov.Core.compile_model

    def spy(self, *args, **kwargs):
        compiled.append(real(self, *args, **kwargs))
        return compiled[-1]

    monkeypatch.setattr(ov.Core, "compile_model", spy)
    with warnings.catch_warnings():  # OpenVINO's converter traces with torch.jit.trace, which warns
        warnings.simplefilter("ignore", FutureWarning)
        runtime = builtin.openvino(torch.nn.Linear(4, 2).eval(), torch.randn(1, 4), "cpu", None)
    (model,) = compiled
    assert model.get_property("ENABLE_CPU_PINNING") is False
    assert runtime is not None


def test_threads_cpu_time_is_read_where_the_kernel_keeps_no_schedstat(tmp_path):
    """Without schedstat (a kernel built without it) every thread read as idle, so a side that ran
    off its timing core passed unseen; stat's ticks stand in (a name with a ') ' in it included)."""
    import os

    from perfsuite.compare.side_worker import thread_cpu_ns

    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    (tmp_path / "11").mkdir()
    (tmp_path / "11" / "schedstat").write_text("123456 0 0\n")
    (tmp_path / "12").mkdir()
    rest = "S 1 1 1 0 -1 0 0 0 0 0 5 3 0 0 20 0 1 0 100 0 0"
    (tmp_path / "12" / "stat").write_text(f"12 (openvino) x) {rest}\n")
    (tmp_path / "13").mkdir()  # a thread that ended while it was read: left out
    assert thread_cpu_ns(str(tmp_path)) == {11: 123456, 12: int(8 * tick_ns)}
    assert thread_cpu_ns(str(tmp_path / "absent")) == {}


def test_no_variant_row_carries_a_bias_note_any_more():
    """The OpenVINO bias note is gone with its cause: its row is judged as every other."""
    from perfsuite.compare.paired_gate import GateVerdict, PairedRun
    from perfsuite.compare.variant_study import VariantRow, VariantStudy

    def row(name, ratio):
        run = PairedRun([ratio * (1 + 0.001 * (k % 3 - 1)) for k in range(60)], 1, decision="slower", p=1e-6)
        v = GateVerdict(name, 0.01, run, True, direction=-1)
        return VariantRow(name, "measured", verdict=v, kept={"top1_agreement": 1.0}, holds=True)

    eager = VariantRow("eager", "measured", kept={"top1_agreement": 1.0}, holds=True)
    study = VariantStudy("w", {}, "cpu", 0.99, "items", eager, [row("openvino", 0.4), row("onnxruntime", 0.6)])
    assert study.best == "openvino" and not hasattr(catalog.named("openvino"), "biased")


def test_a_study_stopped_midway_keeps_its_verdicts_and_its_closing_line_names_what_was_not_measured(monkeypatch):
    """SIGTERM during a 0.5B study's third variant kept bf16's and int8-dynamic's rows, and its
    closing line said "keep eager" as though onnxruntime and compile had been measured and lost."""
    from perfsuite.compare.paired_gate import GateVerdict, PairedRun
    from perfsuite.compare.settings import GateSettings
    from perfsuite.compare.variant_study import VariantRow
    from perfsuite.core.registry import get
    from perfsuite.jobs import variants as job

    def gate_one(workload, case, name, *a):
        if name == "onnxruntime":
            return None, KeyboardInterrupt()  # stopped before its verdict
        run = PairedRun([0.5 * (1 + 0.001 * (k % 3 - 1)) for k in range(60)], 1, decision="slower", p=1e-6)
        verdict = GateVerdict(name, 0.01, run, True, direction=-1)
        return VariantRow(name, "measured", verdict=verdict, kept={"top1_agreement": 0.9}, holds=False), None

    monkeypatch.setattr(job, "_gate_one", gate_one)
    names = ["bf16", "int8-dynamic", "onnxruntime", "fp16", "compile"]
    studies, stopped = job.study(get("matmul"), [{"n": 64}], names, "cpu", GateSettings())
    (study,) = studies
    assert isinstance(stopped, KeyboardInterrupt)
    # fp16, which this CPU refuses, is said refused: only what could have been measured is "not measured"
    assert [(r.variant, r.status) for r in study.rows] == [("bf16", "measured"), ("int8-dynamic", "measured"),
                                                          ("fp16", "refused")]  # fmt: skip
    assert study.unmeasured == ["onnxruntime", "compile"]
    stopped_said = "; stopped before the verdicts of onnxruntime, compile, which were not measured"
    assert study.closing.endswith("keep eager" + stopped_said)
    assert "no variant measured that holds accuracy" in study.closing
    back = type(study).from_dict(study.to_dict())
    assert back.unmeasured == study.unmeasured and back.closing == study.closing
    # Stopped before any verdict, with one refused: the line says both
    monkeypatch.setattr(job, "_gate_one", lambda *a: (None, KeyboardInterrupt()))
    (none,), _ = job.study(get("matmul"), [{"n": 64}], ["fp16", "compile"], "cpu", GateSettings())
    assert none.closing.endswith("nothing to choose; the reasons are above; stopped before the verdicts of compile, "
                                 "which were not measured")  # fmt: skip


def test_a_study_saved_before_unmeasured_existed_loads_with_none_unmeasured():
    from perfsuite.compare.kinds import load_result

    old = load_result(Path(__file__).resolve().parents[1] / "reports/variants/qwen-tiny.variants.json", "variants")[0]
    assert old.unmeasured == [] and "stopped" not in old.closing and old.rows
