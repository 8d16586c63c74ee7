"""Markdown for the result pages: numbers, tables and reading a stage's CSV. Shared by ``docs/results.md``
(:mod:`dprelease.compare.reports.results`) and the sections a mechanism's report stage writes for it."""

from __future__ import annotations

import csv
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


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def read_csv(path: Path) -> list[dict] | None:
    """A CSV's rows as dicts of strings; None when the file is absent."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))
