"""The Rényi divergence bound between two inputs' NVIB posteriors (S000 eq. 3, spec F.2). Pure torch, float64.

``gaussian_term`` and ``dirichlet_term`` are the printed formula's parts for given parameters (orientation as
printed: the Gaussian part equals the standard D_λ(N_{q'} ‖ N_q) per dimension, the Dirichlet part the
standard D_λ(Dir(α^q) ‖ Dir(α^{q'}))). :func:`pair_bound` applies them to two posteriors of different lengths
the way the reference code does: pseudo-counts below 1e-4 zeroed; the second posterior's component counts
replaced by the proportional allocation α_0^{q'}·α_i^q/α_0^q; Gaussian components paired by position; and,
with ``normalise`` (the code's normalisation, used for every reported number), the Gaussian part averaged
over embedding dimensions and summed over components, and both the Gaussian and the whole Dirichlet part divided
by the number of vectors: by default the padded length max_length + 1 as in the reference code (which pads every
input to max_length; dividing by an input's own count instead magnifies short inputs), ``n_vectors=None`` the
input's own count. ``normalise=False``
is eq. 3 as printed (sums over dimensions, no division). Arguments outside the formula's domain (σ'² ≤ 0,
a Gamma argument ≤ 0) give NaN; callers count them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .nvib import ALPHA_ZERO

LAMBDA = 1.1
Z_FILTER = 0.5  # the reference code zeroes per-batch RD values whose |z-score| exceeds this


def _lgamma(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, torch.lgamma(x.clamp_min(1e-300)), torch.full_like(x, float("nan")))


def gaussian_term(mu_q, s_q, mu_qp, s_qp, lam: float = LAMBDA) -> torch.Tensor:
    """Element-wise third line of eq. 3: λ/2 (Δμ/σ')² + 1/(1−λ) ln(σ' / (σ_{q'}^{1−λ} σ_q^λ))."""
    var = (1 - lam) * s_qp ** 2 + lam * s_q ** 2
    sp = torch.sqrt(torch.where(var > 0, var, torch.full_like(var, float("nan"))))
    return lam / 2 * ((mu_q - mu_qp) / sp) ** 2 + (torch.log(sp) - (1 - lam) * torch.log(s_qp)
                                                     - lam * torch.log(s_q)) / (1 - lam)


def dirichlet_mass(a0_q, a0_qp, lam: float = LAMBDA) -> torch.Tensor:
    """First line of eq. 3 (total-mass part)."""
    return -(_lgamma(lam * a0_q - (lam - 1) * a0_qp) / (lam - 1) + _lgamma(a0_qp)
             - lam / (lam - 1) * _lgamma(a0_q))


def dirichlet_components(a_q, a_qp, lam: float = LAMBDA, kappa: float = 1.0) -> torch.Tensor:
    """Second line of eq. 3, element-wise per component (κ_i = 1)."""
    return kappa * (_lgamma((lam * a_q - (lam - 1) * a_qp) / kappa) / (lam - 1) + _lgamma(a_qp / kappa)
                    - lam / (lam - 1) * _lgamma(a_q / kappa))


def dirichlet_term(a_q, a_qp, lam: float = LAMBDA) -> torch.Tensor:
    """Lines 1–2 of eq. 3 for two count vectors over the same components (last axis)."""
    return dirichlet_mass(a_q.sum(-1), a_qp.sum(-1), lam) + dirichlet_components(a_q, a_qp, lam).sum(-1)


@dataclass
class Batch:
    """Posterior parameters of a batch (float64): mu/sigma (B, m, d), alpha/mask (B, m), prior row 0."""

    mu: torch.Tensor
    sigma: torch.Tensor
    alpha: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def of(cls, post) -> "Batch":
        a = post.alpha.detach().double() * post.mask
        a = torch.where(a < ALPHA_ZERO, torch.zeros_like(a), a)
        return cls(post.mu.detach().double(), post.sigma.detach().double(), a, post.mask.bool())


def _allocated(a_q: torch.Tensor, a_qp: torch.Tensor):
    """α_q restricted to its non-zero components and the proportional allocation of q' over them."""
    keep = a_q > 0
    a0_q, a0_qp = a_q.sum(-1, keepdim=True), a_qp.sum(-1, keepdim=True)
    alloc = a0_qp * a_q / a0_q.clamp_min(1e-300)
    return keep, a0_q.squeeze(-1), a0_qp.squeeze(-1), alloc


def dirichlet_part(a_q, a_qp, n_vec, lam: float = LAMBDA, normalise: bool = True) -> torch.Tensor:
    """Dirichlet part with proportional allocation; per pair (leading axes broadcast)."""
    keep, a0_q, a0_qp, alloc = _allocated(a_q, a_qp)
    comp = torch.where(keep, dirichlet_components(torch.where(keep, a_q, 1.0), torch.where(keep, alloc, 1.0), lam),
                       torch.zeros_like(a_q)).sum(-1)
    total = dirichlet_mass(a0_q, a0_qp, lam) + comp
    return total / n_vec if normalise else total


def gaussian_part(mu_q, s_q, mu_qp, s_qp, paired, n_vec, lam: float = LAMBDA, normalise: bool = True):
    """Gaussian part over position-paired components (``paired``: (…, m) bool); per pair."""
    g = gaussian_term(mu_q, s_q, mu_qp, s_qp, lam)
    per_comp = g.mean(-1) if normalise else g.sum(-1)
    total = torch.where(paired, per_comp, torch.zeros_like(per_comp)).sum(-1)
    return total / n_vec if normalise else total


def pair_bound(b: Batch, i: torch.Tensor, j: torch.Tensor, lam: float = LAMBDA, normalise: bool = True,
               n_vectors: int | None = None):
    """eq. 3 bound D_λ(q_i ‖ q_j) for index vectors ``i``, ``j`` into the batch: (gaussian, dirichlet) parts.
    ``n_vectors``: the normaliser (the reference: the padded length, max_length + 1); None: q_i's own count."""
    n_vec = b.mask[i].sum(-1).to(b.mu.dtype) if n_vectors is None else torch.full((len(i),), float(n_vectors),
                                                                                    dtype=b.mu.dtype)
    paired = b.mask[i] & b.mask[j]
    g = gaussian_part(b.mu[i], b.sigma[i], b.mu[j], b.sigma[j], paired, n_vec, lam, normalise)
    d = dirichlet_part(b.alpha[i], b.alpha[j], n_vec, lam, normalise)
    return g, d


def ordered_pairs(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = i != j
    return i[keep], j[keep]


def batch_rd(b: Batch, lam: float = LAMBDA, normalise: bool = True, n_vectors: int | None = None):
    """eq. 3 for every ordered pair of the batch, and how many were NaN (set to 0, as the code does)."""
    if b.mu.shape[0] < 2:
        return torch.zeros(0, dtype=torch.float64), 0
    i, j = ordered_pairs(b.mu.shape[0])
    g, d = pair_bound(b, i, j, lam, normalise, n_vectors)
    rd = g + d
    bad = int(torch.isnan(rd).sum())
    return torch.nan_to_num(rd, nan=0.0), bad


def z_filtered(values: torch.Tensor, z: float = Z_FILTER) -> torch.Tensor:
    """The reference's filter: values whose |z-score| within the batch exceeds ``z`` set to 0."""
    if values.numel() < 2:
        return values
    sd = values.std(unbiased=False)
    if float(sd) == 0.0:
        return values
    return torch.where(((values - values.mean()) / sd).abs() > z, torch.zeros_like(values), values)


class RDStats:
    """Running RD statistics over test batches: unfiltered max/mean over all pairs and the reference's
    filtered per-batch max/mean, then max/mean over batches."""

    def __init__(self, n_vectors: int | None = None):
        self.n_vectors = n_vectors
        self.max, self.total, self.count, self.nan = 0.0, 0.0, 0, 0
        self.batch_max: list[float] = []
        self.batch_mean: list[float] = []

    def add(self, b: Batch, lam: float = LAMBDA) -> None:
        rd, bad = batch_rd(b, lam, n_vectors=self.n_vectors)
        self.nan += bad
        if rd.numel() == 0:
            return
        self.max = max(self.max, float(rd.max()))
        self.total += float(rd.sum())
        self.count += rd.numel()
        f = z_filtered(rd)
        self.batch_max.append(float(f.max()))
        self.batch_mean.append(float(f.mean()))

    def summary(self) -> dict:
        n = max(len(self.batch_max), 1)
        return {"rd_max": self.max, "rd_avg": self.total / max(self.count, 1),
                "rd_max_filtered": max(self.batch_max, default=0.0), "rd_avg_filtered": sum(self.batch_mean) / n,
                "rd_pairs": self.count, "rd_nan_pairs": self.nan}
