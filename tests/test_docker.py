"""No Docker engine runs here: the recipe is checked for what can be checked without one."""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


def _compose():
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _make_targets():
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def test_compose_has_the_three_services():
    assert set(_compose()["services"]) == {"suite", "tensorboard", "profiler"}


def test_every_path_in_compose_and_dockerfile_exists():
    for name, svc in _compose()["services"].items():
        build = svc.get("build")
        if build:
            context = (DOCKER / build["context"]).resolve()
            assert context == ROOT, name
            assert (context / build["dockerfile"]).is_file(), name
        for volume in svc.get("volumes", []):
            host = volume.split(":")[0]
            assert (DOCKER / host).resolve().is_dir(), f"{name}: {host}"
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in shlex.split(line)[1:-1]:
                assert (ROOT / src).exists(), src


def test_every_command_names_something_that_exists():
    from perfsuite.cli.app import COMMANDS

    dockerfile = (DOCKER / "Dockerfile").read_text()
    for name, svc in _compose()["services"].items():
        cmd = svc["command"]
        if cmd[0] == "make":
            assert cmd[1] in _make_targets(), f"{name}: make {cmd[1]}"
        elif cmd[0] == "tensorboard":
            assert "[vision,gpu,report,llm,dev]" in dockerfile, "the Dockerfile installs the report extra"
            assert any(d.startswith("tensorboard") for d in _extras()["report"]), "tensorboard is in the report extra"
            logdir = cmd[cmd.index("--logdir") + 1]
            assert logdir == "/opt/perfsuite/reports/tensorboard", "the folder make bench exports to"
            assert "--logdir reports/tensorboard" in (ROOT / "Makefile").read_text()
        elif cmd[0] == "nsys":
            assert "nvcr.io/nvidia/pytorch" in dockerfile, "nsys comes with NVIDIA's PyTorch image"
            i = cmd.index("-m")
            assert cmd[i + 1] == "perfsuite" and cmd[i + 2] in COMMANDS, name
        else:
            raise AssertionError(f"{name}: unchecked command {cmd[0]}")
    dcmd = re.search(r"^CMD \[(.*)\]", dockerfile, re.M).group(1)
    assert '"make", "bench"' in dcmd and "bench" in _make_targets()


def _extras():
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_services_that_load_data_share_the_hosts_ipc():
    # PyTorch's DataLoader workers hand batches over through /dev/shm (64 MB in a container).
    services = _compose()["services"]
    for name in ("suite", "profiler"):
        assert services[name].get("ipc") == "host" or services[name].get("shm_size"), name


def image_files(dest: Path) -> Path:
    """What the Dockerfile's COPY lines put in the image, copied to `dest` (its WORKDIR)."""
    workdir = None
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if line.startswith("WORKDIR "):
            workdir = line.split()[1]
        if line.startswith("COPY "):
            *srcs, target = shlex.split(line)[1:]
            where = dest / Path(target.replace(workdir or "/", "", 1) if target.startswith("/") else target)
            for src in srcs:
                path = ROOT / src
                if path.is_dir():
                    shutil.copytree(
                        path,
                        where if len(srcs) == 1 else where / path.name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
                        dirs_exist_ok=True,
                    )
                else:
                    (where if str(target).endswith("/") else where.parent).mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, where / path.name if str(target).endswith("/") else where)
    return dest


def test_the_images_file_set_runs_suites_and_list(tmp_path):
    image = image_files(tmp_path / "opt-perfsuite")
    # make bench reads the suite files through perfsuite.suite.file.shipped_suites_dir().
    assert (image / "suites" / "gpu.yaml").is_file() and (image / "Makefile").is_file()
    for args in (["suites"], ["list"]):
        res = subprocess.run(
            [sys.executable, "-m", "perfsuite", *args],
            cwd=image,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "300"},
        )
        assert res.returncode == 0, res.stdout + res.stderr
        if args == ["suites"]:
            out = " ".join(res.stdout.replace("│", " ").split())
            for name in ("ci", "cpu", "gpu"):
                assert f" {name} " in out, name
        else:
            assert "autoencoder" in res.stdout and "qwen" in res.stdout
    # The package imported there is the image's copy, not this checkout's.
    where = subprocess.run(
        [sys.executable, "-c", "import perfsuite.suite.file as s; print(s.shipped_suites_dir())"],
        cwd=image,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.strip() == str(image / "suites"), where.stderr
