"""docs/results.md's shared pieces: reading the stages' outputs and formatting numbers and tables
(:mod:`dprelease.compare.reports.results` renders the page)."""

from __future__ import annotations

from dprelease.core.markdown import LINK, g4, missing, num, read_csv, read_json, sci, table  # noqa: F401  (re-exported)


def count(v) -> str:
    return "–" if v in (None, "") else f"{int(float(v)):,}"


def yes(v) -> str:
    return {"true": "yes", "false": "no"}.get(str(v).strip().lower(), str(v) or "–")
