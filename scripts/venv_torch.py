"""Create the project's virtual environment with the right torch: `make setup` runs this with
the system interpreter ($(PYTHON)) when .venv is missing.

TORCH=auto (the default), system or pinned:
- system: the venv sees the system's site packages (`--system-site-packages`) and uses the torch
  installed there; nothing about torch is downloaded. GPU machines carry their own CUDA build of
  torch (2.11+cu130 on the H100 this was written for) and often no network: pinning 2.14.1
  there downloaded gigabytes, or failed.
- pinned: a venv of its own with TORCH_PINS (torch/torchvision this project is developed on).
- auto: system when the system Python's torch is a CUDA (or ROCm) build inside pyproject's
  range, pinned otherwise; the line printed says which and why.

The torch kept is also written to <venv>/constraints.txt, which the Makefile passes to every
later `pip install` (-c): without it, installing the project's extras could pull a torchvision
that needs another torch and replace the system's torch inside the venv after all.

Standard library only: it runs before the venv, under whatever Python the machine has.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHOICES = ("auto", "system", "pinned")
ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = "constraints.txt"
# What a pinned venv takes on disk, measured on x86_64 with Python 3.11 (2026-11-27): 6.3 GiB,
# of which torch 1.2, its nvidia-* libraries 3.2 and triton 0.9 (TORCH_PINS is a CUDA build).
# pip fills the disk half-way through otherwise, and says only "[Errno 28] No space left".
PINNED_NEEDS_GIB = 6.5
# Where a pinned venv goes when the checkout's disk is short of that: CI's clean clone once had
# 2.0 GiB free on its disk while /dev/shm (memory, half of it by default) had 12 or more.
SPILL = ("/dev/shm",)


class Refused(Exception):
    """The choice cannot be honoured here; the message says why and what to do."""


@dataclass(frozen=True)
class Probe:
    """The system interpreter's torch (and torchvision), as imported by it."""

    torch: str | None = None  # version, None when it does not import
    cuda: str | None = None  # torch.version.cuda: None on a CPU-only build
    hip: str | None = None  # torch.version.hip (ROCm builds)
    torchvision: str | None = None
    why_not: str = ""  # why torch did not import

    @property
    def gpu_build(self) -> bool:
        return bool(self.cuda or self.hip)

    def describe(self) -> str:
        if self.torch is None:
            return f"no torch in the system Python ({self.why_not})"
        build = f"CUDA {self.cuda}" if self.cuda else f"ROCm {self.hip}" if self.hip else "a CPU-only build"
        return f"the system Python's torch {self.torch} ({build})"


def probe() -> Probe:
    """Import torch here, in the interpreter that will create the venv (`$(PYTHON)`)."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - not installed, or broken (missing CUDA libraries, ...)
        return Probe(why_not=f"{type(exc).__name__}: {exc}")
    try:
        import torchvision

        tv = torchvision.__version__
    except Exception:  # noqa: BLE001 - any failure: no torchvision to keep, pip chooses one for this torch
        tv = None
    version = getattr(torch, "version", None)
    return Probe(
        torch=str(torch.__version__),
        cuda=getattr(version, "cuda", None),
        hip=getattr(version, "hip", None),
        torchvision=tv,
    )


def _release(version: str) -> tuple[int, ...]:
    """2.11.0+cu130 -> (2, 11, 0); pre-release and local parts are ignored."""
    m = re.match(r"\d+(?:\.\d+)*", version.strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(p) for p in m.group(0).split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


_OPS = {
    ">=": lambda c: c >= 0,
    ">": lambda c: c > 0,
    "<=": lambda c: c <= 0,
    "<": lambda c: c < 0,
    "==": lambda c: c == 0,
    "!=": lambda c: c != 0,
}


def torch_range(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The torch requirement's specifiers in pyproject's dependencies, e.g. ">=2.4,<2.15"."""
    m = re.search(r'^\s*"torch\s*([<>=!][^"]*)"', pyproject.read_text(), re.M)
    if not m:
        raise ValueError(f'{pyproject}: no "torch..." requirement in its dependencies')
    return m.group(1).replace(" ", "")


def satisfies(version: str, spec: str) -> bool:
    """Whether `version` meets comma-separated specifiers (>=, >, <=, <, ==, !=; no wildcards)."""
    v = _release(version)
    for part in filter(None, spec.split(",")):
        m = re.fullmatch(r"(>=|<=|==|!=|>|<)(\d+(?:\.\d+)*)", part)
        if not m:
            raise ValueError(f"unsupported version specifier {part!r} in {spec!r}")
        if not _OPS[m.group(1)](_cmp(v, _release(m.group(2)))):
            return False
    return True


@dataclass
class Plan:
    mode: str  # "system" or "pinned"
    why: str
    commands: list[list[str]] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    # Site-packages the new venv must see beside its own: the parent venv's, when the interpreter
    # that makes it is itself in a venv (written to a .pth file in the new venv: write_inherited).
    inherit: list[str] = field(default_factory=list)


def decide(choice: str, found: Probe, pins: list[str], spec: str) -> tuple[str, str]:
    """("system" | "pinned", why) for TORCH=`choice`, or Refused."""
    if choice not in CHOICES:
        raise Refused(f"TORCH={choice!r}: choose one of {', '.join(CHOICES)}")
    in_range = found.torch is not None and satisfies(found.torch, spec)
    if choice == "system":
        if found.torch is None:
            raise Refused(f"TORCH=system: {found.describe()}; install torch there, or use TORCH=pinned")
        if not in_range:
            raise Refused(
                f"TORCH=system: {found.describe()} is outside this project's torch{spec} "
                "(pyproject.toml); use TORCH=pinned"
            )
        return "system", f"TORCH=system: {found.describe()}"
    if choice == "pinned":
        if not pins:
            raise Refused("TORCH=pinned with TORCH_PINS empty: nothing to install torch from")
        return "pinned", "TORCH=pinned"
    if found.gpu_build and in_range:
        return "system", f"TORCH=auto: {found.describe()}, kept (TORCH=pinned installs {' '.join(pins)} instead)"
    why = (
        f"outside this project's torch{spec}"
        if found.torch is not None and found.gpu_build
        else "not a GPU build"
        if found.torch is not None
        else ""
    )
    if not pins:
        raise Refused(f"TORCH=auto: {found.describe()}{', ' + why if why else ''}, and TORCH_PINS is empty")
    return "pinned", f"TORCH=auto: {found.describe()}{', ' + why if why else ''}: installing {' '.join(pins)}"


def parent_venv_site_packages() -> list[str]:
    """This interpreter's own site-packages when it runs in a venv, else [] (issue 54). A venv made
    with `--system-site-packages` sees its *base* interpreter's site-packages, never those of the
    venv it was made from: on every GPU machine this project has run on, python3 is
    /opt/torch/.venv/bin/python, torch lives in that venv, and the new venv could not import it."""
    import site

    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return []
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


INHERITED_PTH = "_perfsuite_parent_venv.pth"


def write_inherited(venv: Path, paths: list[str]) -> Path | None:
    """A .pth file in the new venv's site-packages naming `paths`, so its interpreter imports from
    them after its own packages (what the parent venv's torch needs). None when there are none."""
    if not paths:
        return None
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = Path(purelib) / INHERITED_PTH
    target.write_text("".join(p + "\n" for p in paths))
    return target


def plan(
    choice: str,
    found: Probe,
    pins: list[str],
    venv: Path,
    python: str,
    venv_args: list[str],
    spec: str,
    parent_site: list[str] | None = None,
) -> Plan:
    """`parent_site`: the making interpreter's venv site-packages (parent_venv_site_packages), which a
    system-torch venv must see too."""
    mode, why = decide(choice, found, pins, spec)
    vpy = str(venv / "bin" / "python")
    system = ["--system-site-packages"] if mode == "system" else []
    p = Plan(mode, why, [[python, "-m", "venv", *system, *venv_args, str(venv)]])
    if mode == "pinned":
        # Upgrading pip needs an index; the system torch is chosen for machines that may have none.
        p.commands += [
            [vpy, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
            [vpy, "-m", "pip", "install", "--quiet", *pins],
        ]
        p.constraints = list(pins)
    else:
        # The exact versions seen, local labels included: pip then takes the installed ones.
        p.constraints = [f"torch=={found.torch}"] + ([f"torchvision=={found.torchvision}"] if found.torchvision else [])
        p.inherit = list(parent_site or [])
    return p


def _free_gib(where: Path) -> tuple[Path, float]:
    while not where.exists():  # the venv, or its parent, is not made yet: the disk it will be on
        where = where.parent
    return where, shutil.disk_usage(where).free / 2**30


def room_for(p: Plan, venv: Path, needs_gib: float = PINNED_NEEDS_GIB, spill: tuple[str, ...] = SPILL) -> Path | None:
    """None when the venv fits where it is asked (or needs no room: a system torch); otherwise the
    first of `spill` with room, where the venv is made instead (.venv then links to it). Refused
    when nowhere has room."""
    if p.mode != "pinned" or needs_gib <= 0:
        return None
    where, free_gib = _free_gib(venv.resolve())
    if free_gib >= needs_gib:
        return None
    for place in map(Path, spill):
        if place.is_dir() and os.access(place, os.W_OK) and _free_gib(place)[1] >= needs_gib:
            return place
    tried = f" (nor on {', '.join(spill)})" if spill else ""
    raise Refused(
        f"{venv}: {free_gib:.1f} GiB free on the disk of {where}{tried}, and a pinned torch "
        f"venv takes about {needs_gib:g} GiB (torch, its nvidia libraries and triton); free some space, "
        "use TORCH=system with a torch already installed, or set VENV_NEEDS_GIB=0 to try anyway"
    )


def spilled_venv(venv: Path, place: Path) -> Path:
    """Make the venv's folder on `place` and link `venv` to it; the folder's name is unique to the
    venv's path, so two checkouts never share one."""
    real = place / f"perfsuite-venv-{hashlib.sha1(str(venv.resolve()).encode()).hexdigest()[:12]}"
    shutil.rmtree(real, ignore_errors=True)  # a half-made one from an earlier failed set-up
    real.mkdir(parents=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    venv.symlink_to(real, target_is_directory=True)
    return real


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, required=True)
    ap.add_argument("--torch", default="auto", help="auto | system | pinned (make's TORCH)")
    ap.add_argument("--pins", default="", help="make's TORCH_PINS, space-separated requirements")
    ap.add_argument("--venv-args", default="", help="make's VENV_ARGS, passed to `python -m venv`")
    ap.add_argument(
        "--needs-gib",
        type=float,
        default=PINNED_NEEDS_GIB,
        help="free disk a pinned venv needs (make's VENV_NEEDS_GIB); 0 skips the check",
    )
    ap.add_argument(
        "--spill",
        default=" ".join(SPILL),
        help="space-separated folders for the venv when its own disk is short (make's VENV_SPILL; '' for none)",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the commands; change nothing")
    args = ap.parse_args(argv)
    pins = args.pins.split()
    found = probe() if args.torch != "pinned" else Probe(why_not="not looked at: TORCH=pinned")
    try:
        p = plan(
            args.torch,
            found,
            pins,
            args.venv,
            sys.executable,
            shlex.split(args.venv_args),
            torch_range(),
            parent_venv_site_packages(),
        )
        spill = None if args.dry_run else room_for(p, args.venv, args.needs_gib, tuple(args.spill.split()))
    except Refused as exc:
        print(f"venv_torch: {exc}", file=sys.stderr)
        return 2
    print(f"venv_torch: {p.mode} torch: {p.why}", flush=True)
    existed = args.venv.exists() or args.venv.is_symlink()
    target = args.venv / CONSTRAINTS
    real = None
    try:
        if spill is not None:
            real = spilled_venv(args.venv, spill)
            # `python -m venv` refuses a path that is a link ("Unable to create directory"): the
            # commands make and fill the real folder, and the link serves everything after them.
            p.commands = [[str(real) + c[len(str(args.venv)) :] if c.startswith(str(args.venv)) else c for c in cmd]
                          for cmd in p.commands]  # fmt: skip
            print(
                f"venv_torch: {args.venv}'s disk has under {args.needs_gib:g} GiB free: the venv is made in "
                f"{real} (on {spill}), and {args.venv} links to it; `make clean-venv` removes both",
                flush=True,
            )
        for cmd in p.commands:
            print("+ " + shlex.join(cmd), flush=True)
            if not args.dry_run:
                subprocess.run(cmd, check=True)
        if p.inherit:
            print(f"+ {INHERITED_PTH} in {args.venv}: the parent venv's {' '.join(p.inherit)}", flush=True)
            if not args.dry_run:
                write_inherited(args.venv, p.inherit)
        print(f"+ constraints {target}: {' '.join(p.constraints)}")
        if not args.dry_run:
            target.write_text("".join(c + "\n" for c in p.constraints))
    except (subprocess.CalledProcessError, OSError) as exc:
        # A half-made venv would look made to `make` (its bin/python exists): remove what this
        # run created, so the next `make setup` starts again.
        if not existed:
            if real is not None:
                shutil.rmtree(real, ignore_errors=True)
                args.venv.unlink(missing_ok=True)
            shutil.rmtree(args.venv, ignore_errors=True)
        print(f"venv_torch: {exc}" + ("" if existed else f"; {args.venv} removed"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
