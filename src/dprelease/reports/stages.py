"""Report stages: ``compare_report`` (the comparison of every arm, from their guarantee records)."""

from __future__ import annotations

from ..config import Params
from ..stage import Stage
from .compare import compare_report


def declare(params: Params) -> list[Stage]:
    arm_files = {"nonprivate": ["reports/arms/nonprivate", "metrics/nonprivate.json"],
                 "swag_ppm": ["reports/arms/swag_ppm", "metrics/swag_ppm.json"],
                 "dpsgd": ["reports/arms/dpsgd", "metrics/dpsgd.json", "metrics/dpsgd_sweep.json"]}
    deps = sorted({f for files in arm_files.values() for f in files}
                  | {"reports/release", "metrics/audit.json", "metrics/release.json", "metrics/data.json"})
    return [Stage(name="compare_report", run=compare_report, params=["seed", "model.backend", "compare"], deps=deps, outs=["reports/compare"],
                  group="compare")]
