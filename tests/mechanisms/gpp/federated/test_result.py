"""gpp.federated.result: the public summary of a distributed run (aggregates, the uplink ratio)."""

from __future__ import annotations

import numpy as np

from dprelease.mechanisms.gpp.federated.result import DistributedResult


def test_summary_has_only_public_scalars_and_the_uplink_ratio():
    r = DistributedResult(
        z_train=np.zeros((4, 2)),
        z_test=np.zeros((2, 2)),
        rounds=3,
        clients=5,
        bytes_up_per_round=1_000.0,
        bytes_down_per_round=400.0,
        fedavg_bytes_per_round=60_000.0,
        engine_overhead_s=1.5,
        train_s=2.0,
        encoder_params=7_500,
        head_params=100,
    )
    s = r.summary()
    assert s["uplink_vs_fedavg_upload"] == 30.0  # FedAvg uploads half of its up+down bytes
    assert s["rounds"] == 3.0 and s["clients"] == 5.0 and s["encoder_params"] == 7_500.0
    assert all(isinstance(v, float) for v in s.values())
    assert not {"z_train", "z_test", "history", "steps_per_client"} & set(s)  # no draws, no per-round detail


def test_a_run_that_sent_nothing_does_not_divide_by_zero():
    r = DistributedResult(
        z_train=np.zeros((0, 2)),
        z_test=np.zeros((0, 2)),
        rounds=0,
        clients=1,
        bytes_up_per_round=0.0,
        bytes_down_per_round=0.0,
        fedavg_bytes_per_round=10.0,
        engine_overhead_s=0.0,
        train_s=0.0,
    )
    assert r.summary()["uplink_vs_fedavg_upload"] == 5.0
