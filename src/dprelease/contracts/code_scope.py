"""A stage's code, computed: the static import closure of the module that defines its run function (``ast`` only,
nothing imported). Its cache key, its ``dvc.yaml`` code deps and a release's code version hash these files; the same
analysis draws the import graph the architecture tests check.

See docs/architecture.md, "Notes from the code", `contracts/code_scope.py`."""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
PKG = "dprelease"
PACKAGE_DIR = SRC / PKG
_PARSE = threading.Lock()  # CPython 3.11's parser is not thread-safe ("AST constructor recursion depth mismatch"),
#                          and flows run stages in threads: one parse at a time
DATA = {
    "dprelease.core.data.records": ("core/resources/__init__.py", "core/resources/oiics_201_nature.csv"),
    "dprelease.core.encoder_recipe": (
        "core/resources/public_encoder/layers.safetensors",
        "core/resources/public_encoder/recipe.json",
        "core/resources/public_encoder/public_features.safetensors",
    ),
}  # files read as data


@dataclass(frozen=True)
class Import:
    importer: str  # module name of the file holding the statement
    target: str  # dotted module name imported (resolved, absolute)
    path: Path
    lineno: int

    def where(self) -> str:
        """``path:line``, relative to the checkout when the file is in it."""
        try:
            path = self.path.relative_to(SRC.parent).as_posix()
        except ValueError:  # a synthetic file elsewhere (tests)
            path = self.path.name
        return f"{path}:{self.lineno}"


def module_files(src: Path = SRC, package: str = PKG) -> dict[str, Path]:
    """``{module name: file}`` for every ``.py`` file of ``package`` under ``src``.

    Args:
        src: the folder that holds the package.
        package: the top-level package's name.

    Returns:
        Each dotted module name (a package by its ``__init__``'s) with its file."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name a relative import names, resolved against the importing module's package.

    Args:
        module: the importing module's dotted name.
        is_package: whether ``module`` is a package (an ``__init__``).
        level: the number of leading dots.
        name: what follows the dots (``None`` for ``from . import x``).

    Returns:
        The absolute dotted name; ``ValueError`` when the import climbs past the top-level package."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        if level - 1 > len(base):
            raise ValueError(f"{module}: relative import beyond the top-level package")
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _dynamic_target(node: ast.Call) -> str | None:
    """``importlib.import_module("x")`` / ``import_module("x")`` / ``__import__("x")`` with a constant."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name in ("import_module", "__import__") and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
            return arg.value
    return None


def _parse(text: str, filename: str) -> ast.Module:
    with _PARSE:
        return ast.parse(text, filename=filename)


def raw_imports(path: Path, module: str, known: set[str] | None = None) -> list[Import]:
    """Every import in one file as absolute dotted names, at any depth.

    Args:
        path: the file.
        module: its dotted module name (to resolve relative imports).
        known: our modules: ``from P import n`` gives ``P.n`` when that is one of them, else ``P``.

    Returns:
        The file's imports, ``importlib`` / ``__import__`` calls with a constant name included."""
    known = known or set()
    out = []
    for lineno, base, names in _statements(path, module, _stamp(path)):
        if names is None:
            out.append(Import(module, base, path, lineno))
        else:
            for name in names:
                sub = f"{base}.{name}" if base else name
                out.append(Import(module, sub if sub in known else base, path, lineno))
    return out


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=None)
def _statements(path: Path, module: str, stamp: tuple[int, int]) -> tuple[tuple[int, str, tuple[str, ...] | None], ...]:
    """One file's imports as ``(line, absolute base, names of a from-import or None)``, parsed once per
    version of the file (``stamp``: its mtime and size) and process: every stage's closure reads them."""
    tree = _parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            base = (
                resolve_relative(module, path.name == "__init__.py", node.level, node.module)
                if node.level
                else node.module or ""
            )
            out.append((node.lineno, base, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            if target:
                out.append((node.lineno, target, None))
    return tuple(out)


def implicit_imports(module: str, known: set[str]) -> list[str]:
    """Imports by a computed name, made visible: the plug-in list's reads of each listed package's ``params`` and
    ``kinds`` modules, the registry's loads of each ``plugin`` module (the list read from source, not imported).

    Args:
        module: the importing module's dotted name.
        known: our modules.

    Returns:
        The modules ``module`` imports by name (empty for every other module)."""
    suffixes = {PLUGINS: ("params", "kinds"), REGISTRY: ("plugin",)}.get(module, ())
    return [f"{p}.{suffix}" for p in listed_packages() for suffix in suffixes if f"{p}.{suffix}" in known]


def listed_packages() -> tuple[str, ...]:
    """:data:`dprelease.contracts.plugins.PACKAGES`, read from its source, ``packages.py`` (nothing imported): the one list of
    packages."""
    listing = PACKAGE_DIR / "contracts" / "packages.py"
    return _listed_packages(listing, _stamp(listing))


@lru_cache(maxsize=None)
def _listed_packages(path: Path, stamp: tuple[int, int]) -> tuple[str, ...]:
    tree = _parse(path.read_text(encoding="utf-8"), path.name)
    return tuple(
        next(
            ast.literal_eval(n.value)
            for n in tree.body
            if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "PACKAGES" for t in n.targets)
        )
    )


PLUGINS = f"{PKG}.contracts.plugins"
REGISTRY = f"{PKG}.pipeline.registry"
PACKAGE_LIST = (
    f"{PKG}.contracts.packages"  # the list of packages: configuration, in no stage's scope (as a params module)
)
# the functions of the plug-in list that hand out a params module's declarations beyond its schema (ARMS,
# FRONTIER: labels, stage names, ``requires`` tests — code a caller runs) or every package's guarantee kinds; a
# module naming one of them depends on every listed ``params`` and ``kinds`` module. ``sections`` and
# ``arm_names`` give the schema only (config.py): values.
DECLARATION_READERS = frozenset({"arms", "frontier_sources", "guarantee_kinds", "signed_folders"})
KIND_LOOKUP = f"{PKG}.core.privacy.guarantee"  # finds one kind by name (loading every ``kinds`` module on a miss)


def reads_declarations(path: Path, module: str) -> bool:
    """Whether ``module`` calls a :data:`DECLARATION_READERS` function of the plug-in list.

    Args:
        path: the module's file.
        module: its dotted name.

    Returns:
        True when the file names one (``plugins.arms()``, ``from ..plugins import arms``)."""
    return module not in (PLUGINS, KIND_LOOKUP) and _reads_declarations(path, module, _stamp(path))


@lru_cache(maxsize=None)
def _reads_declarations(path: Path, module: str, stamp: tuple[int, int]) -> bool:
    imports_plugins = any(
        base == PLUGINS or (names and base == PLUGINS.rpartition(".")[0] and "plugins" in names)
        for _, base, names in _statements(path, module, stamp)
    )
    if not imports_plugins:
        return False
    tree = _parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in DECLARATION_READERS
            and isinstance(node.value, ast.Name)
            and node.value.id == "plugins"
        ):
            return True
    return any(
        base == PLUGINS and names and DECLARATION_READERS & set(names)
        for _, base, names in _statements(path, module, stamp)
    )


def scope_imports(module: str, path: Path, known: set[str]) -> list[str]:
    """The imports by a computed name that enter a stage's scope (the graph's other edges stay out).

    Args:
        module: the importing module's dotted name.
        path: its file.
        known: our modules.

    Returns:
        The registry's plug-ins, and every listed ``params`` module for a reader of their declarations."""
    if module == PLUGINS:
        return []
    out = implicit_imports(module, known)
    if reads_declarations(path, module):
        out += implicit_imports(PLUGINS, known)
    return out


def own_params(module: str, known: set[str], suffix: str = "params") -> list[str]:
    """The ``params`` (or ``kinds``) module of the listed package ``module`` belongs to.

    Args:
        module: a dotted module name.
        known: our modules.
        suffix: ``"params"``, or ``"kinds"`` for the package's guarantee kinds.

    Returns:
        ``[<package>.<suffix>]`` when that module exists, else ``[]``."""
    package = next((p for p in listed_packages() if module.startswith(p + ".")), None)
    own = f"{package}.{suffix}" if package else None
    return [own] if own in known else []


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@lru_cache(maxsize=None)
def _closure(module: str) -> tuple[str, ...]:
    files = module_files()
    if module not in files:
        raise KeyError(f"not a module of {PKG}: {module}")
    known = set(files)
    seen: set[str] = set()
    todo = [module, *own_params(module, known)]
    while todo:
        m = todo.pop()
        if m not in seen and m in files and (m != PACKAGE_LIST or m == module):
            seen.add(m)
            todo += [p for p in _parents(m) if p in files]
            todo += [i.target for i in raw_imports(files[m], m, known) if i.target in files]
            todo += scope_imports(m, files[m], known)
        if not todo and KIND_LOOKUP in seen:  # it reads or makes guarantee records: its own package's kinds too
            todo = [k for k in own_params(module, known, "kinds") if k not in seen]
    rel = {files[m].relative_to(PACKAGE_DIR).as_posix() for m in seen}
    rel |= {d for m in seen for d in DATA.get(m, ())}
    return tuple(sorted(rel))


def closure(*modules: str) -> list[str]:
    """A stage's scope: every file the modules may run (or read as data), package-relative and sorted.

    It holds the files of their own package they import (and its ``params`` module), the shared core those import,
    and other packages' ``params`` modules only where their declarations are read (:func:`scope_imports`).

    Args:
        *modules: dotted module names (a stage's run module).

    Returns:
        Package-relative paths, sorted."""
    return sorted({f for m in modules for f in _closure(m)})


def module_of(fn) -> str:
    """The module that defines ``fn`` (``functools.partial`` unwrapped).

    Args:
        fn: a function or a ``functools.partial`` of one.

    Returns:
        Its module's dotted name."""
    return getattr(fn, "func", fn).__module__
