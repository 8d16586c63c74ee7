"""Figures of the house's structure, as the import-graph test sees it: modules, parts (a floor's subpackage or
module, or a top-level module), the layers the parts stack in, import edges, top-level entries of
``src/dprelease``, ``config.py``'s lines and mechanism mentions, the places that check ``target_epsilon``, and the
files that import by a computed name.

    python benchmarks/house.py [--root REPO]

Static analysis only (``tests/import_graph.py``): nothing of the package is imported. Run it on another checkout
(``--root``) to compare two versions with the same definitions.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

MECHANISM_WORDS = r"\b(dpsgd|swag_ppm|ppm|swag|ncm|nvdp|gpp|nonprivate|linear_ppm)\b"


def _files(root: Path, pattern: str, *paths: str) -> list[str]:
    """The tracked files under ``paths`` with a line matching ``pattern`` (``git grep -lE``)."""
    out = subprocess.run(["git", "grep", "-lE", pattern, "--", *paths], cwd=root, capture_output=True, text=True)
    return sorted(line for line in out.stdout.splitlines() if line)


def figures(root: Path) -> dict:
    sys.path[:0] = [str(root / "tests"), str(root / "src")]  # that checkout's analysis and package
    import import_graph as ig  # the analysis the import rules are tested with

    src = root / "src"
    graph = ig.import_graph(src)
    parts = ig.part_graph(graph, ig.code_scope.listed_packages())

    @lru_cache(maxsize=None)
    def depth(part: str) -> int:
        return 1 + max((depth(q) for q in parts.get(part, ()) if q in parts), default=0)

    config = next(src.rglob("config.py")).read_text(encoding="utf-8")
    return {
        "modules": len(graph),
        "module import edges": sum(len(v) for v in graph.values()),
        "parts": len(parts),
        "part layers": max(depth(p) for p in parts),
        "part import edges": sum(len(v) for v in parts.values()),
        "top-level entries of src/dprelease": len(
            [p for p in (src / "dprelease").iterdir() if p.name != "__pycache__"]
        ),
        "config.py lines": len(config.splitlines()),
        "config.py mechanism mentions": len(re.findall(MECHANISM_WORDS, config, re.IGNORECASE)),
        "places reading dpsgd.target_epsilon": _files(root, r"\.dpsgd\.target_epsilon\b", "src"),
        "files importing by a computed name": _files(root, r"import_module\(|__import__\(", "src", "flows", "tasks"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="repository checkout")
    args = ap.parse_args()
    for name, value in figures(args.root.resolve()).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
