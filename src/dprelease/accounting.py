"""DP-SGD accounting on top of Opacus's RDP analysis of the sampled Gaussian mechanism (spec E.3).

Opacus computes the per-order RDP (``compute_rdp``). Converting RDP to (ε, δ) has two standard forms:

* ``mironov`` — Mironov 2017 Prop. 3, ε = min_α [RDP(α) + log(1/δ)/(α−1)]. This is what the SWAG-PPM
  paper's DP-SGD baseline used (private-transformers), so it is the default here: with n = 5,346,
  B = 512, 30 epochs and ε = 4 it gives σ ≈ 2.21 at δ = 1/(2n) and 1.98 at δ = 1e-3 (spec E.4).
* ``opacus`` — Opacus's own, tighter conversion (Balle et al. 2020), which needs less noise for the
  same ε (σ ≈ 1.97 at δ = 1/(2n) in the same setting).
"""

from __future__ import annotations

import math

import numpy as np
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

ORDERS = tuple(RDPAccountant.DEFAULT_ALPHAS)  # 1.1 … 10.9, 12 … 63 (same grid as spec E.3)


def mironov_epsilon(rdp: np.ndarray, orders, delta: float) -> float:
    orders = np.asarray(orders, dtype=float)
    return float(np.min(np.asarray(rdp) + math.log(1.0 / delta) / (orders - 1.0)))


def epsilon_for(sigma: float, sample_rate: float, steps: int, delta: float, conversion: str = "mironov") -> float:
    rdp = compute_rdp(q=sample_rate, noise_multiplier=sigma, steps=steps, orders=ORDERS)
    if conversion == "mironov":
        return mironov_epsilon(rdp, ORDERS, delta)
    if conversion == "opacus":
        return float(get_privacy_spent(orders=ORDERS, rdp=rdp, delta=delta)[0])
    raise ValueError(f"unknown RDP conversion {conversion!r} (mironov | opacus)")


def steps_for(epochs: int, sample_rate: float) -> int:
    """Number of Poisson-sampled steps for ``epochs`` passes: ⌈E/q⌉ (spec E.3)."""
    return math.ceil(epochs / sample_rate)


def noise_multiplier(target_epsilon: float, target_delta: float, sample_rate: float, steps: int,
                     conversion: str = "mironov", tol: float = 1e-3) -> float:
    """Smallest σ (to ``tol``, rounded up: conservative) whose ε after ``steps`` is ≤ the target."""
    if target_epsilon <= 0:
        raise ValueError("target epsilon must be > 0")
    if not 0 < target_delta < 1:
        raise ValueError("delta must lie in (0, 1)")
    lo, hi = 0.05, 1.0
    while epsilon_for(hi, sample_rate, steps, target_delta, conversion) > target_epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise ValueError(f"no noise level reaches ε = {target_epsilon} with δ = {target_delta}")
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if epsilon_for(mid, sample_rate, steps, target_delta, conversion) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi


class ConvertedRDPAccountant(RDPAccountant):
    """Opacus's RDP accountant, reporting ε with the chosen conversion."""

    def __init__(self, conversion: str = "mironov") -> None:
        super().__init__()
        self.conversion = conversion

    def get_epsilon(self, delta: float, alphas=None) -> float:  # noqa: D401 - Opacus signature
        if self.conversion == "opacus":
            return super().get_epsilon(delta, alphas)
        if not self.history:
            return 0.0
        orders = alphas or ORDERS
        rdp = sum(compute_rdp(q=q, noise_multiplier=s, steps=n, orders=orders) for s, q, n in self.history)
        return mironov_epsilon(rdp, orders, delta)
