"""Pseudo posterior mechanism maths (docs/algorithms.md, B, C): arrays in, arrays out.

* risk r̂_i = max_s CE_i(θ^(s)) over draws from the unweighted SWAG (B.2)
* normalised risk f̃ (min–max by default, B.3) and weights w = clip(c(1 − f̃) + g, 0, 1) (B.4)
* per-draw max weighted loss M_s = max_i w_i CE_i(θ^(s)), Δ = max_s M_s, ε = 2Δ (B.6)
* re-weighting towards the database bound Δ with strength k (C.2)
"""

from __future__ import annotations

import numpy as np

from dprelease.core.privacy.censor import Censor


def normalise_risk(risk: np.ndarray, method: str = "minmax") -> np.ndarray:
    """Map per-record risk to [0, 1] (docs/algorithms.md, B.3). A constant risk vector maps to 0."""
    r = _finite_1d(risk, "risk")
    if method == "minmax":
        lo, hi = r.min(), r.max()
        return np.zeros_like(r) if hi == lo else (r - lo) / (hi - lo)
    if method == "divmax":
        hi = r.max()
        if (r < 0).any():
            raise ValueError("divmax normalisation needs non-negative risk")
        return np.zeros_like(r) if hi == 0 else r / hi
    raise ValueError(f"unknown risk normalisation {method!r} (minmax | divmax)")


def weights_from_risk(risk: np.ndarray, c: float = 1.0, g: float = 0.0, method: str = "minmax") -> np.ndarray:
    """w_i = min(1, max(0, c · (1 − f̃_i) + g)) (docs/algorithms.md, B.4)."""
    f = normalise_risk(risk, method)
    return np.clip(c * (1.0 - f) + g, 0.0, 1.0)


def max_weighted_loss(ce: np.ndarray, weights: np.ndarray, censor: Censor | None = None) -> np.ndarray:
    """M_s = max_i w_i · CE_i(θ^(s)) for a [S, n] matrix of per-record losses (docs/algorithms.md, B.6 step 1); with a
    ``censor`` (level κ), M_s = max_i censor(w_i CE_i) ≤ κ (the strict variant, docs/guarantees.md, P; both forms are
    increasing, so censoring the maximum is the maximum of the censored losses)."""
    ce = np.asarray(ce, dtype=np.float64)
    w = _finite_1d(weights, "weights")
    if ce.ndim != 2 or ce.shape[1] != w.size:
        raise ValueError(f"losses {ce.shape} do not match {w.size} weights")
    m = (ce * w).max(axis=1)
    return m if censor is None else censor.numpy(m)


def epsilon(max_deltas: np.ndarray) -> tuple[float, float]:
    """(Δ̂, ε) with Δ̂ = max_s M_s and ε = 2Δ̂ (docs/algorithms.md, B.6 steps 2–3). δ is asymptotic, never a number."""
    m = _finite_1d(max_deltas, "max deltas")
    delta = float(m.max())
    return delta, 2.0 * delta


def reweight(weights: np.ndarray, record_max_loss: np.ndarray, k: float = 0.95, form: str = "power") -> np.ndarray:
    """New weights that pull each record's bound Δ_i = w_i L_i toward Δ = max_i Δ_i (docs/algorithms.md, C.2).

    power:    w_new = min(1, w^(1−k) · (Δ / L)^k)  — keeps max_i w_new L_i = Δ; w = 0 stays 0 for k < 1.
    additive: w_new = min(1, γ · (w + k(1 − Δ_i/Δ))), γ chosen so that max_i w_new L_i = Δ.
    """
    w = _finite_1d(weights, "weights")
    L = _finite_1d(record_max_loss, "record max loss")
    if w.shape != L.shape:
        raise ValueError("weights and record max losses differ in length")
    if not 0.0 <= k <= 1.0:
        raise ValueError("k must lie in [0, 1]")
    bounds = w * L
    big_delta = bounds.max()
    if big_delta <= 0:
        return w.copy()
    if form == "power":
        new = np.zeros_like(w)
        live = (w > 0) & (L > 0)
        new[live] = w[live] ** (1.0 - k) * (big_delta / L[live]) ** k
        new[(w > 0) & (L == 0)] = 1.0  # zero loss: no bound to protect, full weight
    elif form == "additive":
        raw = w + k * (1.0 - bounds / big_delta)
        gamma = big_delta / (L * raw).max()
        new = gamma * raw
    else:
        raise ValueError(f"unknown re-weighting form {form!r} (power | additive)")
    return np.clip(new, 0.0, 1.0)


def reweight_toward(weights: np.ndarray, record_max_loss: np.ndarray, *, target: float, step: float) -> np.ndarray:
    """One damped step of iterative re-weighting towards a target bound Δ* (docs/guarantees.md, N):

        w_new = min(1, w · (Δ* / (w L))^step) = min(1, w^(1−step) · (Δ*/L)^step),

    i.e. each record's bound w_i L_i moves a fraction ``step`` (on the log scale) towards Δ*: records above
    the target are down-weighted, records with slack are up-weighted, w = 0 stays 0. ``step = 1`` sets every
    bound to Δ* at once (before clipping); the C.2 power form is the special case Δ* = max_i w_i L_i."""
    w = _finite_1d(weights, "weights")
    L = _finite_1d(record_max_loss, "record max loss")
    if w.shape != L.shape:
        raise ValueError("weights and record max losses differ in length")
    if not 0.0 < step <= 1.0:
        raise ValueError("step must lie in (0, 1]")
    if not target > 0:
        raise ValueError("target bound must be positive")
    new = np.zeros_like(w)
    live = (w > 0) & (L > 0)
    new[live] = w[live] ** (1.0 - step) * (target / L[live]) ** step
    new[(w > 0) & (L == 0)] = 1.0
    return np.clip(new, 0.0, 1.0)


def _finite_1d(x: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return a
