"""Report stages: ``compare_report`` (the comparison of every arm of ``compare.arms``, from their guarantee
records). Its deps are the arms' files, so the compare flow's plan holds exactly the arms asked for."""

from __future__ import annotations

from ..config import Params
from ..errors import ConfigError
from ..stage import Stage
from .compare import compare_report

RELEASE_FILES = ["reports/release", "metrics/audit.json", "metrics/release.json", "metrics/data.json"]


def arm_files(arm: str) -> list[str]:
    """What the report reads of one arm (the re-weighted arm is the release itself)."""
    if arm == "swag_ppm_reweighted":
        return []
    extra = ["metrics/dpsgd_sweep.json"] if arm == "dpsgd" else []
    return [f"reports/arms/{arm}", f"metrics/{arm}.json", *extra]


def check(params: Params) -> None:
    if "swag_ppm_reweighted" in params.compare.arms and not params.ppm.reweight:
        raise ConfigError("compare.arms: swag_ppm_reweighted needs ppm.reweight: true")


def declare(params: Params) -> list[Stage]:
    deps = sorted({f for arm in params.compare.arms for f in arm_files(arm)} | set(RELEASE_FILES))
    return [Stage(name="compare_report", run=compare_report, params=["seed", "model.backend", "compare"], deps=deps,
                  outs=["reports/compare"], group="compare")]
