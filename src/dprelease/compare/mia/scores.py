"""Membership scores from a model's class probabilities (docs/guarantees.md, L.2): arrays in, arrays out.
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


def _check_reference(phi_target: np.ndarray, phi_reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    phi_target = np.asarray(phi_target, dtype=np.float64)
    ref = np.asarray(phi_reference, dtype=np.float64)
    if ref.ndim != 2 or ref.shape[1] != phi_target.shape[0] or ref.shape[0] < 2:
        raise ValueError(f"reference confidences {ref.shape} must be [R ≥ 2, {phi_target.shape[0]}]")
    return phi_target, ref


def lira_online(
    phi_target: np.ndarray, phi_reference: np.ndarray, in_mask: np.ndarray, sigma_floor: float = SIGMA_FLOOR
) -> np.ndarray:
    """LiRA, online (Carlini et al. 2022): per target, Gaussians fitted to its φ under the reference
    models that trained on it (IN) and those that did not (OUT); score = log N(φ; μ_in, σ_in²) −
    log N(φ; μ_out, σ_out²). With few models per side the paper's global variance is used: one σ_in
    and one σ_out pooled over all targets (more stable than per-target variances below ~64 models)."""
    phi_target, ref = _check_reference(phi_target, phi_reference)
    inm = np.asarray(in_mask, dtype=bool)
    if inm.shape != ref.shape:
        raise ValueError(f"IN mask {inm.shape} must match the reference confidences {ref.shape}")
    n_in, n_out = inm.sum(axis=0), (~inm).sum(axis=0)
    if (n_in == 0).any() or (n_out == 0).any():
        raise ValueError("every target needs at least one IN and one OUT reference model")
    mu_in = np.where(inm, ref, 0).sum(axis=0) / n_in
    mu_out = np.where(~inm, ref, 0).sum(axis=0) / n_out
    sd_in = max(
        float(np.sqrt(np.where(inm, (ref - mu_in) ** 2, 0).sum() / max(1, inm.sum() - len(mu_in)))), sigma_floor
    )
    sd_out = max(
        float(np.sqrt(np.where(~inm, (ref - mu_out) ** 2, 0).sum() / max(1, (~inm).sum() - len(mu_out)))), sigma_floor
    )
    log_in = -0.5 * ((phi_target - mu_in) / sd_in) ** 2 - np.log(sd_in)
    log_out = -0.5 * ((phi_target - mu_out) / sd_out) ** 2 - np.log(sd_out)
    return log_in - log_out
