"""The frontier's figure (``reports/frontier/frontier.png`` and ``.svg``): test weighted F1 against ε, one line
per mechanism, the public floor a line across, hollow markers for points without an ε."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dprelease.contracts import plugins
from dprelease.core.utility.points import PRIVATE_VALIDATION

OFF_SCALE = 1e3  # points beyond this ε sit at the plot's right edge (▶, value in the legend's note)


def floor_kinds() -> set[str]:
    """The guarantee kinds declared ``floor`` (:class:`dprelease.contracts.mechanism.Kind`): a model that reads no
    private report, ε 0, the floor every DP point is drawn against (the public model's)."""
    return {k.name for k in plugins.guarantee_kinds() if k.floor}


def _x(row) -> tuple[float | None, bool]:
    """Where a point sits on the ε axis: its ε, or (hollow) the uncertified index 2Δ̂ it carries instead."""
    if row["epsilon"] is not None and not pd.isna(row["epsilon"]):
        return float(row["epsilon"]), True
    index = json.loads(row["config"]).get("uncertified_index")
    return (float(index), False) if index else (None, False)


def _clamped(x: float) -> float:
    return min(x, OFF_SCALE)


def plot(frame: pd.DataFrame, folder: Path, *, budget: float) -> None:
    """frontier.png and .svg: test weighted F1 (mean ± sd) against ε (log), one line per mechanism; the ceiling
    dashed; hollow markers for a point that claims no ε (placed at its index); ▷ at an audit's lower bound."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for mechanism, group in frame.groupby("mechanism", sort=False):
        if group["kind"].isin(floor_kinds()).all():  # ε 0 is off a log axis: the floor is a line across
            r = group.iloc[0]
            ax.axhline(r["weighted_f1_mean"], ls="-.", c="green", lw=1, label=f"{r['label']}: ε 0, the floor")
            continue
        placed = [(*_x(r), r) for _, r in group.iterrows()]
        placed = sorted((p for p in placed if p[0] is not None), key=lambda p: p[0])
        if not placed:
            for _, r in group.iterrows():  # no ε at all (non-private): the ceiling
                ax.axhline(r["weighted_f1_mean"], ls="--", c="grey", lw=1, label=f"{r['label']} (no privacy)")
            continue
        xs, ys = [_clamped(p[0]) for p in placed], [p[2]["weighted_f1_mean"] for p in placed]
        uncovered = placed[0][2].get("tuning") == PRIVATE_VALIDATION  # dashed: its tuning is not covered by ε
        line = ax.errorbar(
            xs,
            ys,
            yerr=[p[2]["weighted_f1_sd"] for p in placed],
            marker="o",
            ms=4,
            capsize=2,
            ls="--" if uncovered else "-",
            label=placed[0][2]["label"].split(" (τ")[0] + (" [tuning not covered]" if uncovered else ""),
            mfc="white" if not placed[0][1] else None,
        )
        for x, certified, r in placed:
            if not certified:
                ax.plot([_clamped(x)], [r["weighted_f1_mean"]], "o", mfc="white", c=line[0].get_color())
            if x > OFF_SCALE:
                ax.plot([OFF_SCALE], [r["weighted_f1_mean"]], ">", ms=9, c=line[0].get_color())
                ax.annotate(
                    f"ε {x:.2g}",
                    (OFF_SCALE, r["weighted_f1_mean"]),
                    fontsize=6,
                    xytext=(-40, 4),
                    textcoords="offset points",
                )
            if r["audit_bound"] is not None and not pd.isna(r["audit_bound"]) and r["audit_bound"] > 0:
                ax.plot([r["audit_bound"]], [r["weighted_f1_mean"]], ">", c=line[0].get_color())
        index = [
            (2 * json.loads(r["config"])["local_sensitivity"], r["weighted_f1_mean"])
            for _, r in group.iterrows()
            if r["kind"].startswith("ppm") and "local_sensitivity" in json.loads(r["config"])
        ]
        if index:  # a PPM point granted its index 2Δ̂ as if it were an ε: where it would sit, hollow (not an ε)
            ax.plot(
                *zip(*sorted(index)),
                ls="none",
                marker="D",
                mfc="white",
                c=line[0].get_color(),
                label=f"{placed[0][2]['label'].split(' (τ')[0]} at its index 2Δ̂ (not an ε)",
            )
    ax.axvline(budget, ls=":", c="black", lw=1, label=f"budget ε = {budget:g}")
    ax.set_xscale("log")
    ax.set_xlabel(f"ε (log scale; hollow: no ε claimed, placed at its index 2Δ̂; ▶: beyond {OFF_SCALE:g})")
    ax.set_ylabel("test weighted F1 (mean ± sd over seeds)")
    ax.legend(fontsize=7, loc="lower right")
    try:
        for fmt in ("png", "svg"):
            fig.savefig(folder / f"frontier.{fmt}", format=fmt, dpi=120)
    finally:
        fig.clear()
