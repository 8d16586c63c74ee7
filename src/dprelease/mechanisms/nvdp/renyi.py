"""The Rényi divergence bound between two inputs' NVIB posteriors (S000 eq. 3, docs/algorithms.md, F.2), normalised as
the reference code does. Pure torch, float64.

See docs/nvdp.md, "Notes from the code", `mechanisms/nvdp/renyi.py`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dprelease.mechanisms.nvdp.nvib import ALPHA_ZERO

LAMBDA = 1.1
Z_FILTER = 0.5  # the reference code zeroes per-batch RD values whose |z-score| exceeds this


def _lgamma(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, torch.lgamma(x.clamp_min(1e-300)), torch.full_like(x, float("nan")))


def gaussian_term(mu_q, s_q, mu_qp, s_qp, lam: float = LAMBDA) -> torch.Tensor:
    """Element-wise third line of eq. 3: λ/2 (Δμ/σ')² + 1/(1−λ) ln(σ' / (σ_{q'}^{1−λ} σ_q^λ))."""
    var = (1 - lam) * s_qp**2 + lam * s_q**2
    sp = torch.sqrt(torch.where(var > 0, var, torch.full_like(var, float("nan"))))
    return lam / 2 * ((mu_q - mu_qp) / sp) ** 2 + (
        torch.log(sp) - (1 - lam) * torch.log(s_qp) - lam * torch.log(s_q)
    ) / (1 - lam)


def dirichlet_mass(a0_q, a0_qp, lam: float = LAMBDA) -> torch.Tensor:
    """First line of eq. 3 (total-mass part)."""
    return -(_lgamma(lam * a0_q - (lam - 1) * a0_qp) / (lam - 1) + _lgamma(a0_qp) - lam / (lam - 1) * _lgamma(a0_q))


def dirichlet_components(a_q, a_qp, lam: float = LAMBDA, kappa: float = 1.0) -> torch.Tensor:
    """Second line of eq. 3, element-wise per component (κ_i = 1)."""
    return kappa * (
        _lgamma((lam * a_q - (lam - 1) * a_qp) / kappa) / (lam - 1)
        + _lgamma(a_qp / kappa)
        - lam / (lam - 1) * _lgamma(a_q / kappa)
    )


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


def dirichlet_part(
    a_q, a_qp, n_vec, lam: float = LAMBDA, normalise: bool = True, skip_undefined: bool = False
) -> torch.Tensor:
    """Dirichlet part with proportional allocation; per pair (leading axes broadcast). ``skip_undefined``: the
    RD code's ``nansum`` over components (the BDP accountant's order-2 terms keep NaN, as its code does)."""
    keep, a0_q, a0_qp, alloc = _allocated(a_q, a_qp)
    comp = torch.where(
        keep,
        dirichlet_components(torch.where(keep, a_q, 1.0), torch.where(keep, alloc, 1.0), lam),
        torch.zeros_like(a_q),
    )
    comp = comp.nansum(-1) if skip_undefined else comp.sum(-1)
    total = dirichlet_mass(a0_q, a0_qp, lam) + comp
    return total / n_vec if normalise else total


def gaussian_part(mu_q, s_q, mu_qp, s_qp, paired, n_vec, lam: float = LAMBDA, normalise: bool = True):
    """Gaussian part over position-paired components (``paired``: (…, m) bool); per pair."""
    g = gaussian_term(mu_q, s_q, mu_qp, s_qp, lam)
    if normalise:  # the reference's nanmean over dimensions, then nansum over components
        per_comp = g.nanmean(-1)
        per_comp = torch.where(torch.isnan(per_comp), torch.zeros_like(per_comp), per_comp)
    else:
        per_comp = g.sum(-1)
    total = torch.where(paired, per_comp, torch.zeros_like(per_comp)).sum(-1)
    return total / n_vec if normalise else total


def pair_bound(
    b: Batch,
    i: torch.Tensor,
    j: torch.Tensor,
    lam: float = LAMBDA,
    normalise: bool = True,
    n_vectors: int | None = None,
):
    """eq. 3 bound D_λ(q_i ‖ q_j) for index vectors ``i``, ``j`` into the batch: (gaussian, dirichlet) parts.
    ``n_vectors``: the normaliser (the reference: the padded length, max_length + 1); None: q_i's own count."""
    n_vec = (
        b.mask[i].sum(-1).to(b.mu.dtype)
        if n_vectors is None
        else torch.full((len(i),), float(n_vectors), dtype=b.mu.dtype)
    )
    paired = b.mask[i] & b.mask[j]
    g = gaussian_part(b.mu[i], b.sigma[i], b.mu[j], b.sigma[j], paired, n_vec, lam, normalise)
    d = dirichlet_part(b.alpha[i], b.alpha[j], n_vec, lam, normalise, skip_undefined=normalise)
    return g, d


def undefined_terms(b: Batch, i: torch.Tensor, j: torch.Tensor, lam: float = LAMBDA) -> torch.Tensor:
    """Per pair: how many Gaussian dimension terms (σ'² ≤ 0) and Dirichlet component terms (a Gamma argument
    ≤ 0) of eq. 3 are undefined, i.e. where the order-λ divergence is infinite."""
    paired = (b.mask[i] & b.mask[j]).unsqueeze(-1)
    var = (1 - lam) * b.sigma[j] ** 2 + lam * b.sigma[i] ** 2
    gauss = ((var <= 0) & paired).sum((-1, -2))
    keep, _, _, alloc = _allocated(b.alpha[i], b.alpha[j])
    dirichlet = (keep & (lam * b.alpha[i] - (lam - 1) * alloc <= 0)).sum(-1)
    return gauss + dirichlet


def ordered_pairs(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = i != j
    return i[keep], j[keep]


def batch_parts(b: Batch, lam: float = LAMBDA, normalise: bool = True, n_vectors: int | None = None):
    """eq. 3's Gaussian and Dirichlet parts for every ordered pair of the batch (NaN where undefined), and how
    many pairs had an undefined term (infinite true divergence; the code drops such terms, see the module note)."""
    if b.mu.shape[0] < 2:
        empty = torch.zeros(0, dtype=torch.float64)
        return empty, empty, 0
    i, j = ordered_pairs(b.mu.shape[0])
    g, d = pair_bound(b, i, j, lam, normalise, n_vectors)
    bad = int(((undefined_terms(b, i, j, lam) > 0) | torch.isnan(g + d)).sum())
    return g, d, bad


def batch_rd(b: Batch, lam: float = LAMBDA, normalise: bool = True, n_vectors: int | None = None):
    """eq. 3 for every ordered pair of the batch (a NaN pair set to 0, as the code does), and the number of pairs
    with an undefined term (:func:`batch_parts`)."""
    g, d, bad = batch_parts(b, lam, normalise, n_vectors)
    return torch.nan_to_num(g + d, nan=0.0), bad


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
    filtered per-batch max/mean, then max/mean over batches; and the Gaussian / Dirichlet parts of the pair that
    attains the unfiltered max (which part of eq. 3 the max comes from)."""

    def __init__(self, n_vectors: int | None = None):
        self.n_vectors = n_vectors
        self.max, self.total, self.count, self.nan = 0.0, 0.0, 0, 0
        self.max_parts = (0.0, 0.0)
        self.batch_max: list[float] = []
        self.batch_mean: list[float] = []

    def add(self, b: Batch, lam: float = LAMBDA) -> None:
        g, d, bad = batch_parts(b, lam, n_vectors=self.n_vectors)
        self.nan += bad
        if g.numel() == 0:
            return
        rd = torch.nan_to_num(g + d, nan=0.0)
        top = int(rd.argmax())
        if float(rd[top]) > self.max:
            self.max, self.max_parts = float(rd[top]), (float(g[top]), float(d[top]))
        self.total += float(rd.sum())
        self.count += rd.numel()
        f = z_filtered(rd)
        self.batch_max.append(float(f.max()))
        self.batch_mean.append(float(f.mean()))

    def summary(self) -> dict:
        n = max(len(self.batch_max), 1)
        return {
            "rd_max": self.max,
            "rd_avg": self.total / max(self.count, 1),
            "rd_max_filtered": max(self.batch_max, default=0.0),
            "rd_avg_filtered": sum(self.batch_mean) / n,
            "rd_pairs": self.count,
            "rd_nan_pairs": self.nan,
            "rd_max_gaussian": self.max_parts[0],
            "rd_max_dirichlet": self.max_parts[1],
        }
