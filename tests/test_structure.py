"""The packages import only downward, in the order docs/layout.md writes (scripts/structure.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import structure  # noqa: E402


def test_perfsuites_packages_import_only_downward(capsys):
    wrong = structure.check_packages(str(ROOT / "perfsuite"), str(ROOT / "docs" / "layout.md"))
    out = capsys.readouterr().out
    assert wrong == 0, out
    assert "stats" in out and "core" in out


def _package(tmp_path: Path, files: dict[str, str], layers: str) -> tuple[Path, Path]:
    pkg = tmp_path / "pkg"
    for name, text in files.items():
        f = pkg / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    doc = tmp_path / "layout.md"
    doc.write_text(f"# Layout\n\n```layers\n{layers}\n```\n")
    return pkg, doc


@pytest.mark.parametrize("where", ["top", "inside"])
def test_an_import_upward_is_found_at_module_top_and_inside_a_function(tmp_path, capsys, where):
    up = "from pkg.high import x\n" if where == "top" else "def f():\n    from pkg.high import x\n    return x\n"
    pkg, doc = _package(
        tmp_path,
        {
            "__init__.py": "",
            "high/__init__.py": "",
            "high/x.py": "from pkg.low import y\n",
            "low/__init__.py": "",
            "low/y.py": up,
        },
        "high\nlow",
    )
    assert structure.check_packages(str(pkg), str(doc)) >= 1
    assert "pkg.low.y imports pkg.high" in capsys.readouterr().out


def test_peers_on_one_line_and_a_package_in_no_layer_are_refused(tmp_path, capsys):
    pkg, doc = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "from pkg.b import z\n",
            "b/__init__.py": "",
            "b/z.py": "",
            "c/__init__.py": "",
        },
        "a b\n__init__",
    )
    assert structure.check_packages(str(pkg), str(doc)) == 2
    out = capsys.readouterr().out
    assert "b is not below a" in out and "package c is in no layer" in out


def test_the_script_exits_1_when_the_packages_do_not_layer(tmp_path):
    pkg, doc = _package(tmp_path, {"__init__.py": "", "a/__init__.py": "", "b/__init__.py": "import pkg.a\n"}, "a\nb")
    ran = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "structure.py"), "--packages", str(pkg), str(doc)],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "NOT LAYERED" in ran.stdout


def test_every_internal_import_names_a_module_and_a_name_that_exist():
    """Imports inside functions run only when their function does: a module moved or a name
    renamed must not wait for that call to fail."""
    import ast
    import importlib
    import importlib.util

    missing = []
    for f in sorted((ROOT / "perfsuite").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("perfsuite"):
                if importlib.util.find_spec(node.module) is None:
                    missing.append(f"{f.relative_to(ROOT)}:{node.lineno}: no module {node.module}")
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if (
                        importlib.util.find_spec(node.module).submodule_search_locations
                        and importlib.util.find_spec(sub) is not None
                    ):
                        continue
                    if not hasattr(importlib.import_module(node.module), alias.name):
                        missing.append(f"{f.relative_to(ROOT)}:{node.lineno}: {node.module} has no {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("perfsuite") and importlib.util.find_spec(alias.name) is None:
                        missing.append(f"{f.relative_to(ROOT)}:{node.lineno}: no module {alias.name}")
    assert not missing, "\n".join(missing)


def test_a_package_init_that_imports_a_submodule_importing_the_package_is_a_cycle(tmp_path, capsys):
    """perfsuite/cli/__init__.py imported app, which imports every command module, and each command
    module's `from perfsuite.cli import options` runs that __init__ first: a cycle the graph hid while
    it dropped every package -> submodule edge."""
    pkg, _ = _package(
        tmp_path,
        {
            "__init__.py": "",
            "cli/__init__.py": "from pkg.cli.app import main\n",
            "cli/app.py": "from pkg.cli import options\nmain = None\n",
            "cli/options.py": "",
        },
        "cli",
    )
    structure.main(str(pkg))
    out = capsys.readouterr().out
    assert "cycles 1" in out and "pkg.cli <-> pkg.cli.app" in out, out


def test_the_module_graph_has_no_cycle(capsys):
    structure.main(str(ROOT / "perfsuite"))
    out = capsys.readouterr().out
    assert "cycles 0" in out, out


HEAVY = ("torch", "scipy", "pandas", "matplotlib", "sqlalchemy", "alembic", "transformers", "tensorboard")


def test_the_command_line_starts_without_the_heavy_libraries():
    """The CLI's start-up is kept short by what its modules import at their top, not by hiding
    perfsuite's own imports in functions: `perfsuite --help`, `list` or a refused flag must not
    wait for torch (seconds on a cold disk) or the database and plotting libraries."""
    code = (
        f"import sys, perfsuite.cli.app, perfsuite\nprint(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "", f"imported at start-up: {ran.stdout.strip()}"


def test_the_layout_page_names_every_package_and_module_there_is():
    """docs/layout.md's table: a row per package, ending in the package's modules, in layer order."""
    import re

    text = (ROOT / "docs" / "layout.md").read_text()
    rows = re.findall(r"^\| `(\w+)/` \| .*: ([\w_, ]+) \|$", text, flags=re.M)
    pkg = ROOT / "perfsuite"
    packages = sorted(p.name for p in pkg.iterdir() if (p / "__init__.py").exists())
    assert sorted(name for name, _ in rows) == packages
    for name, listed in rows:
        there = sorted(
            p.stem if p.is_file() else p.name
            for p in (pkg / name).iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
        )
        assert [m.strip() for m in listed.split(",")] == there, name
    layered = [
        p
        for layer in structure.layers_from(ROOT / "docs" / "layout.md")
        for p in layer
        if p not in ("__init__", "__main__")
    ]
    assert [name for name, _ in rows] == layered


def repeated_names(paths: list[str]) -> dict[str, list[str]]:
    """Module names used twice where the rule does not allow it: a command module (cli/NAME.py) may
    share its name with the one engine module it calls; every other name is used once, so a
    newcomer reading "gate.py" knows which one is meant. __init__/__main__ are Python's names and
    migrations/env.py is Alembic's."""
    by_name: dict[str, list[str]] = {}
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        if name in ("__init__.py", "__main__.py") or p.endswith("migrations/env.py"):
            continue
        by_name.setdefault(name, []).append(p)
    return {n: ps for n, ps in by_name.items() if len([p for p in ps if "/cli/" not in p]) > 1}


def test_a_module_name_means_one_thing():
    root = Path(__file__).resolve().parents[1]
    paths = [str(p.relative_to(root)) for p in (root / "perfsuite").rglob("*.py")]
    assert repeated_names(paths) == {}
    # the rule can fail: two engine modules of one name, even beside their command
    assert repeated_names(["perfsuite/cli/gate.py", "perfsuite/jobs/gate.py", "perfsuite/compare/gate.py"]) == {
        "gate.py": ["perfsuite/cli/gate.py", "perfsuite/jobs/gate.py", "perfsuite/compare/gate.py"]
    }
    assert repeated_names(["perfsuite/cli/why.py", "perfsuite/compare/why.py"]) == {}
