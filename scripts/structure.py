"""The package's import structure, measured from its own source (issue 22's table).

    python scripts/structure.py [PACKAGE_DIR]

Counts every internal import (module level and inside functions): modules, import arrows,
layers (longest chain of imports), import cycles (strongly connected components), and the
modules left flat in the package root.
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


def imports_of(root: Path, path: Path, modules: set[str]) -> set[str]:
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def main(pkg: str = "perfsuite") -> None:
    root = Path(pkg).resolve()
    files = sorted(root.rglob("*.py"))
    modules = {module_name(root, f) for f in files}
    graph = {module_name(root, f): imports_of(root, f, modules) for f in files}
    # Package __init__ re-exports are edges too; a package importing its own submodules is not a cycle
    # worth reporting, so edges parent-package -> child are dropped.
    for m, deps in graph.items():
        graph[m] = {d for d in deps if not d.startswith(m + ".")}
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
    flat = [m for m in modules if m.count(".") == 1 and not (root / m.split(".")[1]).is_dir()
            and m.split(".")[1] not in {"__main__"}]
    lines = {module_name(root, f): len(f.read_text().splitlines()) for f in files}
    flat_lines = sum(lines[m] for m in flat)
    print(f"modules {len(modules)}, layers {layers}, import arrows {sum(map(len, graph.values()))}, "
          f"cycles {len(cycles)}")
    for c in cycles:
        print("  cycle:", " <-> ".join(c))
    print(f"flat modules in {root.name}/: {len(flat)} ({flat_lines / sum(lines.values()):.0%} of the lines): "
          + ", ".join(sorted(m.split('.')[1] for m in flat)))


if __name__ == "__main__":
    main(*sys.argv[1:])
