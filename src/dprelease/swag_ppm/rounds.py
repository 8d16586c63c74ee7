"""The SWAG-PPM rounds as stage functions (docs/algorithms.md, B.5–B.7): per-record risk, sensitivity ε = 2Δ̂ and the ONE
released draw (the fine-tune and SWAG of each round are in ``fit.py``, so their code excludes the PPM maths).
Round stages take ``r`` (1 = unweighted, 2 = weighted); round 3 (re-weighted) is fitted by ``reweighting.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ..backends.base import get_flat, set_flat
from ..config import Params
from ..data.splits import backend_for, features, label_info
from ..io import atomic_dir, read_json, write_json
from ..layout import Layout
from ..privacy import guarantee, secret
from ..release import write_arm_model, write_release
from ..code_scope import closure
from ..training import finetune as run_finetune
from ..utility.evaluate import write_arm
from . import calibrate, claim, extremes, ppm, temperature
from .fit import round_weights
from .passes import posterior_pass
from .reweighting import released_round
from .swag import SwagMoments, iter_samples


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
    return {"weight_mean": float(w.mean()), "weight_median": float(np.median(w)),
            "weights_zero": int((w == 0).sum()), "weights_one": int((w == 1).sum())}


def sensitivity(params: Params, root: str | Path = ".", r: int = 2) -> dict:
    """M_s = max_i w_i CE_i(θ^(s)) over S draws of SWAG_r; Δ̂ = max_s M_s; ε = 2Δ̂ (docs/algorithms.md, B.6); for the
    censored mechanism M_s = max_i min(w_i CE_i, ε_c/2)."""
    lay = Layout.from_params(params, root)
    record_max, max_deltas = posterior_pass(params, lay, r, round_weights(lay, r), "sensitivity", censor=params.censor)
    local_sensitivity, eps = ppm.epsilon(max_deltas)
    with atomic_dir(lay.sensitivity(r), private=True) as tmp:
        np.save(tmp / "record_max_loss.npy", record_max)  # private: per-record, feeds re-weighting
        np.save(tmp / "max_deltas.npy", max_deltas)  # per-draw maxima (aggregates) for the max-delta plot
    summary = {"round": r, "local_sensitivity": local_sensitivity, "epsilon": eps, "draws": len(max_deltas)}
    write_json(lay.metrics / f"sensitivity_r{r}.json", summary)
    return summary


SECRET_NOISE = "seeded from the project's secret key (OS entropy), not from the public seed"


def draw_one(backend, model, moments: SwagMoments, feats, y, weights: np.ndarray | None, *, seed: int,
             censor=None) -> tuple[torch.Tensor, float]:
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
    return extremes.tail_or_none(np.load(lay.sensitivity(r) / "max_deltas.npy"),
                                 seed=secret.seed(lay.artifacts, f"tail/round{r}"))


def _draw(params: Params, lay: Layout, r: int, tag: str):
    """:func:`draw_from_round` plus the tail fit its claim used."""
    backend = backend_for(params, lay)
    feats, y = features(lay)
    moments = SwagMoments.load(lay.swag(r) / "moments.safetensors", device=backend.device)
    model = backend.new_model(feats)
    theta, m_star = draw_one(backend, model, moments, feats, y, round_weights(lay, r),
                             seed=secret.seed(lay.artifacts, f"{tag}/round{r}"), censor=params.censor)
    sens = read_json(lay.metrics / f"sensitivity_r{r}.json")
    temp = read_json(lay.metrics / f"temperature_r{r}.json")["temperature"]
    local_sensitivity = max(sens["local_sensitivity"], m_star)
    q = {"posterior_draws": sens["draws"], "round": r, "calibration": params.ppm.calibration,
         "released_draw_noise": SECRET_NOISE}
    tail = release_tail(params, lay, r)
    if params.censor is not None:
        g = guarantee.censored(params.ppm.censor_epsilon, local_sensitivity,
                               weights=guarantee.RISK_WEIGHTS if r >= 2 else guarantee.UNIFORM_WEIGHTS,
                               temperature=temp["subspace"], temperature_min=temp["subspace_min"],
                               temperature_all=temp["all_parameters"], **q)
    else:  # an ε only for a sampler certified in every direction, from the tail's upper bound (claim.py)
        g = claim.ppm_claim(local_sensitivity, temp, parameters=int(moments.mean.numel()), tail=tail, **q)
    return backend, model, theta, m_star, g, tail


def draw(params: Params, root: str | Path = ".") -> dict:
    """ONE independent draw θ* from the released round's SWAG; its own M* enters Δ̂ (docs/algorithms.md, B.7b step 7)."""
    lay = Layout.from_params(params, root)
    r = released_round(params, lay)
    backend, model, theta, m_star, g, tail = _draw(params, lay, r, "release")
    labels = label_info(lay)
    with atomic_dir(lay.draw, private=True) as tmp:
        save_file({"theta": theta.cpu().contiguous()}, str(tmp / "theta.safetensors"))
        # the release as it will be shared, staged privately: the privacy audit loads it from here and
        # the `publish` stage adds the model card and writes it to params.release
        write_release(tmp / "release", backend, model, labels["codes"], labels["titles"],
                      release_manifest(params, lay, g, tail), closure(__name__))
    summary = {"round": r, "released_draw_max_loss": m_star, "guarantee": g.as_dict(),
               "local_sensitivity_tail": tail}
    write_json(lay.metrics / "release.json", summary)
    return summary


def release_manifest(params: Params, lay: Layout, g: guarantee.Guarantee, tail: dict | None = None) -> dict:
    """The public manifest of a SWAG-PPM release: its guarantee record plus public config and aggregates."""
    p, data = params.ppm, read_json(lay.metrics / "data.json")
    r = g.quantities["round"]  # statistics of the released round only: an unreleased round's stay private
    out = {
        "guarantee": g.as_dict(), "released_from_round": r,
        "temperature": read_json(lay.metrics / f"temperature_r{r}.json")["temperature"],
        "calibration": p.calibration, "prior_precision": p.prior_precision,
        "mechanism": p.mechanism, "censor_epsilon": p.censor_epsilon,
        "c": p.c, "g": p.g, "reweight": params.reweighting, "risk_norm": p.risk_norm,
        "draws": p.draws, "smoke_test": p.smoke_test, "backend": params.model.backend,
        "randomness": {"public_seed": params.seed, "public_seed_drives": "the stratified split and the audit's choice of target records only",
                       "secret_key_drives": "initialisation, batch order, dropout, SWAG's SGD, re-weighting refits, "
                                            "Δ̂ and evaluation passes, the released draw",
                       "released_draw": SECRET_NOISE, "secret_key_id": secret.key_id(lay.artifacts)},
        "dataset": {key: data[key] for key in ("rows", "classes", "train_rows", "test_rows", "train_class_gini")},
        "knobs_that_move_epsilon": epsilon_knobs(params),
    }
    if params.reweighting:
        rw = read_json(lay.metrics / "reweight.json")
        out["reweighting"] = {"mode": p.reweight_mode, "k": p.k if p.reweight_mode == "oneshot" else None,
                              "step": p.reweight_step if p.reweight_mode == "iterative" else None,
                              "tolerance": p.reweight_tolerance if p.reweight_mode == "iterative" else None,
                              "max_refits": p.max_refits if p.reweight_mode == "iterative" else 1,
                              **{key: rw[key] for key in ("accepted", "released_round", "reason")}}
    if tail is not None:
        out["local_sensitivity_uncertainty"] = tail
    if g.kind in claim.KINDS:  # the headline as quoted (card, MLflow), the point figure beside it, the coverage
        out["claim"] = claim.summary(g)
    return out


def epsilon_knobs(params: Params) -> dict:
    """The settings that are not the data but move Δ̂ and so ε (``make epsilon-sensitivity`` measures how much);
    a reviewer checks that they were fixed before ε was seen."""
    sw, ft, p = params.backend.swag, params.ppm_finetune, params.ppm
    out = {"swag_lr": sw.lr, "swag_epochs": sw.epochs, "swag_batch_size": sw.batch_size, "swag_momentum": sw.momentum,
           "swag_rank": sw.rank, "finetune_epochs": ft.epochs, "finetune_lr": ft.lr, "finetune_batch_size": ft.batch_size,
           "calibration": p.calibration, "prior_precision": p.prior_precision, "c": p.c, "g": p.g,
           "risk_norm": p.risk_norm, "draws": p.draws, "reweighting": None}
    if params.reweighting:
        out["reweighting"] = {"mode": p.reweight_mode, "step": p.reweight_step, "aim": p.reweight_aim,
                              "tolerance": p.reweight_tolerance, "target": p.reweight_target,
                              "max_refits": p.max_refits, "k": p.k, "form": p.reweight_form}
    return out


def round2_arm(params: Params, root: str | Path = ".") -> dict:
    """Comparison arm ``swag_ppm``: an independent draw from SWAG 2 (what the release is with
    ``ppm.reweight: false``), with its own M* in Δ̂, evaluated on the test split."""
    lay = Layout.from_params(params, root)
    backend, model, _, _, g = draw_from_round(params, lay, 2, tag="swag_ppm")  # not the release's draw
    write_arm_model(lay, "swag_ppm", backend, model, g, closure(__name__))
    return write_arm(lay, "swag_ppm", backend, model, label_info(lay), g, {"round": 2})
