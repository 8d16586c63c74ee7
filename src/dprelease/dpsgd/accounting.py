"""DP-SGD accounting (docs/algorithms.md, E.3): the step count, the noise multiplier for a target (ε, δ), and Opacus's
RDP accountant reporting ε with the chosen conversion (:mod:`dprelease.privacy.rdp`).

With n = 5,346, B = 512, 30 epochs and ε = 4, the Mironov conversion gives σ ≈ 2.21 at δ = 1/(2n) and
1.98 at δ = 1e-3 (docs/algorithms.md, E.4); Opacus's conversion gives σ ≈ 1.97 at δ = 1/(2n).
"""

from __future__ import annotations

import math

from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp

from ..privacy.rdp import ORDERS, mironov_epsilon, sampled_gaussian_epsilon


DELTA_EXPONENT = 1.1  # the default δ ≤ n^-1.1: below 1/n by the factor n^0.1 (docs/algorithms.md, E.1)


def default_delta(n: int) -> float:
    """δ = min(n^-1.1, 1/(2n)) ≤ 1/n^1.1, the project's default (E.1).

    δ must be ≪ 1/n: a mechanism that publishes each record with probability δ is (0, δ)-DP and exposes about
    n·δ records. The former default 1/(2n) exposes half a record whatever n; n^-1.1 exposes n^-0.1 (0.42 at
    n = 5,346), a margin that grows with n. Below n = 2^10 = 1,024 records n^-1.1 would exceed 1/(2n), so the
    smaller of the two is taken: never looser than the former default. Declared, not tuned: the same rule
    for every data set.
    """
    if n < 2:
        raise ValueError(f"default δ needs at least 2 training records (got {n})")
    return min(float(n) ** -DELTA_EXPONENT, 1.0 / (2 * n))


def steps_for(epochs: int, sample_rate: float) -> int:
    """Number of Poisson-sampled steps for ``epochs`` passes: ⌈E/q⌉ (docs/algorithms.md, E.3)."""
    return math.ceil(epochs / sample_rate)


def noise_multiplier(target_epsilon: float, target_delta: float, sample_rate: float, steps: int,
                     conversion: str = "mironov", tol: float = 1e-3) -> float:
    """Smallest σ (to ``tol``, rounded up: conservative) whose ε after ``steps`` is ≤ the target."""
    if target_epsilon <= 0:
        raise ValueError("target epsilon must be > 0")
    if not 0 < target_delta < 1:
        raise ValueError("delta must lie in (0, 1)")

    def eps(sigma: float) -> float:
        return sampled_gaussian_epsilon(sigma, sample_rate, steps, target_delta, conversion)

    lo, hi = 0.05, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise ValueError(f"no noise level reaches ε = {target_epsilon} with δ = {target_delta}")
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if eps(mid) > target_epsilon:
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
