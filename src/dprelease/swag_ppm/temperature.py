"""The temperature of a SWAG sampler against a Laplace (GGN) approximation of the weighted pseudo
posterior (TRUST.md M): arrays in, numbers out.

Reference posterior at the SWAG mean θ̄: N(θ̄, H⁻¹) with H = G + λI, G = Σ_i w_i GGN_i(θ̄) (the weighted
generalised Gauss–Newton, summed over records) and the prior stated explicitly as N(0, λ⁻¹I).
A sampler with covariance Σ that equals the tempered reference T·H⁻¹ satisfies ΣH = T·I, so

    T̂ = tr(Σ_U H_U) / r     in the SWAG subspace U (orthonormal basis of the r deviation directions;
                             Σ_U = UΣUᵀ, H_U = UHUᵀ: the Laplace posterior restricted to the subspace, as
                             in subspace inference) — the headline T̂, and what ``calibration: scale`` sets
                             to 1. The eigenvalues of Σ_U H_U are the per-direction temperatures (min/max
                             reported): a scalar calibration cannot make them all 1.
    T̂_all = tr(HΣ) / d      over all d parameters (exact for tempered Gaussians: Σ is diagonal + low rank,
                             so tr(H·diag v) = Σ_j H_jj v_j and tr(H·DᵀD) = tr(D G Dᵀ) + λ|D|²). Outside the
                             subspace SWAG's diagonal part is set by how far constant-lr SGD diffused in a
                             few epochs, while the Laplace variance there is set by the prior: the head's
                             T̂_all is ~0.001 under N(0, I), a statement about the prior in directions the
                             data barely inform, reported but not used for calibration.

Drawing from π_w^{1/T} is the exponential mechanism with utility scaled by 1/T, so the ε it implies is
2Δ̂ / T̂ when T̂ < 1 (a sampler that is too narrow); for T̂ ≥ 1 the stated 2Δ̂ is kept.

Mandt, Hoffman & Blei (2017): for SGD on the average loss L̄ = (1/N) Σ ℓ_i with batch size S and constant
learning rate η, the stationary covariance solves AΣ + ΣA = (η/S)·C (A the Hessian of L̄, C the per-example
gradient covariance). The reference posterior is N(θ*, (NA)⁻¹). Taking the trace of the Lyapunov equation,
tr(AΣ) = η·tr C / (2S), and with Σ ∝ η the KL divergence to the posterior is, up to constants,
½[N·η·tr C / (2S) − D·log η], minimised at η* = 2·S·D / (N·tr C) — their optimal constant learning rate
(without preconditioning), derived here rather than copied.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Temperature:
    subspace: float  # T̂ = tr(Σ_U H_U)/r
    subspace_min: float  # smallest per-direction temperature in the subspace
    subspace_max: float
    all_parameters: float  # T̂_all = tr(HΣ)/d
    rank: int
    prior_precision: float

    def as_dict(self) -> dict:
        return asdict(self)

    def rescaled(self, factor: float) -> "Temperature":
        """T̂ of the same sampler with its scale multiplied by ``factor`` (every reading is linear in it)."""
        return replace(self, subspace=self.subspace * factor, subspace_min=self.subspace_min * factor,
                       subspace_max=self.subspace_max * factor, all_parameters=self.all_parameters * factor)


def subspace_basis(deviations: np.ndarray, rtol: float = 1e-6) -> np.ndarray:
    """Orthonormal rows spanning the SWAG deviations (right singular vectors above ``rtol``·σ_max)."""
    _, sv, vt = np.linalg.svd(np.asarray(deviations, dtype=np.float64), full_matrices=False)
    return vt[sv > rtol * sv.max()] if sv.size and sv.max() > 0 else vt[:0]


def estimate(var: np.ndarray, deviations: np.ndarray, scale: float, basis: np.ndarray, ggn_diag: np.ndarray,
             ggn_block: np.ndarray, *, prior_precision: float) -> Temperature:
    """T̂ of the sampler scale·(diag(var) + DᵀD/(K−1)) against N(θ̄, (G + λI)⁻¹).

    ``basis`` [r, d] orthonormal rows spanning D's rows; ``ggn_diag`` = diag(G); ``ggn_block`` = U G Uᵀ."""
    if prior_precision < 0:
        raise ValueError("prior precision must be >= 0")
    var, dev, u = (np.asarray(a, dtype=np.float64) for a in (var, deviations, basis))
    g_u = np.asarray(ggn_block, dtype=np.float64)
    d, k, r = var.size, dev.shape[0], u.shape[0]
    if dev.shape[1:] != var.shape or u.shape[1:] != var.shape or g_u.shape != (r, r) or len(ggn_diag) != d:
        raise ValueError("variance, deviations, basis, GGN diagonal and GGN block do not match")
    if r == 0:
        raise ValueError("the SWAG deviations span no subspace (all zero)")
    low = dev @ u.T  # [K, r]: deviations in subspace coordinates (they lie in its span)
    lr_scale = 1.0 / (k - 1) if k > 1 else 0.0
    sigma_u = scale * ((u * var) @ u.T + lr_scale * low.T @ low)
    h_u = g_u + prior_precision * np.eye(r)
    temps = np.linalg.eigvals(sigma_u @ h_u).real
    h_diag = np.asarray(ggn_diag, dtype=np.float64) + prior_precision
    trace_all = float(h_diag @ var) + lr_scale * float(np.trace(low @ h_u @ low.T))
    return Temperature(subspace=float(np.trace(sigma_u @ h_u)) / r, subspace_min=float(temps.min()),
                       subspace_max=float(temps.max()), all_parameters=scale * trace_all / d, rank=int(r),
                       prior_precision=float(prior_precision))


def implied_epsilon(epsilon: float, temperature: float) -> float:
    """2Δ̂/T̂ for a sampler that is too narrow (T̂ < 1); ε itself otherwise."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return epsilon / min(1.0, temperature)


def mandt_learning_rate(mean_sq_grad: float, sq_mean_grad: float, *, n: int, batch_size: int, dim: int) -> float:
    """η* = 2·S·D / (N·tr C), tr C = mean_i |∇ℓ_i|² − |mean_i ∇ℓ_i|² (module docstring)."""
    tr_c = mean_sq_grad - sq_mean_grad
    if not np.isfinite(tr_c) or tr_c <= 0:
        raise ValueError(f"gradient-noise trace must be positive and finite, got {tr_c}")
    return 2.0 * batch_size * dim / (n * tr_c)
