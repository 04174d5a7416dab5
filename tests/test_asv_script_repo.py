"""asv's history recipe in a repository that is not a Python package (issue 50, item 6): a model
at the repository's root, no pyproject [project] and no setup.py, perfsuite's files untracked.
asv builds nothing and installs nothing (asv.conf.json's empty commands), and each commit is
measured with its own code from asv's checkout, never the working tree's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]

# The model at the root of the repository, as scripts-only repositories keep it. Its size is
# the commit's: 32 at the first commit, 384 at the second (about 1,700 times the FLOPs).
MODEL = (
    "import torch\n\nSIZE = {size}\n\n\ndef matrices():\n    return torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)\n"
)
WORKLOAD = '''import perfsuite
import torch

import model


@perfsuite.workload(params={"which": ["root"]})
def square(which: str, device: str):
    """A matmul of the commit's size."""
    a, b = model.matrices()
    return perfsuite.Step(lambda: a @ b, items=1, unit="products")
'''
# The recipe of docs/front-ends.md ("A repository that is not a package"), less the matrix: the
# test's environment sees this venv's torch and perfsuite through ASV_PYTHONPATH instead of
# installing torch (5 GB, a minute) into asv's.
ASV_CONF = {
    "version": 1,
    "project": "scripts",
    "repo": ".",
    "branches": ["main"],
    "environment_type": "virtualenv",
    "build_command": [],
    "install_command": [],
    "uninstall_command": [],
    "benchmark_dir": "benchmarks",
    "env_dir": ".asv/env",
    "results_dir": ".asv/results",
    "html_dir": ".asv/html",
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_asv_history_of_a_repository_that_is_not_a_package_measures_each_commits_code(tmp_path):
    asv = shutil.which("asv", path=str(Path(sys.executable).parent)) or shutil.which("asv")
    if asv is None:
        pytest.skip("asv is not installed in this environment")
    root = tmp_path / "scripts"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    shas = []
    for size in (32, 384):
        (root / "model.py").write_text(MODEL.format(size=size))
        _git(root, "add", "model.py")
        _git(root, "commit", "-qm", f"size {size}")
        shas.append(_git(root, "rev-parse", "HEAD"))
    # The working tree's model is neither commit's: a benchmark that imported it would show it.
    (root / "model.py").write_text(MODEL.format(size=2))
    # perfsuite's files, untracked, as a new user adds them
    (root / "pyproject.toml").write_text('[tool.perfsuite]\nworkloads = ["bench"]\n')
    (root / "bench").mkdir()
    (root / "bench" / "square.py").write_text(WORKLOAD)
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "bench_workloads.py").write_text(
        "from perfsuite.frontends.asv import expose\n\nexpose(globals(), max_time=0.5)\n"
    )
    (root / "asv.conf.json").write_text(json.dumps(ASV_CONF))

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    subprocess.run([asv, "machine", "--yes"], cwd=root, env=env, capture_output=True, timeout=120)
    # asv makes its environment (`asv setup` exits 1 even when it succeeds); torch and perfsuite
    # come from this venv through a .pth file instead of the recipe's matrix (asv 0.6 drops
    # ASV_PYTHONPATH in a virtualenv of its own).
    subprocess.run([asv, "setup"], cwd=root, env=env, capture_output=True, timeout=300)
    (made,) = (root / ".asv" / "env").glob("*/lib/python*/site-packages")
    here = sysconfig.get_paths()["purelib"]
    (made / "zz-perfsuite-test.pth").write_text(f"{REPO}\n{here}\n")
    res = subprocess.run(  # the docs' history recipe: every commit of the branch
        [asv, "run", "ALL", "--bench", "SquareTrack.track_median_s", "--show-stderr"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "no pyproject.toml or setup.py" not in out
    medians = {}
    for path in (root / ".asv" / "results").rglob("*.json"):
        if path.name in ("machine.json", "benchmarks.json"):
            continue
        doc = json.loads(path.read_text())
        medians[doc["commit_hash"]] = doc["results"]["bench_workloads.SquareTrack.track_median_s"][0][0]
    assert set(medians) == set(shas), out[-3000:]
    # 384^3 against 32^3 multiply-adds: far beyond any load's noise (the tree's size 2 would be
    # the smaller still, and equal at both commits).
    assert medians[shas[1]] > 20 * medians[shas[0]], medians
