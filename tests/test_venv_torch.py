"""Which torch `make setup` gives the venv (scripts/venv_torch.py), and what `make bench` does
when the suite run fails a check. No GPU and no network here: the system Python's torch is a
fake package on PYTHONPATH, and make runs its real recipes on a fake venv interpreter."""

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import venv_torch  # noqa: E402
from venv_torch import Probe, Refused  # noqa: E402

PINS = ["torch==2.14.1", "torchvision==0.29.1"]
SPEC = ">=2.4,<2.15"
H100 = Probe(torch="2.11.0+cu130", cuda="13.0", torchvision="0.26.0+cu130")  # what the H100 machine had


def _plan(choice, found):
    return venv_torch.plan(choice, found, PINS, Path("/x/.venv"), "/usr/bin/python3", [], SPEC)


def test_auto_keeps_the_systems_cuda_torch():
    """On the H100 a fresh `make bench` would have installed torch 2.14.1 over its 2.11+cu130."""
    p = _plan("auto", H100)
    assert p.mode == "system"
    assert p.commands == [["/usr/bin/python3", "-m", "venv", "--system-site-packages", "/x/.venv"]]
    assert not any("torch==2.14.1" in c for cmd in p.commands for c in cmd)  # nothing about torch installed
    # pip later sees the installed versions as the only acceptable ones: no extra replaces them.
    assert p.constraints == ["torch==2.11.0+cu130", "torchvision==0.26.0+cu130"]
    assert _plan("auto", Probe(torch="6.2.0", hip="6.2")).mode == "pinned"  # out of range: pinned
    assert _plan("auto", Probe(torch="2.6.0+rocm6.2", hip="6.2")).mode == "system"


@pytest.mark.parametrize(
    "found, why",
    [
        (Probe(why_not="ModuleNotFoundError: No module named 'torch'"), "no torch in the system Python"),
        (Probe(torch="2.14.1+cpu"), "a CPU-only build), not a GPU build: installing torch==2.14.1"),
        (Probe(torch="2.16.0", cuda="13.0"), "outside this project's torch>=2.4,<2.15"),
    ],
)
def test_auto_pins_otherwise_and_says_why(found, why):
    p = _plan("auto", found)
    assert p.mode == "pinned" and why in p.why
    assert p.commands[0] == ["/usr/bin/python3", "-m", "venv", "/x/.venv"]
    assert p.commands[-1] == ["/x/.venv/bin/python", "-m", "pip", "install", "--quiet", *PINS]
    assert p.constraints == PINS


def test_the_user_chooses():
    assert _plan("pinned", H100).mode == "pinned"
    assert _plan("system", Probe(torch="2.14.1+cpu")).mode == "system"  # a CPU torch, if the user says so
    with pytest.raises(Refused, match="TORCH=system: no torch in the system Python .*use TORCH=pinned"):
        _plan("system", Probe(why_not="ModuleNotFoundError"))
    with pytest.raises(Refused, match=r"TORCH=system: the system Python's torch 2.3.1 \(CUDA 12.1\) is outside"):
        _plan("system", Probe(torch="2.3.1", cuda="12.1"))
    with pytest.raises(Refused, match="TORCH='gpu': choose one of auto, system, pinned"):
        _plan("gpu", H100)
    with pytest.raises(Refused, match="TORCH_PINS is empty"):
        venv_torch.plan("auto", Probe(), [], Path("v"), "py", [], SPEC)


def test_versions_against_pyprojects_range():
    assert venv_torch.torch_range() == SPEC  # read from this checkout's pyproject.toml
    assert venv_torch.satisfies("2.11.0+cu130", SPEC) and venv_torch.satisfies("2.14.1", SPEC)
    assert not venv_torch.satisfies("2.15.0", SPEC) and not venv_torch.satisfies("2.3.1", SPEC)
    assert venv_torch.satisfies("2.15.0.dev20260101", ">=2.4")
    with pytest.raises(ValueError, match="unsupported version specifier '~=2.4'"):
        venv_torch.satisfies("2.5", "~=2.4")


def _fake_system_torch(tmp_path, version="2.11.0+cu130", cuda="'13.0'"):
    pkg = tmp_path / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\nfrom . import version\n")
    (pkg / "version.py").write_text(f"cuda = {cuda}\nhip = None\n")
    return tmp_path / "site"


def test_the_script_probes_the_interpreter_that_runs_it(tmp_path):
    """The real probe, in a real process, on a fake CUDA torch; --dry-run changes nothing."""
    site = _fake_system_torch(tmp_path)
    venv = tmp_path / "venv"
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "venv_torch.py"),
            "--venv",
            str(venv),
            "--pins",
            " ".join(PINS),
            "--dry-run",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert (
        "venv_torch: system torch: TORCH=auto: the system Python's torch 2.11.0+cu130 (CUDA 13.0), kept" in res.stdout
    )
    assert f"-m venv --system-site-packages {venv}" in res.stdout and "pip install" not in res.stdout
    assert "constraints.txt: torch==2.11.0+cu130" in res.stdout and not venv.exists()

    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "venv_torch.py"),
            "--venv",
            str(venv),
            "--torch",
            "system",
            "--dry-run",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(_fake_system_torch(tmp_path / "old", "2.3.1"))},
    )
    assert res.returncode == 2 and "outside this project's torch>=2.4,<2.15" in res.stderr


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


@needs_make
def test_make_setup_passes_the_choice_to_the_script(tmp_path):
    venv = tmp_path / "venv"
    res = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "setup", f"VENV={venv}", "TORCH=system"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert f'python3 scripts/venv_torch.py --venv {venv} --torch "system" --pins "{" ".join(PINS)}"' in res.stdout
    assert "test -f" in res.stdout and f"-c {venv}/constraints.txt" in res.stdout


FAKE_PYTHON = """#!/bin/bash
# The venv's python as make bench calls it: every call logged; `perfsuite run` measures nothing
# but exits with $RUN_STATUS, as a suite whose correctness check failed does (3).
echo "$*" >> "$LOG"
case "$*" in
  "-c "*) echo cpu ;;
  *"perfsuite run "*) mkdir -p "$OUT_DIR"; exit "$RUN_STATUS" ;;
esac
exit 0
"""


def _fake_venv(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    (venv / ".deps-installed").touch()  # newer than pyproject.toml: no install
    return venv


@needs_make
@pytest.mark.parametrize("status, reported", [(0, True), (3, True), (2, False)])
def test_make_bench_reports_what_was_measured_when_a_check_failed(tmp_path, status, reported):
    """A failed correctness check made `perfsuite run` exit 3 and make stopped before the report:
    a first GPU run ended with no report at all. Now the report and export run, then make exits
    with the run's status; other failures (2: bad input) still stop at once."""
    venv, log, out = _fake_venv(tmp_path), tmp_path / "calls.log", tmp_path / "out"
    env = {**os.environ, "LOG": str(log), "OUT_DIR": str(out), "RUN_STATUS": str(status)}
    res = subprocess.run(
        ["make", "-C", str(ROOT), "bench", f"VENV={venv}", f"OUT={out}", f"REPORT={tmp_path}/rep"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = log.read_text().splitlines()
    assert calls[0] == "-m perfsuite peak --max-time 6"
    assert f"-m perfsuite run --suite cpu --out {out}" in calls
    assert (f"-m perfsuite report {out} --out-dir {tmp_path}/rep" in calls) == reported, calls
    assert (f"-m perfsuite export tensorboard {out} --logdir reports/tensorboard" in calls) == reported
    assert res.returncode == (2 if status else 0), res.stdout + res.stderr  # make's own status: 2 on failure
    assert ("perfsuite run exited 3 (see above); reporting what it measured" in res.stdout) == (status == 3)
    if status:
        assert f"Error {status}" in res.stderr  # make names the recipe's status: the failure is not lost


def test_a_disk_too_small_for_the_pinned_torch_is_refused_before_anything_is_made(tmp_path, monkeypatch, capsys):
    """CI's clean clone once ran out of disk half-way through pip's install of torch, which said
    only "[Errno 28] No space left on device". Now the script refuses first and says how much."""
    free = {"gib": 2.5}
    monkeypatch.setattr(
        venv_torch.shutil, "disk_usage", lambda path: SimpleNamespace(total=300 * 2**30, free=int(free["gib"] * 2**30))
    )
    venv = tmp_path / "not" / "yet" / ".venv"
    rc = venv_torch.main(["--venv", str(venv), "--torch", "pinned", "--pins", " ".join(PINS)])
    err = capsys.readouterr().err
    assert rc == 2 and not venv.exists() and not (tmp_path / "not").exists()
    assert f"2.5 GiB free on the disk of {tmp_path.resolve()}" in err and "about 6.5 GiB" in err
    assert venv_torch.main(["--venv", str(venv), "--torch", "pinned", "--pins", " ".join(PINS), "--dry-run"]) == 0
    # Enough room, a system torch (nothing installed) and an explicit 0 all pass the check.
    free["gib"] = 7.0
    venv_torch.room_for(_plan("pinned", H100), venv)
    free["gib"] = 0.1
    venv_torch.room_for(_plan("auto", H100), venv)
    venv_torch.room_for(_plan("pinned", H100), venv, needs_gib=0)
    with pytest.raises(Refused, match="VENV_NEEDS_GIB=0 to try anyway"):
        venv_torch.room_for(_plan("pinned", H100), venv, needs_gib=1)


@needs_make
def test_make_passes_the_disk_need_to_the_script(tmp_path):
    res = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "setup", f"VENV={tmp_path / 'v'}", "VENV_NEEDS_GIB=0"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "--needs-gib 0" in res.stdout


def test_a_venv_made_from_a_venv_imports_the_parent_venvs_torch(tmp_path):
    """Issue 54: on the GPU machines python3 is itself a venv (/opt/torch/.venv) holding torch, and
    `--system-site-packages` exposes only the base interpreter's packages: the new venv could not
    import torch, and `make bench` stopped before measuring. Here a real parent venv holds a fake
    CUDA torch; the venv the script makes from it must import that torch."""
    base = sys.base_prefix
    parent = tmp_path / "parent"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(parent)], check=True, timeout=120)
    parent_py = parent / "bin" / "python"
    purelib = subprocess.run(
        [str(parent_py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    shutil.copytree(_fake_system_torch(tmp_path / "fake"), purelib, dirs_exist_ok=True)
    child = tmp_path / "child"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    res = subprocess.run(
        [str(parent_py), str(ROOT / "scripts" / "venv_torch.py"), "--venv", str(child), "--venv-args=--without-pip"],
        check=False, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "system torch" in res.stdout and "the parent venv's" in res.stdout
    got = subprocess.run(
        [str(child / "bin" / "python"), "-c", "import sys, torch; print(torch.__version__, sys.prefix)"],
        check=False, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    version, prefix = got.stdout.split()
    assert version == "2.11.0+cu130" and Path(prefix) == child and Path(prefix) != Path(base)


def test_a_short_disk_makes_the_venv_where_there_is_room_and_links_it(tmp_path, monkeypatch, capsys):
    """CI's clean clone had 2.0 GiB free on its disk and stopped at set-up (the refusal above);
    /dev/shm had room. The venv is made on the first spill place with room, and .venv links to it;
    a failed install removes both, so the next `make setup` starts again."""
    repo_disk, spill = tmp_path / "checkout", tmp_path / "shm"
    repo_disk.mkdir()
    spill.mkdir()
    monkeypatch.setattr(
        venv_torch.shutil,
        "disk_usage",
        lambda path: SimpleNamespace(total=300 * 2**30, free=(9 if str(path).startswith(str(spill)) else 2) * 2**30),
    )
    venv = repo_disk / ".venv"
    assert venv_torch.room_for(_plan("pinned", H100), venv, spill=(str(tmp_path / "absent"), str(spill))) == spill
    assert venv_torch.room_for(_plan("pinned", H100), venv, needs_gib=1.5, spill=(str(spill),)) is None
    with pytest.raises(Refused, match=f"2.0 GiB free on the disk of {repo_disk} \\(nor on {tmp_path / 'absent'}\\)"):
        venv_torch.room_for(_plan("pinned", H100), venv, spill=(str(tmp_path / "absent"),))

    made: list[list[str]] = []

    def run(cmd, check):  # the plan's commands, stood in: python -m venv, then pip, which fails
        made.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
        elif "pip" in cmd and any(a.startswith("torch") for a in cmd):
            raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(venv_torch.subprocess, "run", run)
    argv = ["--venv", str(venv), "--torch", "pinned", "--pins", " ".join(PINS), "--spill", str(spill)]
    assert venv_torch.main(argv) == 1
    out = capsys.readouterr()
    assert "the venv is made in" in out.out and str(spill) in out.out
    assert any(cmd[1:3] == ["-m", "venv"] for cmd in made)
    assert not venv.exists() and not venv.is_symlink() and list(spill.iterdir()) == []  # both removed

    monkeypatch.setattr(
        venv_torch.subprocess,
        "run",
        lambda cmd, check: (
            made.append(cmd) or ((Path(cmd[-1]) / "bin").mkdir(parents=True) if cmd[1:3] == ["-m", "venv"] else None)
        ),
    )
    assert venv_torch.main(argv) == 0
    (real,) = spill.iterdir()
    assert venv.is_symlink() and venv.resolve() == real.resolve() and (real / "bin").is_dir()
    assert (real / venv_torch.CONSTRAINTS).read_text().split() == PINS
