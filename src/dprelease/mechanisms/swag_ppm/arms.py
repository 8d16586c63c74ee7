"""Comparison arms of the round-2 SWAG-PPM variants (uncalibrated, censored), each evaluated on the test split, every
random choice from the secret key.

See docs/guarantees.md, T.4."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from dprelease.contracts.code_scope import closure
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.data.splits import backend_for, features, label_info
from dprelease.core.privacy import guarantee, secret
from dprelease.core.privacy.censor import Censor
from dprelease.core.privacy.target import declared
from dprelease.core.release.folder import write_arm_model
from dprelease.core.utility.evaluate import write_arm
from dprelease.mechanisms.swag_ppm import calibrate, claim, extremes
from dprelease.mechanisms.swag_ppm.fit import UNCALIBRATED
from dprelease.mechanisms.swag_ppm.passes import PassJob, run_pass
from dprelease.mechanisms.swag_ppm.reweighting import fit
from dprelease.mechanisms.swag_ppm.rounds import SECRET_NOISE, draw_one
from dprelease.mechanisms.swag_ppm.swag import SwagMoments


def censor_epsilon(params: Params) -> float:
    """The censored SWAG-PPM's declared ε (``ppm.censor_epsilon``); a one-line ConfigError when it is null."""
    return declared(params.ppm.censor_epsilon, key="ppm.censor_epsilon", who="the censored mechanism")


def _release_one(
    params: Params,
    lay: Layout,
    arm: str,
    backend,
    model,
    moments: SwagMoments,
    feats,
    y,
    w: np.ndarray,
    censor: Censor | None,
    tag: str,
    source: Path | None = None,
    *,
    tail: bool = False,
):
    """Certify ``moments`` on S fresh draws, then draw θ* (its M* enters Δ̂). Returns (model at θ*, Δ̂, S, the
    extreme-value fit of the S per-draw maxima: only with ``tail``, and None below ``extremes.MIN_DRAWS``).
    ``source``: the file ``moments`` were loaded from (chunks on a mapper then read it there; moments
    held only in memory travel with the chunks)."""
    p = params.ppm
    job = PassJob(
        params, lay, moments if source is None else source, w, censor, scale=None if source is None else moments.scale
    )
    _, max_deltas = run_pass(
        job,
        draws=p.draws,
        chunk=p.draw_batch,
        seed=secret.seed(lay.artifacts, f"{tag}/round2"),
        desc=f"{arm} draws",
        local=(backend, model, moments, feats, y),
    )
    _, m_star = draw_one(
        backend, model, moments, feats, y, w, seed=secret.seed(lay.artifacts, f"{tag}-release/round2"), censor=censor
    )
    fitted = extremes.tail_or_none(max_deltas, seed=secret.seed(lay.artifacts, f"{tag}-tail/round2")) if tail else None
    return model, max(float(max_deltas.max()), m_star), len(max_deltas), fitted


def uncalibrated_arm(params: Params, root: str | Path = ".") -> dict:
    lay, arm = Layout.from_params(params, root), "swag_ppm_uncalibrated"
    backend = backend_for(params, lay)
    feats, y = features(lay)
    w = np.load(lay.weights(2) / "weights.npy")
    source = lay.swag(2) / UNCALIBRATED  # SWAG as fitted; absent when the calibration only changed the scale
    source = source if source.is_file() else lay.swag(2) / "moments.safetensors"
    moments = replace(SwagMoments.load(source, device=backend.device), scale=0.5)
    model = backend.new_model(feats)
    t = calibrate.temperature_of(
        backend, model, moments, feats, torch.from_numpy(w).float(), params.ppm.prior_precision
    )
    model, delta, draws, tail = _release_one(
        params, lay, arm, backend, model, moments, feats, y, w, None, "uncalibrated", source, tail=True
    )
    # the release's rule (claim.py): an ε only when every direction is certified, Δ from the tail's upper bound
    g = claim.ppm_claim(
        delta,
        t.as_dict(),
        parameters=int(moments.mean.numel()),
        tail=tail,
        posterior_draws=draws,
        round=2,
        calibration="none",
        released_draw_noise=SECRET_NOISE,
    )
    write_arm_model(lay, arm, backend, model, g, closure(__name__))
    return write_arm(lay, arm, backend, model, label_info(lay), g, {"round": 2, "temperature": t.subspace})


def censored_arm(params: Params, root: str | Path = ".") -> dict:
    lay, arm = Layout.from_params(params, root), "swag_ppm_censored"
    eps = censor_epsilon(params)  # declared in advance: never read from the release (privacy/target.py)
    backend = backend_for(params, lay)
    feats, y = features(lay)
    w = np.ones(len(y))  # uniform: independent of the data, so the censoring bound holds for every neighbour
    censor = Censor(eps / 2, params.ppm.censor_form)
    fitted = fit(params, backend, feats, y, w, 2, censor=censor, artifacts=lay.artifacts)
    t = fitted["temperature"]["temperature"]["subspace"]
    model, delta, draws, _ = _release_one(
        params, lay, arm, backend, fitted["model"], fitted["moments"], feats, y, w, censor, "censored"
    )
    g = guarantee.censored(
        eps,
        delta,
        posterior_draws=draws,
        round=2,
        censor_level=eps / 2,
        censor_form=censor.form,
        temperature=t,
        weights=guarantee.UNIFORM_WEIGHTS,
        calibration=fitted["temperature"]["calibration"],
        released_draw_noise=SECRET_NOISE,
    )
    write_arm_model(lay, arm, backend, model, g, closure(__name__))
    return write_arm(
        lay,
        arm,
        backend,
        model,
        label_info(lay),
        g,
        {"round": 2, "censor_epsilon": eps, "temperature": t, "weights": "uniform"},
    )
