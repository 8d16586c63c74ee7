"""gpp.federated.client_app: what one client sends up for each operation, without the engine."""

from __future__ import annotations

import numpy as np
import pytest

from dprelease.mechanisms.gpp.federated.client_app import partition_file, respond
from dprelease.mechanisms.gpp.federated.engine import _write_partitions
from dprelease.mechanisms.gpp.federated.local import build_utility_head


@pytest.fixture
def spec(tmp_path):
    rng = np.random.default_rng(0)
    n = 150
    x = rng.normal(size=(n, 12)).astype(np.float32)
    u, s, c = rng.integers(0, 3, n), rng.integers(0, 2, n), np.repeat([0, 1], n // 2)
    _write_partitions(tmp_path, 2, x, u, s, c, x[:20], np.repeat([0, 1], 10))
    return {
        "d_z": 4,
        "n_u": 3,
        "n_s": 2,
        "encoder_hidden": [16, 8],
        "head_hidden": [8],
        "k": 2,
        "epochs": 1,
        "batch_size": 32,
        "lr": 1e-2,
        "seed": 0,
        "betas": [1.0, 2.0],
        "lams": [0.01, 0.01],
        "data_dir": str(tmp_path),
    }


def test_partitions_are_owner_only_files(spec):
    path = partition_file(spec["data_dir"], 1)
    assert path.stat().st_mode & 0o777 == 0o600
    with np.load(path) as f:
        assert set(f.files) == {"x_train", "u_train", "s_train", "x_test"} and f["x_train"].shape == (75, 12)


def test_a_client_sends_only_z_and_u_batches_then_only_draws(spec):
    up, metrics, step = respond(op="init", client=1, spec=spec, step=0)
    assert step == 0 and set(up) == {"batch"} and set(up["batch"]) == {"z", "u"}
    assert up["batch"]["z"].shape == (32, 4) and up["batch"]["u"].dtype == np.int64 and set(metrics) == {"compute_s"}
    psi, _ = build_utility_head(d_z=4, n_u=3, head_hidden=[8], lr=1e-2, seed=0)
    for expected in (1, 2, 3):  # ⌈75/32⌉ = 3 steps in one epoch; no batch after the last
        up, metrics, step = respond(op="step", client=1, spec=spec, step=step, psi_state=psi.state_dict())
        assert step == expected and set(metrics) == {"adversary_ce", "encoder_loss", "compute_s"}
        assert set(up) == ({"batch"} if step < 3 else set())
    up, _, _ = respond(op="release", client=1, spec=spec, step=step)
    assert set(up) == {"release"} and set(up["release"]) == {"z_train", "z_test"}
    assert up["release"]["z_train"].shape == (75, 4) and up["release"]["z_test"].shape == (10, 4)


def test_a_client_refuses_to_go_on_from_a_state_it_does_not_hold(spec):
    respond(op="init", client=0, spec=spec, step=0)
    with pytest.raises(RuntimeError, match="not in this worker's memory"):
        respond(op="release", client=0, spec=spec, step=5)
