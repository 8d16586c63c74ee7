"""DP-SGD accounting: the noise multiplier chosen for the paper's setting (docs/algorithms.md, E.4) and the accountant."""

import math

import pytest

from dprelease.core.privacy import accountants
from dprelease.core.privacy.rdp import sampled_gaussian_epsilon
from dprelease.core.privacy.rdp import sampled_gaussian_epsilon as epsilon_for
from dprelease.mechanisms.dpsgd.accounting import default_delta, noise_multiplier, spent_epsilon, steps_for

N, B, EPOCHS = 5346, 512, 30  # docs/algorithms.md, E.3: q = 512/5346 = 0.0958, T = ⌈30/q⌉ = 314 steps
Q = B / N


def test_steps_match_spec():
    assert steps_for(EPOCHS, Q) == 314


@pytest.mark.parametrize(
    ("delta", "expected"),
    # docs/algorithms.md, E.4 (private-transformers / Mironov Prop. 3); the project's default δ at N = 5,346,
    # N^-1.1 = exp(-1.1·ln 5346) = 7.93e-5 (below 1/(2N) = 9.35e-5), needs σ ≈ 2.22 at ε = 4 (E.3 recipe)
    [(1 / (2 * N), 2.21), (1e-3, 1.98), (N**-1.1, 2.22)],
)
def test_noise_multiplier_matches_spec(delta, expected):
    sigma = noise_multiplier(4.0, delta, Q, steps_for(EPOCHS, Q), conversion="mironov")
    assert abs(sigma - expected) <= 0.02


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (N, 7.928082305544238e-05),  # 5346^-1.1 = exp(-1.1 · ln 5346) = exp(-9.44251…); 1/(2N) = 9.35e-5 is larger
        (10**10, 1e-11),  # (10^10)^1.1 = 10^11
        (1024, 1 / 2048),  # the switch: 1024^1.1 = 2^(10·1.1) = 2^11 = 2·1024, both forms agree
        (24, 1 / 48),  # below 1,024 n^-1.1 (24^-1.1 = 0.0303) exceeds 1/(2n) = 0.0208: the smaller is taken
    ],
)
def test_default_delta_is_at_most_n_to_the_minus_1_1(n, expected):
    """δ = min(n^-1.1, 1/(2n)) (docs/algorithms.md, E.1): ≤ 1/n^1.1 and never above the former 1/(2n)."""
    assert default_delta(n) == pytest.approx(expected, rel=1e-12)
    assert default_delta(n) <= min(n**-1.1, 1 / (2 * n)) * (1 + 1e-12)
    if n > 1024:
        assert n * default_delta(n) == pytest.approx(n**-0.1, rel=1e-12)  # records exposed by a "(0, δ)" release


def test_default_delta_needs_two_records():
    with pytest.raises(ValueError, match="2 training records"):
        default_delta(1)


def test_noise_multiplier_is_conservative_and_tight():
    steps = steps_for(EPOCHS, Q)
    sigma = noise_multiplier(4.0, 1e-3, Q, steps, tol=1e-3)
    assert epsilon_for(sigma, Q, steps, 1e-3) <= 4.0  # the chosen σ meets the target
    assert epsilon_for(sigma - 2e-3, Q, steps, 1e-3) > 4.0  # and is within the tolerance of the minimum


def test_opacus_conversion_needs_less_noise_and_agrees_with_opacus():
    from opacus.accountants.utils import get_noise_multiplier

    steps = steps_for(EPOCHS, Q)
    ours = noise_multiplier(4.0, 1 / (2 * N), Q, steps, conversion="opacus")
    theirs = get_noise_multiplier(
        target_epsilon=4.0,
        target_delta=1 / (2 * N),
        sample_rate=Q,
        steps=steps,
        accountant="rdp",
        epsilon_tolerance=0.001,
    )
    assert abs(ours - theirs) < 0.01
    assert ours < noise_multiplier(4.0, 1 / (2 * N), Q, steps, conversion="mironov")


def test_mironov_conversion_by_hand():
    # Mironov Prop. 3 for one order: ε = RDP(α) + log(1/δ)/(α−1); with q = 1 the SGM is the plain Gaussian
    # mechanism, RDP(α) = α/(2σ²) per step. σ = 10, 1 step, δ = 1e-5: minimise α/200 + 11.5129/(α−1)
    # over the order grid; the continuous optimum α* = 1 + sqrt(200·11.5129) ≈ 48.98 gives
    # ε ≈ 48.98/200 + 11.5129/47.98 ≈ 0.4849 + 0.2400 = 0.7249; the grid holds 49 (ε = 0.7249).
    eps = epsilon_for(10.0, 1.0, 1, 1e-5, conversion="mironov")
    assert eps == pytest.approx(49 / 200 + math.log(1e5) / 48, rel=1e-9)


def test_accountant_reports_the_same_epsilon():
    acc = accountants.get("mironov").opacus()
    assert acc.get_epsilon(1e-5) == 0.0
    steps = steps_for(EPOCHS, Q)
    for _ in range(steps):
        acc.step(noise_multiplier=2.21, sample_rate=Q)
    assert acc.get_epsilon(1 / (2 * N)) == pytest.approx(epsilon_for(2.21, Q, steps, 1 / (2 * N)), rel=1e-9)


def test_bad_targets_raise():
    with pytest.raises(ValueError, match="epsilon"):
        noise_multiplier(0.0, 1e-5, Q, 10)
    with pytest.raises(ValueError, match="delta"):
        noise_multiplier(1.0, 1.5, Q, 10)
    with pytest.raises(ValueError, match="conversion"):
        epsilon_for(1.0, Q, 10, 1e-5, conversion="nope")


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """Closed form: the exact ε of a μ-GDP mechanism at δ (Dong, Roth & Su 2019, Cor. 2.13), by bisection on
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    from scipy.stats import norm

    def d(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("sigma,steps", [(5.0, 20), (2.5, 20), (10.0, 50)])
def test_prv_at_full_batch_is_the_composed_gaussian(sigma, steps):
    """q = 1: T Gaussian steps of noise multiplier σ compose to a μ-GDP mechanism with μ = √T/σ, whose exact ε is
    known in closed form. The PRV accountant's ε is an upper bound within its declared error (0.01 in ε)."""
    delta = 1e-4
    exact = _gaussian_epsilon(math.sqrt(steps) / sigma, delta)
    prv = spent_epsilon(sigma, 1.0, steps, delta, "prv")
    assert exact - 1e-6 <= prv <= exact + 0.02
    assert sampled_gaussian_epsilon(sigma, 1.0, steps, delta, "opacus") > prv  # RDP's conversion is looser


def test_prv_needs_less_noise_than_rdp_for_the_same_target():
    q, steps, delta = 512 / 2626, 154, 2626**-1.1
    s_prv = noise_multiplier(8.0, delta, q, steps, "prv")
    s_rdp = noise_multiplier(8.0, delta, q, steps, "opacus")
    assert s_prv < s_rdp
    assert spent_epsilon(s_prv, q, steps, delta, "prv") <= 8.0
    with pytest.raises(ValueError, match="conversion"):
        spent_epsilon(1.0, q, steps, delta, "moments")
