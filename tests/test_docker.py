"""No Docker engine runs here: the recipe is checked for what can be checked without one."""

import re
import shlex
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
    from perfsuite.cli import COMMANDS

    dockerfile = (DOCKER / "Dockerfile").read_text()
    for name, svc in _compose()["services"].items():
        cmd = svc["command"]
        if cmd[0] == "make":
            assert cmd[1] in _make_targets(), f"{name}: make {cmd[1]}"
        elif cmd[0] == "tensorboard":
            assert "tensorboard" in dockerfile, "tensorboard is installed by the Dockerfile"
        elif cmd[0] == "nsys":
            assert "nvcr.io/nvidia/pytorch" in dockerfile, "nsys comes with NVIDIA's PyTorch image"
            i = cmd.index("-m")
            assert cmd[i + 1] == "perfsuite" and cmd[i + 2] in COMMANDS, name
        else:
            raise AssertionError(f"{name}: unchecked command {cmd[0]}")
    dcmd = re.search(r'^CMD \[(.*)\]', dockerfile, re.M).group(1)
    assert '"make", "bench"' in dcmd and "bench" in _make_targets()
