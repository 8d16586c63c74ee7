"""NVDP's section of ``docs/results.md`` (``reports/nvdp/section.md``, declared by ``params.RESULTS_SECTION``):
per task and variant the λ with the best score, from the report's ``table.csv``. Aggregates only."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.markdown import LINK, num, read_csv, table
from dprelease.mechanisms.nvdp.params import RESULTS_SECTION


def render(rows: list[dict]) -> list[str]:
    """The section's lines from ``table.csv``'s rows (strings, as read back from the file)."""
    out = [RESULTS_SECTION.heading, ""]
    best: dict[tuple[str, str], dict] = {}
    for r in rows:
        if r["variant"] == "nonprivate":
            continue
        key, score = (r["task"], r["variant"]), float(r["score"] or "nan")
        old = best.get(key)
        if (
            old is None
            or score > float(old["score"] or "nan")
            or (score == float(old["score"]) and float(r["bdp_epsilon"]) < float(old["bdp_epsilon"]))
        ):
            best[key] = r
    base = {r["task"]: r["score"] for r in rows if r["variant"] == "nonprivate"}
    out += [
        "Per task and variant, the λ with the best score. The reference accountant's figure is **not an ε of "
        f"the sanitizer** ({LINK}, NVDP); RD max is the unfiltered largest Rényi-divergence bound between two "
        "test inputs.",
        "",
    ]
    out += table(
        [
            "task",
            "variant",
            "λ",
            "score",
            "non-private score",
            "reference accountant figure",
            "RD max",
            "RD max (filtered as the reference reports it)",
        ],
        [
            [
                t,
                v,
                r["lambda"],
                num(r["score"]),
                num(base.get(t)),
                num(r["bdp_epsilon"]),
                num(r["rd_max"]),
                num(r["rd_max_filtered"]),
            ]
            for (t, v), r in best.items()
        ],
    )
    return out + ["", "Source: `reports/nvdp/table.csv` (the full grid is in `reports/nvdp/report.md`).", ""]


def write(folder: Path) -> None:
    """``folder/section.md`` from ``folder/table.csv`` (the report folder, as the report stage writes it)."""
    (folder / "section.md").write_text("\n".join(render(read_csv(folder / "table.csv"))), encoding="utf-8")
