"""A differentially private evaluation: the test split's per-class TP / FP / FN counts with Gaussian noise, and the
F1 figures computed from the noised counts (post-processing).

Adding or removing one test report changes one count by 1 when it is coded right (its code's TP) and two counts
by 1 when it is coded wrong (its code's FN, the predicted code's FP): L2 sensitivity √2. Each count gets
N(0, (z·√2)²), a Gaussian mechanism with noise multiplier z, which the release's accountant composes with
training (one entry (z, q = 1, T = 1)). The figures partners read are these; the exact ones stay internal.
"""

from __future__ import annotations

import math

import numpy as np
import torch

SENSITIVITY = math.sqrt(2.0)


def confusion_counts(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    """[3, K]: per class TP, FP and FN of the predictions (exact: private)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    right = y_true == y_pred
    tp = np.bincount(y_true[right], minlength=n_classes)
    fn = np.bincount(y_true[~right], minlength=n_classes)
    fp = np.bincount(y_pred[~right], minlength=n_classes)
    return np.stack([tp, fp, fn]).astype(float)


def noised_counts(counts: np.ndarray, *, noise_multiplier: float, generator: torch.Generator) -> np.ndarray:
    """``counts`` + N(0, (z·√2)²) each, the noise from ``generator`` (seeded from the secret key)."""
    if not noise_multiplier > 0:
        raise ValueError(f"the evaluation's noise multiplier must be > 0 (got {noise_multiplier})")
    noise = torch.randn(counts.shape, generator=generator, dtype=torch.float64).numpy()
    return counts + noise * noise_multiplier * SENSITIVITY


# A class enters an F1 only when its noised denominator 2TP + FP + FN clears this many of its own noise sds (√6 count
# sds): below it the clipped noise alone would read as F1 near 1. Measured on the bundled release's test split
# (30 noise draws, z = 2): bias of weighted F1 +0.008 (sd 0.006) at 1, of macro F1 +0.010 (sd 0.014) at 2; with no
# threshold +0.016 and +0.16 (docs/guarantees.md, "The DP evaluation").
WEIGHTED_THRESHOLD, MACRO_THRESHOLD = 1.0, 2.0


def f1_from_counts(counts: np.ndarray, *, count_sd: float = 0.0) -> dict[str, float]:
    """Weighted F1, macro F1 and accuracy from [3, K] counts (negative noised counts read as 0; with ``count_sd``,
    the noise sd per count, a class whose denominator is within the thresholds above of its noise counts as 0)."""
    tp, fp, fn = np.clip(counts, 0.0, None)
    denominator = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    noise = count_sd * math.sqrt(6.0)
    support = tp + fn
    total = support.sum()
    weighted = np.where(denominator > WEIGHTED_THRESHOLD * noise, f1, 0.0)
    macro = np.where(denominator > MACRO_THRESHOLD * noise, f1, 0.0)
    return {
        "weighted_f1": float((weighted * support).sum() / total) if total > 0 else 0.0,
        "macro_f1": float(macro.mean()),
        "accuracy": float(tp.sum() / total) if total > 0 else 0.0,
    }


def dp_scores(
    y_true: np.ndarray, y_pred: np.ndarray, n_classes: int, *, noise_multiplier: float, generator: torch.Generator
) -> dict[str, float]:
    """The released figures: F1 from the noised counts, with the noise level that covers them."""
    counts = noised_counts(
        confusion_counts(y_true, y_pred, n_classes), noise_multiplier=noise_multiplier, generator=generator
    )
    found = f1_from_counts(counts, count_sd=noise_multiplier * SENSITIVITY)
    return {
        **{k: round(v, 4) for k, v in found.items()},
        "noise_multiplier": noise_multiplier,
        "count_noise_sd": round(noise_multiplier * SENSITIVITY, 4),
    }


def separate_figures(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    n_classes: int,
    *,
    noise_multiplier: float,
    delta: float,
    generator: torch.Generator,
) -> dict:
    """The released figures of a mechanism whose training claim is its own (a pseudo posterior draw's local ε): the
    noised-count F1 and the evaluation's exact (ε, δ) for the TEST reports (one Gaussian mechanism, μ = 1/z). Each
    report has one role, so this and the training claim hold in parallel (docs/guarantees.md, "Parallel roles")."""
    from dprelease.core.privacy.gaussian import mu_epsilon

    found = dp_scores(y_true, y_pred, n_classes, noise_multiplier=noise_multiplier, generator=generator)
    return {
        **found,
        "kind": "dp_noised_counts",
        "evaluation_epsilon": round(mu_epsilon(1.0 / noise_multiplier, delta), 4),
        "evaluation_delta": delta,
    }
