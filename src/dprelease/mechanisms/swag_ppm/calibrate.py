"""SWAG with its temperature measured and, optionally, calibrated (``ppm.calibration``: none, scale, subspace, lr or
prior); the released ε is 2Δ / min(1, T_min) over all d directions whatever the mode.

See docs/guarantees.md, T.5."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from dprelease.core.backends import curvature
from dprelease.core.backends.base import Backend, Features, get_flat
from dprelease.core.privacy.censor import Censor
from dprelease.mechanisms.swag_ppm import temperature
from dprelease.mechanisms.swag_ppm.params import SwagParams
from dprelease.mechanisms.swag_ppm.swag import SwagMoments
from dprelease.mechanisms.swag_ppm.swag_train import swag as run_swag

# The pipeline's CG budget per temperature measurement (r = K − 1 solves at once). Whatever it leaves
# unconverged widens the certified bounds (temperature.laplace_marginal) and so LOWERS the reported
# temperatures: a small budget can only make ε larger, never smaller. With the default prior (λ = 1000, the
# head's initialisation precision) K-FAC-preconditioned CG reaches rtol in ~8 iterations on the head; with
# λ = 1 (H = G + I badly conditioned) 40 iterations leave a 2.5× gap (bound_gap in metrics/temperature_r*.json).
PIPELINE_CG = {"rtol": 1e-3, "max_iter": 40}


def measure_temperature(
    backend: Backend,
    model: nn.Module,
    moments: SwagMoments,
    features: Features,
    weights: torch.Tensor | None,
    prior_precision: float,
    cg: dict | None = None,
) -> Measured:
    """Temperatures of the sampler against the Laplace-GGN posterior of the weighted loss at the SWAG mean,
    marginal against marginal in SWAG's subspace (r conjugate-gradient solves on GGN-vector products; ``cg``:
    rtol / max_iter, default :data:`PIPELINE_CG`), with the pieces a recalibration re-reads without new solves."""
    cg = PIPELINE_CG if cg is None else cg
    theta = moments.mean.float()
    dev = moments.deviations.double().cpu().numpy()
    basis = temperature.subspace_basis(dev)
    g_diag = curvature.ggn_diagonal(backend, model, theta, features, weights).double().cpu().numpy()
    g_block = curvature.ggn_subspace(backend, model, theta, features, weights, torch.from_numpy(basis)).cpu().numpy()
    op = curvature.ggn_operator(backend, model, theta, features, weights)
    pre = curvature.ggn_preconditioner(backend, model, theta, features, weights, prior_precision)
    marginal = temperature.laplace_marginal(
        lambda v: op(torch.from_numpy(v)).numpy(),
        basis,
        g_diag,
        prior_precision=prior_precision,
        preconditioner=None if pre is None else (lambda v: pre(torch.from_numpy(v)).numpy()),
        **cg,
    )
    measured = Measured(basis, g_diag, g_block, marginal, prior_precision, None)
    return measured.read(moments)


@dataclass(frozen=True)
class Measured:
    """One temperature measurement: SWAG's subspace U, diag G, U G Uᵀ, the certified marginal bounds, and
    the sampler's temperatures (``reading``) — private intermediate quantities, never written out."""

    basis: np.ndarray
    g_diag: np.ndarray
    g_block: np.ndarray
    marginal: temperature.Marginal
    prior_precision: float
    reading: temperature.Temperature | None

    def read(self, moments: SwagMoments) -> "Measured":
        """The same measurement read for another sampler spanning (part of) the same subspace."""
        t = temperature.estimate(
            moments.var.cpu().numpy(),
            moments.deviations.double().cpu().numpy(),
            moments.scale,
            self.basis,
            self.g_diag,
            self.g_block,
            self.marginal,
            prior_precision=self.prior_precision,
        )
        return replace(self, reading=t)


def temperature_of(
    backend: Backend,
    model: nn.Module,
    moments: SwagMoments,
    features: Features,
    weights: torch.Tensor | None,
    prior_precision: float,
    cg: dict | None = None,
) -> temperature.Temperature:
    """The temperatures alone (:func:`measure`)."""
    return measure_temperature(backend, model, moments, features, weights, prior_precision, cg).reading


def swag(
    backend: Backend,
    model: nn.Module,
    features: Features,
    labels: torch.Tensor,
    weights: torch.Tensor | None,
    params: SwagParams,
    *,
    seed: int,
    calibration: str,
    prior_precision: float,
    desc: str = "SWAG",
    censor: Censor | None = None,
    measure: bool = True,
) -> tuple[SwagMoments, list[float], dict]:
    """SWAG from the model's current (fine-tuned) θ on the objective with prior λ = ``prior_precision``;
    returns (calibrated moments, epoch losses, public summary, SWAG's own moments before calibration)."""
    lr = params.lr
    if calibration == "lr":
        mean_sq, sq_mean = curvature.gradient_noise(backend, model, get_flat(model), features, labels, weights)
        lr = temperature.mandt_learning_rate(
            mean_sq, sq_mean, n=len(labels), batch_size=params.batch_size, dim=get_flat(model).numel()
        )
    moments, hist = run_swag(
        backend,
        model,
        features,
        labels,
        weights,
        params.model_copy(update={"lr": lr}),
        seed=seed,
        progress=True,
        desc=desc,
        censor=censor,
        prior_precision=prior_precision,
    )
    if not np.isfinite(hist.losses[-1]) or not torch.isfinite(moments.mean).all():
        raise FloatingPointError(f"SWAG diverged at learning rate {lr:.4g} (calibration: {calibration})")
    if not measure:
        return moments, hist.losses, {"calibration": "none", "lr": lr, "scale": moments.scale}, moments
    raw, found = moments, measure_temperature(backend, model, moments, features, weights, prior_precision)
    measured = found.reading
    summary = {"calibration": calibration, "lr": lr, "temperature_uncalibrated": measured.as_dict()}
    if calibration == "scale":  # every temperature is linear in the sampling scale: no second curvature pass
        factor = 1.0 / measured.subspace_min
        moments = replace(moments, scale=moments.scale * factor)
        measured = measured.rescaled(factor)
    elif calibration in ("subspace", "prior"):  # the subspace covariance := the marginal's certified upper bound
        if calibration == "prior":  # Σ ⪰ scale·diag(var) ⪰ I/λ ⪰ H⁻¹ in every direction
            moments = replace(moments, var=moments.var.clamp_min(1.0 / (prior_precision * moments.scale)))
        dev = temperature.subspace_deviations(
            moments.var.cpu().numpy(),
            found.basis,
            found.marginal.upper,
            scale=moments.scale,
            rows=moments.deviations.shape[0],
        )
        moments = replace(moments, deviations=torch.from_numpy(dev).to(moments.deviations))
        measured = found.read(moments).reading  # re-read from what is stored (float32 deviations)
    summary |= {"scale": moments.scale, "temperature": measured.as_dict()}
    return moments, hist.losses, summary, raw
