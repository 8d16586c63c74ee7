"""From membership scores to audit figures (TRUST.md L.2–L.4): scores in, numbers out.

* ROC, AUC and TPR at a fixed FPR (low-FPR TPR is what matters for privacy, Carlini et al. 2022);
* the L.3 figure: an ε "lower bound" from one test's error rates with Clopper–Pearson bounds
  (threshold chosen on one half, evaluated on the other). On ONE trained model the records are not
  independent trials, so this is a *heuristic* figure, and it is labelled so everywhere;
* the L.4 one-run canary bound (Steinke, Nasr & Jagielski 2023, δ = 0): with r guesses of which v are
  right, an ε-DP mechanism gives v ≤st Bin(r, e^ε/(1+e^ε)); ε_LB is the largest ε rejected at level α.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta, binom
from sklearn.metrics import roc_auc_score, roc_curve

EPS_MAX = 50.0


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


def heuristic_epsilon(scores: np.ndarray, member: np.ndarray, *, rng: np.random.Generator, delta: float = 0.0,
                      alpha: float = 0.05, n_thresholds: int = 200) -> float:
    """The L.3 figure: pick the threshold on a random half (the one with the largest bound there),
    evaluate its error rates on the other half with Clopper–Pearson upper bounds. HEURISTIC on a
    single trained model (records are not independent trials)."""
    s, m = _check(scores, member)
    idx = rng.permutation(len(s))
    a, b = idx[: len(s) // 2], idx[len(s) // 2:]
    if m[a].all() or not m[a].any() or m[b].all() or not m[b].any():
        raise ValueError("each half needs both members and non-members")
    candidates = np.unique(np.quantile(s[a], np.linspace(0, 1, n_thresholds)))

    def bound(sub: np.ndarray, t: float) -> float:
        fp, n_out, fn, n_in = _rates(s[sub], m[sub], t)
        return epsilon_from_error_rates(clopper_pearson_upper(fp, n_out, alpha),
                                        clopper_pearson_upper(fn, n_in, alpha), delta)

    best = max(candidates, key=lambda t: bound(a, t))
    return bound(b, float(best))


def canary_guesses(scores: np.ndarray, k_plus: int, k_minus: int) -> np.ndarray:
    """+1 ("in") for the k₊ highest scores, −1 ("out") for the k₋ lowest, 0 (abstain) otherwise."""
    s = np.asarray(scores, dtype=np.float64)
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > len(s):
        raise ValueError(f"k₊ + k₋ = {k_plus + k_minus} guesses for {len(s)} canaries")
    order = np.argsort(s, kind="stable")
    g = np.zeros(len(s), dtype=int)
    if k_minus:
        g[order[:k_minus]] = -1
    if k_plus:
        g[order[len(s) - k_plus:]] = 1
    return g


def one_run_epsilon(correct: int, guesses: int, alpha: float = 0.05) -> float:
    """Largest ε with P[Bin(r, e^ε/(1+e^ε)) ≥ v] ≤ α (the tail grows with ε); 0 if even ε = 0 is not
    rejected. δ = 0."""
    if not 0 <= correct <= guesses:
        raise ValueError(f"need 0 ≤ correct ≤ guesses, got {correct} of {guesses}")

    def tail(eps: float) -> float:
        p = 1.0 / (1.0 + math.exp(-eps))
        return float(binom.sf(correct - 1, guesses, p))

    if guesses == 0 or tail(0.0) > alpha:
        return 0.0
    lo, hi = 0.0, EPS_MAX
    if tail(hi) <= alpha:
        return hi
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) <= alpha else (lo, mid)
    return lo


def canary_audit(scores: np.ndarray, member: np.ndarray, k_plus: int, k_minus: int, alpha: float = 0.05) -> dict:
    """Guesses from scores, how many are right, and the one-run ε lower bound."""
    g = canary_guesses(scores, k_plus, k_minus)
    m = np.asarray(member, dtype=bool)
    made = g != 0
    right = int(((g == 1) & m).sum() + ((g == -1) & ~m).sum())
    return {"guesses": int(made.sum()), "correct": right, "epsilon_lower_bound": one_run_epsilon(right, int(made.sum()), alpha),
            "max_certifiable": one_run_epsilon(int(made.sum()), int(made.sum()), alpha)}
