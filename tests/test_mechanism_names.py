"""No mechanism's name outside its folder (issue 53): every module outside ``mechanisms/`` (``src/dprelease``,
``flows/``, ``tasks/``) is parsed (``ast``, nothing imported) and may not name a mechanism in an import, an
attribute, a name or a string constant that is not a docstring; what is left is listed in :data:`ALLOWED`, and
an entry that no longer occurs fails too, so the list only shrinks. A mechanism's name is the short name of a
``dprelease.mechanisms`` package in ``contracts/packages.py``, matched as a word (``_``, ``.``, ``/`` and ``:``
separate words: ``nonprivate_labelled_eps1`` and ``metrics/dpsgd_sweep.json`` name one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dprelease.contracts.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
MECHANISMS = sorted(p.rsplit(".", 1)[1] for p in PACKAGES if p.startswith("dprelease.mechanisms."))
WORD = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(MECHANISMS) + r")(?![A-Za-z0-9])")

ALLOWED: dict[str, tuple[set[str], str]] = {
    "src/dprelease/contracts/packages.py": (set(MECHANISMS), "the package list itself"),
    "src/dprelease/core/release/params.py": ({"dpsgd"}, "the default declared release (params.yaml declares it)"),
    "src/dprelease/compare/reports/compare.py": ({"dpsgd"}, "the caveat's prose"),
    "src/dprelease/compare/mia/plugin.py": ({"nvdp"}, "the NVDP audit arm"),
    "src/dprelease/compare/mia/stages.py": ({"nvdp"}, "the NVDP audit arm (its run code is the audit's)"),
    "src/dprelease/compare/mia/nvdp_arm.py": ({"nvdp", "nonprivate"}, "the NVDP audit arm and its labels"),
    "flows/nvdp.py": ({"nvdp"}, "the plug-in flow it names"),
    "flows/gpp.py": ({"gpp"}, "the plug-in flow it names"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, nodes)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
        and isinstance(n.body[0].value.value, str)
    }


def _texts(node: ast.AST, docstrings: set[int]) -> list[str]:
    """What a node names: an import's modules, an attribute, a name, a string constant (a docstring aside)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] + [a.name for a in node.names]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
        return [node.value]
    return []


def names_in(path: Path) -> dict[str, int]:
    """``{mechanism name: first line}`` of what ``path`` names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings, out = _docstrings(tree), {}
    for node in ast.walk(tree):
        for text in _texts(node, docstrings):
            for name in WORD.findall(text):
                out[name] = min(out.get(name, node.lineno), node.lineno)
    return out


def shared_modules() -> list[Path]:
    files = [p for p in (ROOT / "src" / "dprelease").rglob("*.py") if "mechanisms" not in p.parts]
    return sorted(files + [p for folder in ("flows", "tasks") for p in (ROOT / folder).rglob("*.py")])


def test_the_mechanism_names_are_the_listed_packages():
    assert {"dpsgd", "swag_ppm", "nvdp", "gpp"} <= set(MECHANISMS)
    assert WORD.findall("metrics/dpsgd_sweep.json planted:nonprivate_labelled_eps1 swag_ppmx") == [
        "dpsgd",
        "nonprivate",
    ]


def test_no_mechanism_is_named_outside_its_folder():
    found = {p.relative_to(ROOT).as_posix(): names_in(p) for p in shared_modules()}
    unexpected = [
        f"{path}:{line}: {name}"
        for path, names in found.items()
        for name, line in sorted(names.items())
        if name not in ALLOWED.get(path, (set(), ""))[0]
    ]
    assert not unexpected, "a mechanism named outside its folder (declare it in the mechanism instead):\n" + "\n".join(
        unexpected
    )
    stale = [
        f"{path}: {sorted(names - set(found.get(path, {})))}"
        for path, (names, _) in ALLOWED.items()
        if names - set(found.get(path, {}))
    ]
    assert not stale, "ALLOWED lists what no longer occurs (remove it):\n" + "\n".join(stale)
