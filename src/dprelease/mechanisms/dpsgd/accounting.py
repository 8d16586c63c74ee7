"""DP-SGD accounting (docs/algorithms.md, E.3): the step count, the noise multiplier for a target (ε, δ), and Opacus's
RDP accountant reporting ε with the chosen conversion (:mod:`dprelease.core.privacy.rdp`), or Opacus's PRV accountant
(``conversion="prv"``: Gopi, Lee & Wutschitz 2021, numerical composition of privacy random variables; its ε is
the accountant's upper bound, error ≤ 0.01 in ε and δ/1000 in δ).

With n = 5,346, B = 512, 30 epochs and ε = 4, the Mironov conversion gives σ ≈ 2.21 at δ = 1/(2n) and
1.98 at δ = 1e-3 (docs/algorithms.md, E.4); Opacus's conversion gives σ ≈ 1.97 at δ = 1/(2n).
"""

from __future__ import annotations

import math
from functools import lru_cache

from dprelease.core.privacy import accountants
from dprelease.core.privacy.target import DELTA_EXPONENT, default_delta  # noqa: F401  (the shared δ rule, re-exported)


def steps_for(epochs: int, sample_rate: float) -> int:
    """Number of Poisson-sampled steps for ``epochs`` passes: ⌈E/q⌉ (docs/algorithms.md, E.3)."""
    return math.ceil(epochs / sample_rate)


CONVERSIONS = accountants.names()  # RDP with Mironov's or Opacus's conversion, or the PRV accountant (one registry)


def spent_epsilon(
    sigma: float,
    sample_rate: float,
    steps: int,
    delta: float,
    conversion: str = "mironov",
    extra: tuple[tuple[float, float, int], ...] = (),
) -> float:
    """ε after ``steps`` Poisson-sampled Gaussian steps with noise multiplier ``sigma`` (the accountant's bound),
    composed with the Gaussian mechanisms of ``extra`` ((σ, q, T) each: the release's DP evaluation)."""
    if conversion not in accountants.names():
        raise ValueError(f"unknown conversion {conversion!r} (one of {', '.join(accountants.names())})")
    if extra:
        return _composed(((float(sigma), float(sample_rate), int(steps)), *extra), float(delta), conversion)
    return _spent(float(sigma), float(sample_rate), int(steps), float(delta), conversion)


@lru_cache(maxsize=1 << 12)
def _composed(history: tuple, delta: float, conversion: str) -> float:
    return accountants.get(conversion).composed(history, delta)


@lru_cache(maxsize=1 << 14)
def _spent(sigma: float, sample_rate: float, steps: int, delta: float, conversion: str) -> float:
    """:func:`spent_epsilon`, remembered: a pure function of public numbers. The noise searches bisect from the
    same brackets, so searches for nearby targets (private selection's calibration nests one per level it
    tries) evaluate the same σ again; Opacus's RDP over fractional orders is pure Python (~0.1 s a call)."""
    return accountants.get(conversion).epsilon(sigma, sample_rate, steps, delta)


def accountant_for(conversion: str = "mironov"):
    """The Opacus accountant that reports ``conversion``'s ε (RDP with a conversion, or PRV): the registry's."""
    return accountants.get(conversion).opacus()


def noise_multiplier(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: int,
    conversion: str = "mironov",
    tol: float = 1e-3,
    extra: tuple[tuple[float, float, int], ...] = (),
) -> float:
    """Smallest σ (to ``tol``, rounded up: conservative) whose ε after ``steps``, composed with ``extra``, is ≤ the
    target."""
    if target_epsilon <= 0:
        raise ValueError("target epsilon must be > 0")
    if not 0 < target_delta < 1:
        raise ValueError("delta must lie in (0, 1)")

    def eps(sigma: float) -> float:
        return spent_epsilon(sigma, sample_rate, steps, target_delta, conversion, extra)

    if extra and spent_epsilon(1e4, sample_rate, steps, target_delta, conversion, extra) > target_epsilon:
        raise ValueError(f"the evaluation alone spends more than ε = {target_epsilon} at δ = {target_delta}")
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
