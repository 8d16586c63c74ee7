"""The SWAG-PPM release's utility evaluation, stage ``evaluate`` (``params.evaluation``; not the privacy audit of
:mod:`dprelease.compare.mia`, nor the registry's audit gate): the released draw's test F1,
F1 over further draws, per-class F1 with class sizes, the class-size quartile table, the fit verdicts,
and the max-delta, F1-violin, per-class, loss-curve and confusion plots (docs/algorithms.md, D.7.4–D.9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from tqdm.auto import tqdm

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features, label_info
from dprelease.core.headline import figures as headline_figures
from dprelease.core.io import read_json, write_json
from dprelease.core.plots import confusion_plot, f1_violin_plot, loss_curves_plot, max_delta_plot, per_class_plot
from dprelease.core.privacy import secret
from dprelease.core.utility.evaluate import quartile_summary, score, write_tables
from dprelease.core.utility.metrics import f1_summary, mean_sd
from dprelease.mechanisms.swag_ppm import section
from dprelease.mechanisms.swag_ppm.diagnostics import diagnose
from dprelease.mechanisms.swag_ppm.record import own_figures
from dprelease.mechanisms.swag_ppm.reweighting import released_round
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, iter_samples


def evaluate_release(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    r = released_round(params, lay)
    labels = label_info(lay)
    n_classes = len(labels["codes"])
    backend = backend_for(params, lay)
    feats, y = features(lay, "test")
    model = backend.new_model(feats)
    theta = load_file(str(lay.draw / "theta.safetensors"))["theta"]
    set_flat(model, theta)
    released_pred = backend.predict_proba(model, feats).argmax(1).numpy()
    released, per_class, quartiles = score(y.numpy(), released_pred, labels)
    write_tables(lay.evaluation, per_class, quartiles)

    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    # the evaluation's draws are released figures (F1 over draws): secret like every draw of the mechanism
    gen = torch.Generator(device=backend.device).manual_seed(secret.seed(lay.artifacts, f"evaluate/round{r}"))
    draws = []
    for chunk in iter_samples(moments, params.evaluation.draws, 10, gen):
        for theta in tqdm(chunk, desc="evaluation draws", unit="draw", leave=False):
            set_flat(model, theta)
            draws.append(
                f1_summary(y.numpy(), backend.predict_proba(model, feats).argmax(1).numpy(), list(range(n_classes)))
            )
    weighted = np.array([d["weighted_f1"] for d in draws])
    macro = np.array([d["macro_f1"] for d in draws])

    rounds = [k for k in params.ppm.rounds if k >= 2]
    series = {f"round {k}": np.load(lay.sensitivity(k) / "max_deltas.npy") for k in rounds}
    claimed = read_json(lay.metrics / "swag_ppm_draw.json")["guarantee"]["epsilon"]  # None: no ε claimed (K.9)
    eps = {} if claimed is None else {f"round {r}": claimed}  # other rounds: their 2Δ̂ only, never labelled ε
    tail = read_json(lay.metrics / "swag_ppm_draw.json")["local_sensitivity_tail"]
    max_delta_plot(series, eps, lay.plots / "max_delta.png", tails={f"round {r}": tail})
    f1_violin_plot(
        weighted,
        macro,
        (released["weighted_f1"], released["macro_f1"]),
        lay.plots / "f1_violin.png",
        title=f"test F1 over {len(draws)} draws of SWAG round {r}",
    )
    per_class_plot(per_class, lay.plots / "per_class_f1.png")
    diagnostics = _diagnostics(params, lay, series)
    histories = {
        f"round {k} {ph}": read_json(lay.round(k) / ph / "history.json")["epoch_loss"]
        for k in params.ppm.rounds
        for ph in ("finetune", "swag")
    }
    loss_curves_plot(histories, lay.plots / "loss_curves.png")
    _confusion(labels, y.numpy(), released_pred, lay.plots / "confusion_top_classes.png")

    w_mean, w_sd = mean_sd(weighted)
    m_mean, m_sd = mean_sd(macro)
    summary = {
        "released_weighted_f1": released["weighted_f1"],
        "released_macro_f1": released["macro_f1"],
        "draws": len(draws),
        "weighted_f1_mean": w_mean,
        "weighted_f1_sd": w_sd,
        "macro_f1_mean": m_mean,
        "macro_f1_sd": m_sd,
        **quartile_summary(quartiles),
        "verdict": diagnostics[f"round {r}"]["verdict"],
        "released_round": r,
    }
    write_json(lay.metrics / "evaluation.json", summary)
    # the headline figures under their one set of names (ε, F1, …): what `dvc exp show` compares side by side
    write_json(
        lay.metrics / "headline.json", headline_figures(own_figures(lay.metrics), lay.metrics, arm=None, canary=False)
    )
    # its section of docs/results.md (params.RESULTS_SECTION)
    section.write(lay.evaluation, lay.metrics, selection=section.selection_row(params))
    return summary


def _diagnostics(params: Params, lay: Layout, series: dict[str, np.ndarray]) -> dict:
    """Fit verdict and scores per weighted round, from its max-delta series and SWAG-phase losses."""
    out = {}
    for name, m in series.items():
        k = int(name.split()[-1])
        verdict, scores = diagnose(m, read_json(lay.swag(k) / "history.json")["epoch_loss"])
        out[name] = {"verdict": verdict, **scores.as_dict()}
    write_json(lay.metrics / "diagnostics.json", out)
    return out


def _confusion(labels: dict, y_true: np.ndarray, y_pred: np.ndarray, path: Path, top: int = 12) -> None:
    """Confusion among the ``top`` largest training classes (other predictions are left out)."""
    from sklearn.metrics import confusion_matrix

    order = np.argsort(labels["train_sizes"], kind="stable")[::-1][:top]
    names = [f"{labels['codes'][i]} {labels['titles'][i][:22]}" for i in order]
    matrix = confusion_matrix(y_true, y_pred, labels=order)
    confusion_plot(matrix, names, path, title=f"released draw, {len(order)} largest classes (test)")
