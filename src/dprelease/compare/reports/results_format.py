"""docs/results.md's shared pieces: reading the stages' outputs and formatting numbers and tables
(:mod:`dprelease.compare.reports.results` renders the page)."""

from __future__ import annotations

import json
from pathlib import Path

from dprelease.core.markdown import LINK, num, read_csv, table  # noqa: F401  (re-exported)


def missing(what: str, target: str) -> str:
    return f"{what}: not measured yet: run `make {target}`."


def count(v) -> str:
    return "–" if v in (None, "") else f"{int(float(v)):,}"


def sci(v) -> str:
    """δ: a short scientific form (1.9e-04), or the cell's text when it is not a number."""
    if v in (None, ""):
        return "–"
    try:
        x = float(v)
    except ValueError:
        return str(v)
    return "0" if x == 0 else f"{x:.2g}" if x >= 1e-3 else f"{x:.1e}"


def yes(v) -> str:
    return {"true": "yes", "false": "no"}.get(str(v).strip().lower(), str(v) or "–")


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _g(v) -> str:
    """Four significant figures ('–' for none): ε runs from 1 to 10²⁹ (a certified floor) on this data."""
    text = num(v)
    return text if text == "–" or not isinstance(v, (int, float, str)) else f"{float(v):.4g}"
