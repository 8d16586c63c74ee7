"""The headline figures of a release: the few numbers a person compares runs and versions by.

One set of names everywhere: the MLflow run's metrics and tags, the registered version's tags, the
retrain's Prefect artifact. Read from the run's public aggregates in ``metrics/`` only (the guarantee, the
test-split evaluation, the record count, the canary audit): never a per-record quantity.

=====================  ===============================================================================
``epsilon``            the release's stated ε
``epsilon_ci_low/high`` ε implied by the ends of the extreme-value interval of Δ̂'s tail (ε = 2Δ̂;
                       SWAG-PPM's asymptotic mechanism only)
``temperature``        T̂, SWAG's temperature against the Laplace posterior (1 = matched)
``weighted_f1``        weighted F1 of the released draw on the test split
``macro_f1``           macro F1 of the released draw
``weighted_f1_mean``   weighted F1 averaged over the evaluation's posterior draws (``audit.draws``)
``macro_f1_mean``      macro F1 averaged over the same draws
``epsilon_lb``         the one-run canary audit's ε lower bound for the released arm (when it ran)
``records``            training records
=====================  ===============================================================================
"""

from __future__ import annotations

from pathlib import Path

from .io import read_json

NAMES = ("epsilon", "epsilon_ci_low", "epsilon_ci_high", "temperature", "weighted_f1", "macro_f1",
         "weighted_f1_mean", "macro_f1_mean", "epsilon_lb", "records")
LABELS = {"epsilon": "ε", "epsilon_ci_low": "ε interval, low", "epsilon_ci_high": "ε interval, high",
          "temperature": "T̂ (temperature)", "weighted_f1": "weighted F1 (released draw)",
          "macro_f1": "macro F1 (released draw)", "weighted_f1_mean": "weighted F1 (mean over draws)",
          "macro_f1_mean": "macro F1 (mean over draws)", "epsilon_lb": "ε lower bound (canary audit)",
          "records": "training records"}
RELEASED_ARM = {2: "swag_ppm", 3: "swag_ppm_reweighted"}  # released round → its arm in the privacy audit


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def released_arm(metrics: Path) -> str:
    """The privacy-audit arm of the released round."""
    return RELEASED_ARM[read_json(Path(metrics) / "release.json")["round"]]


def headline(metrics: str | Path, *, canary: bool = True) -> dict[str, float]:
    """The headline figures of the run whose ``metrics/`` folder is ``metrics`` (absent ones left out);
    ``canary=False``: without the canary audit's bound (``metrics/headline.json``, written by the release's
    ``audit`` stage, whose inputs the canary audit is not)."""
    metrics = Path(metrics)
    rel = read_json(metrics / "release.json")
    g = rel["guarantee"]
    out = {"epsilon": g.get("epsilon"), "temperature": g.get("quantities", {}).get("temperature")}
    tail = rel.get("local_sensitivity_tail")
    if tail and g.get("kind") == "ppm_local_asymptotic":  # ε = 2Δ̂: the interval of Δ̂'s tail, doubled
        out |= {"epsilon_ci_low": 2 * tail["ci_low"], "epsilon_ci_high": 2 * tail["ci_high"]}
    if (metrics / "audit.json").is_file():
        a = read_json(metrics / "audit.json")
        out |= {"weighted_f1": a.get("released_weighted_f1"), "macro_f1": a.get("released_macro_f1"),
                "weighted_f1_mean": a.get("weighted_f1_mean"), "macro_f1_mean": a.get("macro_f1_mean")}
    if canary and (metrics / "audit_canary.json").is_file():
        arm = RELEASED_ARM.get(rel["round"])
        entry = read_json(metrics / "audit_canary.json")["arms"].get(arm, {})
        audits = entry.get("audits", {})  # the gate's bound, fixed in advance: input canaries when present
        gate = audits.get("input", audits.get("mislabelled", {})).get("gate", {})
        out["epsilon_lb"] = gate.get("epsilon_lower_bound", entry.get("epsilon_lower_bound"))
    if (metrics / "data.json").is_file():
        out["records"] = read_json(metrics / "data.json").get("train_rows")
    return {k: out[k] for k in NAMES if _number(out.get(k))}


def markdown(figures: dict, title: str, extra: dict | None = None) -> str:
    """The figures as a two-column Markdown table (the retrain's Prefect artifact)."""
    rows = [(LABELS[k], f"{v:.4g}" if isinstance(v, float) else str(v)) for k, v in figures.items() if k in LABELS]
    rows += [(k, str(v)) for k, v in (extra or {}).items()]
    cell = lambda s: " ".join(str(s).split()).replace("|", "\\|")  # noqa: E731 - one line per row
    return "\n".join([f"### {title}", "", "| figure | value |", "|---|---|",
                      *(f"| {cell(k)} | {cell(v)} |" for k, v in rows)])
