"""Writes the tuning outputs: decision trail / grid table (Markdown + CSV + JSON) and the grid figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dprelease.core.config import Params
from dprelease.core.io import atomic_path, write_json
from dprelease.core.plots import tune_grid_plot


def write_tune_report(params: Params, root: str | Path, result: dict) -> Path:
    out = Path(root) / "reports" / "tune"
    out.mkdir(parents=True, exist_ok=True)
    mode = result["mode"]
    frame = pd.DataFrame(result["trail"])
    with atomic_path(out / f"{mode}.csv") as tmp:
        frame.to_csv(tmp, index=False)
    write_json(out / f"{mode}.json", result)
    chosen = result["chosen"]
    tune_grid_plot(
        result["trail"],
        out / f"{mode}.png",
        chosen=(chosen["c"], chosen["epochs"]) if chosen else None,
        target=params.tune.target_epsilon,
    )
    req, base = result["requirements"], result["baseline"]
    lines = [
        f"# SWAG-PPM tuning ({mode})",
        "",
        f"Requirements: ε < {req['target_epsilon']:g}; weighted F1 ≥ {(1 - req['max_drop_weighted']) * base['weighted_f1']:.3f} "
        f"and macro F1 ≥ {(1 - req['max_drop_macro']) * base['macro_f1']:.3f} "
        f"(at most {req['max_drop_weighted']:.0%} / {req['max_drop_macro']:.0%} below the non-private "
        f"{base['weighted_f1']:.3f} / {base['macro_f1']:.3f}). F1 = mean over the evaluation draws.",
        "",
        "| " + " | ".join(frame.columns) + " |",
        "|" + "---|" * len(frame.columns),
    ]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |")
    lines += [
        "",
        f"Chosen: c = {chosen['c']:g}, FT epochs = {chosen['epochs']} (ε {chosen['epsilon']:.3f}, "
        f"F1 {chosen['weighted_f1']:.3f} / {chosen['macro_f1']:.3f})"
        if chosen
        else "Chosen: none — no run met both requirements.",
        "",
        f"![{mode}]({mode}.png)",
        "",
    ]
    with atomic_path(out / f"{mode}.md") as tmp:
        tmp.write_text("\n".join(lines), encoding="utf-8")
    return out
