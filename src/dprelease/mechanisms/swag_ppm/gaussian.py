"""SWAG's sampler as a Gaussian, N(μ, S) with S = A + U Uᵀ, A = s·diag(v), U = sqrt(s/(K′−1))·D̂ᵀ
(swag.py: the covariance ``transform`` samples from), and the two quantities the replay audit needs from
it: the log-density of a parameter vector and the KL divergence between two such samplers. Woodbury and the
matrix determinant lemma keep both O(d·K′²) in float64, so they run on the head's 126k parameters.

    S⁻¹ = A⁻¹ − A⁻¹U M⁻¹ UᵀA⁻¹,  M = I + UᵀA⁻¹U,  log det S = Σ log aᵢ + log det M
    KL(p‖q) = ½ [tr(S_q⁻¹S_p) − d + (μ_q−μ_p)ᵀS_q⁻¹(μ_q−μ_p) + log det S_q − log det S_p]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.swag_ppm.swag import SwagMoments


@dataclass(frozen=True)
class LowRankGaussian:
    mean: np.ndarray  # [d]
    diag: np.ndarray  # [d], A's diagonal (> 0)
    factor: np.ndarray  # [d, K] (K may be 0)

    def __post_init__(self) -> None:
        d = self.mean.shape[0]
        if self.diag.shape != (d,) or self.factor.ndim != 2 or self.factor.shape[0] != d:
            raise ValueError("mean [d], diag [d] and factor [d, K] must agree on d")
        if not (self.diag > 0).all():
            raise ValueError("the diagonal part of the covariance must be positive")

    @classmethod
    def from_moments(cls, m: SwagMoments) -> "LowRankGaussian":
        mean = m.mean.double().cpu().numpy()
        diag = m.scale * m.var.double().cpu().numpy()
        k = m.rank
        dev = m.deviations.double().cpu().numpy()
        factor = (math.sqrt(m.scale / (k - 1)) * dev.T) if k > 1 else np.zeros((mean.shape[0], 0))
        return cls(mean, diag, factor)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def _cap(self) -> np.ndarray:
        """Cholesky factor of M = I + UᵀA⁻¹U."""
        u = self.factor
        return np.linalg.cholesky(np.eye(u.shape[1]) + u.T @ (u / self.diag[:, None]))

    def logdet(self) -> float:
        return float(np.log(self.diag).sum() + 2 * np.log(np.diag(self._cap())).sum())

    def solve(self, r: np.ndarray) -> np.ndarray:
        """S⁻¹ r for r [d] or [d, m]."""
        ai_r = r / (self.diag if r.ndim == 1 else self.diag[:, None])
        if self.factor.shape[1] == 0:
            return ai_r
        c = self._cap()
        inner = np.linalg.solve(c.T, np.linalg.solve(c, self.factor.T @ ai_r))
        u_ai = self.factor / self.diag[:, None]
        return ai_r - u_ai @ inner

    def log_pdf(self, x: np.ndarray) -> float:
        r = np.asarray(x, dtype=np.float64) - self.mean
        return float(-0.5 * (self.dim * math.log(2 * math.pi) + self.logdet() + r @ self.solve(r)))


def kl(p: LowRankGaussian, q: LowRankGaussian) -> float:
    """KL(p ‖ q) in nats (module docstring)."""
    if p.dim != q.dim:
        raise ValueError("the two Gaussians have different dimensions")
    # tr(S_q⁻¹ A_p) = Σ a_p/a_q − tr(M_q⁻¹ U_qᵀ A_q⁻¹ A_p A_q⁻¹ U_q)
    tr = float((p.diag / q.diag).sum())
    if q.factor.shape[1]:
        c = q._cap()
        w = q.factor / q.diag[:, None]
        g = w.T @ (w * p.diag[:, None])
        tr -= float(np.trace(np.linalg.solve(c.T, np.linalg.solve(c, g))))
    if p.factor.shape[1]:
        tr += float((p.factor * q.solve(p.factor)).sum())
    dm = q.mean - p.mean
    return 0.5 * (tr - p.dim + float(dm @ q.solve(dm)) + q.logdet() - p.logdet())


def log_ratio(x: np.ndarray, p: LowRankGaussian, q: LowRankGaussian) -> float:
    """log p(x) − log q(x): the likelihood-ratio score of ``x`` for "drawn from p" against "drawn from q"."""
    return p.log_pdf(x) - q.log_pdf(x)
