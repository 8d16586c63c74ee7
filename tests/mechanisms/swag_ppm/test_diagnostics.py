"""Fit verdicts from max-delta series (seed 001 §4.1–4.2): synthetic shapes with fixed seeds, scores
against numpy computations, the loss-trend rule, degenerate and bad input, the real default-run series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dprelease.mechanisms.swag_ppm.diagnostics import MAD_TO_SD, FitScores, Thresholds, diagnose, fit_scores, verdict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _by_hand(m: np.ndarray, z_spike: float = 6.0) -> dict:
    med = np.median(m)
    scale = 1.4826 * np.median(np.abs(m - med))
    z = (m - med) / scale
    return {"median": med, "rcv": scale / med, "spikes": int((z >= z_spike).sum()), "max_z": z.max()}


def _underfit_normal() -> np.ndarray:
    return np.random.default_rng(11).normal(8.0, 0.6, 500)  # rcv ≈ 0.6 / 8 = 0.075 ≥ 0.04


def _underfit_gumbel() -> np.ndarray:
    return np.random.default_rng(12).gumbel(3.0, 0.5, 500)  # scale large relative to location


def _ok() -> np.ndarray:
    return np.random.default_rng(13).normal(3.0, 0.03, 500)


SPIKES_AT = [17, 203, 388]


def _overfit() -> np.ndarray:
    m = _ok()
    m[SPIKES_AT] += 1.0  # ~33 robust SDs above a bulk of SD 0.03
    return m


def _load(name: str) -> np.ndarray:
    return np.loadtxt(FIXTURES / name, comments="#")


# --- verdicts of the three synthetic shapes ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, expected",
    [
        (_underfit_normal, "underfit"),
        (_underfit_gumbel, "underfit"),
        (_overfit, "overfit"),
        (_ok, "ok"),
    ],
    ids=["underfit-normal", "underfit-gumbel", "overfit", "ok"],
)
def test_synthetic_shapes_get_their_verdict(make, expected):
    v, scores = diagnose(make())
    assert v == expected, scores


@pytest.mark.parametrize("make", [_underfit_normal, _underfit_gumbel, _overfit, _ok])
def test_scores_match_numpy(make):
    m = make()
    s = fit_scores(m)
    ref = _by_hand(m)
    assert MAD_TO_SD == 1.4826
    assert s.median == pytest.approx(ref["median"], rel=1e-12)
    assert s.rcv == pytest.approx(ref["rcv"], rel=1e-12)
    assert s.spikes == ref["spikes"]
    assert s.max_z == pytest.approx(ref["max_z"], rel=1e-12)
    assert s.loss_trend is None


def test_overfit_spikes_are_exactly_the_planted_ones():
    m = _overfit()
    s = fit_scores(m)
    assert s.spikes == len(SPIKES_AT)
    ref = _by_hand(m)
    z = (m - ref["median"]) / (ref["rcv"] * ref["median"])
    assert sorted(np.flatnonzero(z >= 6)) == SPIKES_AT
    assert s.rcv < Thresholds().rcv_high


def test_underfit_is_by_variability_not_spikes():
    s = fit_scores(_underfit_normal())
    assert s.rcv >= Thresholds().rcv_high and s.spikes == 0
    assert 0.06 < s.rcv < 0.09  # ≈ 0.6 / 8


def test_spikes_on_a_variable_bulk_are_underfit():
    m = _underfit_normal()
    m[[5, 50]] += 20.0
    v, s = diagnose(m)
    assert s.spikes == 2 and v == "underfit"


def test_many_spikes_are_not_overfit():
    """More than max_spike_frac (2 %) of the draws at z ≥ 6 is variability, not isolated spikes."""
    m = _ok()
    m[:25] += 1.0  # 5 %
    v, s = diagnose(m)
    assert s.spikes == 25 and s.rcv < Thresholds().rcv_high
    assert v != "overfit"


def test_spike_fraction_boundary():
    base = dict(median=3.0, rcv=0.01, max_z=10.0, loss_trend=None)
    assert verdict(FitScores(spikes=10, **base), n_draws=500) == "overfit"  # exactly 2 %
    assert verdict(FitScores(spikes=11, **base), n_draws=500) == "underfit"  # frequent extremes = variability
    assert verdict(FitScores(spikes=10, **base)) == "overfit"  # n_draws defaults to 500
    assert verdict(FitScores(spikes=1, **base), n_draws=500) == "ok"  # one z >= 6 draw is common under a Gumbel bulk
    assert verdict(FitScores(spikes=2, **base), n_draws=6) == "overfit"  # min_spikes always fits
    assert verdict(FitScores(spikes=3, **base), n_draws=6) == "underfit"
    assert verdict(FitScores(spikes=0, **base), n_draws=500) == "ok"


def test_rcv_boundary_is_inclusive():
    t = Thresholds()
    s = FitScores(median=3.0, rcv=t.rcv_high, spikes=1, max_z=7.0, loss_trend=None)
    assert verdict(s) == "underfit"
    assert verdict(FitScores(median=3.0, rcv=t.rcv_high * 0.999, spikes=0, max_z=3.0, loss_trend=None)) == "ok"


# --- loss trend -------------------------------------------------------------------------------------------------------
def test_loss_trend_is_first_half_vs_second_half_mean():
    losses = [2.0, 1.8, 1.6, 1.4, 1.2, 1.0]
    first, second = np.mean(losses[:3]), np.mean(losses[3:])
    s = fit_scores(_ok(), losses)
    assert s.loss_trend == pytest.approx((first - second) / first)  # (1.8 − 1.2) / 1.8 = 1/3
    assert s.loss_trend == pytest.approx(1 / 3)


def test_loss_trend_odd_length_drops_the_middle_epoch():
    s = fit_scores(_ok(), [4.0, 100.0, 2.0])
    assert s.loss_trend == pytest.approx(0.5)


def test_falling_loss_makes_an_ok_series_underfit():
    m = _ok()
    assert diagnose(m)[0] == "ok"
    assert diagnose(m, [1.00, 1.02, 0.99, 1.01, 1.00, 0.99])[0] == "ok"  # flat: sampling around a mode
    v, s = diagnose(m, [2.0, 1.8, 1.6, 1.4, 1.2, 1.0])
    assert v == "underfit" and s.loss_trend >= Thresholds().trend_high


def test_loss_trend_threshold_is_inclusive():
    t = Thresholds(trend_high=0.125)
    v, s = diagnose(_ok(), [1.0, 0.875], t)  # exactly 0.125 in binary
    assert s.loss_trend == 0.125 and v == "underfit"
    assert diagnose(_ok(), [1.0, 0.876], t)[0] == "ok"


def test_loss_trend_does_not_override_overfit():
    assert diagnose(_overfit(), [2.0, 1.0])[0] == "overfit"


@pytest.mark.parametrize(
    "losses, expected", [(None, None), ([], None), ([1.0], None), ([0.0, 0.0], 0.0), ([1.0, 2.0], -1.0)]
)
def test_loss_trend_edge_cases(losses, expected):
    assert fit_scores(_ok(), losses).loss_trend == expected


# --- degenerate and bad input --------------------------------------------------------------------------------------
def test_constant_series_does_not_crash():
    v, s = diagnose(np.full(50, 2.0))
    assert v == "ok"
    assert s.median == 2.0 and s.spikes == 0 and s.max_z == 0.0 and np.isfinite(s.rcv)


def test_zero_mad_falls_back_to_std():
    m = np.full(500, 2.0)
    m[7] = 3.0  # MAD 0: the scale falls back to the standard deviation
    s = fit_scores(m)
    assert s.rcv == pytest.approx(m.std() / 2.0)
    assert s.spikes == 1 and s.max_z == pytest.approx(1.0 / m.std())


@pytest.mark.parametrize(
    "bad",
    [
        np.array([1.0, np.nan, 2.0]),
        np.array([1.0, np.inf, 2.0]),
        np.array([2.5]),
        np.array([]),
        np.ones((10, 2)),
    ],
    ids=["nan", "inf", "length-1", "empty", "2-D"],
)
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError, match="finite 1-D"):
        fit_scores(bad)
    with pytest.raises(ValueError):
        diagnose(bad)


def test_as_dict_round_trips():
    s = fit_scores(_overfit(), [1.0, 0.9])
    assert FitScores(**s.as_dict()) == s
    assert set(s.as_dict()) == {"median", "rcv", "spikes", "max_z", "loss_trend"}


# --- real series (default params, head backend, 500 draws) ------------------------------------------------------
def test_real_round2_series_is_underfit():
    m = _load("max_deltas_default_round2.csv")
    assert m.shape == (500,)
    v, s = diagnose(m)
    assert v == "underfit"
    assert s.rcv == pytest.approx(0.05, abs=0.005)
    assert s.spikes == 0


def test_real_round3_series_is_overfit():
    m = _load("max_deltas_default_round3.csv")
    assert m.shape == (500,)
    v, s = diagnose(m)
    assert v == "overfit"
    assert s.spikes >= 1 and s.rcv < Thresholds().rcv_high
    assert s.max_z == pytest.approx(_by_hand(m)["max_z"])


# --- the z ≥ 6 spike threshold under a pure Gumbel null -------------------------------------------------------------
def _gumbel_null_overfit(seeds) -> list[int]:
    return [seed for seed in seeds if diagnose(np.random.default_rng(seed).gumbel(3.0, 0.05, 500))[0] == "overfit"]


def test_gumbel_bulk_z5_about_once_per_500_draws():
    """The docstring's premise: a Gumbel bulk has about one draw at z ≥ 5 per 500 (analytically 1.17)."""
    count = [
        fit_scores(np.random.default_rng(s).gumbel(3.0, 0.05, 500), thresholds=Thresholds(z_spike=5)).spikes
        for s in range(200)
    ]
    assert np.mean(count) == pytest.approx(1.17, abs=0.3)


def test_gumbel_null_false_overfit_rate_is_documented():
    """What the thresholds give on a pure Gumbel(3, 0.05) bulk of 500 draws (no spikes planted): ≥ 2
    draws at robust z ≥ 6 has probability 1 − P(0) − P(1) with p = 7.5e-4 per draw, ≈ 0.065 — the false
    'overfit' rate. Pinned here so a threshold change is noticed."""
    assert _gumbel_null_overfit(range(10)) == []
    rate = len(_gumbel_null_overfit(range(10, 410))) / 400
    assert 0.03 < rate < 0.13  # analytic ≈ 0.065 (measured 0.09 on these seeds); binomial SD at n = 400 is 0.012


def test_gumbel_null_is_rarely_overfit():
    assert len(_gumbel_null_overfit(range(10))) <= 1
