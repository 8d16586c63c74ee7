"""Stage ``select``: private selection of the released draw on the validation split (docs/algorithms.md, D.10); the
published ε never grows with the number of tries.

See docs/algorithms.md, I.7."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features, label_info
from dprelease.core.io import atomic_dir, read_json, skip_marker, write_json
from dprelease.core.privacy import secret
from dprelease.core.privacy.selection import select, selection_budget
from dprelease.core.release.folder import write_release
from dprelease.core.release.path import check_release_path
from dprelease.core.utility.metrics import f1_summary
from dprelease.mechanisms.swag_ppm import claim, ppm
from dprelease.mechanisms.swag_ppm.released import release_manifest
from dprelease.mechanisms.swag_ppm.reweighting import released_round
from dprelease.mechanisms.swag_ppm.rounds import SECRET_NOISE
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, iter_samples

COMPOSITION = (
    "publishing both the plain release (ε) and this selected one (2ε) from the same data "
    "costs ε + 2ε in total (basic composition)"
)
NOT_ENABLED = "selection.enabled is false"
NO_VALIDATION = "data.validation_size is 0 (no validation split to score candidates on)"


def selected_folder(lay: Layout) -> Path:
    return lay.release.with_name(lay.release.name + "-selected")


def private_select(params: Params, root: str | Path = ".") -> dict:
    sp, lay = params.selection, Layout.from_params(params, root)
    if sp.split == "test":
        raise ValueError(
            "selection.split: private selection refuses to score on the test split "
            "(set data.validation_size > 0 and use split: validation)"
        )
    folder = selected_folder(lay)
    check_release_path(params, root, folder.resolve())
    if not sp.enabled:
        skip_marker(lay.artifacts / "selection", NOT_ENABLED)
        return skip_marker(folder, NOT_ENABLED, lay.metrics / "selection.json")
    if params.data.validation_size == 0:
        skip_marker(lay.artifacts / "selection", NO_VALIDATION)
        return skip_marker(folder, NO_VALIDATION, lay.metrics / "selection.json")
    if not (lay.features / "validation.safetensors").is_file():
        raise FileNotFoundError("no validation split: set data.validation_size > 0 and re-run stratify/featurize")
    r = released_round(params, lay)
    backend = backend_for(params, lay)
    train, y_train = features(lay, "train")
    val, y_val = features(lay, "validation")
    model = backend.new_model(train)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    weights = np.load(lay.weights(r) / "weights.npy")
    sens = read_json(lay.metrics / f"sensitivity_r{r}.json")
    bound = sens["local_sensitivity"]  # Δ, fixed before any candidate is drawn
    gen = torch.Generator(device=backend.device).manual_seed(secret.seed(lay.artifacts, f"select/round{r}"))
    draws = iter_samples(moments, 10**9, 1, gen)  # lazily, one at a time
    classes = list(range(len(label_info(lay)["codes"])))

    def draw() -> torch.Tensor | None:
        theta = next(draws)
        ce = backend.per_record_ce(model, theta, train, y_train).double().numpy()
        return theta[0] if float(ppm.max_weighted_loss(ce, weights)[0]) <= bound else None  # over Δ: a failed try

    def score(theta: torch.Tensor | None) -> float:
        if theta is None:
            return float("-inf")
        set_flat(model, theta)
        pred = backend.predict_proba(model, val).argmax(1).numpy()
        return f1_summary(y_val.numpy(), pred, classes)[sp.metric]

    rng = secret.numpy_rng(lay.artifacts, f"select-stop/round{r}")
    result = select(draw, score, sp.tau, sp.gamma, rng)
    temp = read_json(lay.metrics / f"temperature_r{r}.json")["temperature"]
    g = claim.ppm_claim(
        bound,
        temp,
        parameters=int(moments.mean.numel()),
        budget=selection_budget,
        mechanism="SWAG-PPM with private selection (Liu & Talwar 2019)",
        posterior_draws=sens["draws"],
        round=r,
        candidate_rule="Δ fixed before selection; a candidate with M* > Δ is a failed try",
        claim_basis="Δ fixed before selection: a hard threshold on every candidate that can be released",
        released_draw_noise=SECRET_NOISE,
    )
    # The number of tries and the rejected candidates' scores are data-dependent and NOT covered by the
    # 2ε guarantee (docs/guarantees.md, Q): they stay in the private artifacts, never in metrics, MLflow, logs or
    # the release folder.
    with atomic_dir(lay.artifacts / "selection", private=True) as tmp:
        write_json(tmp / "private.json", {"tries": result.tries, "scores": result.scores})
    summary = {
        "found": result.found,
        "tau": sp.tau,
        "gamma": sp.gamma,
        "metric": sp.metric,
        "guarantee": g.as_dict(),
        "composition": COMPOSITION,
    }
    if result.found:
        set_flat(model, result.selected)
        labels = label_info(lay)
        manifest = release_manifest(params, lay, g)
        manifest["selection"] = {k: summary[k] for k in ("tau", "gamma", "metric", "composition")}
        write_release(folder, backend, model, labels["codes"], labels["titles"], manifest, closure(__name__))
    else:  # a previous selection's release must not outlive a run that found nothing
        shutil.rmtree(folder, ignore_errors=True)
        skip_marker(folder, f"no draw reached {sp.metric} ≥ {sp.tau} before the random stop")
    write_json(lay.metrics / "selection.json", summary)
    return summary
