"""NVDP's MLflow record as plain data (nvdp/tracking.py): a child per task × variant, one step per λ, NaN left out."""

from __future__ import annotations

import math

import pandas as pd

from dprelease.core.config import parse_params
from dprelease.mechanisms.nvdp.tracking import METRICS, tracked_run


def test_one_child_per_task_and_variant_with_a_step_per_lambda(tmp_path):
    out = tmp_path / "reports" / "nvdp"
    out.mkdir(parents=True)
    rows = [{"task": "rte", "variant": "clip", "lambda": lam, **{m: 0.5 for m in METRICS}} for lam in (1.0, 0.1)]
    rows.append({"task": "osha", "variant": "plain", "lambda": float("nan"), **{m: float("nan") for m in METRICS}})
    pd.DataFrame(rows).to_csv(out / "table.csv", index=False)
    run = tracked_run(parse_params({}), tmp_path, {})
    assert run.name == "nvdp" and "seed" in run.params and all(k.startswith(("nvdp.", "seed")) for k in run.params)
    assert [c.name for c in run.children] == ["nvdp rte clip", "nvdp osha plain"]
    rte, osha = run.children
    assert [s["lambda"] for s in rte.steps] == [0.1, 1.0] and rte.tags == {"task": "rte", "variant": "clip"}
    assert osha.steps == [{}] and not any(math.isnan(v) for s in rte.steps for v in s.values())
    assert run.artifacts == [(out / "table.csv", "nvdp")]
