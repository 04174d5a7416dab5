"""scripts/gate_power.py: the replay is the gate's own sequential decision, and the curve's cells
count what the replay decides."""

import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import gate_power  # noqa: E402


def _ratios(n: int, sd: float, bias: float = 0.0, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [math.exp(rng.gauss(bias, sd)) for _ in range(n)]


def test_replay_decides_like_the_gate():
    same = [math.log(x) for x in _ratios(200, 0.05)]
    # 200 pairs at SD 5%: +10% is caught, nothing is not, and the threshold is respected.
    assert gate_power.replay(same, math.log1p(0.10), alpha=0.01, threshold=0.01) is True
    assert gate_power.replay(same, 0.0, alpha=0.01, threshold=0.01) is False
    assert gate_power.replay(same, math.log1p(0.02), alpha=0.01, threshold=0.05) is False


def test_curve_counts_windows_per_budget(tmp_path, capsys):
    doc = {
        "budget_s": 20.0,
        "builds": 3,
        "threads": 1,
        "runs": [{"ratios": _ratios(200, 0.05, seed=s), "seconds": 20.0} for s in range(2)],
    }
    path = tmp_path / "aa.json"
    path.write_text(json.dumps(doc))
    gate_power.curve(argparse.Namespace(pairs=str(path), threshold=[0.01], alpha=0.01, selfcheck=None))
    rows = {
        line.split("|")[1].strip(): line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and " s |" in line
    }
    assert set(rows) == {"5 s", "10 s", "15 s", "20 s"}  # no budget beyond the runs' own length
    # 10 pairs/s, 90% of the budget: 45 pairs in a 5 s window, 4 windows a run, 8 in all.
    cells = rows["5 s"].split("|")
    assert cells[2].strip() == "~45" and cells[3].strip().startswith("0/8 ")  # unchanged: no false alarm
    assert cells[7].strip().startswith("8/8 ")  # +5% at SD 5% over 45 pairs: always caught
