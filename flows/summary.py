"""The end-of-run summary printed by ``make run`` (public aggregates only)."""

from __future__ import annotations

from dprelease.compare.frontier.report import recommendation_line
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.io import read_json
from dprelease.core.privacy.guarantee import Guarantee


def _num(v, fmt: str = ".3f") -> str:
    return "–" if v is None else format(v, fmt)


def release_blocks(params: Params, root: str, stages: list[str], declared: dict | None = None) -> list[str]:
    """The same summary for every release folder one of ``stages`` wrote (a signed ``release.json`` with a
    guarantee record): mechanism, kind, ε, δ, test F1, diagnostics, where the folder is. ``declared``: the
    plan's stage declarations by name (else each is looked up)."""
    from pathlib import Path

    from dprelease.pipeline import registry

    lines = []
    for name in stages:
        for out in (declared[name] if declared and name in declared else registry.get(params, name)).outs:
            manifest = Path(root) / out / "release.json"
            if not manifest.is_file() or "guarantee" not in (m := read_json(manifest)) or not m.get("signed_by"):
                continue
            g = Guarantee.from_dict(m["guarantee"])
            f1 = m.get("test_f1") or {}
            f1 = f1.get("released_draw", f1)
            s = m.get("sampling") or {}
            diag = ", ".join(
                f"{k} {s[k]:.4g}"
                for k in ("rhat_max", "ess_bulk_min", "divergences", "temperature_all")
                if isinstance(s.get(k), (int, float))
            )
            lines += [
                "",
                f"Release ({m.get('mechanism', name)})",
                f"  mechanism  {g.mechanism}",
                f"  claim      {g.claim_text} [{g.kind}]" + ("" if g.delta is not None else f", δ {g.delta_text}"),
                f"  utility    weighted F1 {_num(f1.get('weighted_f1'))}, macro F1 {_num(f1.get('macro_f1'))} "
                "(test split)",
                *([f"  diagnostics {diag}"] if diag else []),
                f"  release    {out}/ (signed; check: dprelease verify --release {out} --key agency.pub)",
            ]
    return lines


def released_lines(params: Params, root: str) -> list[str]:
    """The declared release (``metrics/released.json``, the shared publish step's record): mechanism, kind, ε, δ,
    F1, diagnostics, how it was configured, where the signed folder is and how to check and use it."""
    lay = Layout.from_params(params, root)
    rec = read_json(lay.metrics / "released.json")
    g = Guarantee.from_dict(rec["guarantee"])
    diag = ", ".join(
        f"{k} {_num(v, '.4g') if isinstance(v, (int, float)) and not isinstance(v, bool) else v}"
        for k, v in (rec.get("diagnostics") or {}).items()
    )
    return [
        f"  mechanism  {g.mechanism} (released.mechanism: {rec['mechanism']}, declared before the data were seen)",
        f"  claim      {g.claim_text} [{g.kind}]" + ("" if g.delta is not None else f", δ {g.delta_text}"),
        f"  utility    weighted F1 {_num(rec.get('weighted_f1'))}, macro F1 {_num(rec.get('macro_f1'))} (test split"
        + (", from noised counts: covered by ε)" if (rec.get("test_f1_kind") == "dp_noised_counts") else ")"),
        *floor_lines(lay),
        *([f"  diagnostics {diag}"] if diag else []),
        *([f"  tuning     {rec['tuning']}"] if rec.get("tuning") else []),
        f"  release    {lay.release}/ (signed; check: dprelease verify --release {lay.release} --key agency.pub; "
        f"code narratives: dprelease predict --release {lay.release} --input narratives.csv --output coded.csv "
        "--key agency.pub)",
    ]


def floor_lines(lay: Layout) -> list[str]:
    """The public-only floor beside the release (exact figures on the private test split: the operator's view)."""
    path = lay.metrics / "public_floor.json"
    if not path.is_file():
        return []
    f = read_json(path)
    if not f.get("public_model"):
        return []
    pub, rel = f["public_model"], f["release_exact"]
    gain = rel["weighted_f1"] - pub["weighted_f1"]
    return [
        f"  floor      the public model (reads no private report, ε 0): weighted F1 {pub['weighted_f1']:.3f}; the "
        f"release {rel['weighted_f1']:.3f} exact, {gain:+.3f} over the floor (internal: exact test figures)"
    ]


def print_summary(params: Params, root: str, result: dict, seconds: float) -> None:
    """The release's summary: the data, the release's record (:func:`released_lines`), the frontier's
    recommendation, then what each releasing mechanism that ran adds through its plug-in's ``summary`` hook (the
    declared release's first; SWAG-PPM's chain measured beside it)."""
    from dprelease.pipeline import registry

    lay = Layout.from_params(params, root)
    data = read_json(lay.metrics / "data.json")
    lines = [
        "",
        f"Release ({params.released.mechanism})",
        f"  data       {data['rows']:,} rows, {data['classes']} classes "
        f"(train {data['train_rows']:,} / test {data['test_rows']:,}; train class-size Gini {data['train_class_gini']:.3f})",
        *released_lines(params, root),
        f"  frontier   {recommendation_line(params, root)}",
        *registry.summaries(params, root, set(result["timings"]) | {s.name for s in registry.group(params, "release")}),
    ]
    if result.get("mlflow_run_id"):
        lines.append(
            f"  MLflow     run {result['mlflow_run_id']}  (UI: make ui  or  mlflow ui --backend-store-uri {params.tracking.mlflow_uri} --workers 1)"
        )

    # ``seconds``: the flow's own wall time, start to end (every stage, re-weighting's refits included); the
    # per-stage list leaves out the untimed stages, whose duration depends on the data and is never recorded
    untimed = [s.name for s in registry.group(params, "release") if not s.timed and s.name not in result["timings"]]
    lines.append(
        f"  wall time  {seconds:.1f} s  (the flow, start to end; per stage: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in result["timings"].items())
        + (f"; not itemised: {', '.join(untimed)}, whose duration depends on the data" if untimed else "")
        + ")"
    )
    print("\n".join(lines))
