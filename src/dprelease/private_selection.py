"""Stage: private selection of the released draw (spec D.10).

Draws from the final SWAG until one scores ≥ τ on the held-out *validation* split, stopping with
probability γ after each failure. Refuses the test split: the audit's test F1 must stay an unbiased
estimate, and scoring spends private data. For a formal guarantee the validation split must be
public (or its use accounted for separately); the PPM bound covers the training records only.
Budget: every candidate is a SWAG-PPM draw with ε = 2Δ̂ (its own M* included), so the selection is
2ε = 4Δ̂ (Liu & Talwar).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .backends.base import load_features, set_flat
from .config import Params
from .io import read_json, write_json
from .layout import Layout
from .mechanism import ppm
from .mechanism.selection import select, selection_budget
from .mechanism.swag import SwagMoments, iter_samples
from .metrics import f1_summary
from .release import write_release
from .seeds import stage_seed
from .stages import backend_for, label_info, release_manifest


def private_select(params: Params, root: str | Path = ".") -> dict:
    sp, lay, r = params.selection, Layout.from_params(params, root), params.final_round
    if sp.split == "test":
        raise ValueError("selection.split: private selection refuses to score on the test split "
                         "(set data.validation_size > 0 and use split: validation)")
    val_path = lay.features / "validation.safetensors"
    if not val_path.is_file():
        raise FileNotFoundError("no validation split: set data.validation_size > 0 and re-run stratify/featurize")
    backend = backend_for(params, lay)
    train, y_train = load_features(lay.features / "train.safetensors")
    val, y_val = load_features(val_path)
    model = backend.new_model(train)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    weights = np.load(lay.weights(r) / "weights.npy")
    gen = torch.Generator(device=backend.device).manual_seed(stage_seed(params.seed, "select", r))
    draws = iter_samples(moments, 10**9, 1, gen)  # lazily, one at a time
    classes = list(range(len(label_info(lay)["codes"])))
    m_stars: list[float] = []

    def draw() -> torch.Tensor:
        theta = next(draws)
        ce = backend.per_record_ce(model, theta, train, y_train).double().numpy()
        m_stars.append(float(ppm.max_weighted_loss(ce, weights)[0]))
        return theta[0]

    def score(theta: torch.Tensor) -> float:
        set_flat(model, theta)
        pred = backend.predict_proba(model, val).argmax(1).numpy()
        return f1_summary(y_val.numpy(), pred, classes)[sp.metric]

    rng = np.random.default_rng(stage_seed(params.seed, "select-stop", r))
    result = select(draw, score, sp.tau, sp.gamma, rng)
    delta = max(read_json(lay.metrics / f"sensitivity_r{r}.json")["delta"], max(m_stars))
    eps = 2 * delta
    summary = {"found": result.found, "tries": result.tries, "tau": sp.tau, "gamma": sp.gamma,
               "metric": sp.metric, "best_score": max(result.scores), "epsilon_per_candidate": eps,
               "delta_hat": delta, "budget_epsilon": selection_budget(eps)}
    folder = lay.release.with_name(lay.release.name + "-selected")
    if result.found:
        set_flat(model, result.selected)
        labels = label_info(lay)
        manifest = release_manifest(params, lay, {"epsilon": eps, "delta": delta, "round": r})
        manifest |= {"mechanism": "SWAG-PPM with private selection (Liu & Talwar 2019)",
                     "epsilon": summary["budget_epsilon"], "epsilon_per_candidate": eps,
                     "selection": {k: summary[k] for k in ("tries", "tau", "gamma", "metric")}}
        write_release(folder, backend, model, labels["codes"], labels["titles"], manifest)
    elif folder.exists():  # a previous selection's release must not outlive a run that found nothing
        import shutil

        shutil.rmtree(folder)
    write_json(lay.metrics / "selection.json", summary)
    return summary
