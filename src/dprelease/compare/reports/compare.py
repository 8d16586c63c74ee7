"""The comparison report (seed 004 Tables 1, 2, 4 and Figure 3 analogues) as Markdown + CSV + PNG."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.io import atomic_dir, atomic_path, read_json
from dprelease.core.plots import per_class_compare_plot
from dprelease.core.privacy.guarantee import Guarantee
from dprelease.core.utility.evaluate import quartile_summary
from dprelease.core.utility.metrics import quartile_table

CAVEAT = (
    "SWAG-PPM's ε is a *local* bound measured on this database from finitely many posterior draws, and its "
    "δ is asymptotic (→ 0 as n grows) and not quantified; DP-SGD's (ε, δ) is a worst-case guarantee over all "
    "neighbouring databases from the RDP accountant. Equal numbers would not make them the same guarantee. "
    "Every SWAG-PPM ε is also conditional on the SWAG posterior approximation: T̂ is SWAG's temperature "
    "against a Laplace (GGN) posterior in the SWAG subspace (1 = matched; below 1 the sampler is too narrow "
    "and understates ε, by the factor T̂), and Δ̂ is a maximum over finitely many draws (Monte Carlo error). "
    "The censored row's ε is the declared ppm.censor_epsilon, fixed before any run (each record's weighted loss "
    "censored at ε/2): it holds on every database for an exact posterior draw, not only on this one, but its "
    "draw also comes from SWAG. DP-SGD runs at the declared target dpsgd.target_epsilon, also fixed before any "
    "run and never set from the release's measured ε (a level chosen from the data would void its worst-case "
    "claim); its row is therefore not matched to the release's ε. The DP-SGD point nearest the release's ε "
    "belongs to a frontier of DP-SGD runs over declared levels, which this report does not have yet."
)


def arm_metrics(lay: Layout, arm: str) -> tuple[dict, Guarantee, pd.DataFrame]:
    """An arm's test F1, its guarantee record and its per-class F1 table, from the files it declares
    (:meth:`dprelease.contracts.mechanism.Arm.sources`)."""
    root = lay.metrics.parent
    record, (scores, weighted, macro), per_class = plugins.arms()[arm].sources()
    rec = read_json(root / record)
    f1 = rec if scores == record else read_json(root / scores)
    m = {"weighted_f1": f1[weighted], "macro_f1": f1[macro]}
    table = pd.read_csv(root / per_class / "per_class_f1.csv", dtype={"code": str})
    return m, Guarantee.from_dict(rec["guarantee"]), table


def _write(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def _md(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _cell(v) -> str:
    if isinstance(v, float):
        return "–" if pd.isna(v) else f"{v:.4g}" if abs(v) < 1e-2 and v != 0 else f"{v:.3f}"
    return str(v)


def _quartiles(per_class: pd.DataFrame) -> dict:
    """Quartile F1 of an arm as table columns ("top weighted", …), from :func:`quartile_summary`."""
    summary = quartile_summary(quartile_table(per_class))
    return {k.removesuffix("_f1").replace("_quartile_", " "): v for k, v in summary.items()}


def compare_report(params: Params, root: str | Path = ".") -> dict:
    """Write ``reports/compare/`` as a whole (no stale table survives a run with fewer arms)."""
    lay = Layout.from_params(params, root)
    final = lay.reports / "compare"
    with atomic_dir(final) as out:
        _write_report(params, lay, out)
    return {"arms": list(params.compare.arms), "report": str(final / "report.md")}


def _write_report(params: Params, lay: Layout, out: Path) -> None:
    table1, table2, frames = [], [], {}
    arms = plugins.arms()
    for name in params.compare.arms:
        arm = arms[name]
        m, g, per_class = arm_metrics(lay, name)
        frames[arm.label] = per_class
        label = arm.label + (arm.suffix(g.quantities) if arm.suffix is not None else "")
        table1.append(
            {
                "model": label,
                "epsilon": g.epsilon if g.epsilon is not None else float("nan"),
                "delta": g.delta if g.delta is not None else g.delta_reason,
                "guarantee": g.kind,
                "T̂": g.quantities.get("temperature", float("nan")),
                "weighted F1": m["weighted_f1"],
                "macro F1": m["macro_f1"],
            }
        )
        table2.append({"model": arm.label, **_quartiles(per_class)})
    t1, t2 = pd.DataFrame(table1), pd.DataFrame(table2)
    _write(t1, out / "table1.csv")
    _write(t2, out / "quartiles.csv")
    sections = [
        "# SWAG-PPM against non-private training and DP-SGD",
        "",
        f"Data: {read_json(lay.metrics / 'data.json')['rows']:,} rows; backend `{params.model.backend}`; "
        f"seed {params.seed}. {CAVEAT}",
        "",
        "## Table 1: privacy and utility (test set)",
        "",
        _md(t1),
        "",
        "## Table 2: F1 in the top and bottom quartile of classes by training size",
        "",
        _md(t2),
        "",
    ]
    for name in params.compare.arms:  # an arm's own table (Arm.table), when its file has rows
        spec = arms[name].table
        source = lay.metrics.parent / spec.source if spec else None  # root-relative
        rows = read_json(source)["rows"] if source and source.is_file() else []
        if rows:
            frame = pd.DataFrame(rows)[list(spec.columns)]
            _write(frame, out / spec.csv)
            sections += [f"## {spec.title}", "", _md(frame), ""]
    per_class_compare_plot(frames, out / "per_class_vs_size.png")
    sections += [
        "## Figure: per-class F1 against training class size",
        "",
        "![per-class F1](per_class_vs_size.png)",
        "",
    ]
    with atomic_path(out / "report.md") as tmp:
        tmp.write_text("\n".join(sections), encoding="utf-8")
