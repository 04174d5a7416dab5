"""profile-step marks exactly one step with process-wide ranges; trace writes a bounded window."""

import json

from perfsuite import cli
from perfsuite.profiling import step_marking


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
    code = cli.main(["profile-step", "autoencoder", "-p", "batch_size=4", "--device", "cpu",
                     "--warmup-iters", "3", "--profile-iter", "4"])
    out = capsys.readouterr().out
    assert code == 0
    assert [e for e in events if e[0] == "start"] == [("start", n) for n in
                                                      ("train_step", "forward", "loss", "backward", "optimizer_step")]
    assert events[-1] == ("end", "train_step")
    assert "need a CUDA GPU" in out and "ncu --import" in out and "dram__bytes.sum" in out


def test_profile_step_bad_iterations(capsys):
    assert cli.main(["profile-step", "resnet", "--warmup-iters", "3", "--profile-iter", "1"]) == 2


def test_trace_writes_chrome_json_top_ops_and_split(tmp_path, capsys):
    code = cli.main(["trace", "autoencoder", "-p", "batch_size=4", "--device", "cpu", "--out-dir", str(tmp_path),
                     "--active", "1"])
    assert code == 0
    trace = next(tmp_path.glob("*.trace.json"))
    assert json.loads(trace.read_text())["traceEvents"]
    assert "aten::" in next(tmp_path.glob("*.top-ops.txt")).read_text()
    split = json.loads(next(tmp_path.glob("*.split.json")).read_text())
    assert split["forward"] > 0 and split["backward"] > 0 and split["optimizer_step"] > 0
    assert split["forward"] + split["loss"] + split["backward"] + split["optimizer_step"] <= split["wall"] * 1.05
