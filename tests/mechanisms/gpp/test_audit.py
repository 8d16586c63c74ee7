"""The G.3 audit: AUC definitions and a probe that finds what is there and nothing that is not."""

import numpy as np
import pytest

from dprelease.mechanisms.gpp.audit import ProbeConfig, audit, fit_probe, macro_auc
from dprelease.mechanisms.gpp.train import GPPInputError

FAST = ProbeConfig(hidden=(16,), epochs=10, lr=1e-2, batch_size=32)


def test_macro_auc_binary_and_multiclass():
    assert macro_auc(np.array([0, 1, 0, 1]), np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6]])) == 1.0
    y = np.array([0, 1, 2, 0])
    p = np.eye(3)[y] * 0.9 + 0.05
    assert macro_auc(y, p) == 1.0
    # a class absent from the test labels is skipped, not an error
    assert macro_auc(np.array([0, 1, 0, 1]), np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]] * 2)) == 1.0


def test_audit_separates_signal_from_noise():
    rng = np.random.default_rng(0)
    n = 400
    s = rng.integers(0, 2, 2 * n)
    u = rng.integers(0, 3, 2 * n)
    z = np.c_[s * 2.0 + rng.normal(0, 0.3, 2 * n), rng.normal(size=(2 * n, 3))].astype(np.float32)  # u not in z
    out = audit(
        z[:n], z[n:], u_train=u[:n], u_test=u[n:], s_train=s[:n], s_test=s[n:], n_u=3, n_s=2, config=FAST, seed=1
    )
    assert out["adversary_auc"] > 0.95
    assert abs(out["utility_auc"] - 0.5) < 0.1
    assert set(out) >= {"utility_auc", "utility_accuracy", "adversary_auc", "adversary_majority"}


def test_probe_rejects_labels_outside_classes_and_width_mismatch():
    z = np.zeros((4, 2), np.float32)
    with pytest.raises(GPPInputError, match="outside"):
        fit_probe(z, np.array([0, 1, 2, 3]), 3, config=FAST, seed=0)
    y = np.array([0, 1, 0, 1])
    with pytest.raises(GPPInputError, match="width"):
        audit(z, np.zeros((4, 3), np.float32), u_train=y, u_test=y, s_train=y, s_test=y, n_u=2, n_s=2, config=FAST)
