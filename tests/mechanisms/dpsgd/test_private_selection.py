"""DP-SGD with private selection (dpsgd/private_selection.py): the calibrated total ε meets the level (and is
tight), an impossible level is refused, and a selection releases its best noisy score's run, reproducibly."""

from __future__ import annotations

import pytest
import torch
from conftest import install_test_key, tiny_problem

from dprelease.mechanisms.dpsgd import frontier as F
from dprelease.mechanisms.dpsgd import private_selection as P
from dprelease.mechanisms.dpsgd import search as S
from dprelease.mechanisms.dpsgd.params import DPSGDGrid

GRID = DPSGDGrid(batch_sizes=[0, 20], epochs=[3], max_grad_norms=[1.0], sgd_lrs=[1.0], adamw_lrs=[0.05])
LEVEL = dict(n=60, epsilon=8.0, delta=1e-3, eta=1.0, gamma=0.1, score_sigma=5.0)  # the grid's selection defaults


@pytest.fixture(scope="module")
def calibrated():
    """The ε-8 calibration (Opacus's RDP over fractional orders: ~20 s on 2 cores), computed once for the
    module; it is deterministic."""
    configs = F.configurations(GRID, n=60)
    return configs, P.calibrate(configs, **LEVEL)


def test_calibrated_total_meets_the_level_tightly_or_is_refused(calibrated):
    configs, (s, sigmas, total) = calibrated
    assert 7.9 < total <= 8.0 and 0 < s < 8.0  # the search costs: each run gets less than the level
    assert set(sigmas) == {(1.0, 3), (1 / 3, 9)}
    assert P.calibrate(configs, n=60, epsilon=0.3, delta=1e-3, eta=1.0, gamma=0.1, score_sigma=5.0) is None


def test_selection_releases_a_grid_configuration_reproducibly(calibrated, tmp_path):
    install_test_key(tmp_path)
    feats, y = tiny_problem(90, classes=3, dim=16)
    data = (feats["x"][:60], y[:60], feats["x"][60:], y[60:])
    configs, (_, sigmas, _) = calibrated
    kw = dict(
        fit_many=F.fit_many, predict=F.predict, eta=1.0, gamma=0.1, score_sigma=5.0, artifacts=tmp_path / "artifacts"
    )
    (w, b), cfg = P.run_selection(configs, sigmas, data, 3, label="a", **kw)
    (w2, _), cfg2 = P.run_selection(configs, sigmas, data, 3, label="a", **kw)
    assert torch.equal(w, w2) and cfg == cfg2  # the operator reproduces it with the key
    assert {k: v for k, v in cfg.items() if k != "noise_multiplier"} in configs
    (w3, _), _ = P.run_selection(configs, sigmas, data, 3, label="b", **kw)
    assert not torch.equal(w, w3)


def test_the_batched_selection_releases_what_runs_trained_alone_would(calibrated, tmp_path):
    """K, the configurations and the score noise are drawn before any training: training the planned runs one by
    one (``fit``, its own call each) releases the same configuration and, to float rounding, the same model."""
    install_test_key(tmp_path)
    feats, y = tiny_problem(90, classes=3, dim=16)
    xt, yt, xv, yv = feats["x"][:60], y[:60], feats["x"][60:], y[60:]
    configs, (_, sigmas, _) = calibrated
    kw = dict(eta=1.0, gamma=0.1, score_sigma=5.0, artifacts=tmp_path / "artifacts", label="c")
    runs = P.plan_selection(configs, sigmas, 60, **kw)
    assert runs and all(label == f"c/run/{k}" for k, (_, _, label, _) in enumerate(runs))
    alone = [S.fit(s, xt, yt, 3, artifacts=tmp_path / "artifacts", label=label) for _, s, label, _ in runs]
    (w1, b1), cfg1 = P.released(runs, alone, xv, yv, predict=F.predict)
    (w, b), cfg = P.run_selection(configs, sigmas, (xt, yt, xv, yv), 3, fit_many=F.fit_many, predict=F.predict, **kw)
    assert cfg == cfg1 and torch.allclose(w, w1, atol=1e-5) and torch.allclose(b, b1, atol=1e-5)


def test_points_refuse_an_infeasible_level_with_a_note(calibrated, tmp_path, monkeypatch):
    configs, found = calibrated
    real, asked = P.calibrate, []

    def once(cfgs, **kw):  # the module's ε-8 calibration where private_points asks for exactly it; else the real one
        asked.append(kw["epsilon"])
        return found if cfgs == configs and kw == LEVEL else real(cfgs, **kw)

    monkeypatch.setattr(P, "calibrate", once)
    install_test_key(tmp_path)
    feats, y = tiny_problem(120, classes=3, dim=16)
    x = feats["x"]
    splits = {"train": (x[:60], y[:60]), "validation": (x[60:90], y[60:90]), "test": (x[90:], y[90:])}
    grid = F.configurations(GRID, n=60)  # no proxy: every ε draws from the whole grid
    points, notes = P.private_points(
        {0.3: grid, 8.0: grid},
        splits,
        3,
        grid=GRID,
        epsilons=[0.3, 8.0],
        seeds=3,
        delta=1e-3,
        fit_many=F.fit_many,
        predict=F.predict,
        artifacts=tmp_path / "artifacts",
    )
    assert asked == [0.3, 8.0]
    assert [p.target_epsilon for p in points] == [8.0] and points[0].epsilon <= 8.0
    assert points[0].tuning == "private selection" and points[0].config["candidates"] == len(grid)
    assert len(points[0].weighted_f1) == 3 and notes == ["private selection cannot meet ε 0.3: its own cost exceeds it"]
    assert pytest.approx(points[0].config["per_run_epsilon"], rel=1e-9) == points[0].config["per_run_epsilon"]
