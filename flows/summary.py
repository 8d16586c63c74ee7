"""The end-of-run summary printed by ``make run`` (public aggregates only)."""

from __future__ import annotations

from dprelease.config import Params
from dprelease.io import read_json
from dprelease.layout import Layout
from dprelease.privacy.guarantee import Guarantee


def print_summary(params: Params, root: str, result: dict, seconds: float) -> None:
    lay = Layout.from_params(params, root)
    data, audit, rel = (read_json(lay.metrics / f"{n}.json") for n in ("data", "audit", "release"))
    g = Guarantee.from_dict(rel["guarantee"])
    lines = [
        "",
        "SWAG-PPM release",
        f"  data       {data['rows']:,} rows, {data['classes']} classes "
        f"(train {data['train_rows']:,} / test {data['test_rows']:,}; train class-size Gini {data['train_class_gini']:.3f})",
    ]
    for r in params.rounds:
        if r >= 2:
            s = read_json(lay.metrics / f"sensitivity_r{r}.json")
            label = "weighted" if r == 2 else "re-weighted"
            lines.append(f"  round {r}    ε = {s['epsilon']:.3f}  (Δ̂ = {s['local_sensitivity']:.3f}, {s['draws']} draws, {label})")
    lines += [
        f"  released   ε = {g.epsilon:.3f}, δ {g.delta_text}; one draw from round {rel['round']}",
        f"  utility    released draw: weighted F1 {audit['released_weighted_f1']:.3f}, macro F1 {audit['released_macro_f1']:.3f}",
        f"             over {audit['draws']} draws: weighted {audit['weighted_f1_mean']:.3f} ± {audit['weighted_f1_sd']:.3f}, "
        f"macro {audit['macro_f1_mean']:.3f} ± {audit['macro_f1_sd']:.3f}",
        f"  release    {lay.release}/  (predict: dprelease predict --release {lay.release} --input narratives.csv --output coded.csv)",
        f"  plots      {lay.plots}/max_delta.png, {lay.plots}/f1_violin.png; per-class F1: {lay.audit}/per_class_f1.csv",
    ]
    if result.get("mlflow_run_id"):
        lines.append(f"  MLflow     run {result['mlflow_run_id']}  (UI: make ui  or  mlflow ui --backend-store-uri {params.tracking.mlflow_uri} --workers 1)")
    lines.append(f"  wall time  {seconds:.1f} s  (per stage: " + ", ".join(f"{k} {v:.1f}s" for k, v in result["timings"].items()) + ")")
    print("\n".join(lines))
