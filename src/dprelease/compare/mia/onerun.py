"""One-run canary bounds (docs/guarantees.md, L.4, R.3): guesses and right guesses in, ε lower bounds out. Pure maths.

m canaries each included with probability ½ (secret coins), one run; the attacker guesses "in" for the k₊ highest
scores and "out" for the k₋ lowest: r guesses, v right. Two bounds: Steinke, Nasr & Jagielski 2023 (a p-value under
(ε, δ); δ = 0 is the pure bound) and Mahloujifar, Melis & Chaudhuri 2024 (a whole trade-off curve: ``pure``, or
``gaussian``, which reads a claim (ε, δ) as the Gaussian mechanism's, a curve DP-SGD's accountant implies only
approximately). A bound's ceiling is its value with every guess right: a claim above it cannot be convicted.

See docs/audit.md, "Notes from the code", `compare/mia/onerun.py`."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom, norm

EPS_MAX = 100.0
FAMILIES = ("pure", "gaussian")


def _check_counts(correct: int, guesses: int, canaries: int | None = None) -> None:
    if not 0 <= correct <= guesses:
        raise ValueError(f"need 0 ≤ correct ≤ guesses, got {correct} of {guesses}")
    if canaries is not None and guesses > canaries:
        raise ValueError(f"{guesses} guesses for {canaries} canaries")


def _q(eps: float) -> float:
    return 1.0 / (1.0 + math.exp(-eps))


def steinke_p_value(
    correct: int, guesses: int, eps: float, *, delta: float = 0.0, canaries: int | None = None
) -> float:
    """Upper bound on P[v ≥ correct] for an (ε, δ)-DP mechanism (Steinke et al. 2023)."""
    _check_counts(correct, guesses, canaries)
    if correct == 0:
        return 1.0
    q = _q(eps)
    tail = float(binom.sf(correct - 1, guesses, q))
    if delta == 0:
        return tail
    if canaries is None:
        raise ValueError("the δ term needs the number of canaries m")
    i = np.arange(1, correct + 1)
    window = binom.sf(correct - i - 1, guesses, q) - tail  # P[c − i ≤ Bin < c]
    return min(1.0, tail + 2 * canaries * delta * float(np.max(window / i)))


def _largest_rejected(rejects: Callable[[float], bool]) -> float:
    """Largest ε with rejects(ε) True, rejection being monotone (True for small ε, then False)."""
    if not rejects(0.0):
        return 0.0
    if rejects(EPS_MAX):
        return EPS_MAX
    lo, hi = 0.0, EPS_MAX
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo


def steinke_epsilon(
    correct: int, guesses: int, *, alpha: float = 0.05, delta: float = 0.0, canaries: int | None = None
) -> float:
    """ε_LB at confidence 1 − α: the largest ε whose p-value is ≤ α; 0 if ε = 0 is not rejected."""
    _check_counts(correct, guesses, canaries)
    if guesses == 0:
        return 0.0
    return _largest_rejected(lambda e: steinke_p_value(correct, guesses, e, delta=delta, canaries=canaries) <= alpha)


# ---- f-DP (Mahloujifar, Melis & Chaudhuri 2024) ---------------------------------------------------------


def tradeoff_pure(eps: float) -> Callable[[float], float]:
    """f_ε(x) = max(0, 1 − e^ε x, e^−ε (1 − x)): the trade-off curve of ε-DP."""
    a, b = math.exp(eps), math.exp(-eps)
    return lambda x: max(0.0, 1.0 - a * x, b * (1.0 - x))


def tradeoff_gaussian(mu: float) -> Callable[[float], float]:
    """G_μ(x) = Φ(Φ⁻¹(1 − x) − μ): the trade-off curve of μ-GDP (Dong, Roth & Su 2022)."""
    return lambda x: float(norm.cdf(norm.ppf(1.0 - x) - mu))


def gdp_delta(eps: float, mu: float) -> float:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Corollary 2.13)."""
    if mu <= 0:
        return 0.0
    a = norm.logcdf(-eps / mu + mu / 2)
    b = eps + norm.logcdf(-eps / mu - mu / 2)
    return float(math.exp(a) * -math.expm1(b - a)) if b < a else 0.0


def gdp_mu(eps: float, delta: float) -> float:
    """The μ of the Gaussian mechanism that is exactly (ε, δ)-DP (δ(ε; μ) grows with μ)."""
    if not 0 < delta < 1:
        raise ValueError(f"a Gaussian reading needs 0 < δ < 1, got {delta}")
    hi = 1.0
    while gdp_delta(eps, hi) < delta:
        hi *= 2
        if hi > 1e4:
            return hi
    return float(brentq(lambda mu: gdp_delta(eps, mu) - delta, 1e-9, hi, xtol=1e-10))


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ (inverse of ``gdp_mu``)."""
    if mu <= 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-10))


def fdp_rejects(f: Callable[[float], float], correct: int, guesses: int, canaries: int, alpha: float = 0.05) -> bool:
    """Does c right guesses of r (m canaries) reject "the mechanism is f-DP" at level α?

    Mahloujifar et al.'s Algorithm 3 (k = 2): start from the mass α·c/m of right and α·(r − c)/m of
    wrong guesses at the c-th right guess and walk down; at each step the wrong-guess mass must be at
    least what f allows given the right-guess mass (the type-II error at type-I error 1 − right mass),
    and the right-guess mass grows by i/(r − i) times that increase. Reject when the total exceeds r/m."""
    _check_counts(correct, guesses, canaries)
    if correct == 0:
        return False
    right = alpha * correct / canaries
    wrong = alpha * (guesses - correct) / canaries
    for i in range(correct - 1, -1, -1):
        needed = max(wrong, f(1.0 - right))
        if needed == wrong:
            break  # nothing can change from here on
        right = min(1.0, right + i / (guesses - i) * (needed - wrong))
        wrong = needed
    return right + wrong > guesses / canaries


def fdp_epsilon(
    correct: int, guesses: int, canaries: int, *, alpha: float = 0.05, family: str = "pure", delta: float = 0.0
) -> float:
    """ε_LB at confidence 1 − α from the f-DP one-run test: the largest ε whose curve is rejected.
    ``pure``: f_ε (δ must be 0); ``gaussian``: the Gaussian mechanism's curve with that (ε, δ)."""
    _check_counts(correct, guesses, canaries)
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if family == "pure" and delta != 0:
        raise ValueError("the pure-ε curve has δ = 0; use family='gaussian' for an (ε, δ) claim")
    if guesses == 0:
        return 0.0

    def curve(eps: float) -> Callable[[float], float]:
        return tradeoff_pure(eps) if family == "pure" else tradeoff_gaussian(gdp_mu(eps, delta))

    return _largest_rejected(lambda e: fdp_rejects(curve(e), correct, guesses, canaries, alpha))


def fdp_mu(correct: int, guesses: int, canaries: int, *, alpha: float = 0.05) -> float:
    """μ_LB: the largest μ whose μ-GDP curve is rejected (0 if none)."""
    _check_counts(correct, guesses, canaries)
    if guesses == 0 or not fdp_rejects(tradeoff_gaussian(1e-9), correct, guesses, canaries, alpha):
        return 0.0
    lo, hi = 0.0, 1.0
    while fdp_rejects(tradeoff_gaussian(hi), correct, guesses, canaries, alpha):
        lo, hi = hi, 2 * hi
        if hi > 64:
            return lo
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fdp_rejects(tradeoff_gaussian(mid), correct, guesses, canaries, alpha) else (lo, mid)
    return lo


# ---- guesses and the audit of one arm -------------------------------------------------------------------


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
        g[order[len(s) - k_plus :]] = 1
    return g


def right_guesses(scores: np.ndarray, member: np.ndarray, k_plus: int, k_minus: int) -> tuple[int, int]:
    g = canary_guesses(scores, k_plus, k_minus)
    m = np.asarray(member, dtype=bool)
    if m.shape != g.shape:
        raise ValueError(f"scores {g.shape} and membership {m.shape} differ")
    return int(((g == 1) & m).sum() + ((g == -1) & ~m).sum()), int((g != 0).sum())


def _bound(method: str, correct: int, guesses: int, canaries: int, alpha: float, delta: float) -> float:
    if method == "steinke":
        return steinke_epsilon(correct, guesses, alpha=alpha, delta=delta, canaries=canaries)
    return fdp_epsilon(correct, guesses, canaries, alpha=alpha, family="gaussian" if delta > 0 else "pure", delta=delta)


def canary_audit(
    scores: np.ndarray, member: np.ndarray, *, guess_grid: list[int], alpha: float = 0.05, delta: float = 0.0
) -> dict:
    """Both one-run bounds for one arm. Each r of ``guess_grid`` (r/2 "in" + r/2 "out") is tried and the
    best bound kept, at level α/len(grid) per try (Bonferroni), so each method's bound holds at 1 − α.
    Per method: ε_LB, the r that gave it, its right guesses, and the ceiling (every guess right, best r). δ > 0: Steinke's δ version and the f-DP bound's Gaussian reading; δ = 0: the pure forms."""
    s = np.asarray(scores, dtype=np.float64)
    m = len(s)
    grid = sorted({min(int(r) // 2 * 2, m // 2 * 2) for r in guess_grid if r >= 2})
    if not grid:
        raise ValueError(f"no usable guess count in {guess_grid} for {m} canaries")
    a = alpha / len(grid)
    counts = {r: right_guesses(s, member, r // 2, r // 2)[0] for r in grid}
    out = {
        "canaries": m,
        "included": int(np.asarray(member, bool).sum()),
        "alpha": alpha,
        "delta": delta,
        "guess_grid": grid,
        "right_by_guesses": {str(r): c for r, c in counts.items()},
    }
    for method in ("steinke", "fdp"):
        best = max(grid, key=lambda r: (_bound(method, counts[r], r, m, a, delta), -r))
        out[method] = {
            "epsilon_lower_bound": _bound(method, counts[best], best, m, a, delta),
            "guesses": best,
            "correct": counts[best],
            "ceiling": max(_bound(method, r, r, m, a, delta) for r in grid),
        }
    return out
