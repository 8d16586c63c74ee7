"""Private hyper-parameter selection with a random number of repetitions (Papernot & Steinke 2022): the truncated
negative binomial draw and the RDP bound of the whole procedure. Pure maths: arrays in, numbers out.

See docs/frontier.md, "Notes from the code", `core/privacy/tuning.py`."""

from __future__ import annotations

import math

import numpy as np


def expected_repetitions(*, eta: float, gamma: float) -> float:
    """E[K] for K ~ TNB(η, γ), η > 0 (η = 1: geometric, E[K] = 1/γ).

    Args:
        eta: η.
        gamma: γ, in (0, 1).

    Returns:
        E[K]."""
    _check(eta, gamma)
    return eta * (1 - gamma) / (gamma * (1 - gamma**eta))


def selection_rdp(base_rdp, orders, *, eta: float, gamma: float) -> np.ndarray:
    """ε'(λ) at every order of ``orders`` for the base mechanism's RDP curve (Papernot & Steinke, Theorem 2).

    Args:
        base_rdp: the base mechanism's RDP ε at each order.
        orders: the orders λ (the same grid).
        eta: η.
        gamma: γ.

    Returns:
        The whole procedure's RDP ε at each order."""
    _check(eta, gamma)
    rdp, lam = np.asarray(base_rdp, dtype=float), np.asarray(orders, dtype=float)
    if rdp.shape != lam.shape or np.any(lam <= 1):
        raise ValueError("base_rdp and orders must have one value per order, every order > 1")
    hat = np.min((1 + eta) * (1 - 1 / lam) * rdp + (1 + eta) * math.log(1 / gamma) / lam)
    return rdp + hat + math.log(expected_repetitions(eta=eta, gamma=gamma)) / (lam - 1)


def gaussian_rdp(orders, *, sigma: float, sensitivity: float = 1.0) -> np.ndarray:
    """The Gaussian mechanism's RDP: λΔ²/(2σ²) (Mironov 2017, Prop. 7).

    Args:
        orders: the orders λ.
        sigma: the noise's standard deviation.
        sensitivity: Δ, the L2 sensitivity.

    Returns:
        The RDP ε at each order."""
    if sigma <= 0:
        raise ValueError(f"σ must be > 0 (got {sigma})")
    return np.asarray(orders, dtype=float) * sensitivity**2 / (2 * sigma**2)


def draw_repetitions(rng: np.random.Generator, *, eta: float, gamma: float) -> int:
    """K ~ TNB(η, γ): a negative binomial NB(η, γ) draw conditioned on K ≥ 1 (rejection of zeros).

    Args:
        rng: the generator (from the secret key).
        eta: η.
        gamma: γ.

    Returns:
        K ≥ 1."""
    _check(eta, gamma)
    while True:
        k = int(rng.negative_binomial(eta, gamma))
        if k >= 1:
            return k


def _check(eta: float, gamma: float) -> None:
    if not eta > 0 or not 0 < gamma < 1:
        raise ValueError(f"private selection needs η > 0 and γ in (0, 1) (got η {eta}, γ {gamma})")
