"""The drift between a machine's runs, learned from the machine-speed log (issue 26)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t

from perfsuite.storage import machine_drift

KEY = {"case": "matmul[n=256,dtype=fp32]", "kernel": "matmul 128x128 fp32", "device": "cpu", "threads": 1, "host": "h"}


def entry(median_s, time, **other):
    return {**KEY, **other, "time": time, "median_s": median_s}


def test_the_drift_is_learned_from_the_last_alike_runs_only():
    medians = [1.0, 1.1, 0.9, 1.05]
    entries = [entry(m, 100.0 + i) for i, m in enumerate(medians)]
    assert machine_drift.learned(entries[:2], KEY, 200.0) is None  # two runs teach nothing
    got = machine_drift.learned(entries, KEY, 200.0)
    sd = float(np.std(np.log(medians), ddof=1))
    assert got["half_width"] == pytest.approx(math.expm1(t.ppf(0.975, 3) * sd)) and got["runs"] == 4
    # Another case, thread count or host, a run older than a day: not this case on this machine now.
    others = [
        entry(5.0, 150.0, threads=4),
        entry(5.0, 150.0, host="other"),
        entry(5.0, 200.0 - 25 * 3600),
        entry(5.0, 150.0, case="resnet[]"),
    ]
    assert machine_drift.learned(entries + others, KEY, 200.0) == got
    # Only the last KEEP alike runs: an old wild one drops out.
    many = [entry(9.0, 0.0)] + [entry(1.0 + 0.01 * (i % 2), 1.0 + i) for i in range(machine_drift.KEEP)]
    assert machine_drift.learned(many, KEY, 100.0)["half_width"] < 0.05


def _record(median_ref, median_s=1e-3):
    from dataclasses import replace

    from records import make_record

    rec = make_record()
    return replace(
        rec,
        env={**rec.env, "host": "h"},
        conditions={
            **rec.conditions,
            "torch_threads": 1,
            "reference": {"kernel": "matmul 128x128 fp32", "median_s": median_ref},
        },
    )


def test_each_run_is_noted_and_from_the_third_its_interval_includes_the_drift(tmp_path):
    log = tmp_path / "speed.jsonl"
    recs = [machine_drift.note_run(_record(m), log, now=1000.0 + i) for i, m in enumerate([1e-4, 1.2e-4, 0.9e-4])]
    assert len(log.read_text().splitlines()) == 3
    assert [r.machine_drift for r in recs[:2]] == [0.0, 0.0] and recs[2].machine_drift > 0.2
    plain, wide = recs[0].stats, recs[2].stats
    assert (wide.ci_high - wide.ci_low) / wide.median > 2 * (plain.ci_high - plain.ci_low) / plain.median
    assert recs[2].conditions["machine_drift"]["runs"] == 3
    # A torn line (a run killed mid-write) is passed over, not an error; a record without a
    # reference is returned as it was and not noted.
    with log.open("a") as f:
        f.write('{"kernel": "matmul 12')
    from dataclasses import replace

    bare = replace(recs[0], conditions={})
    assert machine_drift.note_run(bare, log) is bare and len(machine_drift.read_log(log)) == 3


def test_a_bad_machine_drift_in_a_record_is_refused():
    from dataclasses import replace

    from perfsuite.core.errors import RecordError

    with pytest.raises(RecordError, match="conditions.machine_drift"):
        replace(_record(1e-4), conditions={"machine_drift": {"half_width": "wide"}})
    with pytest.raises(RecordError, match="conditions.reference.median_s"):
        replace(_record(1e-4), conditions={"reference": {"kernel": "k", "median_s": 0}})
    with pytest.raises(RecordError, match="conditions.reference.ratio"):
        replace(_record(1e-4), conditions={"reference": {"kernel": "k", "median_s": 1e-4, "ratio": float("nan")}})
    with pytest.raises(RecordError, match="conditions.reference.build_ratios"):
        replace(_record(1e-4), conditions={"reference": {"kernel": "k", "median_s": 1e-4, "build_ratios": [1.0, -2]}})
    with pytest.raises(RecordError, match="conditions.reference.sample_ratios"):
        replace(_record(1e-4), conditions={"reference": {"kernel": "k", "median_s": 1e-4, "sample_ratios": [1.0, 0.0]}})
    with pytest.raises(RecordError, match="conditions.reference.sample_builds"):
        replace(
            _record(1e-4),
            conditions={
                "reference": {"kernel": "k", "median_s": 1e-4, "sample_ratios": [1.0, 1.1], "sample_builds": [0]}
            },
        )


def _machine_runs(log, n=10, machine_sd=0.08):
    """n simulated `perfsuite run`s of one step, each on the machine at its own speed (a factor
    lognormal(0, machine_sd) on the step and the reference alike): a shared VM minutes apart."""
    from fakeclock import build_spread_case

    from perfsuite.core.config import RunConfig
    from perfsuite.run.execute import Case, check_cases, run_cases

    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        workload, clock = build_spread_case(
            i, spread=0.01, machine=float(rng.lognormal(0, machine_sd)), reference_s=1e-4
        )
        cfg = RunConfig(max_time=1.0, processes=1)
        (rec,) = run_cases(
            check_cases([Case(workload, {})], "cpu"), cfg, clock=clock, env={"host": "h"}, machine_log=log
        ).records
        out.append(rec)
    return out


def test_runs_on_a_drifting_machine_cover_the_median_of_medians_once_the_log_knows_it(tmp_path, no_gc_pauses):
    """Issue 26, item 4: a fake machine whose speed differs between runs. Each run's builds agree
    within 1%, so its own interval cannot cover the others; with the log, the runs from the third
    on cover the median of all the runs' medians at least as often as the issue asks (90%: a 95%
    interval may miss; with ten runs one miss by 0.1% was a coin of the seed)."""
    runs = _machine_runs(tmp_path / "log.jsonl", n=20)
    centre = float(np.median([r.median_s for r in runs]))

    def covers(r):
        return r.stats.ci_low <= centre <= r.stats.ci_high

    assert sum(covers(r) for r in runs[2:]) >= 0.9 * (len(runs) - 2)
    plain = _machine_runs(None, n=20)
    assert sum(covers(r) for r in plain) <= len(runs) // 2


def test_the_run_command_notes_its_runs_in_the_machine_log(tmp_path, capsys):
    from perfsuite.cli import app as cli

    log = tmp_path / "speed.jsonl"
    # 3 s: the reference takes at most 5% of the timing, and on a loaded machine its blocks take
    # longer; with 1 s a run sometimes had fewer than the 3 blocks a reference needs (2026-11-28).
    for i in range(3):
        assert (
            cli.main(
                ["--machine-log", str(log), "run", "noop", "--max-time", "3", "--out", str(tmp_path / f"r{i}.json")]
            )
            == 0
        )
    assert [json.loads(line)["kernel"] for line in log.read_text().splitlines()] == ["matmul 128x128 fp32"] * 3
    assert "how far this machine's speed moved over its last 3 runs of this case" in capsys.readouterr().out
    saved = json.loads((tmp_path / "r2.json").read_text())["records"][0]
    assert saved["conditions"]["machine_drift"]["runs"] == 3
    assert (
        cli.main(["--machine-log", "none", "run", "noop", "--max-time", "1", "--out", str(tmp_path / "r3.json")]) == 0
    )
    assert len(log.read_text().splitlines()) == 3


def test_a_log_that_cannot_be_written_costs_the_learning_not_the_record(tmp_path):
    rec = _record(1e-4)
    (tmp_path / "log").mkdir()  # a folder where the log's file should be
    got = machine_drift.note_run(rec, tmp_path / "log")
    assert got.samples_s == rec.samples_s and got.machine_drift == 0.0
    assert any("machine-speed log" in w and "not used" in w for w in got.warnings)


def test_the_reference_is_timed_where_the_step_runs_on_the_cpu_only():
    # On an H100 a tiny device matmul timed the host's launches and moved 19% between runs of an
    # unchanged step (reports/gpu/2026-11-27-h100): CUDA records are compared in seconds.
    from perfsuite.measuring import reference

    assert reference.taken_on("cpu")
    assert not reference.taken_on("cuda") and not reference.taken_on("cuda:1")


class _WakeClock:
    """A clock for the reference alone: after each `step(s)` the kernel's first calls are slow
    (the step's wake: 86 us a call, as after a ResNet18 step), then it runs at 51 us."""

    def __init__(self, wake_calls=20):
        self.t, self.wake_calls, self.left = 0.0, wake_calls, 0

    def step(self, seconds):
        self.t += seconds
        self.left = self.wake_calls

    def now(self):
        return self.t

    def time_block(self, fn, n):
        took = 0.0
        for _ in range(n):
            took += 86e-6 if self.left > 0 else 51e-6
            self.left = max(0, self.left - 1)
        self.t += took
        return took


def test_a_reference_block_waits_out_the_steps_wake_and_takes_a_bounded_share_of_the_timing():
    from perfsuite.measuring import reference

    clock = _WakeClock()
    ref = reference.Reference(clock, "cpu", kernel=lambda: None)
    for i in range(400):  # 2 s of a 5 ms step, the reference taken whenever it is due
        clock.step(5e-3)
        if ref.due(clock.now()):
            ref.take(at=i + 1)
    # Each block read the steady speed, not the wake (a block timed at once would read ~86 us).
    assert max(ref.samples_s) < 51e-6 * (1 + reference.STEADY)
    assert all(m > 2 for m in ref.minis)  # it did wait
    # Blocks as often as the share allows: many, and within it.
    assert len(ref.samples_s) >= 20
    assert ref.spent_s <= reference.SHARE * clock.now() + max(ref.minis) * ref.calls * 86e-6
    # Without a wake (right after matmuls), once the process knows the kernel's speed, a block is
    # two mini-blocks; the first blocks wait the whole WARM_S.
    quiet = reference.Reference(_WakeClock(wake_calls=0), "cpu", kernel=lambda: None)
    for i in range(reference.MIN_KNOWN + 2):
        quiet.take(at=i)
    assert quiet.minis[reference.MIN_KNOWN :] == [2, 2] and quiet.minis[0] == quiet.max_minis
    assert quiet.samples_s[-1] == pytest.approx(51e-6)


def test_a_process_reference_of_fewer_than_three_blocks_is_not_kept():
    """Issue 36: a worker whose slot left time for two blocks read 453 us and 50 us (the kernel's
    steady speed 43 us); their median, 252 us, made the run's reference 3.4x another run's."""
    from perfsuite.measuring import reference

    ref = reference.Reference(_WakeClock(wake_calls=0), "cpu", kernel=lambda: None)
    for i in range(reference.MIN_BLOCKS - 1):
        ref.take(at=i + 1)
    assert ref.summary([1.0] * reference.MIN_BLOCKS, [0] * reference.MIN_BLOCKS) is None
    ref.take(at=reference.MIN_BLOCKS)
    assert ref.summary([1.0] * reference.MIN_BLOCKS, [0] * reference.MIN_BLOCKS)["median_s"] > 0


def test_each_sample_is_divided_by_the_reference_read_nearest_it_in_time():
    from perfsuite.measuring.reference import ratios

    # Blocks after the 1st and the 3rd sample: the 1st sample has only the block after it, the 2nd
    # and 3rd the mean of the blocks around them, the 4th only the one before it.
    assert ratios([2.0, 3.0, 3.0, 4.0], [1.0, 2.0], [1, 3]) == pytest.approx([2.0, 2.0, 2.0, 2.0])
    # Two blocks at the same place: the later one is the one before the samples after it.
    assert ratios([1.0, 1.0], [0.5, 1.0], [1, 1]) == pytest.approx([2.0, 1.0])
    with pytest.raises(ValueError, match="2 reference blocks with 1 positions"):
        ratios([1.0], [1.0, 2.0], [0])


def _regime_run(seed, step_s=1e-3, reference_s=1e-4, level_sd=0.15, segment_s=0.03):
    """One process on a machine whose speed jumps every `segment_s` (lognormal(0, level_sd)
    levels, the step and the reference kernel alike), as the VM's did inside 1 s worker slots
    (2026-11-27: a process's reference blocks spread by 5-20%, its samples drifted by up to 20%)."""
    from fakeclock import FakeClock

    from perfsuite.core.config import RunConfig
    from perfsuite.core.record import Work
    from perfsuite.core.workload import BuiltStep, Workload
    from perfsuite.measuring.runner import time_case

    levels = np.random.default_rng(seed).lognormal(0.0, level_sd, size=1000)
    steps = set()

    def build(params, device):
        def step():
            return None

        steps.add(step)
        return BuiltStep(fn=step, work=Work(items_per_step=1, item_unit="calls"))

    clock = FakeClock(step_s=step_s, noise=0.01, seed=seed)
    clock.speed = lambda fn: levels[int(clock.t / segment_s) % 1000] * (1.0 if fn in steps else reference_s / step_s)
    return time_case(
        Workload("toy", "", (), build), {}, RunConfig(max_time=1.0, processes=1, builds=1, device="cpu"), clock=clock
    )


def test_a_process_per_reference_is_steady_when_the_machine_moves_inside_it(no_gc_pauses):
    """Sample by sample, the step over the reference read beside it is the same whatever the
    machine did; a process's median over its blocks' median depends on which speeds its few
    blocks happened to read (20 pairs of matmul n=256 runs on the VM: 4.1% against 2.3% between runs)."""
    truth = math.log(1e-3 / 1e-4)
    local, whole = [], []
    for seed in range(12):
        rec = _regime_run(seed)
        ref = rec.conditions["reference"]
        local.append(math.log(ref["ratio"]) - truth)
        whole.append(math.log(rec.median_s / ref["median_s"]) - truth)
    assert abs(float(np.mean(local))) < 0.03
    assert float(np.std(local)) < 0.5 * float(np.std(whole))


def test_the_pytest_front_end_notes_its_runs_in_the_log_and_asv_does_not(tmp_path, monkeypatch):
    """Issue 26, item 1: 'same for ... the pytest front-end'. It measured through run_cases
    without the log, so its interval (extra_info's median_ci_s) never held the drift between runs
    that `perfsuite run`'s did (20/20 against 15/20 covering, reports/quality). One log for both:
    $PERFSUITE_MACHINE_LOG (conftest points it at this test's folder). asv keeps none: it stores
    medians only, and a sweep over commits would teach the log the steps' differences as drift."""
    from benchmarks._suite import measure_cases
    from perfsuite.core import config, registry
    from perfsuite.frontends.pytest_plugin import measure_record

    monkeypatch.setattr(config, "resolve_device", lambda spec: "cpu")  # asv's "auto": the reference is CPU-only
    log = machine_drift.default_log()
    assert log == tmp_path / "machine-speed.jsonl" and not log.exists()
    (asv,) = measure_cases("noop", {}, max_time=3.0).values()  # a reference needs 3 blocks: 5% of the timing
    assert "_skip" not in asv and asv["conditions"].get("reference") and not log.exists()
    recs = [measure_record(registry.get("noop"), {}, "cpu", 3.0) for _ in range(3)]
    assert [json.loads(line)["case"] for line in log.read_text().splitlines()] == [recs[0].label()] * 3
    assert "machine_drift" not in recs[1].conditions and recs[2].conditions["machine_drift"]["runs"] == 3
    assert recs[2].stats.ci_high - recs[2].stats.ci_low > recs[2].between.ci_high - recs[2].between.ci_low
    for off in ("none", "NONE"):
        monkeypatch.setenv(machine_drift.ENV_VAR, off)
        assert machine_drift.default_log() is None
    measure_record(registry.get("noop"), {}, "cpu", 0.2)
    assert len(log.read_text().splitlines()) == 3


def _hostile_log(kind, tmp_path):
    """A machine-speed log as a hostile or unlucky user leaves it (issue 51); (the log, a file
    outside the project that must stay untouched or absent)."""
    import os

    outside = tmp_path / "outside" / "target"
    outside.parent.mkdir()
    log = tmp_path / "project" / "speed.jsonl"
    log.parent.mkdir()
    good = "".join(json.dumps(entry(1e-4, 1000.0 + i)) + "\n" for i in range(3))
    if kind == "dangling link":
        log.symlink_to(outside)
    elif kind == "link to a file":
        outside.write_text(good)
        log.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(log)
    elif kind == "non-utf8":
        log.write_bytes(good.encode() + b"\xff\xfe{\n")
    elif kind in ("Infinity", "1e300", "NaN"):
        log.write_text(
            good + json.dumps(entry(1e-4, 1002.5))[:-1].replace('"median_s": 0.0001', f'"median_s": {kind}') + "}\n"
        )
    elif kind == "/dev/zero":
        log = Path("/dev/zero")
    elif kind == "long link":
        outside.write_text(good * 700)  # past MAX_LINES: the log would be rewritten
        log.symlink_to(outside)
    elif kind == "huge":
        with log.open("wb") as f:
            f.truncate(machine_drift.MAX_LOG_BYTES + 1)
    return log, outside


@pytest.mark.parametrize(
    "kind",
    [
        "dangling link",
        "link to a file",
        "fifo",
        "non-utf8",
        "Infinity",
        "1e300",
        "NaN",
        "/dev/zero",
        "long link",
        "huge",
    ],
)
def test_a_hostile_machine_log_costs_at_most_the_drift_note_and_nothing_outside(kind, tmp_path):
    """Issue 51: the log goes through the one door: a link is never followed (a dangling one made its
    target outside the project; another got a line appended), a FIFO never blocks, bytes and
    numbers no run wrote are passed over, and whatever happens the record is returned."""
    import signal

    log, outside = _hostile_log(kind, tmp_path)
    before = outside.read_bytes() if outside.exists() else None
    rec = _record(1e-4)

    def hung(*_):
        raise TimeoutError("note_run blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # a FIFO read would block: fail, never hang the suite
    try:
        got = machine_drift.note_run(rec, log, now=1003.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert got.samples_s == rec.samples_s
    assert (outside.read_bytes() if outside.exists() else None) == before
    if kind in ("non-utf8", "Infinity", "1e300", "NaN"):  # the good lines still teach, the bad are passed over
        assert got.machine_drift == 0.0 or math.isfinite(got.machine_drift)
        assert got.conditions["machine_drift"]["runs"] == 4 and not got.warnings
    else:
        assert any("machine-speed log" in w and "not used" in w for w in got.warnings)
