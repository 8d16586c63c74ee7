"""DP-SGD's frontier points (dpsgd/frontier.py): the configuration chosen is the grid's best on VALIDATION, each
refit's batches and noise come from the key, and σ meets the declared level under each accountant."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_problem

from dprelease.core.utility.metrics import f1_summary
from dprelease.mechanisms.dpsgd import frontier as F
from dprelease.mechanisms.dpsgd import search as S
from dprelease.mechanisms.dpsgd.params import DPSGDGrid


def test_configurations_cover_the_declared_grid():
    grid = DPSGDGrid(batch_sizes=[0, 16], epochs=[2], max_grad_norms=[0.1, 1.0], sgd_lrs=[1.0], adamw_lrs=[0.01])
    configs = F.configurations(grid, n=40)
    assert len(configs) == grid.size == 8
    assert {c["batch_size"] for c in configs} == {40, 16}  # 0 → full batch
    assert {(c["optimizer"], c["momentum"]) for c in configs} == {("sgd", 0.9), ("adamw", 0.0)}


def test_select_returns_the_best_validation_configuration(tmp_path):
    from conftest import install_test_key

    install_test_key(tmp_path)
    feats, labels = tiny_problem(90, classes=3, dim=16)
    x, y, xv, yv = feats["x"][:60], labels[:60], feats["x"][60:], labels[60:]
    grid = DPSGDGrid(batch_sizes=[0], epochs=[3], max_grad_norms=[1.0], sgd_lrs=[0.01, 5.0], adamw_lrs=[0.05])
    configs = F.configurations(grid, n=60)
    best, score = S.select(configs, "rdp", x, y, xv, yv, 3, epsilon=8.0, delta=1e-3, artifacts=tmp_path / "artifacts")
    sigmas = F._Sigmas(epsilon=8.0, delta=1e-3, conversion="opacus")
    scores = [
        f1_summary(
            yv.numpy(),
            F.predict(
                *S.fit(
                    sigmas.setting(c, 60),
                    x,
                    y,
                    3,
                    artifacts=tmp_path / "artifacts",
                    label=f"frontier/dpsgd/rdp/8/select/{i}",
                ),
                xv,
            ).numpy(),
            range(3),
        )["weighted_f1"]
        for i, c in enumerate(configs)
    ]
    assert score == max(scores) and best == scores.index(max(scores))
    # another label (another secret draw of batches and noise) gives another model
    w1, _ = S.fit(sigmas.setting(configs[0], 60), x, y, 3, artifacts=tmp_path / "artifacts", label="a")
    w2, _ = S.fit(sigmas.setting(configs[0], 60), x, y, 3, artifacts=tmp_path / "artifacts", label="b")
    w3, _ = S.fit(sigmas.setting(configs[0], 60), x, y, 3, artifacts=tmp_path / "artifacts", label="a")
    assert not torch.equal(w1, w2) and torch.equal(w1, w3)


def test_every_level_in_one_call_chooses_as_each_level_alone(tmp_path):
    """select_all trains the grid at every ε in one trainer call; each ε's choice and score are select's at that ε
    alone (the same key labels: each run draws the same batches and noise whatever runs share its call)."""
    from conftest import install_test_key

    install_test_key(tmp_path)
    feats, labels = tiny_problem(90, classes=3, dim=16)
    data = (feats["x"][:60], labels[:60], feats["x"][60:], labels[60:])
    grid = DPSGDGrid(batch_sizes=[0, 20], epochs=[2], max_grad_norms=[1.0], sgd_lrs=[1.0], adamw_lrs=[0.05])
    configs = F.configurations(grid, n=60)
    together = F.select_all(configs, "rdp", data, 3, epsilons=[2.0, 8.0], delta=1e-3, artifacts=tmp_path / "artifacts")
    for eps in (2.0, 8.0):
        assert together[eps] == S.select(
            configs, "rdp", *data, 3, epsilon=eps, delta=1e-3, artifacts=tmp_path / "artifacts"
        )
    assert set(together) == {2.0, 8.0}


@pytest.mark.parametrize("acc", ["rdp", "prv"])
def test_sigma_meets_the_level_under_each_accountant(acc):
    conversion = F.ACCOUNTANTS[acc][0]
    s = F._Sigmas(epsilon=4.0, delta=1e-4, conversion=conversion).setting(
        {"batch_size": 100, "epochs": 5, "max_grad_norm": 1.0, "optimizer": "sgd", "lr": 1.0, "momentum": 0.9}, 1000
    )
    assert s.epsilon(1e-4, conversion) <= 4.0 and s.epsilon(1e-4, conversion) > 3.5  # tight, never above the target


def test_the_frontier_labels_its_accountants_with_the_registry_labels():
    from dprelease.core.privacy import accountants

    assert all(label == accountants.get(name).label for name, label in F.ACCOUNTANTS.values())
