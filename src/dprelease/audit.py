"""Stage 9, audit: the released draw's test F1, F1 over further draws, per-class F1 with class sizes,
the class-size quartile table, the max-delta plot and the F1 violin plot (spec D.7.4–D.9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from tqdm.auto import tqdm

from .backends import make_backend
from .backends.base import load_features, set_flat
from .config import Params
from .io import atomic_path, read_json, write_json
from .layout import Layout
from .mechanism.swag import SwagMoments, iter_samples
from .metrics import f1_summary, mean_sd, per_class_f1, quartile_table
from .plots import f1_violin_plot, max_delta_plot, per_class_plot
from .seeds import stage_seed


def audit(params: Params, root: str | Path = ".") -> dict:
    lay, r = Layout.from_params(params, root), params.final_round
    labels = read_json(lay.data / "labels.json")
    n_classes = len(labels["codes"])
    backend = make_backend(params, n_classes)
    feats, y = load_features(lay.features / "test.safetensors")
    model = backend.build_model(feats["x"].shape[1] if "x" in feats else None)
    classes = list(range(n_classes))
    y_true = y.numpy()

    def utility(theta: torch.Tensor) -> tuple[dict, np.ndarray]:
        set_flat(model, theta)
        pred = backend.predict_proba(model, feats).argmax(1).numpy()
        return f1_summary(y_true, pred, classes), pred

    released, pred = utility(load_file(str(lay.draw / "theta.safetensors"))["theta"])

    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, "audit", r))
    draws = [utility(theta)[0] for chunk in iter_samples(moments, params.audit.draws, 10, gen)
             for theta in tqdm(chunk, desc="audit draws", unit="draw", leave=False)]
    weighted = np.array([d["weighted_f1"] for d in draws])
    macro = np.array([d["macro_f1"] for d in draws])

    per_class = per_class_f1(y_true, pred, classes, labels["train_sizes"], labels["codes"], labels["titles"])
    quartiles = quartile_table(per_class)
    lay.reports.mkdir(parents=True, exist_ok=True)
    for name, frame in (("per_class_f1.csv", per_class), ("quartiles.csv", quartiles)):
        with atomic_path(lay.reports / name) as tmp:
            frame.to_csv(tmp, index=False)

    rounds = [k for k in params.rounds if k >= 2]
    series = {f"round {k}": np.load(lay.sensitivity(k) / "max_deltas.npy") for k in rounds}
    eps = {f"round {k}": read_json(lay.metrics / f"sensitivity_r{k}.json")["epsilon"] for k in rounds}
    max_delta_plot(series, eps, lay.plots / "max_delta.png")
    f1_violin_plot(weighted, macro, (released["weighted_f1"], released["macro_f1"]), lay.plots / "f1_violin.png",
                   title=f"test F1 over {len(draws)} draws of SWAG round {r}")
    per_class_plot(per_class, lay.plots / "per_class_f1.png")

    w_mean, w_sd = mean_sd(weighted)
    m_mean, m_sd = mean_sd(macro)
    top, bottom = (quartiles.set_index("group").loc[g] for g in ("top quartile", "bottom quartile"))
    summary = {
        "released_weighted_f1": released["weighted_f1"], "released_macro_f1": released["macro_f1"],
        "draws": len(draws), "weighted_f1_mean": w_mean, "weighted_f1_sd": w_sd,
        "macro_f1_mean": m_mean, "macro_f1_sd": m_sd,
        "top_quartile_weighted_f1": float(top["weighted_f1"]), "top_quartile_macro_f1": float(top["macro_f1"]),
        "bottom_quartile_weighted_f1": float(bottom["weighted_f1"]),
        "bottom_quartile_macro_f1": float(bottom["macro_f1"]),
    }
    write_json(lay.metrics / "audit.json", summary)
    return summary
