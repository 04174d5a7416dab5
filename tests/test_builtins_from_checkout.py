"""perfsuite run from a source checkout that is not installed (PYTHONPATH, as on a lent GPU
machine) still finds its built-in workloads: the entry points are read from the checkout's
pyproject.toml when no installed distribution declares them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Hide every installed entry point, as when perfsuite is imported from a checkout.
_NOT_INSTALLED = """
import importlib.metadata as md
md.entry_points = lambda **kw: []
from perfsuite.core import registry
print(" ".join(registry.names()))
"""


def test_builtins_are_found_through_the_checkouts_pyproject_when_not_installed():
    out = subprocess.run([sys.executable, "-c", _NOT_INSTALLED], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    from perfsuite.core import registry

    # The same workloads as the installed entry point gives.
    assert out.stdout.split() == registry.names()
    assert {"matmul", "resnet", "autoencoder", "qwen"} <= set(registry.names())
