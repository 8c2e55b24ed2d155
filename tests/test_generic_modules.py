"""Generic library modules know no concrete benchmark: a benchmark reaches
the paper by its declaration (workflow/lib/hpcvirt/benchmarks/<name>.py),
not by its name written into the analysis, the paper or the workflow code.

No generic module imports a concrete benchmark module or writes a
benchmark's name (or its rows' name) in a string other than a docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hpcvirt.benchmarks import MODULES, REGISTRY

PKG = Path(__file__).resolve().parents[1] / "workflow" / "lib" / "hpcvirt"
#: The library's modules, and the benchmark package's own generic ones (what every declaration is built of;
#: its ``__init__`` is the registry, which lists the benchmark modules by name).
GENERIC = sorted([*PKG.glob("*.py"), *(PKG / "benchmarks" / f"{m}.py" for m in ("base", "parts", "common"))])

def _names() -> list[str]:
    names = {b.name for b in REGISTRY} | {b.row_name for b in REGISTRY if getattr(b, "row_name", None)}
    return sorted(names, key=len, reverse=True)


NAME_RE = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, _names())) + r")(?![A-Za-z0-9])")


def concrete_imports(source: str, module: str = "hpcvirt.x") -> list[str]:
    """The concrete benchmark modules ``source`` (a module of hpcvirt) imports."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            base = mod.removeprefix("hpcvirt.") if node.level == 0 else mod
            parts = base.split(".")
            if parts[0] == "benchmarks":
                if len(parts) > 1 and parts[1] in MODULES:
                    out.append(".".join(parts[:2]))
                elif len(parts) == 1:
                    out += [f"benchmarks.{a.name}" for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names
                    if a.name.startswith("hpcvirt.benchmarks.") and a.name.split(".")[2] in MODULES]
    return out


def benchmark_literals(source: str) -> list[str]:
    """String literals (not docstrings) of ``source`` that name a benchmark."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and NAME_RE.search(n.value)]


def test_the_scanners_find_what_they_look_for():
    planted = ('"""A docstring may say netpipe."""\nfrom .benchmarks.netpipe import parse\n'
               'from .benchmarks import openfoam, REGISTRY\nimport hpcvirt.benchmarks.imb\n'
               'X = {"npb-cg": 1, "milc": 2, "netpipes": 3, "openfoam-dambreak": 4}\n')
    assert concrete_imports(planted) == ["benchmarks.netpipe", "benchmarks.openfoam", "hpcvirt.benchmarks.imb"]
    assert sorted(benchmark_literals(planted)) == ["milc", "npb-cg", "openfoam-dambreak"]


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: p.name)
def test_no_generic_module_imports_a_concrete_benchmark(path):
    assert concrete_imports(path.read_text()) == [], f"{path.name} imports a concrete benchmark module"


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: p.name)
def test_no_generic_module_names_a_benchmark(path):
    found = benchmark_literals(path.read_text())
    assert found == [], f"{path.name} names benchmarks: {found}; let the benchmark's declaration say it instead"


#: The most lines a generic module may have: past it, it does more than one thing.
MAX_LINES = 450


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: p.name)
def test_no_generic_module_is_over_the_line_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines (at most {MAX_LINES}): split what it does"
