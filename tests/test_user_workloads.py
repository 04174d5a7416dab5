"""The user's own model, measured (issue 21): examples/my-project copied into a temporary git
repository and driven as a user would, through every front-end; and bad declarations."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_each import perfsuite_each

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "my-project"
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]


def _env() -> dict:
    # perfsuite from this checkout, whether or not it is installed; one thread keeps the runs calm.
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _plugin() -> list[str]:
    """`-p` for perfsuite's pytest plugin where it is not installed (a source tree on PYTHONPATH)."""
    from importlib.metadata import entry_points

    installed = any(ep.value == "perfsuite.frontends.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "perfsuite.frontends.pytest_plugin"]


def perfsuite(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """examples/my-project as a fresh git repository with one commit."""
    root = tmp_path / "my-project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".asv", "__pycache__"))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "the project"], cwd=root, check=True)
    return root


def commit(root: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", message], cwd=root, check=True)


@pytest.mark.slow
def test_list_run_and_check_find_the_users_workload_from_pyproject(project):
    res = perfsuite(project, "list")
    assert res.returncode == 0, res.stderr
    assert "tiny_mlp" in res.stdout and "32,128 (sweep)" in res.stdout and "A two-layer MLP" in res.stdout
    assert "resnet" not in res.stdout and "perfsuite list --all" in res.stdout  # the project's own
    res = perfsuite(project, "list", "--all")
    assert res.returncode == 0 and "tiny_mlp" in res.stdout and "resnet" in res.stdout  # beside the built-ins

    out = project / "r.json"
    res = perfsuite(project, "run", "tiny_mlp", "--device", "cpu", "--max-time", "0.5", "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    recs = json.loads(out.read_text())["records"]
    assert [r["params"]["batch_size"] for r in recs] == [32, 128]  # the default sweep
    for r in recs:  # FLOPs for free: counted once at build time
        assert r["work"]["flops_method"] == "FlopCounterMode"
        # 2 FLOPs a multiply-add; forward both layers, backward both weight gradients and the second
        # layer's input gradient (the batch needs none): 2 b (2 x 256*256 + 3 x 256*10)
        b = r["params"]["batch_size"]
        assert r["work"]["flops_per_step"] == 2 * b * (2 * 256 * 256 + 3 * 256 * 10)
        assert r["work"]["items_per_step"] == r["params"]["batch_size"] and r["work"]["item_unit"] == "samples"

    res = perfsuite(project, "check", "tiny_mlp", "--device", "cpu")
    assert res.returncode == 0 and "ok    tiny_mlp: its own check" in res.stdout, res.stdout + res.stderr
    res = perfsuite(project, "check", "--device", "cpu")  # no workload named: the project's, not all 12
    assert res.returncode == 0 and "ok    tiny_mlp: its own check" in res.stdout, res.stdout + res.stderr
    assert "checks on cpu: 1 ok, 0 failed" in res.stdout and "resnet" not in res.stdout


@pytest.mark.slow
def test_worker_processes_load_the_users_files_too(project):
    out = project / "w.json"
    res = perfsuite(
        project,
        "run",
        "tiny_mlp",
        "-p",
        "batch_size=32",
        "--processes",
        "2",
        "--device",
        "cpu",
        "--max-time",
        "1",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["conditions"]["processes"] == 2  # merged from two fresh interpreters that loaded bench/tiny_mlp.py


@pytest.mark.slow
def test_the_gate_builds_the_base_from_a_worktree_and_catches_a_slower_commit(project):
    model = project / "myproj" / "model.py"
    model.write_text(
        model.read_text().replace(
            "        return self.body(x)",
            "        y = self.body(x)\n        for _ in range(3):  # extra work: a slower forward\n"
            "            y = y + 0.0 * torch.tanh(x @ x.T).sum()\n        return y",
        )
    )
    commit(project, "a slower forward")
    args = (
        "gate",
        "tiny_mlp",
        "-p",
        "batch_size=32",
        "--device",
        "cpu",
        "--max-time",
        "3",
        "--builds",
        "2",
        "--threads",
        "1",
    )
    # `--commit HEAD`: the commit against its own parent, both in worktrees (issue 50: no worktrees by hand).
    slower = perfsuite(project, *args, "--commit", "HEAD", "--energy")
    if slower.returncode == 5:
        # Undecided: on a loaded machine 3 s of pairs can leave a 2.7x slowdown's interval wide
        # (CI, 2026-11-28: 0.83-7.5 over 20 pairs; beside four busy processes, 12 s read 1.160
        # (0.968-1.389) on 2026-11-29). The gate says it needs more time; given it, it must then
        # say slower. It never says same or faster.
        slower = perfsuite(project, *args[:-5], "30", *args[-4:], "--commit", "HEAD", "--energy")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    # --energy (issue 54): each side asked for its joules per step after the pairs; this VM has no
    # RAPL counter, and the verdict says so (a machine with one gives the paired energy ratio).
    assert "energy not measured: no RAPL counter" in slower.stdout or " energy, ratio " in slower.stdout
    assert ": slower, ratio " in slower.stdout and "% CI " in slower.stdout  # the word, its ratio and interval
    # The stored verdict says which commits it gated (verdicts() read NaN for them, issue 50's rerun)
    import perfsuite as api

    def sha(rev):
        return subprocess.run(["git", "rev-parse", rev], cwd=project, capture_output=True, text=True).stdout.strip()

    gated = api.verdicts(os.environ["PERFSUITE_STORE"], kind="gate").iloc[-1]  # conftest: this test's store
    assert (gated["commit"], gated["parent"]) == (sha("HEAD"), sha("HEAD~1")), gated
    root = perfsuite(project, "gate", "tiny_mlp", "--commit", "HEAD~1", "--device", "cpu")  # the first commit
    assert root.returncode == 2 and "--commit's parent" in root.stderr, root.stdout + root.stderr
    # and what kind of change it is, from the two sides' work signatures: x @ x.T three times, exact
    said = " ".join(slower.stdout.split())
    assert "more work: +3 " in said and "+3 aten.mm.default (32x256,256x32) float32" in said, said

    (project / "NOTES.md").write_text("a change that does not touch the step\n")
    commit(project, "notes")
    same = perfsuite(project, *args, "--base", "HEAD~1")
    # Unchanged code is never slower; 3 s of pairs may not tell "same" from a few percent: then
    # it says undecided (exit 5), not ok.
    assert same.returncode in (0, 5) and ": slower," not in same.stdout, same.stdout + same.stderr
    assert (same.returncode == 5) == (": undecided, ratio " in same.stdout)
    assert "same work" in " ".join(same.stdout.split()), same.stdout
    listed = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # the base checkouts are gone


@pytest.mark.slow
def test_the_gates_self_check_shows_its_power_on_the_users_workload(project, tmp_path):
    """`perfsuite gate W --slowdown F` on the user's workload, as on resnet: its step against
    itself padded with matmuls, and against itself unchanged; the rates and every gate's pairs."""
    out = tmp_path / "self-check.json"
    res = perfsuite(
        project,
        "gate",
        "tiny_mlp",
        "-p",
        "batch_size=128",
        "--device",
        "cpu",
        "--slowdown",
        "0.5",
        "--trials",
        "1",
        "--max-time",
        "2",
        "--builds",
        "2",
        "--threads",
        "1",
        "--json",
        str(out),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("tiny_mlp[batch_size=128,width=256]: injected ")
    assert "caught " in res.stdout and "unchanged flagged " in res.stdout
    (r,) = json.loads(out.read_text())["results"]
    assert r["case"] == "tiny_mlp[batch_size=128,width=256]" and r["trials"] == 1 and r["matmuls_added"] >= 1
    assert {"power", "false_alarm_rate", "caught", "false_alarms"} <= set(r)
    for side in ("slow", "same"):
        assert r["runs"][0][side]["run"]["ratios"] and r["runs"][0][side]["run"]["decision"] is not None


@pytest.mark.slow
def test_pytest_collects_one_benchmark_per_case_without_a_test_file(project):
    smoke = subprocess.run(
        [sys.executable, "-m", "pytest", "--benchmark-disable", "-q", "-p", "no:cacheprovider", *_plugin()],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    # tiny_mlp's two cases and classify's two (the inference workload variants are offered)
    assert smoke.returncode == 0 and "4 passed" in smoke.stdout, smoke.stdout + smoke.stderr
    out = project / "bench.json"
    timed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--benchmark-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *_plugin(),
            "--perfsuite-max-time",
            "0.3",
            "--perfsuite-device",
            "cpu",
            f"--benchmark-json={out}",
        ],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert timed.returncode == 0, timed.stdout + timed.stderr
    benches = json.loads(out.read_text())["benchmarks"]
    # Every parameter in the id, the scalar default width too (a workload of scalars alone was `test_x[]`).
    assert sorted(b["name"] for b in benches) == [
        "test_classify[batch_size=1,width=256]",
        "test_classify[batch_size=64,width=256]",
        "test_tiny_mlp[batch_size=128,width=256]",
        "test_tiny_mlp[batch_size=32,width=256]",
    ]
    for b in benches:
        assert b["extra_info"]["flops_per_s"] > 0 and b["extra_info"]["throughput_unit"] == "samples/s"


def test_benchmark_only_in_a_repository_with_its_own_tests_collects_the_workloads_only(project):
    """Issue 50: in a repository whose pytest config sets `testpaths = ['tests']`, the documented
    `pytest --benchmark-only` collected the project's own tests and stopped at one that could not
    import (exit 2). Without named paths it now collects the perfsuite workloads alone, and says so;
    named paths are collected as pytest would."""
    tests = project / "tests"
    tests.mkdir()
    (tests / "test_host.py").write_text("import a_test_dependency_not_installed\n\ndef test_x():\n    pass\n")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + '\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *_plugin(), "--benchmark-only"]
    opts = ["--co", "-q"]
    res = subprocess.run([*base, *opts], cwd=project, env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tiny_mlp" in res.stdout and "test_host" not in res.stdout
    header = subprocess.run([*base, "--co"], cwd=project, env=_env(), capture_output=True, text=True, timeout=300)
    assert "collects the workloads of pyproject.toml only" in header.stdout
    # Named paths: pytest's own collection, the host's broken test included.
    named = subprocess.run(
        [*base, *opts, "tests"], cwd=project, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert named.returncode != 0 and "a_test_dependency_not_installed" in named.stdout + named.stderr


@pytest.mark.slow
def test_asv_tracks_the_users_workloads(project):
    asv = shutil.which("asv", path=str(Path(sys.executable).parent)) or shutil.which("asv")
    if asv is None:
        pytest.skip("asv is not installed in this environment")
    subprocess.run([asv, "machine", "--yes"], cwd=project, env=_env(), capture_output=True, timeout=120)
    # The Track's calibrated run at half a second a case (expose's default is 5 s): a smoke run here.
    bench = project / "benchmarks" / "bench_workloads.py"
    bench.write_text(bench.read_text().replace("expose(globals())", "expose(globals(), max_time=0.5)"))
    # The documented command (docs/adding-a-workload.md), as a smoke run: --python=same saves its
    # results only when told which commit they belong to. Only tiny_mlp's classes: each asv
    # benchmark is a fresh interpreter importing torch, and the classifier's six add a minute.
    res = subprocess.run(
        [asv, "run", "--python=same", "--set-commit-hash=HEAD", "--quick", "--show-stderr", "--bench", "TinyMlp"],
        cwd=project,
        env={**_env(), "ASV_PYTHONPATH": str(REPO)},  # asv drops PYTHONPATH
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (result,) = [
        p for p in (project / ".asv" / "results").rglob("*.json") if p.name not in ("machine.json", "benchmarks.json")
    ]
    doc = json.loads(result.read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    assert doc["commit_hash"] == head
    medians = doc["results"]["bench_workloads.TinyMlpTrack.track_median_s"]
    assert all(v > 0 for v in medians[0])  # perfsuite's calibrated median, --quick or not
    # --quick calls the step once: asv's own timing is skipped with the reason, not stored as one
    assert all(v is None or v != v for v in doc["results"]["bench_workloads.TinyMlpTime.time_step"][0])
    assert "a smoke run, not a timing" in res.stdout + res.stderr
    # The step's own peak memory, not the process's resident size (hundreds of MB: torch imported)
    assert "bench_workloads.TinyMlpTrack.track_peak_rss" not in doc["results"]
    assert all(0 <= v < 64 << 20 for v in doc["results"]["bench_workloads.TinyMlpTrack.track_step_peak_memory"][0])


def test_a_warning_the_users_file_gives_at_import_is_shown_once_not_once_per_worker(project):
    """Issue 50: a deprecation warning from the user's model module was printed by the parent and
    again by every worker process that loaded the same file."""
    f = project / "bench" / "tiny_mlp.py"
    f.write_text('import warnings\nwarnings.warn("myproj.old_api is deprecated", FutureWarning)\n' + f.read_text())
    res = perfsuite(
        project, "run", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu", "--max-time", "0.4", "--processes", "2"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert (res.stdout + res.stderr).count("FutureWarning: myproj.old_api is deprecated") == 1, res.stderr


# ---- bad declarations -----------------------------------------------------------------------------


def _project_with(tmp_path: Path, source: str, config: str = 'workloads = ["bench"]') -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.perfsuite]\n{config}\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "mine.py").write_text(source)
    return tmp_path


@pytest.fixture
def list_here(monkeypatch, capsys):
    """`perfsuite list` from a project folder, in this process: (exit code, stdout, stderr). For
    projects whose workload file is refused as it loads, which leaves nothing registered
    (discover.load_file): a fresh interpreter per case cost a second or more of imports, and the
    first test below still runs one. sys.path (discovery puts the project's root first) is
    restored after the test, and a workload that did register is dropped."""
    from perfsuite.cli import app as cli
    from perfsuite.core import registry

    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(registry.names())

    def run(root: Path) -> tuple[int, str, str]:
        monkeypatch.chdir(root)
        capsys.readouterr()
        code = cli.main(["list"])
        out = capsys.readouterr()
        return code, out.out, out.err

    yield run
    for name in set(registry.names()) - before:
        registry._REGISTRY.pop(name, None)


def test_a_workload_file_that_fails_to_import_names_the_file_and_line(tmp_path):
    root = _project_with(tmp_path, "import perfsuite\n\nx = 1\nraise ValueError('my own bug')\n")
    res = perfsuite(root, "list")
    assert res.returncode == 2
    assert f"{root / 'bench' / 'mine.py'}, line 4: ValueError: my own bug" in res.stderr
    assert "Traceback" in res.stderr  # the user's own traceback is shown: it is their code


def test_a_name_that_clashes_with_a_builtin_names_both_places(tmp_path, list_here):
    root = _project_with(
        tmp_path, "import perfsuite\n\n@perfsuite.workload(params={})\ndef matmul(device):\n    pass\n"
    )
    code, _, err = list_here(root)
    assert code == 2 and "'matmul' is declared twice" in err
    assert "in perfsuite's built-in workloads and in " in err and "mine.py:3" in err
    from perfsuite.core import registry

    assert registry.get("matmul").builtin  # the built-in is still the one registered


@pytest.mark.parametrize(
    "source, message",
    [
        ("@perfsuite.workload(params={'n': 4})\ndef w(device):\n    pass\n", "does not accept parameter 'n'"),
        ("@perfsuite.workload(params={'n': {1: 2}})\ndef w(n, device):\n    pass\n", "parameter 'n': default"),
        ("@perfsuite.workload(params={})\ndef w(n, device):\n    pass\n", "parameter 'n' of w has no declared value"),
        ("@perfsuite.workload(params={'n': [1, 'a']})\ndef w(n, device):\n    pass\n", "parameter 'n'"),
        (
            "@perfsuite.workload(params={'n': 4}, grids={'ci': {'m': [1]}})\ndef w(n, device):\n    pass\n",
            "grids['ci'] names parameter 'm'",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, grids={'ci': {'n': ['a']}})\ndef w(n, device):\n    pass\n",
            "grids['ci']: parameter 'n' expects int",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, grids={'huge': {}})\ndef w(n, device):\n    pass\n",
            "grids has no size 'huge'",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, asv={'proceses': 2})\ndef w(n, device):\n    pass\n",
            "asv has no key 'proceses'",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, checks={'agrees': 3})\ndef w(n, device):\n    pass\n",
            "check 'agrees' is not callable",
        ),
        (
            "@perfsuite.workload(params={'n': perfsuite.param(None)})\ndef w(n, device):\n    pass\n",
            "parameter 'n': a default of None needs perfsuite.param(None, type=...)",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, presets={'ci': {'n': 1}})\ndef w(n, device):\n    pass\n",
            "presets are chosen by a parameter 'size'",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, validate=3)\ndef w(n, device):\n    pass\n",
            "validate must be a function",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, plan={'build': 2})\ndef w(n, device):\n    pass\n",
            "plan has no key 'build'; known keys: build_s",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, plan={'build_s': {'tpu': 2}})\ndef w(n, device):\n    pass\n",
            "plan['build_s'] must be seconds >= 0",
        ),
        (
            "@perfsuite.workload(params={'n': 4}, trainer=print, ddp={'variant': 'n'})\ndef w(n, device):\n    pass\n",
            "ddp['variant'] must name a parameter with choices",
        ),
    ],
)
def test_a_bad_declaration_is_exit_2_naming_the_workload_and_the_parameter(tmp_path, list_here, source, message):
    root = _project_with(tmp_path, "import perfsuite\n\n" + source)
    code, _, err = list_here(root)
    assert code == 2 and "workload 'w'" in err and message in err, err


def test_a_step_says_how_its_flops_were_found_and_one_without_any_is_not_counted():
    import perfsuite
    from perfsuite.core.errors import ConfigError
    from perfsuite.user.declare import built_step

    calls = []
    step = perfsuite.Step(
        lambda: calls.append(1), items=3, unit="B", bytes=3.0, flops_method="unknown", extra=lambda: {"moved": 3}
    )
    built = built_step("w", step, built_step)
    assert calls == []  # not run under the FLOP counter
    assert built.work.flops_per_step is None and built.work.flops_method == "unknown" and built.extra() == {"moved": 3}
    given = built_step("w", perfsuite.Step(lambda: None, items=1, flops=8.0, flops_method="analytic"), built_step)
    assert (given.work.flops_per_step, given.work.flops_method) == (8.0, "analytic")
    assert built_step("w", perfsuite.Step(lambda: None, items=1, flops=8.0), built_step).work.flops_method == "user"
    for bad, message in (
        ({"flops": 1.0, "flops_method": "unknown"}, "flops given with flops_method 'unknown'"),
        ({"flops_method": "analytic"}, "flops_method 'analytic' without flops"),
        ({"flops_method": "guessed"}, "flops_method must be one of"),
        ({"extra": {"a": 1}}, "extra must be callable"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            perfsuite.Step(lambda: None, items=1, **bad)


def test_an_unknown_tool_perfsuite_key_is_an_error(tmp_path, list_here):
    root = _project_with(tmp_path, "", config='workloads = ["bench"]\nworkload = ["typo"]')
    code, _, err = list_here(root)
    assert code == 2 and "no key 'workload'" in err and "known keys: workloads" in err


@pytest.mark.slow
def test_a_step_that_raises_is_a_recorded_failure_with_the_users_traceback(tmp_path):
    root = _project_with(
        tmp_path,
        (
            "import perfsuite\n\n@perfsuite.workload(params={'n': [1, 2]})\ndef w(n, device):\n"
            "    def step():\n        if n == 2:\n            raise RuntimeError('my step broke')\n"
            "    return perfsuite.Step(step, items=n)\n"
        ),
    )
    out = root / "r.json"
    res = perfsuite(root, "run", "w", "--device", "cpu", "--max-time", "0.3", "--out", str(out))
    assert res.returncode == 3, res.stdout + res.stderr
    doc = json.loads(out.read_text())
    assert [r["params"]["n"] for r in doc["records"]] == [1]  # the run went on and kept the good case
    (failure,) = doc["failures"]
    assert failure["error"] == "RuntimeError: my step broke"
    assert 'mine.py", line 7, in step' in failure["traceback"]


def test_workloads_from_the_command_line_without_a_pyproject(tmp_path):
    (tmp_path / "w.py").write_text(
        "import perfsuite\n\n@perfsuite.workload(params={'n': 3})\ndef cli_only(n, device):\n"
        "    '''Found by --workloads.'''\n    return perfsuite.Step(lambda: None, items=n)\n"
    )
    res = perfsuite(tmp_path, "--workloads", str(tmp_path / "w.py"), "list")
    assert res.returncode == 0 and "cli_only" in res.stdout and "Found by --workloads" in res.stdout
    assert "matmul" in res.stdout and "--all" not in res.stdout  # no project: everything, as before
    assert "cli_only" not in perfsuite(tmp_path, "list").stdout


_MINE = (
    "import perfsuite\n\ndef _fine(n, device):\n    pass\n\n"
    "@perfsuite.workload(params={'n': 3}, checks=_fine)\ndef mine(n, device):\n"
    "    '''The project's own.'''\n    return perfsuite.Step(lambda: None, items=n)\n"
)


def test_list_in_a_project_shows_its_own_workloads_and_all_with_all(tmp_path):
    root = _project_with(tmp_path, _MINE)
    (tmp_path / "extra.py").write_text(_MINE.replace("mine", "extra"))
    # The three in one interpreter (tests/cli_each.py), each through the command line's main.
    own, every, extra = perfsuite_each(
        root, [("list",), ("list", "--all"), ("--workloads", str(tmp_path / "extra.py"), "list")], _env()
    )
    assert own.returncode == 0 and "mine" in own.stdout, own.stderr
    assert "matmul" not in own.stdout and re.search(r"\d+ more .*perfsuite list --all", own.stdout)
    assert every.returncode == 0 and "mine" in every.stdout and "matmul" in every.stdout and "resnet" in every.stdout
    # a file named with --workloads is the user's too
    assert "mine" in extra.stdout and "extra" in extra.stdout and "matmul" not in extra.stdout


def test_check_in_a_project_runs_its_own_checks_and_all_with_all(tmp_path):
    root = _project_with(tmp_path, _MINE)
    res, both = perfsuite_each(root, [("check",), ("check", "mine", "--all")], _env())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok    mine: its own check" in res.stdout and "checks on cpu: 1 ok, 0 failed" in res.stdout
    assert "matmul" not in res.stdout and "--all" in res.stdout  # says how to get the rest
    assert both.returncode == 2 and "not both" in both.stderr


@pytest.mark.slow
def test_check_all_in_a_project_runs_the_builtins_too(tmp_path):
    root = _project_with(tmp_path, _MINE)
    res = perfsuite(root, "check", "--all", timeout=900)
    assert "ok    mine: its own check" in res.stdout and "matmul:" in res.stdout, res.stdout + res.stderr


@pytest.mark.slow
def test_pair_trace_profile_step_compare_and_report_work_on_it(project):
    out = project / "r.json"
    cpu = ("-p", "batch_size=32", "--device", "cpu")
    # One interpreter for the six, as a user's session with perfsuite.cli.app.main would run them
    # (tests/cli_each.py): each still measures through its worker or side processes; a fresh
    # interpreter per command cost seconds of imports each.
    pair, profile, trace, run, compare, report = perfsuite_each(
        project,
        [
            ("pair", "tiny_mlp", "--vary", "width=64,128", *cpu, "--max-time", "0.5"),
            ("profile-step", "tiny_mlp", *cpu, "--warmup-iters", "1"),
            ("trace", "tiny_mlp", *cpu),
            ("run", "tiny_mlp", *cpu, "--max-time", "0.5", "--out", str(out)),
            ("compare", str(out), str(out)),
            ("report", str(out), "--out-dir", str(project / "rep")),
        ],
        _env(),
    )
    assert pair.returncode == 0 and "time 64/128" in pair.stdout, pair.stdout + pair.stderr
    assert profile.returncode == 0 and "profile-step tiny_mlp" in profile.stdout, profile.stdout + profile.stderr
    assert trace.returncode == 0 and "top operators" in trace.stdout, trace.stdout + trace.stderr
    assert run.returncode == 0 and json.loads(out.read_text())["records"][0]["workload"] == "tiny_mlp", run.stderr
    assert compare.returncode == 2 and "same record" in compare.stderr, compare.stdout + compare.stderr  # one run
    assert report.returncode == 0 and "tiny_mlp" in (project / "rep" / "summary.md").read_text(), report.stderr


def test_a_suite_file_in_the_users_repository_names_the_workload_and_runs_its_check(project):
    (project / "mine.yaml").write_text(
        "name: mine\ndevice: cpu\nmax_time: 0.5\nsuites:\n  - workload: tiny_mlp\n    params: {batch_size: [32]}\n"
    )
    out = project / "suite-out"
    res = perfsuite(project, "run", "--config", "mine.yaml", "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok    tiny_mlp: its own check" in res.stdout  # checked before it was timed
    (rec,) = json.loads((out / "tiny_mlp.json").read_text())["records"]
    assert rec["params"] == {"batch_size": 32, "width": 256}


def test_the_gate_refuses_a_base_side_that_imports_the_project_from_elsewhere(project, tmp_path):
    """An installed copy of the project (editable or not) would make the 'base' run other code than
    the base revision's: the side checks where its own packages came from."""
    elsewhere = tmp_path / "site"
    shutil.copytree(project / "myproj", elsewhere / "myproj")
    bench = project / "bench" / "tiny_mlp.py"
    bench.write_text(
        f"import sys\nsys.path.insert(0, {str(elsewhere)!r})  # a stand-in for an installed copy\n" + bench.read_text()
    )
    commit(project, "an installed copy shadows the checkout")
    res = perfsuite(
        project,
        "gate",
        "tiny_mlp",
        "-p",
        "batch_size=32",
        "--base",
        "HEAD",
        "--device",
        "cpu",
        "--max-time",
        "1",
        "--builds",
        "1",
        "--threads",
        "1",
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "imported myproj from" in res.stderr and str(elsewhere) in res.stderr
    listed = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # nothing left behind on the way out


@pytest.mark.slow
def test_a_step_that_prints_every_call_does_not_hang_the_gate(project):
    bench = project / "bench" / "tiny_mlp.py"
    bench.write_text(
        bench.read_text().replace("        opt.step()\n", "        opt.step()\n        print('loss line ' * 40)\n")
    )
    commit(project, "a chatty step")
    res = perfsuite(
        project,
        "gate",
        "tiny_mlp",
        "-p",
        "batch_size=32",
        "--base",
        "HEAD",
        "--device",
        "cpu",
        "--max-time",
        "1",
        "--builds",
        "1",
        "--threads",
        "1",
        timeout=180,
    )
    assert res.returncode in (0, 1, 5) and ", ratio " in res.stdout, res.stdout + res.stderr


def test_the_pytest_plugin_stays_out_of_projects_that_are_not_its_own(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("this is { not toml\n")  # a fixture of someone's
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert sum([1, 1]) == 2\n")
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin()],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr


def test_without_pytest_benchmark_the_plugin_says_what_is_missing(project):
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", *_plugin()],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "need pytest-benchmark" in res.stdout + res.stderr


def test_a_workload_folder_leaves_out_tests_conftest_and_environments(tmp_path):
    from perfsuite.core.discover import workload_files

    for rel in (
        "a.py",
        "sub/b.py",
        "_private.py",
        "test_a.py",
        "conftest.py",
        "setup.py",
        "venv/lib/x.py",
        ".hidden/y.py",
        "_helpers/z.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert [p.relative_to(tmp_path).as_posix() for p in workload_files(tmp_path)] == ["a.py", "sub/b.py"]


def test_in_an_environment_asv_built_for_a_commit_the_installed_project_wins(tmp_path, monkeypatch):
    """`asv run A..B` installs each commit into its environment and runs the current tree's
    benchmark module: the tree's copy of the project must not shadow the commit's (it did: every
    commit measured the working tree's code). Under `--python=same` the tree is what is measured."""
    import importlib
    import sys

    from perfsuite.core import discover

    tree = tmp_path / "tree"
    (tree / "histpkg_x").mkdir(parents=True)
    (tree / "histpkg_x" / "__init__.py").write_text("WHO = 'tree'\n")
    (tree / "pyproject.toml").write_text("[tool.perfsuite]\nworkloads = ['bench']\n")
    (tree / "bench").mkdir()
    installed = tmp_path / "site"
    (installed / "histpkg_x").mkdir(parents=True)
    (installed / "histpkg_x" / "__init__.py").write_text("WHO = 'installed'\n")
    # asv's checkout of the commit (its environment's `project` folder): what a repository that
    # is not a package imports, since asv installed nothing (tests/test_asv_script_repo.py)
    env_dir = tmp_path / "env"
    (env_dir / "project" / "histpkg_y").mkdir(parents=True)
    (env_dir / "project" / "histpkg_y" / "__init__.py").write_text("WHO = 'checkout'\n")
    (tree / "histpkg_y").mkdir()
    (tree / "histpkg_y" / "__init__.py").write_text("WHO = 'tree'\n")
    monkeypatch.setenv("ASV_ENV_DIR", str(env_dir))
    monkeypatch.syspath_prepend(str(installed))
    cases = {"virtualenv": ("a", "x", "installed"), "existing": ("b", "x", "tree")}
    cases |= {"virtualenv ": ("c", "y", "checkout"), "existing ": ("d", "y", "tree")}
    clean_path = list(sys.path)
    for env, (name, pkg, want) in cases.items():
        f = tree / "bench" / f"w_{name}.py"
        f.write_text(f"import histpkg_{pkg}\nWHO = histpkg_{pkg}.WHO\n")
        monkeypatch.setenv("ASV", "true")
        monkeypatch.setenv("ASV_ENV_TYPE", env.strip())
        monkeypatch.setattr(sys, "path", list(clean_path))  # each case from the same path
        sys.modules.pop("histpkg_x", None)
        importlib.invalidate_caches()
        sys.modules.pop("histpkg_y", None)
        mod = sys.modules[discover.load_file(f)]
        assert mod.WHO == want, (env, pkg)
        sys.modules.pop("histpkg_x", None)
        sys.modules.pop("histpkg_y", None)


def test_bisect_by_instructions_counts_each_commit_in_its_own_checkout(project, monkeypatch, forget_workloads):
    """Issue 56: one count per commit, each of the commit's own code (its worktree as code root),
    halving to the commit that added work. The count is stood in by one that reads the checkout it
    is given (a real count under Callgrind, through the same files and code root, is
    tests/test_instructions.py's; three real ones took 177 s of the test tier)."""
    from perfsuite.core.discover import discover
    from perfsuite.jobs.count_bisect import count_bisect
    from perfsuite.measuring import instructions

    model = project / "myproj" / "model.py"
    model.write_text(
        model.read_text().replace(
            "        return self.body(x)",
            "        y = self.body(x)\n        y = y + 0.0 * torch.tanh(x @ x.T).sum()  # extra work\n        return y",
        )
    )
    commit(project, "one extra matmul")
    added = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    for i in range(3):
        (project / "NOTES.md").write_text(f"note {i}\n")
        commit(project, f"notes {i}")
    counted = []

    def count(workload, params, device, files=(), code_root=None, **kw):
        root = Path(code_root)
        assert files == [str(project / "bench" / "tiny_mlp.py")]  # the working tree's workload file (tree)
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        counted.append(sha)
        extra = (root / "myproj" / "model.py").read_text().count("x @ x.T")  # this checkout's own code
        return {"status": "ok", "per_step": 1_000_000.0 + 20_000.0 * extra, "seconds": 1.0}

    monkeypatch.chdir(project)
    monkeypatch.setattr(instructions, "count", count)
    discover([])
    run = count_bisect("tiny_mlp", "HEAD~4", "HEAD", params={"batch_size": 32}, device="cpu")
    assert run.first is not None and run.first.sha == added and "bad is +2.00% instructions per step" in run.answer()
    assert len(counted) == len(set(counted)) <= 2 + 2  # good, bad, then halving four commits: each once
    listed = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True, text=True).stdout
    assert len(listed.splitlines()) == 1  # every checkout removed


def test_bisect_by_instructions_refuses_bad_revisions_before_counting(project):
    """Bad input is exit 2 with the reason, before the first (30-60 s) count."""
    base = ("bisect", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu", "--instructions")
    same = perfsuite(project, *base, "--good", "HEAD", "--bad", "HEAD")
    assert same.returncode == 2 and "are the same commit" in same.stderr, same.stdout + same.stderr
    unknown = perfsuite(project, *base, "--good", "no-such-rev", "--bad", "HEAD")
    assert unknown.returncode == 2 and "no-such-rev" in unknown.stderr, unknown.stdout + unknown.stderr
    assert "instructions per step [" not in same.stdout + unknown.stdout  # nothing was counted


def _count_stood_in(counted: list[str]):
    """An instruction count stood in by one that reads the checkout it is given: 1,000,000 per step
    and 20,000 more for each extra matmul (`x @ x.T`) in its model; each checkout's commit is kept
    in `counted`, so a test sees which commits were counted and how often."""

    def count(workload, params, device, files=(), code_root=None, **kw):
        root = Path(code_root)
        counted.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout)
        extra = (root / "myproj" / "model.py").read_text().count("x @ x.T")
        return {"status": "ok", "per_step": 1_000_000 + 20_000 * extra, "seconds": 1.0}

    return count


def _commit_extra_matmul(project: Path) -> str:
    """A commit that adds one matmul to the example model's forward (what the stood-in count sees);
    its sha."""
    model = project / "myproj" / "model.py"
    model.write_text(model.read_text().replace("        return self.body(x)", "        y = self.body(x)\n        y = y + 0.0 * torch.tanh(x @ x.T).sum()  # extra work\n        return y"))  # fmt: skip
    commit(project, "one extra matmul")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()


def test_history_by_instructions_counts_every_commit_once_each_against_the_one_before(
    project, monkeypatch, forget_workloads
):
    """Issue 56: a history walked by instruction count. The count is stood in as above (it reads the
    checkout it is given); the commit that adds a matmul is the one flagged, the notes are not."""
    from perfsuite.core.discover import discover
    from perfsuite.jobs.count_history import count_history
    from perfsuite.measuring import instructions

    (project / "NOTES.md").write_text("a note\n")
    commit(project, "a note")
    added = _commit_extra_matmul(project)
    (project / "NOTES.md").write_text("another note\n")
    commit(project, "another note")
    counted: list[str] = []
    count = _count_stood_in(counted)

    monkeypatch.chdir(project)
    monkeypatch.setattr(instructions, "count", count)
    discover([])
    run = count_history("tiny_mlp", "HEAD~3..HEAD", params={"batch_size": 32}, device="cpu").state
    assert [p.commit.sha for p in run.changed(1)] == [added] and not run.changed(-1)
    assert len(run.points) == len(counted) == len(set(counted)) == 4  # the start and each commit after it, once
    assert run.points[2].moved == pytest.approx(0.02) and "<- more instructions" in run.lines()[2]
    assert "1 added instructions" in run.summary()
    listed = subprocess.run(["git", "worktree", "list"], cwd=project, capture_output=True, text=True).stdout
    assert len(listed.splitlines()) == 1  # every checkout removed
    refused = perfsuite(project, "history", "tiny_mlp", "--update", "--instructions", "--device", "cpu",
                        "--log", str(project / "none.json"))  # fmt: skip
    assert refused.returncode == 2 and "no history by count" in refused.stderr, refused.stderr


def test_history_by_instructions_gates_each_flagged_commit_by_time_against_its_parent(
    project, monkeypatch, capsys, forget_workloads
):
    """Issue 56: a count's finding is confirmed by time where time can see it. The commit that adds
    a matmul is flagged by the (stood-in) count, then gated by time against its parent (the gate
    stood in too); the notes commit is not gated; --count-only gates nothing."""
    import types

    import perfsuite.jobs.gate as gate_job
    from perfsuite.cli import app as cli
    from perfsuite.compare.paired_gate import GateVerdict, PairedRun
    from perfsuite.measuring import instructions

    added = _commit_extra_matmul(project)
    (project / "NOTES.md").write_text("a note\n")
    commit(project, "a note")
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(instructions, "count", _count_stood_in([]))
    gated = []

    def gate(workload, base="HEAD", *, commit=None, cases=None, device="auto", settings=None, **kw):
        gated.append((workload, commit, cases, settings.threshold))
        run = PairedRun([1.3, 1.31, 1.29, 1.3, 1.32, 1.28] * 4, 1, decision="slower", p=1e-4)
        verdict = GateVerdict("tiny_mlp[batch_size=32]", 0.01, run, confirmed=True)
        return types.SimpleNamespace(outcome=types.SimpleNamespace(records=[verdict], failures=[]))

    monkeypatch.setattr(gate_job, "gate", gate)
    code = cli.main(["history", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu", "--instructions",
                     "--range", "HEAD~2..HEAD"])  # fmt: skip
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1, out  # the count decides the exit: a commit added instructions
    # the case the count counted (its parameters resolved), at the time gate's own threshold
    assert gated == [("tiny_mlp", added, [{"batch_size": 32, "width": 256}], 0.01)], gated
    assert f"{added[:12]}: by time against its parent: slower, ratio 1.30" in out, out
    # The verdict is kept in the log beside the count, its pairs with it, and shown on the page.
    from perfsuite.compare.kinds import load_result
    from perfsuite.core.registry import get
    from perfsuite.jobs.count_history import count_log
    from perfsuite.jobs.history_log import page_beside

    log = count_log("tiny_mlp", get("tiny_mlp").resolve({"batch_size": 32}))
    (kept,) = load_result(log, "count-history")
    flagged = {p.sha: p for p in kept.points if p.by_time is not None}
    assert list(flagged) == [added] and flagged[added].by_time.word == "slower", kept.points
    assert len(flagged[added].by_time.run.ratios) == 24 and not any(p.by_time_note for p in kept.points)
    assert "slower, ratio 1.30" in page_beside(log).read_text()
    # An --update that counts nothing new keeps the verdict with the kept count, and gates nothing.
    assert (
        cli.main(["history", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu", "--instructions", "--update"]) == 0
    )
    (again,) = load_result(log, "count-history")
    assert [p.sha for p in again.points if p.by_time is not None] == [added] and len(gated) == 1, gated
    assert f"{added[:12]}: by time against its parent: slower" in " ".join(capsys.readouterr().out.split())
    gated.clear()
    code = cli.main(["history", "tiny_mlp", "-p", "batch_size=32", "--device", "cpu", "--instructions",
                     "--range", "HEAD~2..HEAD", "--log", str(project / "again.json"), "--count-only"])  # fmt: skip
    assert code == 1 and gated == [] and "by time" not in capsys.readouterr().out


def test_history_by_instructions_is_kept_and_updated_counting_only_the_new_commits(
    project, monkeypatch, forget_workloads
):
    """Issue 56: the history by count is a log and a page; `--update` counts only the commits that
    came since (the same code counts the same), and recounts all of them on another machine."""
    from perfsuite.compare.kinds import load_result
    from perfsuite.core.discover import discover
    from perfsuite.core.errors import ConfigError
    from perfsuite.jobs import count_history as job
    from perfsuite.measuring import instructions

    for note in ("one", "two"):
        (project / "NOTES.md").write_text(note + "\n")
        commit(project, f"note {note}")
    counted: list[str] = []
    count = _count_stood_in(counted)

    monkeypatch.chdir(project)
    monkeypatch.setattr(instructions, "count", count)
    discover([])
    first = job.count_history("tiny_mlp", "HEAD~2..HEAD", params={"batch_size": 32}, device="cpu")
    assert len(counted) == 3 and first.log.exists() and first.page.exists()
    (kept,) = load_result(first.log, "count-history")
    assert [p.sha for p in kept.points] == [p.sha for p in first.state.points] and kept.points[0].per_step == 1e6
    model = project / "myproj" / "model.py"
    model.write_text(model.read_text().replace("        return self.body(x)", "        y = self.body(x)\n        y = y + 0.0 * (x @ x.T).sum()\n        return y"))  # fmt: skip
    commit(project, "one extra matmul <script>")
    added = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    counted.clear()
    again = job.count_history("tiny_mlp", update=True, params={"batch_size": 32}, device="cpu")
    assert counted == [added + "\n"] and again.fresh == {added}  # only the new commit was counted
    assert [p.sha for p in again.state.changed(1)] == [added] and len(again.state.points) == 4
    page = again.page.read_text()
    assert added[:12] in page and "<script>" not in page and "&lt;script&gt;" in page
    counted.clear()
    monkeypatch.setattr(job, "_machine", lambda device: "another machine")
    job.count_history("tiny_mlp", update=True, params={"batch_size": 32}, device="cpu")
    assert len(counted) == 4  # another machine's counts are not this one's
    with pytest.raises(ConfigError, match="it starts at"):  # another start: the log is not replaced
        job.count_history("tiny_mlp", "HEAD~1..HEAD", params={"batch_size": 32}, device="cpu")
    with pytest.raises(ConfigError, match="walked with --every 1"):
        job.count_history("tiny_mlp", update=True, params={"batch_size": 32}, device="cpu", every=2)
    with pytest.raises(ConfigError, match="would drop"):  # the log's newest commit is past this range's end
        job.count_history("tiny_mlp", "HEAD~3..HEAD~1", params={"batch_size": 32}, device="cpu")
    # The command's exit is about what this run counted: the matmul commit, flagged by an earlier
    # run and kept, does not fail a nightly --update again.
    from types import SimpleNamespace

    from perfsuite.cli.history_count import by_count
    from perfsuite.core.registry import get

    monkeypatch.setattr(job, "_machine", lambda device: "this machine again")
    args = SimpleNamespace(
        range_=None,
        update=True,
        param=["batch_size=32"],
        device="cpu",
        threshold=None,
        every=1,
        max_commits=100,
        log=None,
        html=None,
        workloads_from="tree",
        count_only=True,
    )  # fmt: skip  (gating by time: the test above)

    class Quiet:
        def status(self, *a):
            import contextlib

            return contextlib.nullcontext(SimpleNamespace(update=lambda *a, **k: None))

        def print(self, *a, **k):
            pass

    counted.clear()
    assert by_count(args, Quiet(), get("tiny_mlp")) == 1 and len(counted) == 4  # counted anew here: flagged
    counted.clear()
    assert by_count(args, Quiet(), get("tiny_mlp")) == 0 and not counted  # kept: reported before, not again
    (project / ".perfsuite" / "history" / "other.json").write_text(first.log.read_text())
    with pytest.raises(ConfigError, match="not of tiny_mlp"):
        job.count_history("tiny_mlp", update=True, params={"batch_size": 16}, device="cpu",
                          log=project / ".perfsuite" / "history" / "other.json")  # fmt: skip


def test_a_kept_count_of_another_way_of_counting_is_not_this_machines(monkeypatch):
    """A count taken by a process per count and one taken by the server of counts differ by about
    0.25% for the same code: the digest a kept count is reused under names the way it was taken."""
    from perfsuite.jobs import count_history as job
    from perfsuite.measuring import instructions

    now = job._machine("cpu")
    assert job._machine("cpu") == now  # the same machine, the same way: reused
    monkeypatch.setattr(instructions, "METHOD_VERSION", instructions.METHOD_VERSION - 1)
    assert job._machine("cpu") != now
