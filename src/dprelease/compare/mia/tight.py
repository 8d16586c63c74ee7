"""The multi-run (tight) audit's statistics: independent training runs with and without ONE canary in, an ε lower
bound with its confidence out (Nasr et al. 2023; Kairouz et al. 2015 / Jagielski et al. 2020). Pure maths.

Runs are independent trials, so Clopper–Pearson bounds on a fixed test's error rates hold exactly, and ε_LB = max{0,
ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi)} holds with probability ≥ 1 − α. The test is fixed before the
evaluated runs are seen (calibration or simulated runs); the *ceiling* (every evaluated run right) is the most an
audit of n runs per side can certify, however leaky. ``lr_scores``: the gradient canary's log-likelihood ratio under
the CLAIMED σ. ``gdp_fit`` is a HEURISTIC Gaussian-DP reading (no confidence): labelled so, never called a bound.

See docs/audit.md, "Notes from the code", `compare/mia/tight.py`."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

from dprelease.compare.mia.onerun import gdp_epsilon


def cp_upper(x: int, n: int, a: float) -> float:
    """One-sided (1 − a) Clopper–Pearson upper bound for x successes in n."""
    if n <= 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 ≤ x ≤ n and n > 0, got x={x}, n={n}")
    return 1.0 if x == n else float(beta.ppf(1 - a, x + 1, n - x))


def cp_lower(x: int, n: int, a: float) -> float:
    """One-sided (1 − a) Clopper–Pearson lower bound for x successes in n."""
    if n <= 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 ≤ x ≤ n and n > 0, got x={x}, n={n}")
    return 0.0 if x == 0 else float(beta.ppf(a, x, n - x + 1))


def _log_ratio(num: float, den: float) -> float:
    return math.log(num / den) if num > 0 and den > 0 else 0.0


def threshold_bound(
    scores: np.ndarray, member: np.ndarray, threshold: float, direction: str, *, alpha: float, delta: float
) -> dict:
    """The (1 − α) bound of one fixed test on independent runs. ``direction`` "high": "in" when the score
    is ≥ threshold (TPR vs FPR); "low": "out" when it is < threshold (TNR vs FNR)."""
    s, m = np.asarray(scores, dtype=np.float64), np.asarray(member, dtype=bool)
    if s.shape != m.shape or m.all() or not m.any():
        raise ValueError("need equal-length scores and membership with runs of both kinds")
    n_in, n_out = int(m.sum()), int((~m).sum())
    say_in = s >= threshold
    tp, fp = int((say_in & m).sum()), int((say_in & ~m).sum())
    a = alpha / 2  # two one-sided bounds: Bonferroni
    if direction == "high":
        lo, hi = cp_lower(tp, n_in, a), cp_upper(fp, n_out, a)
    elif direction == "low":
        lo, hi = cp_lower(n_out - fp, n_out, a), cp_upper(n_in - tp, n_in, a)
    else:
        raise ValueError(f"direction must be 'high' or 'low', got {direction!r}")
    eps = max(0.0, _log_ratio(lo - delta, hi))
    return {
        "epsilon_lower_bound": eps,
        "threshold": float(threshold),
        "direction": direction,
        "tp": tp,
        "fp": fp,
        "fn": n_in - tp,
        "tn": n_out - fp,
        "runs_in": n_in,
        "runs_out": n_out,
        "rate_lower": lo,
        "rate_upper": hi,
    }


def ceiling(runs_in: int, runs_out: int, *, alpha: float, delta: float) -> float:
    """The bound with every evaluated run classified right (the best this many runs can certify)."""
    a = alpha / 2
    lo = cp_lower(runs_in, runs_in, a)  # = (a)^(1/n)
    hi = cp_upper(0, runs_out, a)  # = 1 − a^(1/n)
    return max(0.0, _log_ratio(lo - delta, hi))


def _bounds(
    s_in: np.ndarray,
    s_out: np.ndarray,
    thresholds: np.ndarray,
    direction: str,
    alpha: float,
    delta: float,
    counts: tuple[int, int] | None,
) -> np.ndarray:
    """The bound of every threshold at once (counts by binary search; with ``counts`` the rates are
    rescaled to that many runs in and out: the bound expected at the evaluated sizes)."""
    n_in, n_out = counts or (len(s_in), len(s_out))
    tpr = 1 - np.searchsorted(np.sort(s_in), thresholds, side="left") / len(s_in)
    fpr = 1 - np.searchsorted(np.sort(s_out), thresholds, side="left") / len(s_out)
    tp, fp = np.rint(tpr * n_in).astype(int), np.rint(fpr * n_out).astype(int)
    a = alpha / 2
    if direction == "high":
        lo = np.where(tp > 0, beta.ppf(a, np.maximum(tp, 1), n_in - tp + 1), 0.0)
        hi = np.where(fp < n_out, beta.ppf(1 - a, fp + 1, np.maximum(n_out - fp, 1)), 1.0)
    else:
        tn, fn = n_out - fp, n_in - tp
        lo = np.where(tn > 0, beta.ppf(a, np.maximum(tn, 1), n_out - tn + 1), 0.0)
        hi = np.where(fn < n_in, beta.ppf(1 - a, fn + 1, np.maximum(n_in - fn, 1)), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((lo - delta > 0) & (hi > 0), np.log(np.maximum(lo - delta, 1e-300) / hi), 0.0).clip(min=0.0)


def choose_test(
    scores: np.ndarray, member: np.ndarray, *, alpha: float, delta: float, counts: tuple[int, int] | None = None
) -> tuple[float, str]:
    """The threshold and direction with the largest bound on these runs (calibration runs, or runs
    simulated from the claimed mechanism; ``counts``: the evaluated runs' sizes). Thresholds sit midway
    between observed scores; among equally good ones, the one that says "in" ("high") or "out" ("low") most
    often."""
    s, m = np.asarray(scores, dtype=np.float64), np.asarray(member, dtype=bool)
    if s.shape != m.shape or m.all() or not m.any():
        raise ValueError("need equal-length scores and membership with runs of both kinds")
    u = np.unique(s)
    if len(u) < 2:
        return float(u[0]), "high"
    mids = (u[1:] + u[:-1]) / 2
    if len(mids) > 3000:  # every tail threshold, quantile-spaced in the middle
        mids = np.unique(np.concatenate([mids[:500], mids[-500:], np.quantile(mids, np.linspace(0, 1, 2000))]))
    best = (-1.0, 0.0, "high")
    for direction in ("high", "low"):
        b = _bounds(s[m], s[~m], mids, direction, alpha, delta, counts)
        top = np.flatnonzero(b >= b.max() - 1e-12)
        if b.max() > best[0]:  # ties: the test that says "in" (resp. "out") most often
            best = (float(b.max()), float(mids[top[0] if direction == "high" else top[-1]]), direction)
    return best[1], best[2]


def audit(
    member: np.ndarray, tests: dict[str, tuple[np.ndarray, float, str]], *, alpha: float = 0.05, delta: float = 0.0
) -> dict:
    """The multi-run bound over tests fixed beforehand (name → (the evaluated runs' scores under that test's
    statistic, threshold, direction); the name says how the test was fixed: a simulation of the claimed
    mechanism, calibration runs kept out of these, or a priori).
    Bonferroni: each test at α/len(tests), the best reported, so the bound holds at 1 − α. With its
    counts, confidence and ceiling (every run classified right, at the same per-test level)."""
    if not tests:
        raise ValueError("no test to evaluate")
    a = alpha / len(tests)
    each = {name: threshold_bound(s, member, t, d, alpha=a, delta=delta) for name, (s, t, d) in tests.items()}
    best = max(each, key=lambda k: each[k]["epsilon_lower_bound"])
    out = each[best]
    return out | {
        "confidence": 1 - alpha,
        "alpha": alpha,
        "delta": delta,
        "test_chosen_on": best,
        "tests": len(tests),
        "per_test": {k: v["epsilon_lower_bound"] for k, v in each.items()},
        "ceiling": ceiling(out["runs_in"], out["runs_out"], alpha=a, delta=delta),
    }


def simulate_lr_scores(
    rng: np.random.Generator, runs: int, sample_rate: float, sigma: float, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """``lr_scores`` of the claimed mechanism, simulated (runs with, runs without the canary): what the
    test is designed on before any real run is seen."""
    if not 0 < sample_rate <= 1 or sigma <= 0:
        raise ValueError(f"need 0 < q ≤ 1 and σ > 0, got q={sample_rate}, σ={sigma}")
    s_in, s_out = np.zeros(runs), np.zeros(runs)
    for _ in range(steps):
        s_out += _lr_step(sigma * rng.standard_normal(runs), sample_rate, sigma)
        s_in += _lr_step(sigma * rng.standard_normal(runs) + (rng.random(runs) < sample_rate), sample_rate, sigma)
    return s_in, s_out


def lr_scores(trace: np.ndarray, sample_rate: float, sigma: float) -> np.ndarray:
    """Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ²))) per run: [R, T] privatised sums (units of C) → [R]."""
    if not 0 < sample_rate <= 1 or sigma <= 0:
        raise ValueError(f"need 0 < q ≤ 1 and σ > 0, got q={sample_rate}, σ={sigma}")
    return _lr_step(np.asarray(trace, dtype=np.float64), sample_rate, sigma).sum(1)


def _lr_step(x: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """log(1 − q + q·e^z), z = (2x − 1)/(2σ²), computed stably as logaddexp(log(1 − q), log q + z)."""
    return np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + (2 * x - 1) / (2 * sigma**2))


def gdp_fit(scores: np.ndarray, member: np.ndarray, delta: float) -> dict:
    """HEURISTIC (Nasr et al. 2023's GDP reading): μ̂ = (mean_in − mean_out)/sd_out of a score assumed
    Gaussian with equal variances, and the ε of μ̂-GDP at δ. No confidence: not a bound."""
    s, m = np.asarray(scores, dtype=np.float64), np.asarray(member, dtype=bool)
    mu = float((s[m].mean() - s[~m].mean()) / s[~m].std(ddof=1))
    return {"mu": mu, "epsilon": gdp_epsilon(abs(mu), delta) if delta > 0 else float("inf"), "heuristic": True}
