"""The package's import structure, measured from its own source.

    python scripts/structure.py [PACKAGE_DIR]             modules, arrows, layers, cycles, flat modules
    python scripts/structure.py --packages [PACKAGE_DIR]  the package layers of docs/layout.md, checked

Counts every internal import (module level and inside functions). The first form: modules,
import arrows, layers (longest chain of imports), import cycles (strongly connected components),
the modules left flat in the package root, and the share of imports made inside functions.
`--packages` reads the layer order from docs/layout.md's ```layers block (top layer first) and
lists every import of a package from one on its own line or above; it exits 1 when there is any
(the test tier runs it: tests/test_structure.py).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _function_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def imports_of(root: Path, path: Path, modules: set[str], counts: dict | None = None) -> set[str]:
    """The internal modules `path` imports; `counts` (when given) adds up its internal import
    statements under "top" and "inside" (inside a function)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    inside = _function_nodes(tree) if counts is not None else set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        internal = False
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
            internal = internal or bool(t)
        if counts is not None and internal:
            counts["inside" if id(node) in inside else "top"] += 1
    return found


def package_of(module: str) -> str:
    """perfsuite.core.record -> core; the package root's own modules are `__init__` and `__main__`."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def layers_from(doc: Path) -> list[list[str]]:
    """The ```layers block of docs/layout.md: one layer per line, top first, its packages separated
    by spaces (text after `#` is a comment)."""
    text = doc.read_text()
    start = text.index("```layers\n") + len("```layers\n")
    block = text[start : text.index("```", start)]
    return [line.split("#")[0].split() for line in block.splitlines() if line.split("#")[0].strip()]


def check_packages(pkg: str = "perfsuite", doc: str = "docs/layout.md") -> int:
    """Print the package graph against the documented layers; the number of imports that go
    sideways or up (0 when the packages layer)."""
    root = Path(pkg).resolve()
    files = sorted(root.rglob("*.py"))
    modules = {module_name(root, f) for f in files}
    layers = layers_from(Path(doc))
    rank = {p: len(layers) - i for i, layer in enumerate(layers) for p in layer}
    counts = {"top": 0, "inside": 0}
    wrong: list[str] = []
    packages = {package_of(module_name(root, f)) for f in files}
    for missing in sorted(packages - set(rank)):
        wrong.append(f"package {missing} is in no layer of {doc}")
    arrows: dict[tuple[str, str], int] = {}
    pkg_name = root.name
    for f in files:
        name = module_name(root, f)
        for dep in sorted(imports_of(root, f, modules, counts)):
            a, b = package_of(name), package_of(dep)
            if a == b:
                continue
            arrows[(a, b)] = arrows.get((a, b), 0) + 1
            line = f"{name} imports {pkg_name}.{b}: {b} is not below {a}"
            if a in rank and b in rank and rank[b] >= rank[a] and line not in wrong:
                wrong.append(line)
    total = counts["top"] + counts["inside"]
    print(
        f"packages {len(packages)}, layers {len(layers)}, package arrows {len(arrows)}, "
        f"imports inside functions {counts['inside']} of {total} ({counts['inside'] / max(total, 1):.0%})"
    )
    for layer in layers:
        below = sorted({b for (a, b) in arrows if a in layer})
        print(f"  {' '.join(layer):<28} -> {' '.join(below) or '-'}")
    for w in wrong:
        print("  NOT LAYERED:", w)
    return len(wrong)


def main(pkg: str = "perfsuite") -> None:
    root = Path(pkg).resolve()
    files = sorted(root.rglob("*.py"))
    modules = {module_name(root, f) for f in files}
    graph = {module_name(root, f): imports_of(root, f, modules) for f in files}
    # Package __init__ re-exports are edges too, and kept: importing perfsuite.cli.options runs
    # perfsuite/cli/__init__.py first, so an __init__ that imported app (which imports every command
    # module) closed a cycle through each `from perfsuite.cli import options`.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    cycles = [sorted(c) for c in sccs if len(c) > 1]
    depth: dict[str, int] = {}

    def layer(v: str, seen: frozenset = frozenset()) -> int:
        if v in depth:
            return depth[v]
        deps = [d for d in graph[v] if d not in seen]
        depth[v] = 1 + max((layer(d, seen | {v}) for d in deps), default=0)
        return depth[v]

    layers = max(layer(v) for v in graph)
    flat = [
        m
        for m in modules
        if m.count(".") == 1 and not (root / m.split(".")[1]).is_dir() and m.split(".")[1] not in {"__main__"}
    ]
    lines = {module_name(root, f): len(f.read_text().splitlines()) for f in files}
    flat_lines = sum(lines[m] for m in flat)
    print(
        f"modules {len(modules)}, layers {layers}, import arrows {sum(map(len, graph.values()))}, cycles {len(cycles)}"
    )
    for c in cycles:
        print("  cycle:", " <-> ".join(c))
    print(
        f"flat modules in {root.name}/: {len(flat)} ({flat_lines / sum(lines.values()):.0%} of the lines): "
        + ", ".join(sorted(m.split(".")[1] for m in flat))
    )


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--packages"]:
        sys.exit(1 if check_packages(*argv[1:]) else 0)
    main(*argv)
