"""Membership scores from a model's class probabilities (TRUST.md L.2): arrays in, arrays out.
Higher score = "more likely a member" everywhere."""

from __future__ import annotations

import numpy as np

SIGMA_FLOOR = 1e-3  # a target whose reference confidences barely vary must not get an infinite z-score


def _true_class(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim != 2 or labels.shape != (probs.shape[0],):
        raise ValueError(f"probabilities {probs.shape} do not match labels {labels.shape}")
    return probs[np.arange(len(labels)), labels]


def loss_scores(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Loss threshold (Yeom et al. 2018): score = −CE = log p_y."""
    return np.log(np.clip(_true_class(probs, labels), eps, 1.0))


def logit_confidence(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """φ = log p_y − log(1 − p_y), with 1 − p_y taken as the sum of the other classes (stable near 1)."""
    probs = np.asarray(probs, dtype=np.float64)
    p_y = _true_class(probs, labels)
    rest = probs.sum(axis=1) - p_y
    return np.log(np.clip(p_y, eps, None)) - np.log(np.clip(rest, eps, None))


def lira_offline(phi_target: np.ndarray, phi_reference: np.ndarray, sigma_floor: float = SIGMA_FLOOR) -> np.ndarray:
    """LiRA, offline (Carlini et al. 2022): per target, a Gaussian N(μ_out, σ_out²) fitted to its φ under
    R reference models that never saw it; score = (φ_target − μ_out)/σ_out. The paper's score is
    Φ of this z (one-sided); Φ is monotone, so the ROC is the same and z keeps resolution in the tail
    where low-FPR thresholds live."""
    phi_target = np.asarray(phi_target, dtype=np.float64)
    ref = np.asarray(phi_reference, dtype=np.float64)
    if ref.ndim != 2 or ref.shape[1] != phi_target.shape[0] or ref.shape[0] < 2:
        raise ValueError(f"reference confidences {ref.shape} must be [R ≥ 2, {phi_target.shape[0]}]")
    mu = ref.mean(axis=0)
    sigma = np.maximum(ref.std(axis=0, ddof=1), sigma_floor)
    return (phi_target - mu) / sigma
