"""Markdown for the result pages: numbers, tables and reading a stage's CSV. Shared by ``docs/results.md``
(:mod:`dprelease.compare.reports.results`) and the sections a mechanism's report stage writes for it."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

LINK = "[docs/guarantees.md](guarantees.md)"  # the guarantees page, as linked from docs/results.md


def num(v, d: int = 3) -> str:
    """A number with ``d`` decimals; '–' for none, NaN or an empty CSV cell."""
    if v is None or v == "":
        return "–"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if math.isnan(x) else f"{x:.{d}f}"


def sci(v) -> str:
    """δ: a short scientific form (1.9e-04), or the cell's text when it is not a number."""
    if v in (None, ""):
        return "–"
    try:
        x = float(v)
    except ValueError:
        return str(v)
    return "0" if x == 0 else f"{x:.2g}" if x >= 1e-3 else f"{x:.1e}"


def g4(v) -> str:
    """Four significant figures ('–' for none): ε runs from 1 to 10²⁹ (a certified floor) on this data."""
    text = num(v)
    return text if text == "–" or not isinstance(v, (int, float, str)) else f"{float(v):.4g}"


def read_json(path: Path) -> dict | None:
    """A JSON file's object; None when the file is absent."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def missing(what: str, target: str) -> str:
    """The line a section without its inputs shows: what is missing and the make target that measures it."""
    return f"{what}: not measured yet: run `make {target}`."


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def read_csv(path: Path) -> list[dict] | None:
    """A CSV's rows as dicts of strings; None when the file is absent."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))
