"""Automatic fit verdicts (under-fit, over-fit, ok) from the max-delta series and the training-loss trajectory: the
practical guide's readings by eye, as scores with documented thresholds.

See docs/algorithms.md, I.5."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Thresholds:
    rcv_high: float = 0.04  # bulk spread above 4 % of the median maximum = persistent variability
    z_spike: float = 6.0
    min_spikes: int = 2
    max_spike_frac: float = 0.02  # more than 2 % "spikes" is variability, not isolated spikes
    trend_high: float = 0.15  # SWAG-phase loss 15 % lower in its second half than in its first


@dataclass(frozen=True)
class FitScores:
    median: float
    rcv: float
    spikes: int
    max_z: float
    loss_trend: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def fit_scores(
    max_deltas: np.ndarray, swag_losses: list[float] | None = None, thresholds: Thresholds = Thresholds()
) -> FitScores:
    m = np.asarray(max_deltas, dtype=float)
    if m.ndim != 1 or m.size < 2 or not np.isfinite(m).all():
        raise ValueError("max-delta series must be a finite 1-D array with at least 2 draws")
    med = float(np.median(m))
    scale = MAD_TO_SD * float(np.median(np.abs(m - med)))
    if scale == 0:  # degenerate bulk: fall back to the standard deviation, then to "no spread"
        scale = float(m.std()) or np.finfo(float).tiny
    z = (m - med) / scale
    trend = None
    if swag_losses is not None and len(swag_losses) >= 2:
        half = len(swag_losses) // 2
        first, second = float(np.mean(swag_losses[:half])), float(np.mean(swag_losses[-half:]))
        trend = (first - second) / first if first > 0 else 0.0
    return FitScores(
        median=med,
        rcv=scale / abs(med) if med else float("inf"),
        spikes=int((z >= thresholds.z_spike).sum()),
        max_z=float(z.max()),
        loss_trend=trend,
    )


def verdict(scores: FitScores, thresholds: Thresholds = Thresholds(), n_draws: int | None = None) -> str:
    """``underfit`` | ``overfit`` | ``ok`` (rules in the module docstring)."""
    limit = max(thresholds.min_spikes, thresholds.max_spike_frac * (n_draws or 500))
    if thresholds.min_spikes <= scores.spikes <= limit and scores.rcv < thresholds.rcv_high:
        return "overfit"
    if scores.rcv >= thresholds.rcv_high or scores.spikes > limit:
        return "underfit"
    if scores.loss_trend is not None and scores.loss_trend >= thresholds.trend_high:
        return "underfit"
    return "ok"


def diagnose(
    max_deltas: np.ndarray, swag_losses: list[float] | None = None, thresholds: Thresholds = Thresholds()
) -> tuple[str, FitScores]:
    scores = fit_scores(max_deltas, swag_losses, thresholds)
    return verdict(scores, thresholds, len(np.asarray(max_deltas))), scores
