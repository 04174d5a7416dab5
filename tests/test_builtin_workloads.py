"""Adding a workload to perfsuite is adding one file (issue 21): a file dropped into a copy of
perfsuite/workloads/, and nothing else edited, is listed, runs, has its check run, is in the
shipped suites and the report, and is one of asv's benchmarks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SQUARE = '''"""A workload added to perfsuite by adding this file, and nothing else."""

import perfsuite


def _check(n: int, device: str) -> None:
    import torch

    eye = torch.eye(n, device=device)
    assert torch.equal(eye @ eye, eye), "I @ I != I"


def _report(records, out_dir, options):
    return ["### square's own section", "", f"{len(records)} cases, latency bound {options['latency_bound_ms']}", ""]


@perfsuite.workload(params={"n": [16, 32]}, checks=_check, report=_report,
                    grids={"ci": {"n": [16, 32]}, "gpu": {"n": [1024]}})
def square(n: int, device: str):
    """n x n matmul, added to perfsuite as one file"""
    import torch

    a = torch.randn(n, n, device=device)
    return perfsuite.Step(lambda: a @ a, items=1, unit="matmuls")
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of this checkout's perfsuite, benchmarks and suites, with square.py added to
    perfsuite/workloads/ and no other change."""
    root = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__")
    for folder in ("perfsuite", "benchmarks", "suites"):
        shutil.copytree(REPO / folder, root / folder, ignore=skip)
    (root / "perfsuite" / "workloads" / "square.py").write_text(SQUARE)
    return root


def _env(tree: Path) -> dict:
    # The copy first on the path: an installed perfsuite (editable, pointing at the checkout) must
    # not be the one imported.
    return {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}


def run(tree: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [sys.executable, *args], cwd=cwd or tree.parent, env=_env(tree), capture_output=True, text=True, timeout=600
    )
    return res


def test_the_copy_is_the_perfsuite_imported(tree):
    res = run(tree, "-c", "import perfsuite; print(perfsuite.__file__)")
    assert res.stdout.strip() == str(tree / "perfsuite" / "__init__.py"), res.stderr


@pytest.mark.slow
def test_a_file_in_the_builtin_folder_is_listed_run_checked_and_reported(tree, tmp_path):
    listed = run(tree, "-m", "perfsuite", "list")
    assert listed.returncode == 0, listed.stderr
    assert "square" in listed.stdout and "added to perfsuite as one file" in listed.stdout
    assert str(tree) not in listed.stdout  # a built-in: no "(file:line)" as a user's workload has

    out = tmp_path / "square.json"
    ran = run(tree, "-m", "perfsuite", "run", "square", "--max-time", "0.3", "--out", str(out))
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    records = json.loads(out.read_text())["records"]
    assert sorted(r["params"]["n"] for r in records) == [16, 32]  # its default sweep

    checked = run(tree, "-m", "perfsuite", "check", "square")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok    square: its own check at the default case: passed (n=16)" in checked.stdout

    report = run(
        tree, "-m", "perfsuite", "report", str(out), "--out-dir", str(tmp_path / "report"), "--latency-bound", "5"
    )
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report" / "summary.md").read_text()
    assert "## square" in page and "### square's own section" in page and "2 cases, latency bound 5.0" in page


def test_a_file_in_the_builtin_folder_is_in_the_shipped_suites(tree):
    code = (
        "from perfsuite.suite.file import load_suite, shipped_suites_dir\n"
        "for s in ('ci', 'cpu', 'gpu'):\n"
        "    e = [e for e in load_suite(shipped_suites_dir() / f'{s}.yaml').entries if e.workload == 'square']\n"
        "    print(s, [c['n'] for x in e for c in x.cases()])\n"
    )
    res = run(tree, "-c", code)
    assert res.returncode == 0, res.stderr
    # Its declared grid at each suite's size ("cpu" falls back to "ci").
    assert res.stdout.split("\n")[:3] == ["ci [16, 32]", "cpu [16, 32]", "gpu [1024]"]


def test_a_file_in_the_builtin_folder_is_one_of_asvs_benchmarks(tree):
    pytest.importorskip("asv_runner")
    code = (
        "import io, json, sys\n"
        "from asv_runner.discovery import list_benchmarks\n"
        "out = io.StringIO(); list_benchmarks(sys.argv[1], out); print(out.getvalue())\n"
    )
    res = run(tree, "-c", code, str(tree / "benchmarks"), cwd=tree)
    assert res.returncode == 0, res.stderr
    found = {b["name"]: b for b in json.loads(res.stdout)}
    assert found["bench_square.SquareTrack.track_median_s"]["params"] == [["16", "32"]]
    assert "bench_square.SquareTime.time_step" in found
    assert "bench_resnet.ResnetTrack.track_median_s" in found  # beside the others, as before


@pytest.mark.slow
def test_asv_measures_the_new_workload_through_its_generated_module(tree):
    """The generated Track class's setup_cache measures the grid; its tracks read the records."""
    code = (
        "import json\n"
        "import benchmarks.bench_square as m\n"
        "t = m.SquareTrack()\n"
        "cache = m.SquareTrack.setup_cache(t)\n"
        "t.setup(cache, 16)\n"
        "print(json.dumps([t.track_median_s(cache, 16), t.track_seconds_per_item(cache, 16)]))\n"
    )
    res = run(tree, "-c", code, cwd=tree)
    assert res.returncode == 0, res.stderr[-3000:]
    median, per_item = json.loads(res.stdout.strip().splitlines()[-1])
    assert median > 0 and per_item == median


def test_the_declaration_reaches_every_place_in_process():
    """In this process, without a copy: what a built-in's file declares is what check, the
    report, the front-ends' grids and the suites use."""
    from perfsuite.core import registry
    from perfsuite.suite.correctness import checks_for

    w = registry.get("qwen")
    assert w.builtin and w.report is not None and w.grid("ci")["shape"] == ["tiny"]
    assert [n for n, _ in checks_for("matmul")] == ["fp32 = float64 reference", "bf16 = float64 reference"]
    assert registry.get("resnet").asv == {"processes": 3, "amp": True}


def test_distributed_and_the_plan_ask_the_workload_not_its_name():
    """The DDP model and the plan's figures are the workloads' own declarations (ddp=, plan=)."""
    from types import SimpleNamespace

    import torch

    from perfsuite.core.errors import ConfigError
    from perfsuite.distributed import ddp_model
    from perfsuite.suite.file import PLAN_DEFAULT_S, plan_seconds

    assert ddp_model.models() == ["autoencoder", "resnet"]
    case = {"variant": "", "size": "ci", "precision": "fp32", "batch_size": None}
    assert ddp_model.sub_params({**case, "model": "resnet"}) == {"size": "ci", "precision": "fp32", "model": "resnet18"}
    assert ddp_model.sub_params({**case, "model": "autoencoder", "variant": "conv", "batch_size": 4}) == {
        "size": "ci",
        "precision": "fp32",
        "batch_size": 4,
        "variant": "conv",
    }
    with pytest.raises(ConfigError, match="'matmul' offers no DDP model"):
        ddp_model.offered("matmul")
    # resnet's module is the model itself, frozen in the gradient check (its BatchNorm); the
    # autoencoder's is its encoder then decoder, left training.
    setup = SimpleNamespace(parts=SimpleNamespace(model=torch.nn.BatchNorm1d(2)))
    assert ddp_model.forward_module("resnet", setup) is setup.parts.model
    assert not ddp_model.checked_module("resnet", setup).training
    ae = SimpleNamespace(
        parts=SimpleNamespace(
            model=torch.nn.ModuleDict({"encoder": torch.nn.Linear(2, 1), "decoder": torch.nn.Linear(1, 2)})
        )
    )
    module = ddp_model.checked_module("autoencoder", ae)
    assert module.training and module(torch.ones(3, 2)).shape == (3, 2)

    assert plan_seconds("qwen", "build_s", "cpu") == 30.0 and plan_seconds("dataloader", "once_s", "cuda") == 10.0
    assert plan_seconds("matmul", "build_s", "cuda") == 0.5 and plan_seconds("checkpoint", "check_s", "cuda") == 1.3
    assert plan_seconds("noop", "check_s", "cpu") == PLAN_DEFAULT_S["check_s"]["cpu"]


def test_asv_reads_the_working_trees_declarations_whichever_perfsuite_is_installed(tree):
    """asv runs today's benchmarks against perfsuite as installed at an older commit: the grids
    come from the working tree (here the copy, which has square.py) in a fresh interpreter, not
    from the perfsuite this process imported (this checkout's, which has no square)."""
    from benchmarks import _suite

    here = _suite._asv.declared("ci")
    there = _suite._asv.declarations(tree, "ci")
    assert "square" not in here and there["square"]["grid"] == {"n": [16, 32]}
    assert there["resnet"] == here["resnet"] and there["resnet"]["processes"] == 3
