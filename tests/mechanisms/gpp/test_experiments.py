"""Experiment helpers: the tuning hold-out never touches the test set; noise tuning picks the best
trade-off on it; sweep rows carry the swept value."""

import numpy as np

from dprelease.mechanisms.gpp import experiments
from dprelease.mechanisms.gpp.audit import ProbeConfig
from dprelease.mechanisms.gpp.data import digits_composites
from dprelease.mechanisms.gpp.params import GPPParams
from dprelease.mechanisms.gpp.train import TrainConfig

TINY = TrainConfig.from_params(
    GPPParams(), d_z=4, epochs=1, batch_size=32, lr=1e-3, encoder_hidden=(16, 8), head_hidden=(8,)
)
PROBE = ProbeConfig(hidden=(8,), epochs=1, lr=1e-2, batch_size=32)


def test_holdout_splits_training_records_only():
    d = digits_composites(n_train=100, n_test=50, clients=2, seed=0)
    h = experiments.holdout(d, 0.2, seed=1)
    assert len(h.x_train) == 80 and len(h.x_test) == 20
    pool = {r.tobytes() for r in d.x_train}
    assert all(r.tobytes() in pool for r in h.x_test)


def test_tune_noise_picks_the_largest_gap(monkeypatch):
    d = digits_composites(n_train=60, n_test=30, clients=1, seed=0)
    fake = {0.5: (0.9, 0.85), 1.0: (0.85, 0.6), 2.0: (0.6, 0.5)}

    def fit(data, method, config, *, probe, seed, noise=1.0, keep_model=False):
        u, a = fake[noise]
        return {"utility_auc": u, "adversary_auc": a}, None

    monkeypatch.setattr(experiments, "fit_and_audit", fit)
    best, trials = experiments.tune_noise(d, TINY, [0.5, 1.0, 2.0], probe=PROBE, seed=0)
    assert best == 1.0 and [t["noise"] for t in trials] == [0.5, 1.0, 2.0]


def test_sweep_rows_carry_the_swept_value():
    d = digits_composites(n_train=60, n_test=30, clients=1, seed=0)
    rows = experiments.sweeps(d, TINY, grids={"beta": [0.5, 2.0], "k": [0]}, probe=PROBE, seed=0)
    assert [(r["experiment"], r["beta"], r["k"]) for r in rows] == [
        ("sweep_beta", 0.5, 2),
        ("sweep_beta", 2.0, 2),
        ("sweep_k", 1.0, 0),
    ]
    assert all(np.isfinite(r["adversary_auc"]) for r in rows)
