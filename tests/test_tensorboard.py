"""TensorBoard export, read back with TensorBoard's own EventAccumulator."""

import json
from dataclasses import replace

import pytest
from records import make_record

from perfsuite.cli import app as cli
from perfsuite.storage.files import results_document
from perfsuite.storage.tensorboard import case_run

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _acc(run_dir):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def _scalars(acc, tag):
    # Each record is its own event file, read in the order of their names (random ids), so the
    # points come back sorted by their step (the record's time), which is how TensorBoard plots them.
    return sorted((e.step, e.value) for e in acc.Scalars(tag))


def test_each_case_is_a_run_with_its_scalars_keyed_by_time_and_its_hparams(tmp_path):
    old = make_record(
        median_s=2e-3,
        seed=1,
        created="2026-11-01T10:00:00+00:00",
        env={"git_commit": "aaa111", "git_dirty": False},
        memory={"host_peak_rss_bytes": 5_000_000},
        peak={"flops_per_s": 1e13, "roof": "fp32"},
    )
    new = replace(
        make_record(
            median_s=1e-3, seed=2, created="2026-11-02T10:00:00+00:00", env={"git_commit": "bbb222", "git_dirty": True}
        )
    )
    other = make_record(params={"n": 512, "dtype": "bf16"})
    (tmp_path / "a.json").write_text(results_document([old, other]))
    (tmp_path / "b.json").write_text(results_document([new]))
    logdir = tmp_path / "tb"
    assert (
        cli.main(["export", "tensorboard", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--logdir", str(logdir)])
        == 0
    )

    run = logdir / case_run("matmul", {"n": 256, "dtype": "fp32"}, "cpu")
    assert run == logdir / "matmul" / "cpu" / "n=256,dtype=fp32"
    acc = _acc(run)
    tags = acc.Tags()["scalars"]
    assert {"latency/median_s", "latency/p90_s", "throughput/images_per_s", "flops_per_s"} <= set(tags)
    t_old, t_new = 1793527200, 1793613600  # the records' creation times in Unix seconds
    med = _scalars(acc, "latency/median_s")
    assert [s for s, _ in med] == [t_old, t_new]
    assert [v for _, v in med] == pytest.approx([old.stats.median, new.stats.median], rel=1e-6)
    assert _scalars(acc, "peak_fraction") == [(t_old, pytest.approx(old.peak_fraction, rel=1e-6))]
    assert _scalars(acc, "memory/host_peak_rss_bytes") == [(t_old, 5_000_000.0)]
    assert _scalars(acc, "throughput/images_per_s")[1][1] == pytest.approx(8 / new.stats.median, rel=1e-6)
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in acc.Tensors("record/text_summary")}
    assert "aaa111" in texts[t_old] and "bbb222` (dirty)" in texts[t_new]
    # hparams: the plugin's session-start data names the case's parameters.
    hp = acc.PluginTagToContent("hparams")
    assert hp and any(b"dtype" in v and b"fp32" in v for v in hp.values())
    # Every case has its own run.
    assert _acc(logdir / "matmul" / "cpu" / "n=512,dtype=bf16").Tags()["scalars"]

    # Exporting the same records again adds nothing.
    before = sorted(p.name for p in run.iterdir())
    assert cli.main(["export", "tensorboard", str(tmp_path), "--logdir", str(logdir)]) == 0
    assert sorted(p.name for p in run.iterdir()) == before
    assert cli.main(["export", "tensorboard", str(tmp_path)]) == 2  # no --logdir


def test_amp_comparison_gives_loss_curves(tmp_path):
    # The speed-up is the median of the pairs' ratios (1.3), whatever a file says beside them.
    doc = {
        "workload": "autoencoder",
        "params": {"size": "ci"},
        "device": "cpu",
        "precision_a": "fp32",
        "precision_b": "bf16",
        "pair_ratios": [1.2, 1.3, 1.4],
        "speedup": 9.9,
        "saved_bytes_a": 10,
        "saved_bytes_b": 5,
        "cuda_peak_a": None,
        "cuda_peak_b": None,
        "loss_tolerance": 0.05,
        "steps": 3,
        "final_loss_a": 0.1,
        "final_loss_b": 0.101,
        "losses_a": [0.5, 0.3, 0.1],
        "losses_b": [0.5, 0.31, 0.101],
        "time_a_s": [0.02, 0.021],
        "time_b_s": [0.015, 0.016],
    }
    (tmp_path / "x.amp.json").write_text(json.dumps(doc))
    assert cli.main(["export", "tensorboard", str(tmp_path), "--logdir", str(tmp_path / "tb")]) == 0
    base = tmp_path / "tb" / "amp" / "autoencoder" / "cpu" / "size=ci"
    fp32, bf16 = _acc(base / "fp32"), _acc(base / "bf16")
    assert [v for _, v in _scalars(fp32, "loss")] == pytest.approx([0.5, 0.3, 0.1])
    assert [s for s, _ in _scalars(bf16, "loss")] == [0, 1, 2]
    assert _scalars(bf16, "amp/speedup") == [(0, pytest.approx(1.3))]


@pytest.mark.slow
def test_run_with_tensorboard_exports_after_the_run(tmp_path, capsys):
    logdir = tmp_path / "tb"
    code = cli.main(
        [
            "run",
            "noop",
            "--device",
            "cpu",
            "--max-time",
            "0.3",
            "--out",
            str(tmp_path / "r.json"),
            "--tensorboard",
            str(logdir),
        ]
    )
    assert code == 0, capsys.readouterr()
    acc = _acc(logdir / "noop" / "cpu" / "default")
    assert len(acc.Scalars("latency/median_s")) == 1
    # An unwritable log directory is refused before anything is measured.
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert (
        cli.main(
            [
                "run",
                "noop",
                "--device",
                "cpu",
                "--max-time",
                "0.3",
                "--out",
                str(tmp_path / "r2.json"),
                "--tensorboard",
                str(blocker / "tb"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "r2.json").exists()
