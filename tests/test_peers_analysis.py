"""scripts/peers.py's spread analysis: the CV ratio to the best peer, the probe-corrected CV and
the drift floor, on made-up medians whose answers are known."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import peers  # noqa: E402


def _drifting(n, drift, noise, seed):
    import random

    rng = random.Random(seed)
    return [1e-3 * math.exp(d + rng.gauss(0, noise)) for d in drift[:n]]


def test_probe_removes_shared_drift_and_reports_the_machines_movement():
    import random

    rng = random.Random(1)
    n = 12
    drift = [rng.gauss(0, 0.04) for _ in range(n)]  # the machine: 4% between slots, shared by all
    results = {
        "W1": {
            "perfsuite-workers": _drifting(n, drift, 0.002, 2),
            "pytest-benchmark": _drifting(n, drift, 0.03, 3),
            "torch.utils.benchmark": _drifting(n, drift, 0.05, 4),
        }
    }
    # Each tool's slots have their own probe series: exact for two tools, noisy for the third.
    probes = {"W1": {t: [1e-3 * math.exp(d) for d in drift] for t in results["W1"]}}
    probes["W1"]["torch.utils.benchmark"] = _drifting(n, drift, 0.02, 9)
    rows = {r["tool"]: r for r in peers.spread_table(results, probes, resamples=500)}
    probe = rows["probe (the machine's speed)"]
    assert probe["cv"] == pytest.approx(sum(peers._cv(s) for s in probes["W1"].values()) / 3)
    # Against the probe only each tool's own noise is left: the quiet tool's 0.2%, the noisy one's ~5%.
    assert rows["perfsuite-workers"]["resid_cv"] < 0.004
    assert 0.03 < rows["torch.utils.benchmark"]["resid_cv"] < 0.08
    ratio = rows["perfsuite-workers"]["ratio"]
    lo, hi = rows["perfsuite-workers"]["ratio_ci"]
    assert lo <= ratio <= hi
    assert ratio == pytest.approx(
        rows["perfsuite-workers"]["cv"] / min(rows["pytest-benchmark"]["cv"], rows["torch.utils.benchmark"]["cv"])
    )


def test_spread_table_leaves_out_a_workload_without_two_runs():
    rows = peers.spread_table(
        {
            "W1": {"perfsuite": [1.0], "pytest-benchmark": [1.1]},
            "W2": {"perfsuite": [1.0, 1.1], "pytest-benchmark": [1.0, 1.3]},
        },
        None,
        resamples=50,
    )
    assert {r["workload"] for r in rows} == {"W2"}


def test_peer_ratio_uses_the_other_peers_only_and_table_formats():
    results = {
        "W2": {
            "perfsuite": [1.0, 1.1, 0.9, 1.0],
            "pytest-benchmark": [1.0, 1.2, 0.8, 1.0],
            "torch.utils.benchmark": [1.0, 1.01, 0.99, 1.0],
        }
    }
    rows = {r["tool"]: r for r in peers.spread_table(results, None, resamples=200)}
    assert "drift floor (probe)" not in rows and rows["perfsuite"]["resid_cv"] is None
    # pytest-benchmark's own ratio is against torch.utils.benchmark, the only other peer.
    assert rows["pytest-benchmark"]["ratio"] == pytest.approx(
        rows["pytest-benchmark"]["cv"] / rows["torch.utils.benchmark"]["cv"]
    )
    text = peers.format_table(list(rows.values()))
    assert text.count("\n") == 4 and "| W2 | perfsuite |" in text


def test_pooled_cv_of_one_session_is_the_cv():
    xs = [1.0, 1.05, 0.97, 1.01, 0.99]
    assert peers._pooled_cv([xs]) == pytest.approx(peers._cv(xs), rel=1e-12)


def test_pooled_table_keeps_tools_in_every_session_and_unequal_lengths(capsys):
    s1 = {
        "W1": {
            "perfsuite": [1.0, 1.1, 0.9],
            "pytest-benchmark": [1.0, 1.2, 0.8, 1.0],
            "torch.utils.benchmark": [1.0, 1.0, 1.1],
        }
    }
    s2 = {
        "W1": {"perfsuite": [2.0, 2.1, 1.9, 2.0, 2.05], "pytest-benchmark": [2.0, 2.4, 1.6, 2.0, 2.2]},
        "W2": {"perfsuite": [5.0, 5.5], "pytest-benchmark": [5.0, 6.0]},
    }
    rows = peers.pooled_table([s1, s2], resamples=200)
    w1 = {r["tool"]: r for r in rows if r["workload"] == "W1"}
    assert set(w1) == {"perfsuite", "pytest-benchmark"}  # torch.utils.benchmark is not in session 2
    assert "left out torch.utils.benchmark" in capsys.readouterr().err
    assert w1["perfsuite"]["runs"] == 3 + 5  # each session cut to its shortest tool
    assert w1["perfsuite"]["cv"] == pytest.approx(peers._pooled_cv([[1.0, 1.1, 0.9], [2.0, 2.1, 1.9, 2.0, 2.05]]))
    assert {r["workload"] for r in rows} == {"W1", "W2"}  # W2 only in the second session


def test_pooled_cv_ignores_a_shift_between_sessions():
    a = [1.0, 1.02, 0.98, 1.0]
    b = [2.0 * x for x in a]  # another session, the machine twice as slow throughout
    assert peers._pooled_cv([a, b]) == pytest.approx(peers._pooled_cv([a]), rel=1e-9)
    assert peers._pooled_cv([a + b]) > 0.3  # taken as one session the shift would dominate


def test_pooled_table_ratio_and_interval():
    import random

    rng = random.Random(5)
    sessions = [
        {
            "W1": {
                "perfsuite-workers": [math.exp(rng.gauss(0, 0.01)) for _ in range(10)],
                "pytest-benchmark": [math.exp(rng.gauss(0, 0.04)) for _ in range(10)],
                "torch.utils.benchmark": [math.exp(rng.gauss(0, 0.05)) for _ in range(10)],
            }
        }
        for _ in range(3)
    ]
    rows = {r["tool"]: r for r in peers.pooled_table(sessions, resamples=500)}
    pw = rows["perfsuite-workers"]
    assert pw["runs"] == 30 and pw["sessions"] == 3
    assert 0.1 < pw["ratio"] < 0.5 and pw["ratio_ci"][0] <= pw["ratio"] <= pw["ratio_ci"][1]
    assert "| W1 | perfsuite-workers | 30 (3) |" in peers.format_pooled(list(rows.values()))
