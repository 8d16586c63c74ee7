"""Static import-graph analysis for tests/test_imports.py (not a test module).

Import rules of the core package, checked by static analysis (``ast``) of every ``.py`` file under
``src/dprelease`` and of the repository's ``tasks/`` and ``flows/`` folders. Nothing here imports the
modules it checks.

How the import graph is built (kept deliberately simple):

* every ``import`` / ``from … import`` statement counts, at any depth (inside functions, ``try``,
  ``if TYPE_CHECKING`` …), plus ``importlib.import_module("x")`` / ``__import__("x")`` with a constant
  string;
* relative imports are resolved against the importing module's package (``from . import x`` in
  ``dprelease/mechanisms/swag_ppm/rounds.py`` is ``dprelease.mechanisms.swag_ppm.x``; in a package ``__init__`` the package
  is the module itself);
* ``from P import name`` is an edge to ``P.name`` when that is a module or subpackage of ours, otherwise
  an edge to ``P`` itself (``name`` is an attribute of ``P``);
* importing ``dprelease.a.b`` also counts as importing the package ``dprelease.a`` — Python runs its
  ``__init__`` first — but *only* if that ``__init__`` has code beyond a docstring (and ``from __future__``
  lines), and only when the importer lives outside ``dprelease.a`` (a module is always loaded after its
  own parents: that is not a cycle);
* imports of ``dprelease`` modules that do not exist (yet) are kept as edges to the dotted name as
  written; they cannot take part in a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dprelease.contracts import code_scope
from dprelease.contracts.code_scope import Import, raw_imports, resolve_relative  # noqa: F401  (one analysis: the package's)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = "dprelease"
MAX_LINES = 400

REGISTRY = "dprelease.pipeline.registry"
# the floors are the folders under src/dprelease (nothing here lists them by hand): each package of the
# ``mechanisms`` floor is a mechanism (none imports another, shared code reads one only through its ``params``
# section and ``kinds``); ``core`` and ``compare`` (and every other module but the registry's callers) are shared.
FLOORS = tuple(sorted(p.name for p in (SRC / PKG).iterdir() if (p / "__init__.py").is_file()))
MECHANISM_FLOOR = f"{PKG}.mechanisms"
MECHANISMS = tuple(
    sorted(f"{MECHANISM_FLOOR}.{p.name}" for p in (SRC / PKG / "mechanisms").iterdir() if (p / "__init__.py").is_file())
)
# the floors that never reach a mechanism's code, even indirectly (its declarations aside)
SHARED = (f"{PKG}.contracts", f"{PKG}.core", f"{PKG}.compare")
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def floor_order(doc: Path = ARCHITECTURE) -> tuple[str, ...]:
    """The floors from the bottom up, as docs/architecture.md's floors table lists them (its first column,
    ``| `contracts/` | …``, in order): a module imports its own floor and the floors below, never one above."""
    text = doc.read_text(encoding="utf-8").split("## The floors", 1)[1].split("\n## ", 1)[0]
    return tuple(line.split("`")[1].rstrip("/") for line in text.splitlines() if line.startswith("| `"))


def floor_rank(module: str, order: tuple[str, ...]) -> int:
    """A module's floor, counted from the bottom: the package's root module (``__version__``) below every floor,
    a module of a floor at its floor's place in ``order``, a top-level module (the command line) above them all."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return order.index(parts[1]) if parts[1] in order else len(order)


def upward_violations(imports: list[Import], order: tuple[str, ...], declarations: set[str]) -> list[str]:
    """Arrows back up: an import of a module on a floor above the importer's. Apart: the plug-in list's imports by
    name of a listed package's declarations (``declarations``: its ``params`` and ``kinds``), the one inversion."""
    return [
        f"{i.where()}: {i.importer} imports {i.target}"
        for i in imports
        if floor_rank(i.target, order) > floor_rank(i.importer, order)
        and not (i.importer == PLUGINS and i.target in declarations)
    ]


# modules of a mechanism that hold its loops/run functions: orchestration reaches them only via the registry
RUN_MODULES = {"rounds", "released", "fit", "evaluate", "select", "passes", "train"}


# --------------------------------------------------------------------------------------------- analysis


def module_files(src: Path, package: str = PKG) -> dict[str, Path]:
    return code_scope.module_files(src, package)


def init_has_code(path: Path) -> bool:
    """True when a package ``__init__`` does more than carry a docstring (and ``from __future__``)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    return bool(body)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def internal_imports(src: Path, package: str = PKG) -> list[Import]:
    """Every import of a ``package`` module by a ``package`` module, with implicit parent ``__init__``
    edges added as described in the module docstring."""
    files = module_files(src, package)
    known = set(files)
    heavy_inits = {m for m, p in files.items() if p.name == "__init__.py" and init_has_code(p)}
    out = []
    for module, path in files.items():
        implicit = [Import(module, t, path, 0) for t in code_scope.implicit_imports(module, known)]
        for imp in raw_imports(path, module, known) + implicit:
            if not inside(imp.target, package):
                continue
            out.append(imp)
            for parent in _ancestors(imp.target):
                if parent in heavy_inits and not inside(module, parent):
                    out.append(Import(module, parent, path, imp.lineno))
    return out


def import_graph(src: Path, package: str = PKG) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in module_files(src, package)}
    for imp in internal_imports(src, package):
        if imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a path ``[a, b, …, a]``, or None. Iterative DFS, deterministic order."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {n: WHITE for n in graph}
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = GREY
        while stack:
            node, children = stack[-1]
            for child in children:
                if colour.get(child, BLACK) == GREY:
                    return path[path.index(child) :] + [child]
                if colour.get(child) == WHITE:
                    colour[child] = GREY
                    path.append(child)
                    stack.append((child, iter(sorted(graph.get(child, ())))))
                    break
            else:
                colour[node] = BLACK
                stack.pop()
                path.pop()
    return None


def part_of(module: str) -> str:
    """The part a module belongs to: a subpackage or module of a floor (``dprelease.core.release.check`` →
    ``dprelease.core.release``), or a top-level module (``dprelease.cli``)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] in FLOORS else parts[:2])


def part_graph(graph: dict[str, set[str]], packages: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """``graph`` with every module collapsed into its part, less the edges to a plug-in package's declarations
    (``<package>.params``, ``<package>.kinds`` of ``packages``: read by name through the plug-in list)."""
    declarations = {f"{p}.{name}" for p in packages for name in ("params", "kinds")}
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = parts.setdefault(part_of(module), set())
        edges.update(part_of(t) for t in targets if t not in declarations and part_of(t) != part_of(module))
    return parts


def mechanism_of(module: str) -> str | None:
    return next((m for m in MECHANISMS if inside(module, m)), None)


def top_level(name: str) -> str:
    return name.split(".")[0]


def orchestration_files() -> dict[str, Path]:
    out = {}
    for folder in ("tasks", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def orchestration_imports() -> list[Import]:
    known = set(module_files(SRC)) | set(orchestration_files())
    return [
        imp
        for module, path in orchestration_files().items()
        for imp in raw_imports(path, module, known)
        if inside(imp.target, PKG)
    ]


def run_module_violations(imports: list[Import]) -> list[str]:
    """Imports of a mechanism's run module (``dprelease.<mechanism>[.…].rounds`` etc.)."""
    bad = []
    for imp in imports:
        mech = mechanism_of(imp.target)
        if mech and RUN_MODULES & set(imp.target[len(mech) + 1 :].split(".")):
            bad.append(f"{imp.where()}: {imp.importer} imports {imp.target}")
    return bad


def cross_mechanism_violations(imports: list[Import]) -> list[str]:
    return [
        f"{i.where()}: {i.importer} imports {i.target}"
        for i in imports
        if mechanism_of(i.importer) and mechanism_of(i.target) and mechanism_of(i.importer) != mechanism_of(i.target)
    ]


PLUGINS = "dprelease.contracts.plugins"  # reads each package's params section (pydantic models only)


def is_params(module: str) -> bool:
    """A mechanism's ``params`` module: its params section, pydantic only (what ``Params`` is built from)."""
    return bool(mechanism_of(module)) and module == f"{mechanism_of(module)}.params"


def is_kinds(module: str) -> bool:
    """A mechanism's ``kinds`` module: the guarantee kinds only it makes (declarations, no torch)."""
    return bool(mechanism_of(module)) and module == f"{mechanism_of(module)}.kinds"


def is_declaration(module: str) -> bool:
    """What shared code may read of a mechanism, through the plug-in list: its params section and its kinds."""
    return is_params(module) or is_kinds(module)


def shared_violations(imports: list[Import]) -> list[str]:
    """A non-mechanism module importing anything of a mechanism package; apart: the registry (its plug-in),
    the plug-in list (its params section and its guarantee kinds)."""
    return [
        f"{i.where()}: {i.importer} imports {i.target}"
        for i in imports
        if mechanism_of(i.target)
        and not mechanism_of(i.importer)
        and i.importer != REGISTRY
        and not (i.importer == PLUGINS and is_declaration(i.target))
    ]


def registry_violations(imports: list[Import]) -> list[str]:
    return sorted(
        {
            i.target
            for i in imports
            if i.importer == REGISTRY and mechanism_of(i.target) and i.target != f"{mechanism_of(i.target)}.plugin"
        }
    )


def describe_cycle(cycle: list[str], imports: list[Import]) -> str:
    lines = ["import cycle: " + " -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        where = [
            i.where() for i in sorted({i for i in imports if i.importer == a and i.target == b}, key=lambda i: i.lineno)
        ]
        lines.append(f"  {a} -> {b}: {', '.join(where)}")
    return "\n".join(lines)
