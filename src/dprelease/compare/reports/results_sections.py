"""docs/results.md's audit, the packages' own (SWAG-PPM's chain, NVDP's, GPP's: their ``RESULTS_SECTION``) and
ε-sensitivity sections (:mod:`dprelease.compare.reports.results` renders the page)."""

from __future__ import annotations

from pathlib import Path

from dprelease.compare.reports.results_format import (
    LINK,
    count,
    missing,
    num,
    read_csv,
    read_json,
    sci,
    table,
    yes,
)
from dprelease.contracts import plugins


def _tpr(r: dict, level: str) -> str:
    if r.get(f"tpr_at_fpr_{level}") in (None, ""):
        return "–"
    return f"{num(r[f'tpr_at_fpr_{level}'])} ({count(r[f'tp_{level}'])} / {count(r[f'fp_{level}'])})"


def audit_section(root: Path) -> list[str]:
    out = ["## Privacy audit (`make audit`, `make audit-tight`)", ""]
    rows = read_csv(root / "reports/privacy/audit.csv")
    if rows is None:
        return out + [missing("The privacy audit", "audit"), missing("The tight multi-run audit", "audit-tight"), ""]
    attacks = [r for r in rows if r["method"] == "heuristic_l3"]
    if attacks:
        out += [
            "Membership-inference attacks on each arm's release-format folder. TPR at a false-positive rate with "
            "its counts (true / false positives); the null band is the TPR that chance reaches 5 % of the time. "
            "Their ε figure is heuristic (one model): not a bound.",
            "",
        ]
        out += table(
            [
                "arm",
                "attack",
                "AUC",
                "TPR @ 1 % FPR (tp / fp)",
                "null band",
                "TPR @ 0.1 % FPR (tp / fp)",
                "null band",
                "heuristic ε",
            ],
            [
                [
                    r["arm"],
                    r["attack"],
                    num(r["auc"]),
                    _tpr(r, "0.01"),
                    num(r.get("null_tpr_95_0.01")),
                    _tpr(r, "0.001"),
                    num(r.get("null_tpr_95_0.001")),
                    num(r["epsilon_lower_bound"]),
                ]
                for r in attacks
            ],
        )
        out.append("")
    bounds = [r for r in rows if r["method"] not in ("heuristic_l3", "multirun_cp", "gdp_fit_heuristic")]
    if bounds:
        out += [
            "One-run canary bounds (95 %) against the canary run's own claim; `gate` marks the bound fixed in "
            "advance that the sanity rule and the registry use; `ceiling` is the bound with every guess right.",
            "",
        ]
        out += table(
            [
                "arm",
                "canaries",
                "method",
                "claimed ε",
                "δ",
                "right / guesses",
                "ε lower bound",
                "ceiling",
                "convicted",
                "gate",
            ],
            [
                [
                    r["arm"],
                    r["attack"].removeprefix("canary_"),
                    r["method"],
                    num(r["claimed_epsilon"]),
                    sci(r["delta"]),
                    f"{count(r['correct'])} / {count(r['guesses'])}",
                    num(r["epsilon_lower_bound"]),
                    num(r["ceiling"]),
                    yes(r["convicted"]),
                    yes(r["gate"]),
                ]
                for r in bounds
            ],
        )
        out.append("")
    tight = [r for r in rows if r["method"] in ("multirun_cp", "gdp_fit_heuristic")]
    if not tight:
        return out + [missing("The tight multi-run audit", "audit-tight"), ""]
    out += ["Tight multi-run audit (independent training runs; `gdp_fit_heuristic` is not a bound):", ""]
    out += table(
        ["arm", "method", "claimed ε", "δ", "runs", "ε lower bound", "ceiling", "convicted", "ε_LB / ε"],
        [
            [
                r["arm"],
                r["method"],
                num(r["claimed_epsilon"]),
                sci(r["delta"]),
                count(r.get("runs")),
                num(r["epsilon_lower_bound"]),
                num(r["ceiling"]),
                yes(r["convicted"]),
                num(r.get("tightness"), 2),
            ]
            for r in tight
        ],
    )
    return out + [
        "",
        f"Source: `reports/privacy/audit.csv`. What these bounds do and do not promise: {LINK}, sections L and R.",
        "",
    ]


def mechanism_sections(root: Path) -> list[str]:
    """The packages' own sections (``RESULTS_SECTION``, in package order), each as its report stage wrote it."""
    out = []
    for declared in plugins.results_sections():
        path = root / declared.path
        if path.is_file():
            out += path.read_text(encoding="utf-8").split("\n")
        else:
            out += [declared.heading, "", missing(declared.what, declared.target), ""]
    return out


def sensitivity_section(root: Path) -> list[str]:
    """Aggregates only: the table is owner-only (ε of models that are never released)."""
    out = ["## ε over the settings that move it (`make epsilon-sensitivity`)", ""]
    rows = read_csv(root / "reports/epsilon_sensitivity/table.csv")
    eps = [float(r["epsilon"]) for r in rows or [] if r.get("epsilon") not in (None, "")]
    if not eps:
        return out + [missing("The ε sensitivity grid", "epsilon-sensitivity"), ""]
    line = (
        f"{len(eps)} cells (SWAG learning rate × prior λ × seed, rank, epochs): ε from {num(min(eps))} to "
        f"{num(max(eps))} (max / min {num(max(eps) / min(eps), 2)})."
    )
    temp = read_json(root / "metrics/temperature_r2.json")
    prior = (temp or {}).get("temperature", {}).get("prior_precision")
    near = [
        float(r["epsilon"])
        for r in rows
        if prior is not None
        and r.get("prior_precision") not in (None, "")
        and float(r["prior_precision"]) == float(prior)
    ]
    if near:
        line += (
            f" At the release's prior λ = {float(prior):g} ({len(near)} cells): {num(min(near))} to "
            f"{num(max(near))} (max / min {num(max(near) / min(near), 2)}); the largest is the figure to "
            "quote beside the release's ε."
        )
    return out + [line, "", "The per-cell table stays in the owner-only `reports/epsilon_sensitivity/`.", ""]
