"""GPP's section of ``docs/results.md`` (``reports/gpp/section.md``, declared by ``params.RESULTS_SECTION``): the
baselines and the distributed runs from the report's ``table.csv``. Aggregates only."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.markdown import LINK, num, read_csv, table
from dprelease.mechanisms.gpp.params import RESULTS_SECTION


def render(rows: list[dict]) -> list[str]:
    """The section's lines from ``table.csv``'s rows (strings, as read back from the file)."""
    out = [RESULTS_SECTION.heading, ""]
    keep = [r for r in rows if r["experiment"] in ("baseline", "distributed")]
    out += [
        "Baselines and the distributed runs, from a fresh probe on sanitized test representations "
        f"(0.5 = chance). GPP's guarantee is empirical: **no ε** ({LINK}, GPP).",
        "",
    ]
    out += table(
        [
            "dataset",
            "method",
            "setting",
            "clients",
            "d_z",
            "β",
            "utility AUC",
            "utility accuracy",
            "adversary AUC",
            "adversary accuracy (majority)",
        ],
        [
            [
                r["dataset"],
                r["method"],
                r["setting"],
                r["clients"] or "–",
                r["d_z"] or "–",
                r["beta"] or "–",
                num(r["utility_auc"]),
                num(r["utility_accuracy"]),
                num(r["adversary_auc"]),
                f"{num(r.get('adversary_accuracy'))} ({num(r.get('adversary_majority'))})",
            ]
            for r in keep
        ],
    )
    return out + ["", "Source: `reports/gpp/table.csv` (sweeps and communication in `reports/gpp/report.md`).", ""]


def write(folder: Path) -> None:
    """``folder/section.md`` from ``folder/table.csv`` (the report folder, as the report stage writes it)."""
    (folder / "section.md").write_text("\n".join(render(read_csv(folder / "table.csv"))), encoding="utf-8")
