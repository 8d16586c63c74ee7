"""From membership scores to audit figures (docs/guarantees.md, L.2–L.4): scores in, numbers out.

* ROC, AUC and TPR at a fixed FPR (low-FPR TPR is what matters for privacy, Carlini et al. 2022);
* the L.3 figure: an ε "lower bound" from one test's error rates with Clopper–Pearson bounds
  (threshold chosen on one half, evaluated on the other). On ONE trained model the records are not
  independent trials, so this is a *heuristic* figure, and it is labelled so everywhere;
* TPR at a fixed FPR with its counts, a two-sided Clopper–Pearson interval and the null band (the 95th
  percentile of that TPR when scores carry no membership information: a negative hypergeometric);
* the one-run canary bounds live in ``onerun`` (Steinke et al. 2023 with δ; Mahloujifar et al. 2024).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta, nhypergeom
from sklearn.metrics import roc_auc_score, roc_curve


def _check(scores: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(member, dtype=bool)
    if s.shape != m.shape or s.ndim != 1:
        raise ValueError(f"scores {s.shape} and membership {m.shape} must be equal-length vectors")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite")
    if m.all() or not m.any():
        raise ValueError("need both members and non-members")
    return s, m


def roc(scores: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) over every threshold, "member" when score ≥ threshold."""
    s, m = _check(scores, member)
    fpr, tpr, _ = roc_curve(m, s)
    return fpr, tpr


def auc(scores: np.ndarray, member: np.ndarray) -> float:
    s, m = _check(scores, member)
    return float(roc_auc_score(m, s))


def tpr_at_fpr(scores: np.ndarray, member: np.ndarray, target_fpr: float) -> float:
    """Largest TPR over thresholds whose FPR ≤ ``target_fpr``."""
    fpr, tpr = roc(scores, member)
    ok = fpr <= target_fpr + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


def clopper_pearson_upper(x: int, n: int, alpha: float = 0.05) -> float:
    """One-sided upper confidence bound (1 − α) for a binomial proportion with x successes in n."""
    if n <= 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 ≤ x ≤ n and n > 0, got x={x}, n={n}")
    return 1.0 if x == n else float(beta.ppf(1 - alpha, x + 1, n - x))


def epsilon_from_error_rates(fpr_upper: float, fnr_upper: float, delta: float = 0.0) -> float:
    """ε_LB = max{0, ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄)} (Kairouz et al. 2015)."""
    out = 0.0
    for a, b in ((fnr_upper, fpr_upper), (fpr_upper, fnr_upper)):
        if b > 0 and 1 - delta - a > 0:
            out = max(out, math.log((1 - delta - a) / b))
    return out


def _rates(s: np.ndarray, m: np.ndarray, t: float) -> tuple[int, int, int, int]:
    fp = int(((s >= t) & ~m).sum())
    fn = int(((s < t) & m).sum())
    return fp, int((~m).sum()), fn, int(m.sum())


def heuristic_epsilon(
    scores: np.ndarray,
    member: np.ndarray,
    *,
    rng: np.random.Generator,
    delta: float = 0.0,
    alpha: float = 0.05,
    n_thresholds: int = 200,
) -> float:
    """The L.3 figure: pick the threshold on a random half (the one with the largest bound there),
    evaluate its error rates on the other half with Clopper–Pearson upper bounds. HEURISTIC on a
    single trained model (records are not independent trials)."""
    s, m = _check(scores, member)
    idx = rng.permutation(len(s))
    a, b = idx[: len(s) // 2], idx[len(s) // 2 :]
    if m[a].all() or not m[a].any() or m[b].all() or not m[b].any():
        raise ValueError("each half needs both members and non-members")
    candidates = np.unique(np.quantile(s[a], np.linspace(0, 1, n_thresholds)))

    def bound(sub: np.ndarray, t: float) -> float:
        fp, n_out, fn, n_in = _rates(s[sub], m[sub], t)
        return epsilon_from_error_rates(
            clopper_pearson_upper(fp, n_out, alpha), clopper_pearson_upper(fn, n_in, alpha), delta
        )

    best = max(candidates, key=lambda t: bound(a, t))
    return bound(b, float(best))


def clopper_pearson_interval(x: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided (1 − α) Clopper–Pearson interval for x successes in n."""
    if n <= 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 ≤ x ≤ n and n > 0, got x={x}, n={n}")
    lo = 0.0 if x == 0 else float(beta.ppf(alpha / 2, x, n - x + 1))
    hi = 1.0 if x == n else float(beta.ppf(1 - alpha / 2, x + 1, n - x))
    return lo, hi


def null_tpr_quantile(n_in: int, n_out: int, target_fpr: float, q: float = 0.95) -> float:
    """The q-quantile of TPR at FPR ≤ ``target_fpr`` when the scores say nothing about membership.

    With k = ⌊target_fpr · n_out⌋ false positives allowed, the best threshold sits just above the
    (k+1)-th highest non-member; under the null every ranking is equally likely, so the members above
    it follow a negative hypergeometric law (members drawn before the (k+1)-th non-member)."""
    if n_in <= 0 or n_out <= 0 or not 0 <= target_fpr < 1:
        raise ValueError(f"need n_in, n_out > 0 and 0 ≤ FPR < 1, got {n_in}, {n_out}, {target_fpr}")
    k = int(math.floor(target_fpr * n_out + 1e-9))
    return float(nhypergeom.ppf(q, n_in + n_out, n_in, k + 1)) / n_in


def tpr_at_fpr_counts(scores: np.ndarray, member: np.ndarray, target_fpr: float, alpha: float = 0.05) -> dict:
    """TPR at FPR ≤ ``target_fpr`` with what a reader needs to judge it: the counts (true and false
    positives of the chosen threshold, members, non-members), a two-sided Clopper–Pearson interval for
    the TPR and the null band (the TPR a score with no information reaches 5 % of the time)."""
    s, m = _check(scores, member)
    n_in, n_out = int(m.sum()), int((~m).sum())
    k = int(math.floor(target_fpr * n_out + 1e-9))
    out_sorted = np.sort(s[~m])[::-1]
    # "member" when score > t, t = the (k+1)-th highest non-member score: at most k false positives
    t = out_sorted[k] if k < n_out else -np.inf
    tp, fp = int((s[m] > t).sum()), int((s[~m] > t).sum())
    lo, hi = clopper_pearson_interval(tp, n_in, alpha)
    return {
        "fpr_target": target_fpr,
        "tpr": tp / n_in,
        "tp": tp,
        "fp": fp,
        "members": n_in,
        "non_members": n_out,
        "tpr_ci_low": lo,
        "tpr_ci_high": hi,
        "null_tpr_95": null_tpr_quantile(n_in, n_out, target_fpr, 1 - alpha),
    }
