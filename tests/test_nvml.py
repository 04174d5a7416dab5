import sys
import types

import pytest

from perfsuite.measuring.nvml import NvmlSampler


def _fake_pynvml(fail_init=False):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM = 1
    state = {"i": 0}

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def util(h):
        state["i"] += 1
        return types.SimpleNamespace(gpu=50 + state["i"] % 2 * 40, memory=30)

    m.nvmlInit = init
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    m.nvmlDeviceGetUtilizationRates = util
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2 * 2**30)
    m.nvmlDeviceGetPowerUsage = lambda h: 150_000  # milliwatts
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1410
    return m


def test_samples_are_summarised(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    import time

    with NvmlSampler(index=0, interval_s=0.005) as s:
        time.sleep(0.1)
    summary = s.summary()
    assert summary["status"] == "ok" and summary["n"] >= 5
    # 0.1 s, shorter than NVML's window, and this driver keeps no samples: utilisation unknown
    assert "gpu_util_pct" not in summary and "shorter than NVML's utilisation window" in summary["gpu_util_unknown"]
    assert summary["power_w"]["mean"] == pytest.approx(150.0)
    assert summary["sm_clock_mhz"]["max"] == 1410.0
    assert not s._thread.is_alive()


def test_without_nvml_the_summary_says_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    with NvmlSampler(index=0) as s:
        pass
    assert s.summary() == {"status": "unavailable", "reason": "NVML could not start: NVML Shared Library Not Found"}


def test_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with NvmlSampler(index=0) as s:
        pass
    assert "nvidia-ml-py is not installed" in s.summary()["reason"]


def test_cpu_device_is_not_sampled():
    with NvmlSampler(index=None) as s:
        pass
    assert s.summary() == {"status": "unavailable", "reason": "not a CUDA device"}


# ---- which GPU NVML reads under CUDA_VISIBLE_DEVICES (issue 23, item 6) -----------------------
# As seen on the H100 (torch 2.11): torch's uuid is a torch._C._CUuuid whose str() is the dashed
# hex without a prefix and whose `bytes` are the raw 16 bytes; NVML spells it 'GPU-…'.
UUIDS = [
    "eab43309-aa90-8814-01b8-57c04c1f359b",
    "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "11111111-2222-3333-4444-555555555555",
    "deadbeef-0000-4000-8000-00000000cafe",
]


class FakeCUuuid:
    """torch._C._CUuuid's two members (the class cannot be built from Python)."""

    def __init__(self, dashed):
        self._dashed = dashed

    @property
    def bytes(self):
        return bytes.fromhex(self._dashed.replace("-", ""))

    def __str__(self):
        return self._dashed


def _machine(monkeypatch, visible, by_uuid=True, uuid_as_bytes=False, torch_uuid=True):
    """A 4-GPU machine (NVML sees all four; GPU i reports i*10 % busy) where torch, under
    CUDA_VISIBLE_DEVICES=`visible`, numbers the visible ones from 0."""
    import torch

    # These tests ask which GPU is read, from its rates: a driver whose window fits the region.
    monkeypatch.setattr("perfsuite.measuring.nvml.UTIL_WINDOW_S", 0.0)
    m = _fake_pynvml()
    spell = [("GPU-" + u).encode() if uuid_as_bytes else "GPU-" + u for u in UUIDS]
    m.nvmlDeviceGetCount = lambda: len(UUIDS)
    m.nvmlDeviceGetHandleByIndex = lambda i: (
        ("handle", UUIDS[i]) if 0 <= i < len(UUIDS) else (_ for _ in ()).throw(RuntimeError("Invalid Argument"))
    )
    m.nvmlDeviceGetUUID = lambda h: spell[UUIDS.index(h[1])]

    def by_uuid_lookup(uuid):
        if not by_uuid or not isinstance(uuid, str) or uuid[4:] not in UUIDS:
            raise RuntimeError("Not Found")
        return ("handle", uuid[4:])

    m.nvmlDeviceGetHandleByUUID = by_uuid_lookup
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=10 * UUIDS.index(h[1]), memory=0)
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(map(str, visible)))
    props = [types.SimpleNamespace(**({"uuid": FakeCUuuid(UUIDS[v])} if torch_uuid else {})) for v in visible]
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])


def _busy(index):
    import time

    with NvmlSampler(index=index, interval_s=0.002) as s:
        time.sleep(0.02)
    return s.summary()


def test_uuid_spellings_normalise_to_the_same_32_hex_digits():
    from perfsuite.measuring.nvml import normalise_uuid

    want = "eab43309aa90881401b857c04c1f359b"
    assert normalise_uuid("GPU-eab43309-aa90-8814-01b8-57c04c1f359b") == want  # NVML, as on the H100
    assert normalise_uuid(b"GPU-EAB43309-AA90-8814-01B8-57C04C1F359B") == want  # older pynvml: bytes
    assert normalise_uuid(FakeCUuuid("eab43309-aa90-8814-01b8-57c04c1f359b")) == want  # torch's _CUuuid
    assert normalise_uuid(types.SimpleNamespace(bytes=bytes.fromhex(want))) == want
    assert normalise_uuid("eab43309-aa90-8814") is None and normalise_uuid("GPU-not-a-uuid") is None


def test_torchs_device_is_found_in_nvml_by_uuid_not_by_index(monkeypatch):
    _machine(monkeypatch, visible=[2, 3])
    s = _busy(0)  # torch's cuda:0 is the machine's GPU 2: NVML's device 0 is another GPU
    assert s["gpu_util_pct"]["max"] == 20.0
    assert s["gpu"] == {"uuid": "GPU-" + UUIDS[2], "matched_by": "uuid"}
    assert _busy(1)["gpu_util_pct"]["max"] == 30.0


def test_a_pynvml_whose_lookup_fails_is_scanned_by_normalised_uuid(monkeypatch):
    _machine(monkeypatch, visible=[3, 1], by_uuid=False, uuid_as_bytes=True)
    s = _busy(0)
    assert s["gpu_util_pct"]["max"] == 30.0 and s["gpu"]["matched_by"] == "uuid"


def test_without_a_torch_uuid_nvml_is_read_by_index_and_the_summary_says_so(monkeypatch):
    _machine(monkeypatch, visible=[2, 3], torch_uuid=False)
    s = _busy(0)
    assert s["gpu_util_pct"]["max"] == 0.0  # NVML's device 0: the wrong GPU, and said
    assert s["gpu"]["matched_by"] == "index" and s["gpu"]["nvml_index"] == 0
    assert "carry no UUID" in s["gpu"]["note"] and "CUDA_VISIBLE_DEVICES" in s["gpu"]["note"]
    assert "'2,3'" in s["gpu"]["note"]


def test_a_uuid_nvml_does_not_know_falls_back_to_the_index_with_a_note(monkeypatch):
    import torch

    _machine(monkeypatch, visible=[1])
    mig = FakeCUuuid("99999999-8888-7777-6666-555555555555")  # e.g. a MIG instance's own UUID
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=mig))
    s = _busy(0)
    assert s["gpu"]["matched_by"] == "index" and "no NVML device has torch's UUID GPU-99999999" in s["gpu"]["note"]


def test_the_amp_comparison_samples_the_same_gpu_as_torch(monkeypatch):
    from perfsuite.compare.amp import side_utilisation
    from perfsuite.measuring.timing import clock_for

    _machine(monkeypatch, visible=[3])
    s = side_utilisation(lambda: None, clock_for("cpu", "auto"), 1, 0, interval_s=0.002, settle_s=0.0, window_s=0.02)
    assert s["gpu_util_pct"]["max"] == 30.0 and s["gpu"]["matched_by"] == "uuid"


def _windowed_pynvml(busy_from_s: float, with_samples: bool):
    """A driver whose utilisation rate averages the last UTIL_WINDOW_S of a timeline that is idle
    before `busy_from_s` (monotonic) and fully busy after it; with `with_samples`, it also keeps
    stamped samples every 1/6 s (nvmlDeviceGetSamples), busy ones from then on."""
    import time as _time

    from perfsuite.measuring.nvml import UTIL_WINDOW_S

    m = _fake_pynvml()
    offset = _time.time() - _time.monotonic()

    def util(h):
        now = _time.monotonic()
        busy = max(0.0, min(UTIL_WINDOW_S, now - busy_from_s))
        return types.SimpleNamespace(gpu=round(100 * busy / UTIL_WINDOW_S), memory=10)

    m.nvmlDeviceGetUtilizationRates = util
    m.NVML_GPU_UTILIZATION_SAMPLES = 1
    if with_samples:

        def samples(h, kind, since_us):
            out, t = [], busy_from_s - 1.0
            while t < _time.monotonic():
                stamp = int((t + offset) * 1e6)
                if stamp >= since_us:
                    value = types.SimpleNamespace(uiVal=100 if t >= busy_from_s else 0)
                    out.append(types.SimpleNamespace(timeStamp=stamp, sampleValue=value))
                t += 1 / 6
            return kind, out

        m.nvmlDeviceGetSamples = samples
    return m


@pytest.mark.parametrize("with_samples", [True, False])
def test_a_short_busy_region_is_not_called_host_bound_by_the_trailing_window(monkeypatch, with_samples):
    """Issue 54: NVML's rates average the last second; a fully busy 0.4 s region after an idle
    set-up read 18-40% "host-bound". The driver's samples stamped inside the region say 100%; a
    driver without them leaves the verdict unknown, never host-bound."""
    import time

    from perfsuite.core.bound import where_time_went

    start = time.monotonic()
    monkeypatch.setitem(sys.modules, "pynvml", _windowed_pynvml(start, with_samples))
    with NvmlSampler(index=0, interval_s=0.02) as s:
        time.sleep(0.4)
    rates = [x["gpu_util_pct"] for x in s.samples]
    assert max(rates) <= 50  # what the old summary averaged: "host-bound"
    summary = s.summary()
    bound = where_time_went("cuda:0", summary)
    if with_samples:
        assert summary["gpu_util_pct"]["mean"] == 100.0 and bound.verdict == "device-bound"
    else:
        assert "gpu_util_pct" not in summary and bound.verdict == "unknown" and "window" in bound.reason


@pytest.mark.parametrize("mode, refused", [(0, False), (3, True), (2, True), (None, False)])
def test_a_gpu_that_admits_one_process_is_refused_before_the_sides_start(monkeypatch, mode, refused):
    """Issue 54: on a GPU in Exclusive_Process mode (common under Slurm) every side of a gate failed
    "busy or unavailable"; the mode is read before anything starts and named. Where NVML cannot
    say (mode None: the query fails), nothing is refused."""
    from perfsuite.compare import sides
    from perfsuite.core.errors import ConfigError

    m = _fake_pynvml()
    if mode is None:
        m.nvmlDeviceGetComputeMode = lambda h: (_ for _ in ()).throw(RuntimeError("Not Supported"))
    else:
        m.nvmlDeviceGetComputeMode = lambda h: mode
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setattr("perfsuite.measuring.nvml.torch_uuid", lambda index: (None, "no uuid here"))
    if refused:
        with pytest.raises(ConfigError, match="compute mode (Exclusive_Process|Prohibited)"):
            with sides.placed("cuda:0", None):
                pass
    else:
        with sides.placed("cuda:0", None):
            pass
    with sides.placed("cpu", 1):  # the CPU is never asked
        pass


def test_the_gpus_power_limit_and_mig_mode_are_part_of_its_environment(monkeypatch):
    """Issue 54: a history's environment label left out the GPU's power limit, compute mode and
    MIG state: a power cap lowered between two commits read as the commit's slowdown. They are
    read from NVML into the fingerprint; the limit and MIG are comparable (a record from before,
    or a CPU, without them is not refused or relabelled)."""
    from perfsuite.measuring import fingerprint as envmod
    from perfsuite.measuring.nvml import gpu_state

    m = _fake_pynvml()
    m.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    m.nvmlDeviceGetMigMode = lambda h: [0, 0]
    m.nvmlDeviceGetComputeMode = lambda h: 3
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setattr("perfsuite.measuring.nvml.torch_uuid", lambda index: (None, "no uuid here"))
    state = gpu_state(0)
    assert state == {"gpu_power_limit_w": 700.0, "gpu_mig": False, "gpu_compute_mode": "Exclusive_Process"}
    base = {"torch": "2.11", "gpu_name": "NVIDIA H100", **state}
    capped = {**base, "gpu_power_limit_w": 450.0}
    assert envmod.mismatches(base, capped) == ["gpu_power_limit_w: 700.0 vs 450.0"]
    before = {k: v for k, v in base.items() if not k.startswith("gpu_") or k == "gpu_name"}
    assert envmod.mismatches(before, base) == []  # a record of before is not refused for it
    assert envmod.comparable({"torch": "2.14"}) == {
        k: ({"torch": "2.14"}).get(k) for k in envmod.COMPARABLE_KEYS if k not in envmod.LATER_KEYS
    }
