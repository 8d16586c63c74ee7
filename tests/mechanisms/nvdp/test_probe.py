"""The attacker's probe: AUC near 1 on a leaking representation, near 0.5 on noise."""

import numpy as np

from dprelease.mechanisms.nvdp.probe import probe_auc, sector_labels


def test_probe_auc_separates_leak_from_noise():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    leak = np.eye(3)[y] * 3 + rng.normal(size=(600, 3))
    noise = rng.normal(size=(600, 3))
    assert probe_auc(leak[:400], y[:400], leak[400:], y[400:], seed=1)["auc"] > 0.9
    assert abs(probe_auc(noise[:400], y[:400], noise[400:], y[400:], seed=1)["auc"] - 0.5) < 0.1


def test_sector_labels_group_rare_and_unknown():
    tr, te, classes = sector_labels(["23"] * 3 + ["33"] + [""], ["33", "23", "99"], min_count=2)
    assert classes == ["23", "other"] and tr.tolist() == [0, 0, 0, 1, 1] and te.tolist() == [1, 0, 1]


def test_single_class_gives_nan():
    x = np.zeros((4, 2))
    assert np.isnan(probe_auc(x, np.zeros(4, int), x, np.zeros(4, int), seed=0)["auc"])
