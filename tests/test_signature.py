"""The work signature (issue 56): what one call of a step dispatches, identical across processes for
the same code, and the kind of change compare reads from two of them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from fakeclock import FakeClock
from records import ENV, make_record

from perfsuite.compare import work
from perfsuite.compare.records import compare_records
from perfsuite.core.config import RunConfig
from perfsuite.core.errors import RecordError
from perfsuite.core.params import Param
from perfsuite.core.record import Record, Work
from perfsuite.core.workload import BuiltStep, Workload
from perfsuite.measuring import signature
from perfsuite.run.execute import Case, check_cases, run_cases


def _mlp_step(extra_cumsum: bool = False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 64), torch.randint(0, 8, (16,))

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        if extra_cumsum:
            out = out + torch.cumsum(out, 1) * 0
        torch.nn.functional.cross_entropy(out, y).backward()
        opt.step()

    step()
    return step


def test_a_training_step_is_counted_forward_and_backward_and_the_same_twice():
    step = _mlp_step()
    a, b = signature.take(step), signature.take(step)
    assert a == b and a["calls"] == sum(e[3] for e in a["entries"])
    ops = {e[0] for e in a["entries"]}
    # forward (addmm), backward (threshold_backward: ReLU's gradient) and the optimiser (add_)
    assert {"aten.addmm.default", "aten.threshold_backward.default", "aten.add_.Tensor"} <= ops
    assert ["aten.addmm.default", "64,16x64,64x64", "float32", 1] in a["entries"]
    assert a["bytes_allocated"] > 16 * 64 * 4  # at least the hidden activation


def test_an_extra_operator_is_more_work_named_exactly_with_its_shape():
    base, new = signature.take(_mlp_step()), signature.take(_mlp_step(extra_cumsum=True))
    kind, said = work.change(base, new)
    assert kind == work.MORE
    # forward, and backward (cumsum's gradient is a cumsum of the flipped gradient)
    assert "+2 aten.cumsum.default (16x8) float32" in said and "+2 aten.flip.default (16x8) float32" in said
    assert (
        work.change(new, base)[0] == work.LESS and "-2 aten.cumsum.default (16x8) float32" in work.change(new, base)[1]
    )
    assert work.change(base, dict(base)) == (work.SAME, [])
    assert work.change(None, base) == (work.UNKNOWN, [])


def test_on_a_gpu_the_kernels_and_copies_of_the_call_are_kept_and_compared(monkeypatch):
    """Issue 56, item 1: kernel launches on a GPU. The profiler's CUDA events are stood in (this
    machine has no GPU): the kernels and the copies among them are counted, the CPU's events not,
    and a record keeps them. Two steps with the same operators and other kernels (a library's
    choice, which autotuning may make differently in two runs) are other work; a profile that saw
    nothing of the device claims nothing. Unproven on a GPU: the profiler's real events."""
    import contextlib
    from types import SimpleNamespace

    def event(name, device_type="DeviceType.CUDA"):
        return SimpleNamespace(name=name, device_type=device_type)

    ran = [event("volta_sgemm_128x64_nn"), event("void at::native::elementwise_kernel<...>"),
           event("Memcpy HtoD (Pageable -> Device)"), event("Memset (Device)"),
           event("aten::mm", "DeviceType.CPU"), event("cudaLaunchKernel", "DeviceType.CPU")]  # fmt: skip
    assert signature.device_work(ran) == {"kernels": 2, "copies": 2}
    assert signature.device_work(ran[4:]) == {}  # no device event seen: nothing claimed

    @contextlib.contextmanager
    def activity(on):
        yield (lambda: ran) if on else list

    monkeypatch.setattr(signature, "_device_activity", activity)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    step = _mlp_step()
    on_gpu, on_cpu = signature.take(step, "cuda:0"), signature.take(step, "cpu")
    assert on_gpu["kernels"] == 2 and on_gpu["copies"] == 2 and "kernels" not in on_cpu
    assert on_gpu["digest"] == on_cpu["digest"]  # the operators' digest: kernels are beside it
    make_record(signature=on_gpu)  # a record keeps them (SignatureShape)
    other_kernels = {**on_gpu, "kernels": 5}
    kind, said = work.change(on_gpu, other_kernels)
    assert kind == work.OTHER and said == ["+3 kernel launches a step (2 -> 5)"], (kind, said)
    assert work.change(on_gpu, dict(on_gpu)) == (work.SAME, [])
    assert work.change(on_gpu, on_cpu) == (work.SAME, [])  # one side without counts: not compared


def test_the_profiler_that_cannot_trace_the_device_leaves_the_signature_whole(monkeypatch):
    """Best effort: where torch.profiler cannot trace CUDA (no CUPTI, nsys holding it; here: a CPU
    build of torch), the operators' signature is taken and no kernel count is claimed."""
    import torch.profiler

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.profiler, "supported_activities", lambda: {torch.profiler.ProfilerActivity.CPU})
    step = _mlp_step()
    got = signature.take(step, "cuda")
    assert "kernels" not in got and got["digest"] == signature.take(step)["digest"]


def test_a_change_in_the_bytes_a_step_allocates_is_noted_where_the_gates_heap_is_held():
    """Issue 49: on real changes that allocate more, the gate's held heap took their page faults out
    of its size (+10-13% where a default-heap process saw +19%); the gate now says so."""
    from perfsuite.compare.gate_sides import sides_work

    def allocating(extra: int):
        x = torch.randn(16, 64)

        def step():
            (x * 2).sum()
            if extra:
                torch.empty(extra, dtype=torch.uint8).fill_(1)

        return step

    base, more = signature.take(allocating(0)), signature.take(allocating(1 << 20))
    note = work.held_heap_note(base, more)
    assert note is not None and "+1.00 MiB a step" in note and "--heap default" in note
    assert "-1.00 MiB a step" in work.held_heap_note(more, base)
    small = signature.take(allocating(4096))  # one page: below glibc's mapping threshold
    assert work.held_heap_note(base, small) is None and work.held_heap_note(None, more) is None

    class Side:
        def __init__(self, sig):
            self.sig = sig

        def request(self, message):
            assert message == {"op": "signature", "build": 0}
            return {"signature": self.sig}

    kind, changes, notes = sides_work(Side(base), Side(more), heap_held=True)
    assert kind == work.MORE and notes == [note]
    assert sides_work(Side(base), Side(more), heap_held=False)[2] == []  # --heap default: the pairs pay them


@pytest.mark.slow
def test_separate_processes_running_the_same_step_find_one_signature(tmp_path):
    """The acceptance test of issue 56's first item: a record's signature is the same in another
    process, for a training step (autoencoder, forward and backward and the optimiser)."""
    digests = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        cmd = [sys.executable, "-m", "perfsuite", "run", "autoencoder", "-p", "batch_size=8"]
        cmd += ["--max-time", "0.5", "--processes", "1", "--out", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
        (rec,) = json.loads(out.read_text())["records"]
        digests.append((rec["signature"]["digest"], rec["signature"]["calls"], rec["signature"]["bytes_allocated"]))
    assert digests[0] == digests[1] and digests[0][1] > 20


def _workload(build_step) -> Workload:
    def build(params, device):
        return BuiltStep(fn=build_step(), work=Work(items_per_step=1, item_unit="calls"))

    return Workload("toy", "a test workload", (Param("x", int, 1),), build)


def test_a_step_that_fails_under_the_counting_mode_keeps_its_measurement_with_a_warning():
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    def refusing():
        def step():
            if _get_current_dispatch_mode() is not None:
                raise RuntimeError("this step refuses to run under a dispatch mode")
            torch.ones(4).sum()

        return step

    out = run_cases(
        check_cases([Case(_workload(refusing), {})], "cpu"),
        RunConfig(max_time=0.3, processes=1),
        clock=FakeClock(step_s=1e-3, seed=0),
    )
    (rec,) = out.records
    assert rec.signature is None and not out.failures
    assert any("work signature not taken: RuntimeError: this step refuses" in w for w in rec.warnings)
    # and the run can be told not to take it at all
    quiet = run_cases(
        check_cases([Case(_workload(lambda: lambda: torch.ones(4).sum()), {})], "cpu"),
        RunConfig(max_time=0.3, processes=1, signature=False),
        clock=FakeClock(step_s=1e-3, seed=0),
    )
    assert quiet.records[0].signature is None and not any("signature" in w for w in quiet.records[0].warnings)


def test_processes_that_disagree_on_the_work_are_named():
    from perfsuite.measuring.workers import merge

    sig_a, sig_b = signature.take(_mlp_step()), signature.take(_mlp_step(extra_cumsum=True))
    recs = [make_record(seed=i, signature=s) for i, s in enumerate((sig_a, sig_b, sig_a))]
    merged = merge(recs, [1, 2, 3], RunConfig(max_time=1.0))
    assert merged.signature == sig_a
    assert any("work signature differs between processes (2 distinct)" in w for w in merged.warnings)
    same = merge([make_record(seed=i, signature=sig_a) for i in range(3)], [1, 2, 3], RunConfig(max_time=1.0))
    assert not any("work signature" in w for w in same.warnings)


def test_compare_says_what_kind_of_change_each_case_is():
    sig_a, sig_b = signature.take(_mlp_step()), signature.take(_mlp_step(extra_cumsum=True))
    base = make_record(median_s=1e-3, seed=1, signature=sig_a)
    (same,) = compare_records([base], [make_record(median_s=1.2e-3, seed=2, signature=sig_a)]).cases
    assert same.verdict == "slower" and same.what_changed() == "same work, slower"
    (more,) = compare_records([base], [make_record(median_s=1.2e-3, seed=2, signature=sig_b)]).cases
    assert more.work == work.MORE and more.what_changed().startswith("more work: +2 ")
    assert "+2 aten.cumsum.default (16x8) float32" in more.what_changed()
    (old,) = compare_records([base], [make_record(median_s=1e-3, seed=2)]).cases
    assert old.what_changed() == work.UNKNOWN
    other_torch = {**ENV, "torch": "2.11.0"}
    with pytest.raises(RecordError, match="environments differ"):
        compare_records([base], [make_record(seed=2, env=other_torch, signature=sig_a)])
    (moved,) = compare_records(
        [base], [make_record(seed=2, env=other_torch, signature=sig_a)], allow_env_mismatch=True
    ).cases
    assert moved.environment_changed and moved.what_changed().endswith("environment changed")


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"calls": 3}, "signature.digest"),
        ({"digest": "ab", "calls": -1}, "signature.calls"),
        ({"digest": "ab", "calls": 1, "entries": [["aten.mm", "2x2", "float32", "1"]]}, "signature.entries"),
    ],
)
def test_a_bad_signature_is_refused_naming_its_key(bad, where):
    d = make_record().to_dict()
    d["signature"] = bad
    with pytest.raises(RecordError, match=where.replace(".", r"\.")):
        Record.from_dict(d)
