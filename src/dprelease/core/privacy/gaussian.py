"""The Gaussian mechanism's exact privacy curve (Balle & Wang 2018, Theorem 8) and its composition.

One Gaussian release with L2 sensitivity Δ and noise σ is μ-GDP with μ = Δ/σ (Dong, Roth & Su 2022), and
δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) exactly. Gaussian releases compose exactly: μ = √(Σ μ_i²). This is how a
release that adds Gaussian noise once (DP nearest class mean's class sums) and a DP evaluation (noised test counts,
:mod:`dprelease.core.utility.dp_eval`) meet one declared (ε, δ) together, and what a release that reads no
private report for its model (the public model) states for its evaluation alone.
"""

from __future__ import annotations

import math

from scipy.stats import norm


def gaussian_delta(sigma: float, epsilon: float, *, sensitivity: float = 1.0) -> float:
    """δ of the Gaussian mechanism with noise σ at ε (Balle & Wang 2018, Theorem 8).

    Args:
        sigma: the noise's standard deviation.
        epsilon: the ε at which δ is reported.
        sensitivity: the query's L2 sensitivity.

    Returns:
        The exact δ."""
    return mu_delta(sensitivity / sigma, epsilon)


def mu_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP (the Gaussian mechanism with Δ/σ = μ).

    Args:
        mu: the GDP parameter μ.
        epsilon: the ε at which δ is reported.

    Returns:
        δ."""
    return float(norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu))


def gaussian_sigma(epsilon: float, delta: float, *, sensitivity: float = 1.0, tol: float = 1e-6) -> float:
    """The smallest σ (to ``tol``, rounded up: conservative) for which the Gaussian mechanism is (ε, δ)-DP.

    Args:
        epsilon: the target ε.
        delta: the target δ.
        sensitivity: the query's L2 sensitivity.
        tol: the search's tolerance on σ.

    Returns:
        σ."""
    if epsilon <= 0 or not 0 < delta < 1:
        raise ValueError(f"need ε > 0 and δ in (0, 1) (got ε {epsilon}, δ {delta})")
    lo, hi = 1e-6, 1.0
    while gaussian_delta(hi, epsilon, sensitivity=sensitivity) > delta:
        lo, hi = hi, hi * 2
    while hi - lo > tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gaussian_delta(mid, epsilon, sensitivity=sensitivity) > delta else (lo, mid)
    return hi


def mu_epsilon(mu: float, delta: float, *, tol: float = 1e-9) -> float:
    """The smallest ε (to ``tol``, rounded up) at which μ-GDP is (ε, δ)-DP.

    Args:
        mu: the GDP parameter μ.
        delta: the target δ.
        tol: the search's tolerance on ε.

    Returns:
        ε."""
    if not mu > 0 or not 0 < delta < 1:
        raise ValueError(f"need μ > 0 and δ in (0, 1) (got μ {mu}, δ {delta})")
    if mu_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while mu_delta(mu, hi) > delta:
        lo, hi = hi, hi * 2
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mu_delta(mu, mid) > delta else (lo, mid)
    return hi


def sigma_beside(epsilon: float, delta: float, *, others: tuple[float, ...], sensitivity: float = 1.0) -> float:
    """The σ of one Gaussian release that, composed with Gaussian releases of the given μ's, meets (ε, δ) in total.

    μ² = μ_total² − Σ μ_i², with μ_total = 1/σ(ε, δ); one line (ValueError) when the others alone spend the budget.

    Args:
        epsilon: the total ε.
        delta: the total δ.
        others: the μ's of the other Gaussian releases.
        sensitivity: this release's L2 sensitivity.

    Returns:
        σ."""
    total = 1.0 / gaussian_sigma(epsilon, delta)
    left = total**2 - sum(m * m for m in others)
    if left <= 0:
        raise ValueError(
            f"ε {epsilon:g} at δ {delta:.3g} is μ {total:.3g}: the evaluation's μ "
            f"{math.sqrt(sum(m * m for m in others)):.3g} leaves nothing (raise released.evaluation_noise)"
        )
    return sensitivity / math.sqrt(left)
