"""Which roofs `perfsuite peak` measures per device, with TF32 forced per roof, and which roof a
record is judged against. CUDA paths run on fakes: the flags are plain torch settings."""

import types
from dataclasses import replace

import pytest
from records import make_record

from perfsuite.core import registry
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import RecordError
from perfsuite.core.record import Work
from perfsuite.measuring import runner, tf32
from perfsuite.measuring.runner import _peak_for, time_case
from perfsuite.suite import peak

PEAK = {
    "flops_per_s": {"fp32": 50e12, "tf32": 400e12, "bf16": 800e12, "fp16": 790e12},
    "bytes_per_s": 3e12,
    "measured": "2026-11-01T00:00:00+00:00",
}


def _fake_run_case(seen):
    """Stands in for the runner: notes each case and the TF32 flag it ran under."""
    import torch

    def fake(workload, params, cfg, *, env=None, **kw):
        seen.append((workload.name, dict(params), torch.backends.cuda.matmul.allow_tf32))
        flops = {"matmul": 1e12 * (1 + len(seen))}.get(workload.name)
        return types.SimpleNamespace(
            id=f"r{len(seen)}", flops_per_s=flops, median_s=1e-3, work=types.SimpleNamespace(bytes_per_step=2e9)
        )

    return fake


@pytest.fixture
def tf32_on():
    """The caller's own setting is TF32 on: the fp32 roof must still be true fp32."""
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


def test_cuda_peak_has_four_roofs_with_tf32_forced_per_roof(monkeypatch, tf32_on):
    import torch

    seen = []
    monkeypatch.setattr(runner, "time_case", _fake_run_case(seen))
    p = peak.measure_peak(RunConfig(), {"gpu_name": "Fake H100"}, "cuda:0")
    assert list(p["flops_per_s"]) == ["fp32", "tf32", "bf16", "fp16"] == list(peak.roofs("cuda:0"))
    matmuls = [(params["dtype"], tf32) for name, params, tf32 in seen if name == "matmul"]
    # fp32 ran with TF32 off, tf32 with fp32 data and TF32 on.
    assert matmuls[:2] == [("fp32", False), ("fp32", True)]
    assert [d for d, _ in matmuls[2:]] == ["bf16", "fp16"]
    assert p["flops_per_s"]["tf32"] == 3e12  # each roof keeps its own run's figure
    assert torch.backends.cuda.matmul.allow_tf32 is True  # the caller's setting is back
    assert p["device_key"] == "cuda|Fake H100" and len(p["records"]) == 5


def test_cpu_peak_is_fp32_and_bf16_and_leaves_tf32_alone(monkeypatch, tf32_on):
    seen = []
    monkeypatch.setattr(runner, "time_case", _fake_run_case(seen))
    p = peak.measure_peak(RunConfig(), {"cpu_model": "Test CPU", "torch_threads": 2}, "cpu")
    assert list(p["flops_per_s"]) == ["fp32", "bf16"] == list(peak.roofs("cpu"))
    assert all(tf32 is True for _, _, tf32 in seen)


@pytest.mark.parametrize("call_s, n", [(1e-4, 2048), (0.02, 768), (0.25, 256)])
def test_a_cpu_roofs_matmul_is_sized_so_one_call_takes_a_tenth_of_the_budget(monkeypatch, call_s, n):
    """A CPU without native bf16 runs it ~50x slower than fp32: a 2048 matmul then takes minutes
    a call. The probe call at 256 sets n (work grows as n^3) so that one call takes <= 10% of the budget."""
    from fakeclock import FakeClock

    from perfsuite.measuring import timing

    monkeypatch.setattr(timing, "clock_for", lambda device, how: FakeClock(step_s=call_s))
    assert peak.cpu_matmul_n("bf16", 6.0) == n
    assert (n / peak.PROBE_N) ** 3 * call_s <= 0.6 or n == peak.PROBE_N


def test_cpu_peak_records_the_size_each_roof_was_measured_at(monkeypatch):
    seen = []
    monkeypatch.setattr(runner, "time_case", _fake_run_case(seen))
    monkeypatch.setattr(peak, "cpu_matmul_n", lambda dtype, budget: {"fp32": 2048, "bf16": 512}[dtype])
    p = peak.measure_peak(RunConfig(max_time=6.0), {"cpu_model": "Test CPU", "torch_threads": 1}, "cpu")
    assert [(params["dtype"], params["n"]) for name, params, _ in seen if name == "matmul"] == [
        ("fp32", 2048),
        ("bf16", 512),
    ]
    assert p["matmul_n"] == {"fp32": 2048, "bf16": 512}


def test_matmul_tf32_restores_the_flag_after_an_error():
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    with pytest.raises(ZeroDivisionError):
        with tf32.matmul_tf32(not before):
            assert torch.backends.cuda.matmul.allow_tf32 is (not before)
            raise ZeroDivisionError("inside the block")
    assert torch.backends.cuda.matmul.allow_tf32 is before


class _StuckMatmul:
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1: the flag reads True whatever is set."""

    @property
    def allow_tf32(self):
        return True

    @allow_tf32.setter
    def allow_tf32(self, value):
        pass


def test_matmul_tf32_refuses_a_flag_that_does_not_change():
    backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=_StuckMatmul()))
    with pytest.raises(RecordError, match="TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"):
        with tf32.matmul_tf32(False, backends):
            pass


class _Mixed:
    """torch >= 2.9 after the fp32_precision API was used: the legacy flag refuses to answer."""

    def __init__(self, precision):
        self.fp32_precision = precision

    @property
    def allow_tf32(self):
        raise RuntimeError("you have used mix of the legacy and new APIs")


def _backends(matmul, cudnn):
    ns = types.SimpleNamespace
    return ns(cuda=ns(matmul=ns(allow_tf32=matmul)), cudnn=ns(allow_tf32=cudnn))


def test_tf32_flags_read_the_legacy_flags_then_the_new_api():
    assert tf32.tf32_flags(_backends(False, True)) == {"matmul": False, "cudnn": True}
    ns = types.SimpleNamespace
    cudnn = _Mixed("none")
    cudnn.conv = _Mixed("ieee")
    mixed = ns(cuda=ns(matmul=_Mixed("tf32")), cudnn=cudnn)
    assert tf32.tf32_flags(mixed) == {"matmul": True, "cudnn": False}


# ---- the roof a record is judged against ------------------------------------------------------


def test_cuda_fp32_with_cudnn_tf32_allowed_is_judged_against_tf32():
    block = _peak_for(PEAK, "fp32", _backends(matmul=False, cudnn=True))
    assert block["roof"] == "tf32" and block["flops_per_s"] == 400e12
    assert block["tf32"] == {"matmul": False, "cudnn": True}
    assert "cudnn.allow_tf32" in block["why"] and "cuda.matmul" not in block["why"]
    # The record's fraction is of that roof: 200 TFLOP/s achieved is half of tf32, not 4x fp32.
    rec = replace(
        make_record(median_s=0.01, n=101, sigma=0.0, peak=block),
        work=Work(items_per_step=1, item_unit="steps", flops_per_step=2e12),
    )
    assert rec.peak_fraction == pytest.approx(0.5)


def test_cuda_fp32_with_tf32_off_is_judged_against_true_fp32():
    block = _peak_for(PEAK, "fp32", _backends(matmul=False, cudnn=False))
    assert block["roof"] == "fp32" and block["flops_per_s"] == 50e12
    assert block["tf32"] == {"matmul": False, "cudnn": False}


def test_cuda_fp16_is_judged_against_fp16_whatever_tf32_says():
    block = _peak_for(PEAK, "fp16", _backends(matmul=True, cudnn=True))
    assert block["roof"] == "fp16" and block["flops_per_s"] == 790e12 and "tf32" not in block


def test_a_missing_roof_gives_no_fraction_and_says_why():
    old_peak = {**PEAK, "flops_per_s": {"fp32": 50e12, "bf16": 800e12}}  # stored before tf32 was measured
    block = _peak_for(old_peak, "fp32", _backends(matmul=False, cudnn=True))
    assert block["flops_per_s"] is None and block["roof"] == "tf32"
    assert "no tf32 roof" in block["why"] and "perfsuite peak" in block["why"]
    assert make_record(peak=block).peak_fraction is None


def test_cpu_fp32_keeps_the_fp32_roof():
    block = _peak_for(PEAK, "fp32", None)
    assert block["roof"] == "fp32" and block["flops_per_s"] == 50e12 and "tf32" not in block
    assert _peak_for(None, "fp32", None) is None


def test_a_cpu_run_records_the_fp32_roof_and_no_tf32_flags(tf32_on):
    rec = time_case(registry.get("matmul"), {"n": 32}, RunConfig(device="cpu", max_time=0.3), peak=PEAK)
    assert rec.peak["roof"] == "fp32" and "tf32" not in rec.peak
    assert rec.peak_fraction == pytest.approx(rec.flops_per_s / 50e12)


# ---- the flag that governs the work's kernels (issue 23, item 3) -----------------------------
# torch's defaults on CUDA: matmul.allow_tf32 False, cudnn.allow_tf32 True (seen on the H100).


def test_fp32_matmul_work_follows_the_matmul_flag_not_cudnns():
    """A cuBLAS fp32 matmul with TF32 off runs on CUDA cores: the H100 run of the unfixed code
    judged it against the tf32 roof (401.5 TFLOP/s where fp32 was 51.7) because cuDNN's flag was on."""
    block = _peak_for(PEAK, "fp32", _backends(matmul=False, cudnn=True), kernels="matmul")
    assert block["roof"] == "fp32" and block["flops_per_s"] == 50e12
    assert block["tf32"] == {"matmul": False, "cudnn": True} and block["kernels"] == "matmul"
    assert "cuda.matmul.allow_tf32 off" in block["why"] and "cudnn" not in block["why"]
    on = _peak_for(PEAK, "fp32", _backends(matmul=True, cudnn=False), kernels="matmul")
    assert on["roof"] == "tf32" and on["flops_per_s"] == 400e12


def test_fp32_conv_work_follows_the_cudnn_flag_not_matmuls():
    block = _peak_for(PEAK, "fp32", _backends(matmul=False, cudnn=True), kernels="conv")
    assert block["roof"] == "tf32" and block["kernels"] == "conv" and "cudnn.allow_tf32 on" in block["why"]
    off = _peak_for(PEAK, "fp32", _backends(matmul=True, cudnn=False), kernels="conv")
    assert off["roof"] == "fp32" and off["tf32"] == {"matmul": True, "cudnn": False}


def test_undeclared_fp32_work_keeps_the_higher_roof_when_either_flag_allows_tf32():
    block = _peak_for(PEAK, "fp32", _backends(matmul=True, cudnn=False))
    assert block["roof"] == "tf32" and block["kernels"] is None and "undeclared" in block["why"]


@pytest.mark.parametrize(
    "name, params, kernels",
    [
        ("matmul", {}, "matmul"),
        ("qwen", {}, "matmul"),
        ("resnet", {}, "conv"),
        ("autoencoder", {"variant": "fc"}, "matmul"),
        ("autoencoder", {"variant": "conv"}, "conv"),
    ],
)
def test_workloads_declare_which_kernels_carry_their_fp32_flops(name, params, kernels):
    from perfsuite.measuring.runner import fp32_kernels

    w = registry.get(name)
    assert fp32_kernels(w, w.resolve(params)) == kernels


def test_a_bad_kernels_declaration_is_refused_naming_the_workload():
    # Refused when the workload is declared (issue 41: declarations are validated when loaded),
    # not when a case is measured.
    with pytest.raises(ValueError, match="'matmul'.*fp32_kernels.*'gemm'"):
        replace(registry.get("matmul"), fp32_kernels="gemm")


def test_run_case_passes_the_workloads_declaration_to_the_roof_choice(monkeypatch):
    """On CPU the flags are not read; the declaration still reaches the roof choice, which on
    CUDA picks the roof from it (the calls above)."""
    from perfsuite.measuring import runner

    seen = []
    real = runner._peak_for
    monkeypatch.setattr(runner, "_peak_for", lambda *a: seen.append(a) or real(*a))
    time_case(registry.get("matmul"), {"n": 32}, RunConfig(device="cpu", max_time=0.3), peak=PEAK)
    assert seen[0][1:] == ("fp32", None, "matmul")


def test_a_parameter_dependent_declaration_names_a_value_it_lacks_and_pickles():
    import pickle

    from perfsuite.measuring.runner import fp32_kernels

    w = registry.get("autoencoder")
    assert pickle.loads(pickle.dumps(replace(w, description="a copy"))).fp32_kernels == w.fp32_kernels
    odd = replace(w, fp32_kernels=("variant", {"fc": "matmul"}))
    with pytest.raises(ValueError, match="no kernels for variant='conv'"):
        fp32_kernels(odd, odd.resolve({"variant": "conv"}))
