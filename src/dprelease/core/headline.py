"""The headline figures of a release, the few numbers a person compares runs and versions by, under one set of names
(MLflow metrics and tags, registry tags, the retrain's artifact); read from public aggregates only.

See docs/mlflow.md, "Notes from the code", `core/headline.py`."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.io import read_json

NAMES = (
    "epsilon",
    "epsilon_point",
    "epsilon_ci_low",
    "epsilon_ci_high",
    "uncertified_index",
    "temperature",
    "weighted_f1",
    "macro_f1",
    "weighted_f1_mean",
    "macro_f1_mean",
    "epsilon_lb",
    "records",
)
# the interval is NOT one for the claimed ε's point estimate: it is the GEV interval of the tail quantile of Δ (the
# 1 − 1/(10·S) quantile of the per-draw maximum) as an ε; the claimed ε is its upper end (or the measured Δ̂'s ε, if
# larger), and the point estimate (from the measured maximum Δ̂ over S draws) usually lies below it
INTERVAL_NOTE = (
    "epsilon_ci_low/high: the GEV 95% interval of the tail quantile of Δ, as ε (2Δ / min(1, T_min)); the "
    "claimed epsilon is its upper end (or the measured Δ̂'s ε, if larger); NOT an interval for epsilon_point, "
    "which comes from the measured maximum Δ̂ and may lie below it"
)
LABELS = {
    "epsilon": "ε",
    "epsilon_point": "ε point estimate (measured Δ̂)",
    "epsilon_ci_low": "tail-quantile ε, GEV interval low (not an interval for the point estimate)",
    "epsilon_ci_high": "tail-quantile ε, GEV interval high (the claimed ε's basis)",
    "uncertified_index": "index 2Δ̂ (NOT an ε: uncertified sampler)",
    "temperature": "T̂ (temperature)",
    "weighted_f1": "weighted F1 (released model)",
    "macro_f1": "macro F1 (released model)",
    "weighted_f1_mean": "weighted F1 (mean over draws)",
    "macro_f1_mean": "macro F1 (mean over draws)",
    "epsilon_lb": "ε lower bound (canary audit)",
    "records": "training records (public expected n̂)",
}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def released_arm(metrics: Path) -> str | None:
    """The privacy-audit arm of the declared release (``metrics/released.json``), or None."""
    record = released_record(metrics)
    return None if record is None else record.get("arm")


def audit_bound(metrics: str | Path, arm: str | None) -> tuple[float, str] | None:
    """The audit bound the registry gate uses for ``arm``, with how it was obtained: the multi-run audit's
    when ``metrics/audit_tight.json`` covers the arm (the audit with the power), else the one-run canary
    bound fixed in advance (input canaries when the run has them). Both are 95 % lower bounds."""
    metrics = Path(metrics)
    tight = metrics / "audit_tight.json"
    if arm and tight.is_file() and arm in read_json(tight).get("arms", {}):
        b = read_json(tight)["arms"][arm]["bound"]
        return b["epsilon_lower_bound"], f"multi-run audit, {b['runs_in'] + b['runs_out']} runs"
    canary = metrics / "audit_canary.json"
    if not arm or not canary.is_file():
        return None
    entry = read_json(canary)["arms"].get(arm, {})
    audits = entry.get("audits", {})
    gate = audits.get("input", audits.get("mislabelled", {})).get("gate", {})
    value = gate.get("epsilon_lower_bound", entry.get("epsilon_lower_bound"))
    return (
        None
        if value is None
        else (value, f"{gate.get('method', '?')} one-run canary bound, {gate.get('guesses', '?')} guesses")
    )


def released_record(metrics: str | Path) -> dict | None:
    """``metrics/released.json``: the declared mechanism's release record (the shared publish step's), or None."""
    path = Path(metrics) / "released.json"
    return read_json(path) if path.is_file() else None


def headline(metrics: str | Path, *, canary: bool = True) -> dict[str, float]:
    """The headline figures of the release whose ``metrics/`` folder is ``metrics``, from its record only
    (``metrics/released.json``, the shared publish step's): ε and the test F1 every record has, then the
    mechanism's own figures (``headline`` in the record: what its plug-in's ``figures`` hook gave), the audit
    bound of its arm and the public record count (absent ones left out). ``canary=False``: without the canary
    audit's bound."""
    record = released_record(metrics) or {}
    g = record.get("guarantee") or {}
    own = {"epsilon": g.get("epsilon"), "weighted_f1": record.get("weighted_f1"), "macro_f1": record.get("macro_f1")}
    return figures(own | (record.get("headline") or {}), metrics, arm=record.get("arm"), canary=canary)


def figures(out: dict, metrics: str | Path, *, arm: str | None, canary: bool = True) -> dict[str, float]:
    """``out`` with the audit bound of ``arm`` (``canary``) and the public record count, in :data:`NAMES`
    order, numbers only: the headline of a mechanism's own figures (SWAG-PPM's ``metrics/headline.json`` too)."""
    metrics, out = Path(metrics), dict(out)
    bound = audit_bound(metrics, arm) if canary and arm else None
    if bound is not None:
        out["epsilon_lb"] = bound[0]
    if (metrics / "data.json").is_file():
        # the PUBLIC expected training size n̂: the private count never reaches the registry's tags
        out["records"] = read_json(metrics / "data.json").get("public", {}).get("expected_train_size")
    return {k: out[k] for k in NAMES if _number(out.get(k))}


SENSITIVITY_TABLE = "reports/epsilon_sensitivity/table.csv"  # ``make epsilon-sensitivity`` (owner-only)


def epsilon_sensitivity_near(root: str | Path, prior_precision: float) -> dict | None:
    """The largest ε the ``make epsilon-sensitivity`` grid measured near a release's settings (its cells at the
    release's prior λ: every SWAG learning rate, seed, rank and epochs), to quote beside the release's ε; None
    when the grid has not been run or has no such cell. An aggregate (a maximum and a count) only."""
    import csv

    path = Path(root) / SENSITIVITY_TABLE
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    near = [
        float(r["epsilon"])
        for r in rows
        if r.get("epsilon") not in (None, "", "nan")
        and r.get("prior_precision") not in (None, "")
        and float(r["prior_precision"]) == float(prior_precision)
    ]
    if not near:
        return None
    return {
        "figure": "ε",
        "maximum": max(near),
        "minimum": min(near),
        "cells": len(near),
        "prior_precision": float(prior_precision),
        "source": "make epsilon-sensitivity (" + SENSITIVITY_TABLE + ")",
    }


def markdown(figures: dict, title: str, extra: dict | None = None) -> str:
    """The figures as a two-column Markdown table (the retrain's Prefect artifact)."""
    rows = [(LABELS[k], f"{v:.4g}" if isinstance(v, float) else str(v)) for k, v in figures.items() if k in LABELS]
    rows += [(k, str(v)) for k, v in (extra or {}).items()]
    cell = lambda s: " ".join(str(s).split()).replace("|", "\\|")  # noqa: E731 - one line per row
    return "\n".join(
        [f"### {title}", "", "| figure | value |", "|---|---|", *(f"| {cell(k)} | {cell(v)} |" for k, v in rows)]
    )
