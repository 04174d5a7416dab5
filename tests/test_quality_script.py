"""scripts/quality.py's split of the spread between runs (issue 26's report): fake records whose
runs move together by a known amount, on top of independent process noise."""

import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import quality  # noqa: E402


def _runs(run_level: float, process: float, n_runs: int = 400, n_units: int = 5, seed: int = 1):
    rng = random.Random(seed)
    runs = []
    for _ in range(n_runs):
        shift = rng.gauss(0.0, run_level)  # the whole run moves with the machine's state
        units = [0.05 * math.exp(shift + rng.gauss(0.0, process)) for _ in range(n_units)]
        # A reference that follows the machine: per reference, the run-level shift is gone.
        runs.append(
            SimpleNamespace(
                units=lambda u=units: u, relative_units=lambda u=units, s=shift: [x / math.exp(s) for x in u]
            )
        )
    return runs


@pytest.mark.parametrize("run_level, process", [(0.0, 0.10), (0.07, 0.08), (0.02, 0.03)])
def test_the_run_level_rest_is_what_more_processes_cannot_remove(run_level, process):
    split = quality.between_runs(_runs(run_level, process), relative=False)
    assert split["runs"] == 400 and split["units"] == 5
    # The SD of a mean of 5 process units is process / sqrt(5); the rest is the run-level shift.
    assert split["explained_by_processes_sd"] == pytest.approx(process / math.sqrt(5), rel=0.2)
    assert split["between_sd"] == pytest.approx(math.hypot(run_level, process / math.sqrt(5)), rel=0.1)
    assert split["run_level_sd"] == pytest.approx(run_level, abs=0.012)
    per_reference = quality.between_runs(_runs(run_level, process), relative=True)
    assert per_reference["run_level_sd"] < 0.012  # the reference took the shift away
    assert per_reference["explained_by_processes_sd"] == pytest.approx(split["explained_by_processes_sd"])


def test_too_few_runs_or_units_give_no_split():
    assert quality.between_runs(_runs(0.05, 0.05, n_runs=2)) is None
    assert quality.between_runs(_runs(0.05, 0.05, n_units=1)) is None
