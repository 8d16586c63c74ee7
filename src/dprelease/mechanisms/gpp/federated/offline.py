"""Flower's and Ray's offline switches: no telemetry, no runtime dependency installation, no usage
statistics. Flower reads its telemetry switch when it is first imported, so the package applies these
on import (before any module of ours loads ``flwr``) and ``run_distributed`` applies them again."""

from __future__ import annotations

import os

FLOWER_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
}


def apply() -> None:
    """Set the switches (forced: this project runs offline; inherited by Ray's worker processes)."""
    os.environ.update(FLOWER_ENV)
