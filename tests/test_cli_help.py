"""Every command-line option of the project has help text: ``dprelease``, the flows, the scripts and the
benchmarks (static: every ``add_argument`` call names ``help``), and ``--help`` shows it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    ROOT / "src" / "dprelease" / "cli.py",
    *sorted((ROOT / "flows").glob("*.py")),
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
]


def _options_without_help(path: Path) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            if not any(k.arg == "help" for k in node.keywords):
                names = [a.value for a in node.args if isinstance(a, ast.Constant)]
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {' '.join(map(str, names))}")
    return bad


def test_every_option_has_help_text():
    calls = sum(
        1
        for p in SOURCES
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument"
    )
    assert calls > 50  # the scan sees the options
    assert [b for p in SOURCES for b in _options_without_help(p)] == []


@pytest.mark.parametrize("sub", ["stage", "predict", "sanitize", "dvc-yaml", "track"])
def test_dprelease_subcommand_help_shows_it(sub, capsys):
    from dprelease.cli import main

    with pytest.raises(SystemExit) as e:
        main([sub, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--params" in out or "--release" in out
    assert "(default: $DPRELEASE_PARAMS or params.yaml)" in out or "release folder" in out
