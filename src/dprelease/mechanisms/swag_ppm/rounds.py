"""The SWAG-PPM rounds as stage functions (docs/algorithms.md, B.5–B.7): per-record risk, sensitivity ε = 2Δ̂ and the ONE
released draw θ* with its guarantee (the fine-tune and SWAG of each round are in ``fit.py``, so their code excludes the
PPM maths; writing the release — the ``draw`` stage, its manifest, the ``swag_ppm`` arm — is ``released.py``, so the
posterior passes' code holds no release or signing code). Round stages take ``r`` (1 = unweighted, 2 = weighted);
round 3 (re-weighted) is fitted by ``reweighting.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from dprelease.contracts.layout import Layout
from dprelease.core.backends.base import set_flat
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features
from dprelease.core.io import atomic_dir, read_json, write_json
from dprelease.core.privacy import guarantee, secret
from dprelease.mechanisms.swag_ppm import claim, extremes, ppm
from dprelease.mechanisms.swag_ppm.fit import release_censor, round_weights
from dprelease.mechanisms.swag_ppm.passes import posterior_pass
from dprelease.mechanisms.swag_ppm.swag import SwagMoments, iter_samples


def risk(params: Params, root: str | Path = ".") -> dict:
    """r̂_i = max over S draws of SWAG_1 of CE_i; w = clip(c(1 − f̃) + g, 0, 1) (docs/algorithms.md, B.2–B.4)."""
    lay, p = Layout.from_params(params, root), params.ppm
    record_risk, _ = posterior_pass(params, lay, 1, None, "risk")
    w = ppm.weights_from_risk(record_risk, c=p.c, g=p.g, method=p.risk_norm)
    with atomic_dir(lay.weights(2), private=True) as tmp:
        np.save(tmp / "weights.npy", w)
    summary = {"risk_min": float(record_risk.min()), "risk_max": float(record_risk.max()), **_weight_stats(w)}
    write_json(lay.metrics / "risk.json", summary)
    return summary


def _weight_stats(w: np.ndarray) -> dict:
    return {
        "weight_mean": float(w.mean()),
        "weight_median": float(np.median(w)),
        "weights_zero": int((w == 0).sum()),
        "weights_one": int((w == 1).sum()),
    }


def sensitivity(params: Params, root: str | Path = ".", r: int = 2) -> dict:
    """M_s = max_i w_i CE_i(θ^(s)) over S draws of SWAG_r; Δ̂ = max_s M_s; ε = 2Δ̂ (docs/algorithms.md, B.6); for the
    censored mechanism M_s = max_i min(w_i CE_i, ε_c/2)."""
    lay = Layout.from_params(params, root)
    record_max, max_deltas = posterior_pass(
        params, lay, r, round_weights(lay, r), "sensitivity", censor=release_censor(params)
    )
    local_sensitivity, eps = ppm.epsilon(max_deltas)
    with atomic_dir(lay.sensitivity(r), private=True) as tmp:
        np.save(tmp / "record_max_loss.npy", record_max)  # private: per-record, feeds re-weighting
        np.save(tmp / "max_deltas.npy", max_deltas)  # per-draw maxima (aggregates) for the max-delta plot
    summary = {"round": r, "local_sensitivity": local_sensitivity, "epsilon": eps, "draws": len(max_deltas)}
    write_json(lay.metrics / f"sensitivity_r{r}.json", summary)
    return summary


SECRET_NOISE = "seeded from the project's secret key (OS entropy), not from the public seed"


def draw_one(
    backend, model, moments: SwagMoments, feats, y, weights: np.ndarray | None, *, seed: int, censor=None
) -> tuple[torch.Tensor, float]:
    """One draw θ* from ``moments`` (the model is left at θ*) and its M* = max_i w_i CE_i(θ*) (censored
    when the mechanism is), which enters Δ̂ (docs/algorithms.md, B.7b step 7)."""
    gen = torch.Generator(device=backend.device).manual_seed(seed)
    theta = next(iter_samples(moments, 1, 1, gen))
    ce = backend.per_record_ce(model, theta, feats, y).double().numpy()
    m_star = float(ppm.max_weighted_loss(ce, weights, censor=censor)[0])
    set_flat(model, theta[0])
    return theta[0], m_star


def draw_from_round(params: Params, lay: Layout, r: int, tag: str = "release"):
    """One independent draw θ* from SWAG_r with its guarantee: M* = max_i w_i CE_i(θ*) enters
    Δ̂ = max(Δ̂_r, M*); the claim (claim.py) is ε = 2Δ / min(1, T_min over all d directions) with Δ the GEV
    upper bound of Δ̂'s tail, or kind ``ppm_uncertified`` (no ε) for a sampler certified in fewer than d
    directions (censored mechanism: ε fixed, Δ̂ ≤ ε/2 reported). Returns (backend, model at θ*, θ*, M*,
    guarantee)."""
    return _draw(params, lay, r, tag)[:5]


def release_tail(params: Params, lay: Layout, r: int) -> dict | None:
    """The extreme-value fit of round r's per-draw maxima (extremes.py); None below ``MIN_DRAWS`` draws."""
    return extremes.tail_or_none(
        np.load(lay.sensitivity(r) / "max_deltas.npy"), seed=secret.seed(lay.artifacts, f"tail/round{r}")
    )


def _draw(params: Params, lay: Layout, r: int, tag: str):
    """:func:`draw_from_round` plus the tail fit its claim used."""
    backend = backend_for(params, lay)
    feats, y = features(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    model, censor = backend.new_model(feats), release_censor(params)
    theta, m_star = draw_one(
        backend,
        model,
        moments,
        feats,
        y,
        round_weights(lay, r),
        seed=secret.seed(lay.artifacts, f"{tag}/round{r}"),
        censor=censor,
    )
    sens = read_json(lay.metrics / f"sensitivity_r{r}.json")
    temp = read_json(lay.metrics / f"temperature_r{r}.json")["temperature"]
    local_sensitivity = max(sens["local_sensitivity"], m_star)
    q = {
        "posterior_draws": sens["draws"],
        "round": r,
        "calibration": params.ppm.calibration,
        "released_draw_noise": SECRET_NOISE,
    }
    tail = release_tail(params, lay, r)
    if censor is not None:
        g = guarantee.censored(
            params.ppm.censor_epsilon,
            local_sensitivity,
            weights=guarantee.RISK_WEIGHTS if r >= 2 else guarantee.UNIFORM_WEIGHTS,
            temperature=temp["subspace"],
            temperature_min=temp["subspace_min"],
            temperature_all=temp["all_parameters"],
            **q,
        )
    else:  # an ε only for a sampler certified in every direction, from the tail's upper bound (claim.py)
        g = claim.ppm_claim(local_sensitivity, temp, parameters=int(moments.mean.numel()), tail=tail, **q)
    return backend, model, theta, m_star, g, tail
