"""House style: no Python module of the repository is over 400 lines (``import_graph.MAX_LINES``) — the package,
its tests, the benchmarks, the scripts, the flows and the Prefect tasks alike. A module that grows past it is
split into coherent modules (tests mirror what they test)."""

from __future__ import annotations

from pathlib import Path

from import_graph import MAX_LINES, ROOT

FOLDERS = ("src", "tests", "benchmarks", "scripts", "flows", "tasks")


def python_files(root: Path = ROOT, folders: tuple[str, ...] = FOLDERS) -> list[Path]:
    return sorted(p for f in folders for p in (root / f).rglob("*.py") if "__pycache__" not in p.parts)


def too_long(paths: list[Path], root: Path = ROOT, limit: int = MAX_LINES) -> dict[str, int]:
    """``{path relative to root: line count}`` of the files over ``limit`` lines."""
    counts = {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
    return {rel: n for rel, n in counts.items() if n > limit}


def test_no_module_is_over_400_lines():
    files = python_files()
    seen = {p.relative_to(ROOT).parts[0] for p in files}
    assert seen == set(FOLDERS), seen  # not vacuous: every folder is scanned
    assert len(files) > 400
    long = too_long(files)
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_size_rule_sees_a_long_module(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "benchmarks" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    files = python_files(tmp_path, ("benchmarks",))
    assert too_long(files, tmp_path) == {"benchmarks/long.py": MAX_LINES + 1}
