"""RDP → (ε, δ) conversions over Opacus's RDP analysis of the sampled Gaussian mechanism (docs/algorithms.md, E.3).

* ``mironov`` — Mironov 2017 Prop. 3, ε = min_α [RDP(α) + log(1/δ)/(α−1)]: what the SWAG-PPM paper's
  DP-SGD baseline used (private-transformers), so it is the project's default;
* ``opacus`` — Opacus's own, tighter conversion (Balle et al. 2020).
"""

from __future__ import annotations

import math

import numpy as np
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

ORDERS = tuple(RDPAccountant.DEFAULT_ALPHAS)  # 1.1 … 10.9, 12 … 63 (same grid as docs/algorithms.md, E.3)


def mironov_epsilon(rdp: np.ndarray, orders, delta: float) -> float:
    """ε from an RDP curve by Mironov's conversion: min over orders of rdp(λ) + log(1/δ)/(λ − 1).

    Args:
        rdp: the RDP ε at each order.
        orders: the orders λ.
        delta: δ.

    Returns:
        ε."""
    orders = np.asarray(orders, dtype=float)
    return float(np.min(np.asarray(rdp) + math.log(1.0 / delta) / (orders - 1.0)))


def opacus_epsilon(rdp: np.ndarray, orders, delta: float) -> float:
    """ε from an RDP curve by Opacus's conversion (``get_privacy_spent``).

    Args:
        rdp: the RDP ε at each order.
        orders: the orders λ.
        delta: δ.

    Returns:
        ε."""
    return float(get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0])


CONVERTERS = {"mironov": mironov_epsilon, "opacus": opacus_epsilon}  # one name → one conversion
CONVERSIONS = tuple(CONVERTERS)


def rdp_to_epsilon(rdp: np.ndarray, orders, delta: float, conversion: str = "mironov") -> float:
    """ε from an RDP curve by the named conversion; a one-line ValueError for δ outside (0, 1) or an unknown name.

    Args:
        rdp: the RDP ε at each order.
        orders: the orders λ.
        delta: δ, in (0, 1).
        conversion: ``"mironov"`` or ``"opacus"``.

    Returns:
        ε."""
    if not 0 < delta < 1:
        raise ValueError(f"δ must lie in (0, 1) for an RDP conversion, got {delta}")
    if conversion not in CONVERTERS:
        raise ValueError(f"unknown RDP conversion {conversion!r} ({' | '.join(CONVERTERS)})")
    return CONVERTERS[conversion](rdp, orders, delta)


def sampled_gaussian_epsilon(
    sigma: float, sample_rate: float, steps: int, delta: float, conversion: str = "mironov"
) -> float:
    """ε after ``steps`` Poisson-sampled Gaussian steps with noise multiplier ``sigma``.

    Args:
        sigma: the noise multiplier σ.
        sample_rate: the Poisson sampling rate q.
        steps: the number of steps T.
        delta: δ.
        conversion: ``"mironov"`` or ``"opacus"``.

    Returns:
        ε over the orders :data:`ORDERS`."""
    rdp = compute_rdp(q=sample_rate, noise_multiplier=sigma, steps=steps, orders=ORDERS)
    return rdp_to_epsilon(rdp, ORDERS, delta, conversion)
