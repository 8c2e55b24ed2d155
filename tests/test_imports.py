"""The library imports without Snakemake, each module alone, and its modules
import each other without cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "workflow" / "lib"
PKG = LIB / "hpcvirt"


def _module(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module(p) for p in PKG.rglob("*.py"))


def _resolve(importer: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute names of the hpcvirt modules an ImportFrom names."""
    if node.level:
        base = importer.split(".")
        base = base[: len(base) - node.level + (1 if is_pkg else 0)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    if not stem.startswith("hpcvirt"):
        return []
    out = []
    for alias in node.names:            # "from . import x": x may be a module
        if f"{stem}.{alias.name}" in MODULES:
            out.append(f"{stem}.{alias.name}")
    return out or [stem]


def graph() -> dict[str, set[str]]:
    g = {}
    for p in PKG.rglob("*.py"):
        name, is_pkg = _module(p), p.name == "__init__.py"
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):   # function-level imports count too
            if isinstance(node, ast.ImportFrom):
                deps.update(_resolve(name, is_pkg, node))
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("hpcvirt"))
        # importlib.import_module(f"{__name__}.{mod}") in the registry
        if name == "hpcvirt.benchmarks":
            from hpcvirt.benchmarks import MODULES as BENCH

            deps.update(f"hpcvirt.benchmarks.{m}" for m in BENCH)
        g[name] = {d for d in deps if d in MODULES and d != name}
    return g


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n):
        state[n] = 1
        path.append(n)
        for d in sorted(g[n]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d)
        path.pop()
        state[n] = 2

    for n in sorted(g):
        if n not in state:
            visit(n)


def test_graph_sees_real_edges():
    """The checker itself: it must see the edges that exist."""
    g = graph()
    assert "hpcvirt.benchmarks.base" in g["hpcvirt.benchmarks.netpipe"]
    assert "hpcvirt.testbeds" in g["hpcvirt.execute"]
    assert "hpcvirt.benchmarks.netpipe" in g["hpcvirt.benchmarks"]


def test_no_module_imports_snakemake():
    for p in PKG.rglob("*.py"):
        tree = ast.parse(p.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not any(x.split(".")[0] == "snakemake" for x in names), p


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module):
    cp = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120,
                        env={"PYTHONPATH": str(LIB), "PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0, cp.stderr[-2000:]
