"""House style of docstrings, checked by static analysis (``ast``) of ``src/dprelease``: every docstring is
short (what the thing does and why; the rationale lives in docs/), and the public functions of the contracts
and of the privacy core say what each argument is and what they return (Google style, as in jax_privacy)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dprelease"
MAX_DOC_LINES = 12
DOCUMENTED = ["contracts", "core/privacy"]  # folders whose public functions need Args:/Returns:


Node = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def docstring_lines(node: Node) -> int:
    """Source lines of ``node``'s docstring literal, 0 when it has none."""
    if not node.body or ast.get_docstring(node, clean=False) is None:
        return 0
    literal = node.body[0]
    return literal.end_lineno - literal.lineno + 1


def named(tree: ast.Module) -> list[tuple[str, Node]]:
    """The module and every class and function in it (nested ones too), with a dotted name."""
    out: list[tuple[str, Node]] = [("<module>", tree)]

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((prefix + node.name, node))
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out


def public_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods of module-level classes whose names (and class's) have no leading _."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not item.name.startswith("_"):
                    out.append((f"{node.name}.{item.name}", item))
    return out


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ("self", "cls")]


def returns_value(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    r = fn.returns
    return r is not None and not (isinstance(r, ast.Constant) and r.value is None)


def section(doc: str, title: str) -> str | None:
    """The indented block under ``title:`` in a Google-style docstring, or None."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"{title}:":
            block = []
            for nxt in lines[i + 1 :]:
                if nxt.strip() and not nxt.startswith((" ", "\t")):
                    break
                block.append(nxt)
            return "\n".join(block)
    return None


def missing_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """What ``fn``'s docstring lacks: ``Args:`` entries for its parameters, a ``Returns:`` (or ``Yields:``)."""
    params = parameters(fn)
    if not params:
        return []
    doc = ast.get_docstring(fn) or ""
    missing = []
    args = section(doc, "Args")
    if args is None:
        missing.append("an Args: section")
    else:
        entries = {line.strip().split(":")[0].split(" (")[0].lstrip("*") for line in args.splitlines() if line.strip()}
        absent = [p for p in params if p not in entries]
        if absent:
            missing.append("Args: entries for " + ", ".join(absent))
    if returns_value(fn) and section(doc, "Returns") is None and section(doc, "Yields") is None:
        missing.append("a Returns: section")
    return missing


def test_every_docstring_is_at_most_twelve_lines():
    long = [
        f"{rel(path)}: {name}'s docstring is {n} lines (at most {MAX_DOC_LINES}; move the rationale to docs/)"
        for path in modules()
        for name, node in named(ast.parse(path.read_text(), filename=str(path)))
        if (n := docstring_lines(node)) > MAX_DOC_LINES
    ]
    assert not long, "\n".join(long)


def test_public_functions_of_the_contracts_and_the_privacy_core_document_args_and_returns():
    checked = [p for folder in DOCUMENTED for p in sorted((SRC / folder).rglob("*.py"))]
    assert checked, "no module found under " + ", ".join(DOCUMENTED)
    gaps = [
        f"{rel(path)}: {name} lacks {', '.join(missing)}"
        for path in checked
        for name, fn in public_functions(ast.parse(path.read_text(), filename=str(path)))
        if (missing := missing_args(fn))
    ]
    assert not gaps, "\n".join(gaps)


def test_the_checks_see_a_long_docstring_and_a_missing_argument():
    tree = ast.parse('def f(x, *, y) -> int:\n    """' + "line\n" * 13 + '    Args:\n        x: one.\n    """\n')
    fn = tree.body[0]
    assert docstring_lines(fn) > MAX_DOC_LINES
    assert missing_args(fn) == ["Args: entries for y", "a Returns: section"]
