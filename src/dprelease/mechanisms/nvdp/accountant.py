"""The Bayesian-DP accountant as the reference code computes it (docs/algorithms.md, F.4; Triastcyn & Faltings 2020, Thm 2).

Per test batch, every unordered pair (j, j') of inputs: left = (μ_j, σ̄_prior, α_j), right = (μ_j', σ̄_post,
α_j'), σ̄ scalar averages. With sampling rate q = batch / test size, the per-invocation cost is
c^L = log Σ_{k=0..m} Bin(k; m, q)·e^{S_k}, m = ⌊λ + 1⌋ = 2 (the code truncates the fractional order 2.1 to 2);
S_0 = S_1 = 0 (the code maps the 0/0 at k = 1 to 0), S_2 = the order-2 Gaussian part (scalar σ's) + the order-2
Dirichlet part, i.e. effectively an order-2 divergence. c^R swaps the sides, c = max(c^L, c^R). Where the
order-2 terms are undefined (2σ̄_post² ≤ σ̄_prior², or a Gamma argument ≤ 0) the code's ``nan_to_num`` sets
S_2 to 0 — optimistic; :class:`BDPAccountant` replicates it and counts how often it fires.
Per batch ĉ_b = log(mean e^c + t_{conf, N−1}·sd(e^c)/√(N−1)); ε = (Σ_b ĉ_b − log(δ − (1 − conf^{#b})))/λ.
With zero divergence ε = ln(1/δ)/λ (10.466 at λ = 1.1, δ = 1e-5).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from dprelease.mechanisms.nvdp.renyi import LAMBDA, Batch, dirichlet_part

DELTA = 1e-5
CONF = 1 - 1e-16


def order(lam: float) -> int:
    """The binomial expansion's order m = ⌊λ + 1⌋ (2 for λ = 1.1)."""
    return int(math.floor(lam + 1))


def posterior_sigma(b: Batch) -> float:
    """σ̄_post: the mean posterior σ over the batch's input components (prior rows excluded)."""
    return float(b.sigma[:, 1:][b.mask[:, 1:]].mean())


def pair_costs(
    b: Batch, q: float, lam: float = LAMBDA, s_prior: float = 1.0, n_vectors: int | None = None
) -> tuple[np.ndarray, int]:
    """c = max(c^L, c^R) for every unordered pair of the batch, and the number of NaN S_k terms set to 0."""
    n = b.mu.shape[0]
    if n < 2:
        return np.zeros(0), 0
    s_post = posterior_sigma(b)
    i, j = torch.triu_indices(n, n, offset=1)
    m = order(lam)
    nan = 0
    sides = []
    for a, c, s_a, s_c in ((j, i, s_post, s_prior), (i, j, s_prior, s_post)):  # c^L: q = right, q' = left
        n_vec = (
            b.mask[a].sum(-1).to(b.mu.dtype)
            if n_vectors is None
            else torch.full((len(a),), float(n_vectors), dtype=b.mu.dtype)
        )
        paired = b.mask[a] & b.mask[c]
        d2 = torch.where(paired, ((b.mu[a] - b.mu[c]) ** 2).mean(-1), torch.zeros(paired.shape, dtype=b.mu.dtype))
        d2 = d2.sum(-1) / n_vec  # Σ_components mean_dims Δμ², per vector
        n_paired = paired.sum(-1) / n_vec
        terms = []
        for k in range(m + 1):
            if k < 2:
                terms.append(torch.zeros(len(i), dtype=torch.float64))
                continue
            var = (1 - k) * s_c**2 + k * s_a**2  # σ'² with scalar σ's (q = side a)
            if var > 0:  # (k−1)·D_k: the scaled Gaussian Rényi term, constant log part per paired component
                logs = (0.5 * math.log(var) - (1 - k) * math.log(s_c) - k * math.log(s_a)) / (1 - k)
                g = (k - 1) * (k / 2 * d2 / var + logs * n_paired)
            else:
                g = torch.full_like(d2, float("nan"))
            d = dirichlet_part(b.alpha[a], b.alpha[c], n_vec, float(k))
            nan += int(torch.isnan(g).sum() + torch.isnan(d).sum())
            terms.append(torch.nan_to_num(g, nan=0.0) + torch.nan_to_num(d, nan=0.0))
        s = torch.stack(terms, -1).numpy()
        w = np.array([math.comb(m, k) * q**k * (1 - q) ** (m - k) for k in range(m + 1)])
        top = s.max(-1, keepdims=True)
        sides.append(top[:, 0] + np.log((w * np.exp(s - top)).sum(-1)))
    return np.maximum(sides[0], sides[1]), nan


def batch_cost(c: np.ndarray, conf: float = CONF) -> float:
    """ĉ_b: Student-t upper bound on log E[e^c] over the batch's pairs, in log space (e^c may overflow:
    log(mean e^c + t·sd/√(N−1)) = M + log(mean e^{c−M} + t·sd(e^{c−M})/√(N−1)), M = max c)."""
    if len(c) == 0:
        return 0.0
    top = float(np.max(c))
    e = np.exp(c - top)
    if len(e) < 2:
        return top + float(np.log(e.mean()))
    return top + float(np.log(e.mean() + stats.t.ppf(conf, len(e) - 1) * e.std() / np.sqrt(len(e) - 1)))


def epsilon(total_cost: float, n_batches: int, lam: float = LAMBDA, delta: float = DELTA, conf: float = CONF) -> float:
    """ε_μ from the summed batch costs."""
    slack = delta - (1 - conf**n_batches)
    if slack <= 0:
        raise ValueError(f"δ = {delta} is below the confidence slack of {n_batches} batches")
    return (total_cost - math.log(slack)) / lam


class BDPAccountant:
    """Accumulates ĉ_b over the test batches (``q`` = eval batch size / test size)."""

    def __init__(
        self, q: float, lam: float = LAMBDA, delta: float = DELTA, conf: float = CONF, n_vectors: int | None = None
    ):
        if not 0 < q <= 1:
            raise ValueError(f"sampling rate q must lie in (0, 1], got {q}")
        self.q, self.lam, self.delta, self.conf, self.n_vectors = q, lam, delta, conf, n_vectors
        self.total, self.batches, self.nan_terms, self.pairs = 0.0, 0, 0, 0
        self.sigmas: list[float] = []

    def add(self, b: Batch) -> None:
        c, nan = pair_costs(b, self.q, self.lam, n_vectors=self.n_vectors)
        if len(c) == 0:
            return
        self.total += batch_cost(c, self.conf)
        self.sigmas.append(posterior_sigma(b))
        self.batches += 1
        self.nan_terms += nan
        self.pairs += len(c)

    @property
    def epsilon(self) -> float:
        return epsilon(self.total, self.batches, self.lam, self.delta, self.conf)

    def summary(self) -> dict:
        return {
            "bdp_epsilon": self.epsilon,
            "bdp_delta": self.delta,
            "bdp_lambda": self.lam,
            "bdp_batches": self.batches,
            "bdp_pairs": self.pairs,
            "bdp_nan_terms_zeroed": self.nan_terms,
            "sigma_post_mean": float(np.mean(self.sigmas)) if self.sigmas else float("nan"),
            "sigma_post_min": float(np.min(self.sigmas)) if self.sigmas else float("nan"),
            "sigma_post_max": float(np.max(self.sigmas)) if self.sigmas else float("nan"),
        }
