"""gpp.federated.offline: Flower and Ray run with telemetry, usage statistics and runtime installs off."""

from __future__ import annotations

import os

from dprelease.mechanisms.gpp.federated import offline


def test_switches_are_set_before_flower_loads():
    from flwr.supercore import telemetry

    assert telemetry.FLWR_TELEMETRY_ENABLED == "0"  # read once, when flwr was first imported
    for key, value in offline.FLOWER_ENV.items():
        assert os.environ[key] == value


def test_apply_forces_the_offline_values(monkeypatch):
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "1")
    offline.apply()
    assert os.environ["FLWR_TELEMETRY_ENABLED"] == "0"
