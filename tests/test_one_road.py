"""One road from a case to a stored result: every kind of measurement (record, pair, amp, the
gate's arms, peak) goes through perfsuite.run.execute.run_cases, so a pair or amp case that
fails is that case's recorded failure (exit 3), never the end of a suite; every kind resumes by
one case key; an amp entry honours its max_time."""

import json
from dataclasses import replace

import pytest

from perfsuite.cli import app as cli
from perfsuite.compare import amp as amp_mod
from perfsuite.compare import pair as pair_mod
from perfsuite.compare.kinds import RESULTS, load_result
from perfsuite.core.config import RunConfig
from perfsuite.run.execute import Case, check_cases, run_cases
from perfsuite.storage.files import DocumentWriter, document_failures
from tests.fakeclock import FakeClock

PAIRS_THEN_RUN = """
name: road
device: cpu
max_time: 0.3
checks: false
suites:
  - {name: pr, kind: pair, workload: matmul, params: {n: [16, 24, 32]}, vary: {dtype: [fp32, bf16]}}
  - {name: mm, workload: matmul, params: {n: 16}}
"""


def _suite(tmp_path, text=PAIRS_THEN_RUN):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def test_a_pair_case_that_fails_is_recorded_and_the_suite_goes_on(tmp_path, monkeypatch, capsys):
    real = pair_mod.pair

    def broken_at_24(workload, params, *a, **kw):
        if params.get("n") == 24:
            raise RuntimeError("the step crashed (simulated)")
        return real(workload, params, *a, **kw)

    monkeypatch.setattr(pair_mod, "pair", broken_at_24)
    out = tmp_path / "out"
    assert cli.main(["run", "--config", str(_suite(tmp_path)), "--out", str(out)]) == 3
    results = load_result(out / "pr.pair.json", "pair")
    assert sorted(r.case["n"] for r in results) == [16, 32]
    (failure,) = document_failures(out / "pr.pair.json")
    assert failure["params"]["n"] == 24 and "crashed" in failure["error"]
    # the entry after the failed case still ran
    assert len(json.loads((out / "mm.json").read_text())["records"]) == 1
    assert "failed pr matmul[n=24" in capsys.readouterr().out

    # Resumed: finished pairs are kept by case key, the failed one only with --retry-failed.
    measured = []
    monkeypatch.setattr(
        pair_mod, "pair", lambda w, params, *a, **kw: measured.append(params["n"]) or real(w, params, *a, **kw)
    )
    assert cli.main(["run", "--config", str(_suite(tmp_path)), "--out", str(out)]) == 0
    assert measured == []
    assert cli.main(["run", "--config", str(_suite(tmp_path)), "--out", str(out), "--retry-failed"]) == 0
    assert measured == [24]
    assert document_failures(out / "pr.pair.json") == []
    assert sorted(r.case["n"] for r in load_result(out / "pr.pair.json", "pair")) == [16, 24, 32]


def test_an_amp_case_that_fails_is_that_entrys_failure(tmp_path, monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("GradScaler exploded (simulated)")

    monkeypatch.setattr(amp_mod, "compare_precisions", broken)
    text = (
        "name: amp\ndevice: cpu\nmax_time: 0.3\nchecks: false\nsuites:\n"
        "  - {name: a, kind: amp, workload: autoencoder, params: {batch_size: 4}, precisions: [fp32, bf16],"
        " pairs: 2, steps: 5}\n  - {name: mm, workload: matmul, params: {n: 16}}\n"
    )
    out = tmp_path / "out"
    assert cli.main(["run", "--config", str(_suite(tmp_path, text)), "--out", str(out)]) == 3
    (failure,) = document_failures(out / "a.amp.json")
    assert "exploded" in failure["error"] and failure["workload"] == "autoencoder"
    assert len(json.loads((out / "mm.json").read_text())["records"]) == 1


def test_amp_stops_its_pairs_at_its_max_time(monkeypatch):
    """The pairs are bounded by max_time (at least 2), not a fixed count: on a clock where each
    block costs 1 s, 30 pairs asked within 6 s give what fits."""
    clock = FakeClock(step_s=1.0)
    monkeypatch.setattr(amp_mod, "calibrate", lambda steps, clock, cfg: type("C", (), {"block_size": 1})())
    ta, tb, n = amp_mod.interleaved_times(lambda: None, lambda: None, clock, 30, RunConfig(max_time=6.0))
    assert n == 1 and 2 <= len(ta) <= 4 and len(ta) == len(tb)
    ta, _, _ = amp_mod.interleaved_times(
        lambda: None, lambda: None, FakeClock(step_s=1.0), 3, RunConfig(max_time=600.0)
    )
    assert len(ta) == 3


def test_the_pair_command_records_a_failed_case_and_exits_3(tmp_path, monkeypatch, capsys):
    real = pair_mod.pair

    def broken_at_24(workload, params, *a, **kw):
        if params.get("n") == 24:
            raise RuntimeError("boom")
        return real(workload, params, *a, **kw)

    monkeypatch.setattr(pair_mod, "pair", broken_at_24)
    path = tmp_path / "p.json"
    assert (
        cli.main(
            [
                "pair",
                "matmul",
                "--vary",
                "dtype=fp32,bf16",
                "-p",
                "n=16,24",
                "--budget",
                "0.2",
                "--device",
                "cpu",
                "--out",
                str(path),
            ]
        )
        == 3
    )
    assert [r.case["n"] for r in load_result(path, "pair")] == [16]
    assert document_failures(path)[0]["params"]["n"] == 24
    # --out names a file that now exists: refused before anything is measured
    assert (
        cli.main(
            [
                "pair",
                "matmul",
                "--vary",
                "dtype=fp32,bf16",
                "-p",
                "n=16",
                "--budget",
                "0.2",
                "--device",
                "cpu",
                "--out",
                str(path),
            ]
        )
        == 2
    )


def test_a_gate_case_whose_side_fails_is_recorded_and_the_others_are_gated(monkeypatch):
    """The gate's arms are one more Measure: a side that crashes is that case's failure."""
    from perfsuite.compare import paired_gate as g
    from perfsuite.core import registry

    class Flaky(g.Measure):
        kind = "gate"

        def measure(self, case, cfg, ctx):
            if case.params["n"] == 24:
                raise RuntimeError("side process died (simulated)")
            return g.gate_case(
                g.GateCase(case.label, [lambda: None], [lambda: None]), FakeClock(step_s=0.001), 0.0, cfg.max_time
            )

    w = registry.get("matmul")
    out = run_cases(check_cases([Case(w, {"n": n}) for n in (16, 24, 32)], "cpu", Flaky()), RunConfig(max_time=0.5))
    assert [v.label for v in out.records] == ["matmul[n=16,dtype=fp32]", "matmul[n=32,dtype=fp32]"]
    assert out.failures[0]["params"]["n"] == 24
    assert not any(v.slower for v in g.across_cases(out.records))


def test_every_kind_of_document_resumes_by_the_same_case_key(tmp_path):
    from perfsuite.core import registry

    w = registry.get("matmul")
    writer = DocumentWriter(tmp_path / "x.pair.json", "pair", {"suite": "s"})
    res = pair_mod.PairResult("matmul", {"n": 16}, "dtype", "fp32", "bf16", [1.0, 1.1], 0, 0)
    writer.add(res, Case(w, {"n": 16}))
    again = DocumentWriter.resume(tmp_path / "x.pair.json", "pair", {"suite": "s"}, model=RESULTS["pair"])
    (done,) = again.done_cases()
    # the stored case gives the same key as the case named with its defaults spelled out
    assert Case(w, done).key("cpu") == Case(w, {"n": 16, "dtype": "fp32"}).key("cpu")
    # and a stored pair reads back as the typed result, with its case and suite, its derived
    # numbers recomputed
    (d,) = load_result(tmp_path / "x.pair.json", "pair")
    assert d.case == {"n": 16} and d.suite == "s" and replace(d, case=None, suite=None) == res
    with pytest.raises(Exception, match="exists"):
        DocumentWriter(tmp_path / "x.pair.json", "pair")


def test_a_stored_case_that_is_not_a_mapping_is_refused_on_resume_not_a_crash(tmp_path, capsys):
    """A suite's pair document whose `case` is not parameters: exit 2 naming it, never exit 4 or a
    case wrongly taken as done."""
    out = tmp_path / "out"
    suite = _suite(tmp_path, PAIRS_THEN_RUN.replace("[16, 24, 32]", "[16]"))
    assert cli.main(["run", "--config", str(suite), "--out", str(out)]) == 0
    doc = json.loads((out / "pr.pair.json").read_text())
    doc["results"][0]["case"] = 5
    (out / "pr.pair.json").write_text(json.dumps(doc))
    assert cli.main(["run", "--config", str(suite), "--out", str(out)]) == 2
    assert "case" in capsys.readouterr().err


def test_pair_and_amp_measure_on_the_runs_threads(monkeypatch):
    """The one-thread CPU default (or --threads) holds for pair and amp cases as for records."""
    import torch

    seen = []
    monkeypatch.setattr(pair_mod, "pair", lambda *a, **kw: seen.append(torch.get_num_threads()))
    monkeypatch.setattr(amp_mod, "compare_precisions", lambda *a, **kw: seen.append(torch.get_num_threads()))
    from perfsuite.core import registry

    before = torch.get_num_threads()
    from perfsuite.core.case import Context

    cfg = RunConfig(device="cpu", max_time=0.1, threads=1)
    pair_mod.Pair("dtype", "fp32", "bf16").measure(Case(registry.get("matmul"), {"n": 16}), cfg, Context())
    amp_mod.Amp("fp32", "bf16").measure(Case(registry.get("autoencoder"), {}), cfg, Context())
    assert seen == [1, 1] and torch.get_num_threads() == before


def test_an_interrupted_pair_command_leaves_no_empty_claim(tmp_path, monkeypatch):
    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(pair_mod, "pair", interrupted)
    path = tmp_path / "p.json"
    args = [
        "pair",
        "matmul",
        "--vary",
        "dtype=fp32,bf16",
        "-p",
        "n=16",
        "--budget",
        "0.2",
        "--device",
        "cpu",
        "--out",
        str(path),
    ]
    assert cli.main(args) == 130
    assert not path.exists()  # the same command can run again
