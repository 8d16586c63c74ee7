"""A stand-in for ``flows/retrain.py:retrain_flow`` (tests/flows/test_serve.py deploys it through
``flows.serve _deploy --entrypoint``): named ``retrain``, the same parameters, and a body that holds while
``<root>/hold`` exists (at most 5 minutes) — a retrain that outlasts the one-minute schedule, on demand."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow


@flow(name="retrain", persist_result=False, log_prints=False)
def retrain_flow(
    snapshot: str | None = None,
    root: str = ".",
    params_file: str = "params.yaml",
    overrides: dict | None = None,
    track: bool = True,
) -> dict:
    hold, t0 = Path(root) / "hold", time.monotonic()
    while hold.exists() and time.monotonic() - t0 < 300:
        time.sleep(0.5)
    return {"held_s": round(time.monotonic() - t0, 1)}
