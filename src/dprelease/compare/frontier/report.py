"""The frontier's table, plot, report and recommendation (docs/frontier.md), from the sources' point files.

The recommendation names, at the agency's declared budget ``frontier.budget_epsilon``, the point with the best
VALIDATION weighted F1 among those whose guarantee is a worst-case DP guarantee (:func:`dp_kinds`) with ε ≤ the
budget. Test figures are reported, never used to choose. A SWAG-PPM point's ε is local and measured on this
database (or absent when uncertified), so it is on the plot but never recommended.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from dprelease.compare.frontier.plot import floor_kinds, plot
from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.io import atomic_dir, read_json, write_json
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.utility.metrics import mean_sd
from dprelease.core.utility.points import COVERED, points_file, read_points

COLUMNS = [
    "mechanism",
    "label",
    "epsilon",
    "target_epsilon",
    "delta",
    "kind",
    "tuning",
    "accountant",
    "weighted_f1_mean",
    "weighted_f1_sd",
    "macro_f1_mean",
    "macro_f1_sd",
    "seeds",
    "grid_size",
    "validation_weighted_f1",
    "proxy_weighted_f1",
    "gain_over_public",
    "audit_bound",
    "source",
    "config",
]
HEURISTIC_ATTACKS = ("loss", "lira_offline")


def dp_kinds() -> tuple[str, ...]:
    """The guarantee kinds whose ε holds for every pair of neighbouring databases (``Kind.worst_case``, declared
    by whoever makes the kind): what the recommendation may name."""
    return tuple(k.name for k in plugins.guarantee_kinds() if k.worst_case)


def sources(params: Params) -> dict[str, str]:
    """``{source: stage}`` the frontier reads: ``frontier.sources`` or every package's ``FRONTIER``."""
    known = plugins.frontier_sources()
    wanted = params.frontier.sources
    return known if wanted is None else {s: known[s] for s in wanted if s in known}


def audit_bounds(path: Path) -> dict[str, float]:
    """The strongest audit lower bound on ε per audited arm (one-run canary and replay bounds; the heuristic
    membership-inference figures are left out)."""
    if not path.is_file():
        return {}
    audit = pd.read_csv(path)
    rows = audit[~audit["attack"].isin(HEURISTIC_ATTACKS) & audit["epsilon_lower_bound"].notna()]
    return {arm: float(v) for arm, v in rows.groupby("arm")["epsilon_lower_bound"].max().items()}


def table(root: Path, params: Params) -> pd.DataFrame:
    """One row per point of every source, sorted by mechanism and ε."""
    bounds = audit_bounds(root / "reports/privacy/audit.csv")
    rows = []
    for source in sources(params):
        doc, points = read_points(points_file(root, source))
        for p in points:
            (wm, ws), (mm, ms) = mean_sd(p.weighted_f1), mean_sd(p.macro_f1)
            rows.append(
                {
                    "mechanism": p.mechanism,
                    "label": p.label,
                    "epsilon": p.epsilon,
                    "target_epsilon": p.target_epsilon,
                    "delta": p.delta,
                    "kind": p.kind,
                    "tuning": p.tuning,
                    "proxy_weighted_f1": p.proxy_weighted_f1,
                    "accountant": p.accountant,
                    "weighted_f1_mean": wm,
                    "weighted_f1_sd": ws,
                    "macro_f1_mean": mm,
                    "macro_f1_sd": ms,
                    "seeds": len(p.weighted_f1),
                    "grid_size": doc["grid_size"],
                    "validation_weighted_f1": p.validation_weighted_f1,
                    "audit_bound": bounds.get(p.arm) if p.arm else None,
                    "source": source,
                    "config": json.dumps(p.config, sort_keys=True),
                }
            )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    floor = floor_of(frame)
    frame["gain_over_public"] = (
        frame["weighted_f1_mean"] - floor["weighted_f1_mean"] if floor is not None else float("nan")
    )
    return frame.sort_values(["mechanism", "epsilon"], na_position="last", kind="stable").reset_index(drop=True)


def floor_of(frame: pd.DataFrame) -> pd.Series | None:
    """The public model's row (a kind declared ``floor``), or None when the frontier has no public period."""
    rows = frame[frame["kind"].isin(floor_kinds())]
    return None if rows.empty else rows.iloc[0]


def _public_wins(floor: pd.Series, budget: float, why: str) -> dict:
    line = (
        f"at ε ≤ {budget:g} the public model wins (it reads no private report: ε 0): {why}; release it "
        f"(`released.mechanism: {floor['source']}`), test {floor['weighted_f1_mean']:.3f} / macro {floor['macro_f1_mean']:.3f}"
    )
    return {
        "budget_epsilon": budget,
        "found": True,
        "mechanism": floor["mechanism"],
        "label": floor["label"],
        "epsilon": 0.0,
        "delta": None,
        "kind": floor["kind"],
        "tuning": floor["tuning"],
        "validation_weighted_f1": float(floor["validation_weighted_f1"]),
        "test_weighted_f1": float(floor["weighted_f1_mean"]),
        "config": json.loads(floor["config"]),
        "line": line,
    }


def recommend(frame: pd.DataFrame, *, budget: float) -> dict:
    """The covered DP point (its tuning public or covered by its ε: never ``private validation``) at ε ≤ ``budget``
    with the best PUBLIC-PROXY weighted F1 when such points exist (the choice among mechanisms then reads no
    private record), else the best validation weighted F1 (said so: that choice reads the validation split);
    ties: the smaller ε."""
    ok = frame[
        frame["kind"].isin(dp_kinds())
        & (frame["epsilon"] <= budget)
        & frame["validation_weighted_f1"].notna()
        & frame["tuning"].isin(COVERED)
        & ~frame["kind"].isin(floor_kinds())
    ]
    floor = floor_of(frame)
    if ok.empty and floor is not None:
        return _public_wins(floor, budget, "no DP point on the frontier covers its tuning")
    if ok.empty:
        return {
            "budget_epsilon": budget,
            "found": False,
            "line": f"at ε ≤ {budget:g} no mechanism on the frontier has a DP guarantee that covers its tuning: "
            "release nothing",
        }
    by = "proxy_weighted_f1" if ok["proxy_weighted_f1"].notna().any() else "validation_weighted_f1"
    ok = ok[ok[by].notna()]
    best = ok.sort_values([by, "epsilon"], ascending=[False, True], kind="stable").iloc[0]
    how = (
        "public proxy weighted F1 "
        if by == "proxy_weighted_f1"
        else "validation weighted F1 (this choice among mechanisms reads the validation split) "
    )
    beside = ""
    if floor is not None and not pd.isna(floor[by]):  # a DP point is named only above the floor by its spread
        gain, spread = best[by] - floor[by], 0.0 if pd.isna(best["weighted_f1_sd"]) else best["weighted_f1_sd"]
        if gain <= spread:
            return _public_wins(
                floor,
                budget,
                f"the best DP point, {best['label']} at ε {best['epsilon']:.3g}, has "
                f"{how}{best[by]:.3f} against the public model's {floor[by]:.3f} (gain {gain:+.3f}, "
                f"not above its seed spread {spread:.3f}; its test {best['weighted_f1_mean']:.3f})",
            )
        test_gain = best["weighted_f1_mean"] - floor["weighted_f1_mean"]
        beside = (
            f"; the public model (ε 0) has {floor[by]:.3f} there and test {floor['weighted_f1_mean']:.3f}: "
            f"gain over public {test_gain:+.3f} on test"
        )
        if test_gain <= spread:  # reported, never used to choose: the choice reads public scores only
            beside += (
                " (WARNING: on the test split it does not beat the public model by its seed spread: the "
                "public simulation's gain did not transfer to the private reports; docs/frontier.md)"
            )
    line = (
        f"at ε ≤ {budget:g} the best defensible release on this data is {best['label']} at ε "
        f"{best['epsilon']:.3g} (δ {best['delta']:.2g}; tuning: {best['tuning']}): {how}"
        f"{best[by]:.3f}, test {best['weighted_f1_mean']:.3f} ± {best['weighted_f1_sd']:.3f} "
        f"/ macro {best['macro_f1_mean']:.3f} over {best['seeds']} seeds{beside}"
    )
    return {
        "budget_epsilon": budget,
        "found": True,
        "mechanism": best["mechanism"],
        "label": best["label"],
        "epsilon": float(best["epsilon"]),
        "delta": float(best["delta"]),
        "kind": best["kind"],
        "validation_weighted_f1": float(best["validation_weighted_f1"]),
        "tuning": best["tuning"],
        "test_weighted_f1": float(best["weighted_f1_mean"]),
        "config": json.loads(best["config"]),
        "line": line,
    }


def winners(frame: pd.DataFrame) -> list[dict]:
    """At each declared level: the DP point with the best TEST weighted F1 (what the closing table reads)."""
    dp = frame[frame["kind"].isin(dp_kinds()) & frame["target_epsilon"].notna()]
    out = []
    for level, group in dp.groupby("target_epsilon"):
        best = group.sort_values("weighted_f1_mean", ascending=False, kind="stable").iloc[0]
        out.append(
            {
                "target_epsilon": float(level),
                "mechanism": best["mechanism"],
                "weighted_f1_mean": float(best["weighted_f1_mean"]),
            }
        )
    return out


def markdown(frame: pd.DataFrame, rec: dict, docs: dict[str, dict]) -> str:
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "—"
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    cols = [
        "label",
        "epsilon",
        "target_epsilon",
        "kind",
        "tuning",
        "accountant",
        "weighted_f1_mean",
        "weighted_f1_sd",
        "macro_f1_mean",
        "validation_weighted_f1",
        "proxy_weighted_f1",
        "gain_over_public",
        "seeds",
        "grid_size",
        "audit_bound",
    ]
    lines = [
        "# The frontier: test utility against ε",
        "",
        f"**Recommendation:** {rec['line']}.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for _, r in frame.iterrows()]
    lines += ["", "How each source chose its configuration (grid sizes in the table):", ""]
    lines += [f"- **{s}**: {d['selection']}" for s, d in docs.items()]
    lines += [
        "",
        "Tuning: `public proxy` (chosen on the earlier, published period at zero ε), `private selection` "
        "(its ε covers the search), `declared` (no search), `private validation` (chosen on the private "
        "validation split: NOT covered by any ε — plotted dashed, never recommended).",
        "",
    ]
    lines += [
        "",
        "Only kinds in " + ", ".join(dp_kinds()) + " (worst case over neighbouring databases) can be "
        "recommended, and only points whose tuning is covered. A SWAG-PPM point's ε is local (this database) and conditional on the posterior "
        "approximation; a point without ε makes no DP claim. Audit bounds are lower bounds from attacks, shown "
        "for points that are exactly an audited arm.",
        "",
    ]
    return "\n".join(lines)


def provenance(params: Params, root: str | Path) -> dict:
    """What the frontier was computed on — the key's public id and the data summary — so that ``make run`` prints
    its recommendation only beside a release made on the same data with the same key."""
    lay = Layout.from_params(params, root)
    key, data = Path(root) / key_id_file(params), lay.metrics / "data.json"
    return {"key_id": read_json(key) if key.is_file() else None, "data": read_json(data) if data.is_file() else None}


def frontier_report(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    frame = table(Path(root), params)
    if frame.empty:
        raise ValueError("frontier: no points (run the sources' stages: make frontier)")
    rec = {**recommend(frame, budget=params.frontier.budget_epsilon), **provenance(params, root)}
    docs = {s: read_json(points_file(root, s)) for s in sources(params)}
    with atomic_dir(lay.reports / "frontier") as out:
        frame.to_csv(out / "frontier.csv", index=False)
        plot(frame, out, budget=params.frontier.budget_epsilon)
        write_json(out / "recommendation.json", {**rec, "winners": winners(frame)})
        (out / "report.md").write_text(markdown(frame, rec, docs), encoding="utf-8")
    return {"points": len(frame), "recommendation": rec["line"]}


def recommendation_line(params: Params, root: str | Path = ".") -> str:
    """The line ``make run`` prints beside its release: the frontier's recommendation at the declared budget when a
    frontier exists for this data and key, else what to run to get one."""
    budget = params.frontier.budget_epsilon
    folder = Layout.from_params(params, root).reports / "frontier"
    if not (folder / "recommendation.json").is_file():
        return (
            f"at ε ≤ {budget:g}: no frontier for this data yet; `make frontier` compares every mechanism at "
            "declared ε levels and names the best defensible release"
        )
    if {k: read_json(folder / "recommendation.json").get(k) for k in ("key_id", "data")} != provenance(params, root):
        return f"at ε ≤ {budget:g}: the frontier in {folder} was computed on other data or another key: `make frontier`"
    frame = pd.read_csv(folder / "frontier.csv")
    return recommend(frame.astype({"epsilon": float}), budget=budget)["line"]
