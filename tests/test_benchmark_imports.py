"""Every module of ``benchmarks/`` and ``scripts/`` compiles and imports what exists, checked statically (``ast``;
nothing is run or imported): each ``import`` / ``from … import`` at any depth (a function's imports too) of the
project's modules (``dprelease``, ``flows``, ``tasks``, a sibling benchmark or script, a test helper) names a module
that exists and, for ``from M import n``, a submodule of M or a name M binds at its top level; a name bound to one of
those modules is only read for attributes M has; any other top-level package is installed. A benchmark is not part of
``make test``, so a package move (``dprelease.plugins`` → ``dprelease.contracts.plugins``) broke one unseen."""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks", "scripts")
# where a benchmark or script finds the project's modules: the package, the checkout (flows, tasks), the folders
# the benchmarks put on sys.path (each other, the test helpers)
SEARCH = (ROOT / "src", ROOT, ROOT / "benchmarks", ROOT / "scripts", ROOT / "tests")


def modules() -> list[Path]:
    return sorted(p for f in FOLDERS for p in (ROOT / f).glob("*.py"))


@lru_cache(maxsize=None)
def module_file(name: str) -> Path | None:
    """The file of the project's module ``name`` (a module or a package's ``__init__``), or None."""
    for root in SEARCH:
        base = root.joinpath(*name.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def is_ours(name: str) -> bool:
    top = name.split(".")[0]
    return module_file(top) is not None or any((root / top).is_dir() for root in SEARCH)


@lru_cache(maxsize=None)
def bound_names(path: Path) -> tuple[frozenset[str], bool]:
    """The names a module binds at its top level (inside ``if`` / ``try`` / ``with`` too, never in a function or
    class), and whether it may bind any name (``from x import *``, a module ``__getattr__``)."""
    names: set[str] = set()
    star = False

    def visit(body: list[ast.stmt]) -> None:
        nonlocal star
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Import):
                names.update(a.asname or a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                star = star or any(a.name == "*" for a in node.names)
                names.update(a.asname or a.name for a in node.names)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return frozenset(names), star or "__getattr__" in names


def has(module: str, name: str) -> bool:
    """``from module import name`` finds it: a submodule, or a name the module binds."""
    if module_file(f"{module}.{name}") is not None:
        return True
    names, anything = bound_names(module_file(module))
    return anything or name in names


def problems(path: Path) -> list[str]:
    """Every import of ``path`` that would fail, one line each (``file:line: what``)."""
    where = path.name
    text = path.read_text(encoding="utf-8")
    compile(text, str(path), "exec")  # byte-compiles (as py_compile does), nothing run
    tree = ast.parse(text, str(path))
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not is_ours(a.name):
                    if importlib.util.find_spec(a.name.split(".")[0]) is None:
                        out.append(f"{where}:{node.lineno}: {a.name} is not installed")
                elif module_file(a.name) is None:
                    out.append(f"{where}:{node.lineno}: no module {a.name}")
                elif a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                out.append(f"{where}:{node.lineno}: a relative import in a script")
            elif not is_ours(node.module):
                if importlib.util.find_spec(node.module.split(".")[0]) is None:
                    out.append(f"{where}:{node.lineno}: {node.module} is not installed")
            elif module_file(node.module) is None:
                out.append(f"{where}:{node.lineno}: no module {node.module}")
            else:
                for a in node.names:
                    if a.name != "*" and not has(node.module, a.name):
                        out.append(f"{where}:{node.lineno}: {node.module} has no {a.name}")
                    elif module_file(f"{node.module}.{a.name}") is not None:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):  # module.attribute of a module imported above
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if not has(module, node.attr):
                out.append(f"{where}:{node.lineno}: {module} has no {node.attr}")
    return out


def test_every_benchmark_and_script_imports_what_exists():
    files = modules()
    assert {p.parent.name for p in files} == set(FOLDERS) and len(files) > 20  # not vacuous
    bad = [line for p in files for line in problems(p)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source, needle",
    [
        ("def f():\n    from dprelease import plugins\n", "dprelease has no plugins"),  # the broken benchmark
        ("from dprelease.core.privacy import nothing_here\n", "dprelease.core.privacy has no nothing_here"),
        ("import dprelease.no_such_module\n", "no module dprelease.no_such_module"),
        ("from dprelease.contracts import plugins\nplugins.no_such_reader()\n", "has no no_such_reader"),
        ("from bench_release import no_such_helper\n", "bench_release has no no_such_helper"),
        ("import no_such_distribution_xyz\n", "no_such_distribution_xyz is not installed"),
    ],
)
def test_the_check_sees_a_broken_import(tmp_path, source, needle):
    path = tmp_path / "bench_broken.py"
    path.write_text(source, encoding="utf-8")
    assert any(needle in line for line in problems(path)), problems(path)


def test_the_check_passes_what_resolves(tmp_path):
    path = tmp_path / "bench_fine.py"
    path.write_text(
        "import sys\nimport numpy\nfrom dprelease.contracts import plugins\nfrom dprelease.core.config import "
        "load_params\nfrom bench_release import scratch_project\n\ndef f():\n    return plugins.frontier_sources()\n",
        encoding="utf-8",
    )
    assert problems(path) == []
