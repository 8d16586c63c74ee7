"""The linear PPM's pure maths: a softmax head on the frozen public features, its (censored, weighted, tempered) log
pseudo posterior, the MAP, a Kronecker-factored preconditioner, risk weights and the all-parameter temperature.
Tensors in, tensors out.

See docs/linear_ppm.md, "Notes from the code", `mechanisms/linear_ppm/maths.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


def augment(x: torch.Tensor) -> torch.Tensor:
    """x̃ = [√d·x, 1]: [n, d] embeddings → [n, d+1] (float32)."""
    x = x.float()
    return torch.cat([x * x.shape[1] ** 0.5, torch.ones(x.shape[0], 1)], dim=1)


def censor(ce: torch.Tensor, kappa: float | None) -> torch.Tensor:
    """c_κ(CE) = κ·(1 − exp(−CE/κ)) ∈ [0, κ) (module docstring); ``kappa`` None: CE itself."""
    if kappa is None:
        return ce
    if not kappa > 0:
        raise ValueError(f"the censoring level κ must be > 0 (got {kappa})")
    return -kappa * torch.expm1(-ce.clamp(min=0.0) / kappa)


def per_record_ce(theta: torch.Tensor, xa: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CE_i for one θ [K, d+1] → [n], or for S draws [S, K, d+1] → [S, n]."""
    logits = xa @ theta.transpose(-1, -2)
    logp = F.log_softmax(logits, dim=-1)
    index = y.long().expand(*logp.shape[:-1]).unsqueeze(-1)
    return -logp.gather(-1, index).squeeze(-1)


@dataclass(frozen=True, kw_only=True)
class Target:
    """The declared pseudo posterior on one database: what the sampler draws from."""

    xa: torch.Tensor  # [n, d+1] augmented features
    y: torch.Tensor  # [n] class indices
    n_classes: int
    prior_precision: float  # λ
    temperature: float = 1.0  # T (likelihood tempering)
    weights: torch.Tensor | None = None  # w_i ∈ [0, 1]; None: w ≡ 1
    kappa: float | None = None  # soft censoring level; None: uncensored

    def __post_init__(self) -> None:
        if not (self.prior_precision > 0 and self.temperature > 0):
            raise ValueError("λ and T must be > 0")
        if self.weights is not None and (self.weights.min() < 0 or self.weights.max() > 1):
            raise ValueError("weights must lie in [0, 1]")

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_classes, self.xa.shape[1]

    @property
    def dim(self) -> int:
        return self.n_classes * self.xa.shape[1]

    def contributions(self, theta: torch.Tensor) -> torch.Tensor:
        """Each record's (weighted, censored, untempered) negative log-likelihood w_i·c(CE_i): [n] or [S, n]."""
        c = censor(per_record_ce(theta, self.xa, self.y), self.kappa)
        return c if self.weights is None else c * self.weights

    def potential(self, theta: torch.Tensor) -> torch.Tensor:
        """U(θ) = Σ_i w_i·c(CE_i)/T + λ/2·|θ|² = −log ξ_T(θ|D) + const: a scalar, or [S] for S draws."""
        lik = self.contributions(theta).sum(-1) / self.temperature
        return lik + 0.5 * self.prior_precision * theta.pow(2).sum((-1, -2))


def fit_map(target: Target, *, max_iter: int = 500, init: torch.Tensor | None = None) -> torch.Tensor:
    """A mode of ξ_T by L-BFGS from ``init`` (default 0: deterministic; the target is strictly log-concave when
    uncensored, so the MAP is unique and its start does not matter)."""
    theta = (torch.zeros(target.shape) if init is None else init.clone()).float().requires_grad_(True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-6,
        tolerance_change=1e-10,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        u = target.potential(theta)
        u.backward()
        return u

    opt.step(closure)
    return theta.detach()


@dataclass(frozen=True)
class Preconditioner:
    """θ = θ₀ + U_G (Z ⊙ S) U_Aᵀ with S_ab = (s_G,a·s_A,b + λ)^{-1/2}: the whitening of the Kronecker-factored
    Laplace approximation N(θ₀, (G⊗A + λI)⁻¹) (Martens & Grosse 2015). It changes how fast the chain mixes,
    never the target: the sampler runs on z with the exact potential U(θ(z)) (a linear map: constant Jacobian)."""

    center: torch.Tensor  # θ₀ [K, D]
    u_g: torch.Tensor  # [K, K]
    u_a: torch.Tensor  # [D, D]
    scale: torch.Tensor  # S [K, D]

    def theta(self, z: torch.Tensor) -> torch.Tensor:
        """z [..., K·D] → θ [..., K, D]."""
        zm = z.reshape(*z.shape[:-1], *self.scale.shape)
        return self.center + self.u_g @ (zm * self.scale) @ self.u_a.T

    def z(self, theta: torch.Tensor) -> torch.Tensor:
        """θ [..., K, D] → z [..., K·D] (the inverse map)."""
        zm = (self.u_g.T @ (theta - self.center) @ self.u_a) / self.scale
        return zm.reshape(*zm.shape[:-2], -1)


def whitened_potential(target: Target, pre: Preconditioner):
    """z ↦ U(θ(z)) for a batch z [S, K·D] → [S], the same function as ``target.potential(pre.theta(z))`` computed
    with one GEMM for all S: logits = x̃θ₀ᵀ + (x̃U_A)(U_G M)ᵀ with M = Z ⊙ S, and, U_G and U_A being orthogonal,
    |θ|² = |θ₀|² + 2⟨U_Gᵀθ₀U_A, M⟩ + |M|² (no K×D×D product per draw)."""
    k, d = pre.scale.shape
    x_rot, base = target.xa @ pre.u_a, target.xa @ pre.center.T  # [n, D], [n, K]
    center_rot, center_sq = pre.u_g.T @ pre.center @ pre.u_a, pre.center.double().pow(2).sum().item()
    index = target.y.long().view(-1, 1, 1)

    def potential(z: torch.Tensor) -> torch.Tensor:
        s = z.shape[0]
        m = z.reshape(s, k, d) * pre.scale
        logits = (x_rot @ (pre.u_g @ m).permute(2, 0, 1).reshape(d, s * k)).view(-1, s, k) + base[:, None, :]
        ce = torch.logsumexp(logits, -1) - logits.gather(-1, index.expand(-1, s, 1)).squeeze(-1)  # [n, S]
        c = censor(ce, target.kappa)
        c = c if target.weights is None else c * target.weights[:, None]
        prior = center_sq + 2 * (m * center_rot).sum((-1, -2)) + m.pow(2).sum((-1, -2))
        return c.sum(0) / target.temperature + 0.5 * target.prior_precision * prior

    return potential


def kfac(target: Target, theta: torch.Tensor) -> Preconditioner:
    """K-FAC at ``theta``: A = Σ_i x̃_i x̃_iᵀ / n, G = Σ_i a_i (diag p_i − p_i p_iᵀ) with a_i = w_i·c'(CE_i)/T,
    so G⊗A ≈ the weighted (censored) Gauss–Newton matrix Σ_i a_i H_i ⊗ x̃_i x̃_iᵀ. Computed on the data; it
    only sets the sampler's geometry (class :class:`Preconditioner`)."""
    xa = target.xa.double()
    p = torch.softmax(xa @ theta.double().T, dim=1)
    a = torch.ones(len(xa), dtype=torch.float64) / target.temperature
    if target.weights is not None:
        a = a * target.weights.double()
    if target.kappa is not None:  # c_κ'(CE) = exp(−CE/κ)
        a = a * torch.exp(-per_record_ce(theta.double(), xa, target.y) / target.kappa)
    g = torch.diag((a[:, None] * p).sum(0)) - (a[:, None] * p).T @ p
    s_a, u_a = torch.linalg.eigh(xa.T @ xa / len(xa))
    s_g, u_g = torch.linalg.eigh(g)
    prec = s_g.clamp(min=0)[:, None] * s_a.clamp(min=0)[None, :] + target.prior_precision
    return Preconditioner(theta.float(), u_g.float(), u_a.float(), prec.rsqrt().float())


def equipartition(z: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Per-coordinate configurational temperature T̂_j = mean_s (z_sj − z̄_j)·∂U/∂z_j(z_s) over draws [S, p].

    For any smooth density ∝ exp(−U) with decaying tails, integration by parts gives E[(z_j − c)·∂_j U] = 1 for
    every coordinate j and constant c (the equipartition theorem), whatever the shape of the target: draws from
    the exact posterior read 1 in every one of the p directions (tempered draws from ∝ exp(−U/T) read T). The
    z coordinates are a basis of the whole parameter space, so this checks all parameters, not a subspace."""
    zc = z - z.mean(0, keepdim=True)
    return (zc * grad).mean(0)


def risk_weights(risk: np.ndarray, *, c: float = 1.0, g: float = 0.0, norm: str = "minmax") -> np.ndarray:
    """PPM risk weights (Chew et al. 2025; Preiss et al. 2026, eq. 6; Hu, Savitsky & Williams): with r̂_i the
    largest CE of record i over draws of the unweighted posterior, f̃_i its min–max (or divide-by-max) normalised
    risk in [0, 1], w_i = min{1, max{0, c·(1 − f̃_i) + g}}."""
    r = np.asarray(risk, dtype=np.float64)
    if norm == "minmax":
        span = r.max() - r.min()
        f = (r - r.min()) / span if span > 0 else np.zeros_like(r)
    elif norm == "divmax":
        f = r / r.max() if r.max() > 0 else np.zeros_like(r)
    else:
        raise ValueError(f"unknown risk normalisation {norm!r} (minmax | divmax)")
    return np.clip(c * (1.0 - f) + g, 0.0, 1.0)


def kappa_for(epsilon: float, temperature: float) -> float:
    """The censoring level that makes one exact draw ε-DP at temperature T: κ = ε·T/2."""
    if not (epsilon > 0 and temperature > 0 and math.isfinite(epsilon)):
        raise ValueError("ε and T must be finite and > 0")
    return epsilon * temperature / 2.0
