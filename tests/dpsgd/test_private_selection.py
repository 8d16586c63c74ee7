"""DP-SGD with private selection (dpsgd/private_selection.py): the calibrated total ε meets the level (and is
tight), an impossible level is refused, and a selection releases its best noisy score's run, reproducibly."""

from __future__ import annotations

import pytest
import torch

from conftest import install_test_key, tiny_problem
from dprelease.dpsgd import frontier as F
from dprelease.dpsgd import private_selection as P
from dprelease.frontier.params import DPSGDGrid

GRID = DPSGDGrid(batch_sizes=[0, 20], epochs=[3], max_grad_norms=[1.0], sgd_lrs=[1.0], adamw_lrs=[0.05])


def test_calibrated_total_meets_the_level_tightly_or_is_refused():
    configs = F.configurations(GRID, n=60)
    s, sigmas, total = P.calibrate(configs, n=60, epsilon=8.0, delta=1e-3, eta=1.0, gamma=0.1, score_sigma=5.0)
    assert 7.9 < total <= 8.0 and 0 < s < 8.0  # the search costs: each run gets less than the level
    assert set(sigmas) == {(1.0, 3), (1 / 3, 9)}
    assert P.calibrate(configs, n=60, epsilon=0.3, delta=1e-3, eta=1.0, gamma=0.1, score_sigma=5.0) is None


def test_selection_releases_a_grid_configuration_reproducibly(tmp_path):
    install_test_key(tmp_path)
    feats, y = tiny_problem(90, classes=3, dim=16)
    data = (feats["x"][:60], y[:60], feats["x"][60:], y[60:])
    configs = F.configurations(GRID, n=60)
    _, sigmas, _ = P.calibrate(configs, n=60, epsilon=8.0, delta=1e-3, eta=1.0, gamma=0.1, score_sigma=5.0)
    kw = dict(fit=F.fit, predict=F.predict, eta=1.0, gamma=0.1, score_sigma=5.0, artifacts=tmp_path / "artifacts")
    (w, b), cfg = P.run_selection(configs, sigmas, data, 3, label="a", **kw)
    (w2, _), cfg2 = P.run_selection(configs, sigmas, data, 3, label="a", **kw)
    assert torch.equal(w, w2) and cfg == cfg2  # the operator reproduces it with the key
    assert {k: v for k, v in cfg.items() if k != "noise_multiplier"} in configs
    (w3, _), _ = P.run_selection(configs, sigmas, data, 3, label="b", **kw)
    assert not torch.equal(w, w3)


def test_points_refuse_an_infeasible_level_with_a_note(tmp_path):
    install_test_key(tmp_path)
    feats, y = tiny_problem(120, classes=3, dim=16)
    x = feats["x"]
    splits = {"train": (x[:60], y[:60]), "validation": (x[60:90], y[60:90]), "test": (x[90:], y[90:])}
    points, notes = P.private_points(F.configurations(GRID, n=60), splits, 3, grid=GRID, epsilons=[0.3, 8.0],
                                     seeds=3, delta=1e-3, fit=F.fit, predict=F.predict,
                                     artifacts=tmp_path / "artifacts")
    assert [p.target_epsilon for p in points] == [8.0] and points[0].epsilon <= 8.0
    assert len(points[0].weighted_f1) == 3 and notes == ["private selection cannot meet ε 0.3: its own cost exceeds it"]
    assert pytest.approx(points[0].config["per_run_epsilon"], rel=1e-9) == points[0].config["per_run_epsilon"]
